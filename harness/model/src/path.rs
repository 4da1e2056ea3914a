//! Normalised absolute paths, compared component by component (MODEL.md section 4).
//!
//! `.` is removed, `..` is resolved lexically, duplicate separators are folded,
//! there is no trailing slash. A `..` that would climb above `/` is a
//! rejection, not a clamp to the root. Symlinks are the host's affair.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An absolute path in normal form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NormalPath {
    /// Shared: an authority is cloned into every record, snapshot and
    /// answer, and a path never changes once parsed.
    components: std::sync::Arc<[String]>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path must be absolute (start with `/`)")]
    NotAbsolute,
    #[error("`..` escapes above the root")]
    Escapes,
    #[error("path contains a NUL byte")]
    Nul,
}

impl NormalPath {
    pub fn parse(raw: &str) -> Result<NormalPath, PathError> {
        if raw.contains('\0') {
            return Err(PathError::Nul);
        }
        if !raw.starts_with('/') {
            return Err(PathError::NotAbsolute);
        }
        let mut components: Vec<String> = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if components.pop().is_none() {
                        return Err(PathError::Escapes);
                    }
                }
                other => components.push(other.to_string()),
            }
        }
        Ok(NormalPath {
            components: components.into(),
        })
    }

    /// Whether `self` is `other` or lies below it: `/w/repo` contains
    /// `/w/repo/src` and itself, never `/w/repo-other`.
    pub fn is_within(&self, other: &NormalPath) -> bool {
        self.components.len() >= other.components.len()
            && self.components[..other.components.len()] == other.components[..]
    }

    /// Joins a relative path onto this one, rejecting escapes above `self`.
    pub fn join_within(&self, relative: &str) -> Result<NormalPath, PathError> {
        let joined = NormalPath::parse(&format!("{self}/{relative}"))?;
        if joined.is_within(self) {
            Ok(joined)
        } else {
            Err(PathError::Escapes)
        }
    }
}

impl fmt::Display for NormalPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.components.is_empty() {
            return f.write_str("/");
        }
        for c in self.components.iter() {
            write!(f, "/{c}")?;
        }
        Ok(())
    }
}

impl Serialize for NormalPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for NormalPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        NormalPath::parse(&raw).map_err(|e| serde::de::Error::custom(format!("path `{raw}`: {e}")))
    }
}

impl JsonSchema for NormalPath {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NormalPath".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^/",
            "description": "An absolute path; `.` and `..` are resolved lexically and a `..` above `/` is rejected."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_and_compares_by_component() {
        let p = NormalPath::parse("/w//repo/./src/../src/").unwrap();
        assert_eq!(p.to_string(), "/w/repo/src");
        let repo = NormalPath::parse("/w/repo").unwrap();
        assert!(p.is_within(&repo));
        assert!(repo.is_within(&repo));
        assert!(!NormalPath::parse("/w/repo-other").unwrap().is_within(&repo));
        assert!(!repo.is_within(&p));
    }

    #[test]
    fn rejects_escapes_and_relative_paths() {
        assert_eq!(NormalPath::parse("/w/../.."), Err(PathError::Escapes));
        assert_eq!(NormalPath::parse("w/repo"), Err(PathError::NotAbsolute));
        let repo = NormalPath::parse("/w/repo").unwrap();
        assert_eq!(repo.join_within("../x"), Err(PathError::Escapes));
        assert_eq!(repo.join_within("a/../b").unwrap().to_string(), "/w/repo/b");
    }
}
