//! A host's expectations file: the failures its maintainers know about, each
//! with its reason, as data (the way rustls' bogo shim lists disabled tests).
//!
//! ```json
//! { "known": [
//!   { "scenario": "ea/*", "expect": "unsupported", "reason": "no external authorizer yet" },
//!   { "scenario": "pg/002-*", "expect": "fail", "reason": "issue #12: allow sent before commit" }
//! ] }
//! ```
//!
//! A listed scenario that passes is `stale` and fails the run, so the file
//! cannot silently outlive the bug. A MUST-tier known failure stays visible
//! as a known security violation in every report.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expected {
    Fail,
    Unsupported,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    /// A scenario id or a glob over ids.
    scenario: String,
    expect: Expected,
    reason: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectationsFile {
    known: Vec<EntryFile>,
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub pattern: String,
    matcher: GlobMatcher,
    pub expect: Expected,
    pub reason: String,
}

#[derive(Clone, Debug, Default)]
pub struct Expectations {
    pub entries: Vec<Entry>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExpectationsError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: at `{path}`: {message}")]
    Parse {
        file: PathBuf,
        path: String,
        message: String,
    },
}

impl Expectations {
    pub fn load(file: &Path) -> Result<Expectations, ExpectationsError> {
        let text = std::fs::read_to_string(file).map_err(|source| ExpectationsError::Read {
            file: file.to_path_buf(),
            source,
        })?;
        Expectations::parse(&text, file)
    }

    pub fn parse(text: &str, file: &Path) -> Result<Expectations, ExpectationsError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let parsed: ExpectationsFile =
            serde_path_to_error::deserialize(&mut de).map_err(|e| ExpectationsError::Parse {
                file: file.to_path_buf(),
                path: e.path().to_string(),
                message: format!(
                    "{}; expected {{\"known\": [{{\"scenario\": ID-OR-GLOB, \"expect\": \"fail\"|\"unsupported\", \"reason\": TEXT}}]}}",
                    e.inner()
                ),
            })?;
        let entries = parsed
            .known
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let matcher = Glob::new(&e.scenario)
                    .map_err(|g| ExpectationsError::Parse {
                        file: file.to_path_buf(),
                        path: format!("known[{i}].scenario"),
                        message: format!("`{}` is not a valid glob: {}", e.scenario, g.kind()),
                    })?
                    .compile_matcher();
                Ok(Entry {
                    pattern: e.scenario,
                    matcher,
                    expect: e.expect,
                    reason: e.reason,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Expectations { entries })
    }

    /// The first entry listing this scenario id.
    pub fn lookup(&self, id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.matcher.is_match(id))
    }
}
