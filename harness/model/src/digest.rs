//! Tool definitions and their digests: SHA-256 over RFC 8785 canonical JSON.
//!
//! A definition is hashed whole, unknown fields included: a description-only
//! edit changes the digest, because that is how tool poisoning works (SD4).
//! Parsing is stricter than serde_json's default: duplicate keys are refused
//! (serde_json would keep the last one silently, so two parties could hash
//! different definitions from the same bytes) and integers beyond 2^53 are
//! refused (JCS would round them to the nearest double).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use sha2::{Digest as _, Sha256};

/// The largest integer JCS represents exactly.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DefinitionError {
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("duplicate key `{key}` in one object; a definition must say each field once")]
    DuplicateKey { key: String },
    #[error(
        "integer {value} is beyond 2^53 and cannot be canonicalised exactly; send it as a string"
    )]
    IntegerOutOfRange { value: String },
    #[error("a tool definition must be a JSON object with a string `name`")]
    NotADefinition,
}

/// Parses JSON text with duplicate keys and unsafe integers refused.
pub fn parse_strict(text: &str) -> Result<Value, DefinitionError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictValue.deserialize(&mut de).map_err(map_err)?;
    de.end().map_err(map_err)?;
    Ok(value)
}

/// Checks an already-parsed value for integers JCS would round.
pub fn check_integers(value: &Value) -> Result<(), DefinitionError> {
    match value {
        Value::Number(n) => {
            check_number(n).map_err(|v| DefinitionError::IntegerOutOfRange { value: v })
        }
        Value::Array(items) => items.iter().try_for_each(check_integers),
        Value::Object(map) => map.values().try_for_each(check_integers),
        _ => Ok(()),
    }
}

fn check_number(n: &Number) -> Result<(), String> {
    let out_of_range = match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => u > MAX_SAFE_INTEGER,
        (None, Some(i)) => i.unsigned_abs() > MAX_SAFE_INTEGER,
        _ => false,
    };
    if out_of_range {
        Err(n.to_string())
    } else {
        Ok(())
    }
}

fn map_err(e: serde_json::Error) -> DefinitionError {
    let text = e.to_string();
    if let Some(rest) = text.strip_prefix("duplicate key:") {
        let key = rest
            .split(" at line")
            .next()
            .unwrap_or(rest)
            .trim()
            .to_string();
        return DefinitionError::DuplicateKey { key };
    }
    if let Some(rest) = text.strip_prefix("integer out of range:") {
        let value = rest
            .split(" at line")
            .next()
            .unwrap_or(rest)
            .trim()
            .to_string();
        return DefinitionError::IntegerOutOfRange { value };
    }
    DefinitionError::Json(text)
}

struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        let n = Number::from(v);
        check_number(&n).map_err(|v| E::custom(format!("integer out of range: {v}")))?;
        Ok(Value::Number(n))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        let n = Number::from(v);
        check_number(&n).map_err(|v| E::custom(format!("integer out of range: {v}")))?;
        Ok(Value::Number(n))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key: {key}")));
            }
            let value = access.next_value_seed(StrictValue)?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

/// RFC 8785 canonical JSON of a value.
pub fn canonical_json(value: &Value) -> Result<String, DefinitionError> {
    check_integers(value)?;
    serde_json_canonicalizer::to_string(value).map_err(|e| DefinitionError::Json(e.to_string()))
}

/// The latest results of a pure function, compared by input: a sequence
/// digests the same few arguments, requests and definitions again and again,
/// and a canonical write and a hash cost far more than a comparison.
pub(crate) struct Recent<K, V> {
    entries: Vec<(K, V)>,
    /// The entry the next new input replaces once the memo is full.
    next: usize,
}

impl<K: PartialEq, V: Clone> Recent<K, V> {
    /// How many results are kept: enough for the inputs one sequence repeats.
    const CAPACITY: usize = 16;

    pub(crate) const fn new() -> Recent<K, V> {
        Recent {
            entries: Vec::new(),
            next: 0,
        }
    }

    /// The result for `key`, computed by `compute` unless it is among the latest.
    pub(crate) fn get_or(&mut self, key: &K, compute: impl FnOnce() -> V) -> V
    where
        K: Clone,
    {
        if let Some((_, value)) = self.entries.iter().find(|(k, _)| k == key) {
            return value.clone();
        }
        let value = compute();
        if self.entries.len() < Self::CAPACITY {
            self.entries.push((key.clone(), value.clone()));
        } else {
            self.entries[self.next] = (key.clone(), value.clone());
            self.next = (self.next + 1) % Self::CAPACITY;
        }
        value
    }
}

/// Lowercase hex SHA-256 of a value's canonical JSON, prefixed `sha256:`.
pub fn digest_value(value: &Value) -> Result<String, DefinitionError> {
    thread_local! {
        static RECENT: std::cell::RefCell<Recent<Value, Result<String, DefinitionError>>> =
            const { std::cell::RefCell::new(Recent::new()) };
    }
    RECENT.with_borrow_mut(|recent| recent.get_or(value, || digest_uncached(value)))
}

fn digest_uncached(value: &Value) -> Result<String, DefinitionError> {
    let canonical = canonical_json(value)?;
    Ok(format!(
        "sha256:{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    ))
}

/// Hex digest of arbitrary bytes, for argument and request commitments.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0xf) as usize] as char);
    }
    out
}

/// Fields that decide what a strict child can invoke; transport metadata
/// (`_meta`, `icons`) is left out of the projection.
const PROJECTION_FIELDS: [&str; 7] = [
    "namespace",
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// A tool definition as the host received it, with its digests.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDefinition {
    pub name: String,
    pub raw: Value,
    /// Digest of the whole definition.
    pub digest: String,
    /// Digest of the strict-child projection, where the definition has an `inputSchema`.
    pub projection_digest: Option<String>,
    /// The definition's text exactly as it arrived, where the host kept it.
    /// Nothing correct reads it: the digest is over the canonical form, and
    /// two texts of one meaning are one definition. It is here so that a
    /// deliberately broken host can digest the bytes instead.
    pub received: Option<String>,
}

impl ToolDefinition {
    pub fn from_text(text: &str) -> Result<ToolDefinition, DefinitionError> {
        ToolDefinition::from_value(parse_strict(text)?)
    }

    pub fn from_value(raw: Value) -> Result<ToolDefinition, DefinitionError> {
        thread_local! {
            static RECENT: std::cell::RefCell<Recent<Value, Result<ToolDefinition, DefinitionError>>> =
                const { std::cell::RefCell::new(Recent::new()) };
        }
        RECENT
            .with_borrow_mut(|recent| recent.get_or(&raw, || ToolDefinition::digested(raw.clone())))
    }

    fn digested(raw: Value) -> Result<ToolDefinition, DefinitionError> {
        let Some(obj) = raw.as_object() else {
            return Err(DefinitionError::NotADefinition);
        };
        let Some(name) = obj.get("name").and_then(Value::as_str) else {
            return Err(DefinitionError::NotADefinition);
        };
        let name = name.to_string();
        let digest = digest_value(&raw)?;
        let projection_digest = if obj.contains_key("inputSchema") {
            let projected: Map<String, Value> = obj
                .iter()
                .filter(|(k, _)| PROJECTION_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Some(digest_value(&Value::Object(projected))?)
        } else {
            None
        };
        Ok(ToolDefinition {
            name,
            raw,
            digest,
            projection_digest,
            received: None,
        })
    }

    /// The same definition, remembering the text it arrived as.
    pub fn with_received(mut self, text: impl Into<String>) -> ToolDefinition {
        self.received = Some(text.into());
        self
    }
}
