//! A tool definition kept as the scenario wrote it, so the tool server can serve those bytes.
//!
//! A `serde_json::Value` forgets how a definition was written: key order,
//! number forms (`10`, `10.0`, `1e1`), string escapes (`\u00e9` or `é`).
//! RFC 8785 makes all of those one canonical form, and a host must digest
//! that form (MODEL.md section 4); a host that digests the bytes it
//! received instead can only be told apart when the bytes are not already
//! canonical. So the definition travels as its text, with only the layout
//! whitespace between tokens taken out (a scenario file is indented; SSE
//! carries one line), and its parsed value beside it for everything that
//! reads its meaning.

use std::fmt;
use std::ops::Deref;

use delegation_model::digest::parse_strict;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// One definition: its text as written (layout aside) and what it means.
#[derive(Clone)]
pub struct DefinitionText {
    text: String,
    value: Value,
}

impl DefinitionText {
    /// From JSON text: strictly parsed (a duplicate key or an integer beyond
    /// 2^53 is refused, since two parties could read different definitions
    /// from it), served with every byte kept but the layout whitespace.
    pub fn parse(text: &str) -> Result<DefinitionText, delegation_model::DefinitionError> {
        let value = parse_strict(text)?;
        Ok(DefinitionText {
            text: without_layout(text),
            value,
        })
    }

    /// The text served on the wire.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// What the definition means.
    pub fn value(&self) -> &Value {
        &self.value
    }
}

/// A definition built in code has no written form of its own: it is served
/// as serde_json writes it (sorted keys, shortest numbers), as before.
impl From<Value> for DefinitionText {
    fn from(value: Value) -> DefinitionText {
        DefinitionText {
            text: value.to_string(),
            value,
        }
    }
}

impl Deref for DefinitionText {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.value
    }
}

/// Two definitions are the same scenario input when they are written the
/// same; equal meaning written differently is a different input.
impl PartialEq for DefinitionText {
    fn eq(&self, other: &DefinitionText) -> bool {
        self.text == other.text
    }
}

impl PartialEq<Value> for DefinitionText {
    fn eq(&self, other: &Value) -> bool {
        self.value == *other
    }
}

impl fmt::Debug for DefinitionText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for DefinitionText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Verbatim where the serializer is serde_json's; a value elsewhere.
        match RawValue::from_string(self.text.clone()) {
            Ok(raw) => raw.serialize(serializer),
            Err(_) => self.value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for DefinitionText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<DefinitionText, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        DefinitionText::parse(raw.get()).map_err(D::Error::custom)
    }
}

impl JsonSchema for DefinitionText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ToolDefinitionText".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "An MCP tool object (`name`, `description`, `inputSchema`, optional `title`, `outputSchema`, `annotations`, any extra field). Served in `tools/list` byte for byte as written here (key order, number forms, escapes, non-ASCII), only the whitespace between tokens removed. Duplicate keys and integers beyond 2^53 are refused."
        })
    }
}

/// The text with the whitespace between tokens removed; strings untouched.
fn without_layout(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_form_survives_but_the_layout() {
        let written = "{ \"z\": 1e1,\n  \"a\" : [10.0, \"caf\\u00e9 \\\" x\", \"é\"] }";
        let d = DefinitionText::parse(written).unwrap();
        assert_eq!(d.text(), r#"{"z":1e1,"a":[10.0,"caf\u00e9 \" x","é"]}"#);
        assert_eq!(d.value()["a"][1], "café \" x");
        let round: DefinitionText = serde_json::from_str(written).unwrap();
        assert_eq!(serde_json::to_string(&round).unwrap(), d.text());
    }

    #[test]
    fn equal_meaning_written_differently_is_a_different_input() {
        let a = DefinitionText::parse(r#"{"n":10.0}"#).unwrap();
        let b = DefinitionText::parse(r#"{"n":1e1}"#).unwrap();
        assert_eq!(a.value(), b.value(), "serde_json reads both as ten");
        assert_ne!(a, b);
    }

    #[test]
    fn duplicate_keys_are_refused_with_the_key_named() {
        let err = serde_json::from_str::<DefinitionText>(r#"{"name":"a","name":"b"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("duplicate key `name`"), "{err}");
    }
}
