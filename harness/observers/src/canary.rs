//! Canary secrets: unmistakable strings the harness plants (task-capability secrets, credentials) and then searches for in everything a host says or records (TC4).

use std::fmt;

use serde_json::Value;

/// The prefix every canary starts with, so a human reading a report recognises one at once.
pub const CANARY_PREFIX: &str = "CANARY-";

/// A secret that must never appear in a host's replies, records, transcripts or reports.
///
/// Deterministic in its seed so a failing run can be reproduced; 32 hex
/// digits of SHA-256 make an accidental occurrence in host output impossible
/// in practice.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Canary(String);

impl Canary {
    pub fn new(seed: u64) -> Canary {
        let digest = delegation_model::digest::sha256_hex(format!("canary:{seed}").as_bytes());
        let hex = digest.trim_start_matches("sha256:");
        Canary(format!("{CANARY_PREFIX}{}", &hex[..32]))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Canary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Canary> for String {
    fn from(canary: Canary) -> String {
        canary.0
    }
}

/// The canaries that occur in `haystack`, each once, in the order given.
///
/// Matching is exact and byte for byte: canaries are ASCII letters, digits
/// and dashes, which JSON escaping leaves untouched, so serialised JSON can
/// be searched as text too.
pub fn find_canaries(haystack: &str, canaries: &[String]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for canary in canaries {
        if !canary.is_empty() && haystack.contains(canary.as_str()) && !found.contains(canary) {
            found.push(canary.clone());
        }
    }
    found
}

/// Where a canary was found inside a JSON value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanaryHit {
    pub canary: String,
    /// RFC 6901 JSON pointer to the value, or to the object holding the key.
    pub pointer: String,
    /// True when the canary was in an object key rather than a value.
    pub in_key: bool,
}

/// Every place in `value` (object keys and string values, at any depth) that contains a canary.
pub fn find_canaries_in_value(value: &Value, canaries: &[String]) -> Vec<CanaryHit> {
    let mut hits = Vec::new();
    search(value, canaries, &mut String::new(), &mut hits);
    hits
}

fn search(value: &Value, canaries: &[String], pointer: &mut String, hits: &mut Vec<CanaryHit>) {
    match value {
        Value::String(text) => {
            for canary in find_canaries(text, canaries) {
                hits.push(CanaryHit {
                    canary,
                    pointer: pointer.clone(),
                    in_key: false,
                });
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&index.to_string());
                search(item, canaries, pointer, hits);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                for canary in find_canaries(key, canaries) {
                    hits.push(CanaryHit {
                        canary,
                        pointer: pointer.clone(),
                        in_key: true,
                    });
                }
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                search(item, canaries, pointer, hits);
                pointer.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canaries_are_deterministic_distinct_and_recognisable() {
        let a = Canary::new(7);
        assert_eq!(a, Canary::new(7));
        assert_ne!(a, Canary::new(8));
        assert!(a.as_str().starts_with(CANARY_PREFIX));
        assert_eq!(a.as_str().len(), CANARY_PREFIX.len() + 32);
    }

    #[test]
    fn text_search_reports_each_planted_canary_once() {
        let planted = Canary::new(1).to_string();
        let absent = Canary::new(2).to_string();
        let haystack = format!("log: token={planted}; again {planted}");
        let found = find_canaries(&haystack, &[planted.clone(), absent]);
        assert_eq!(found, vec![planted]);
    }

    #[test]
    fn clean_text_and_clean_json_have_no_hits() {
        let canaries = vec![Canary::new(3).to_string()];
        assert!(find_canaries("CANARY- but nothing after it", &canaries).is_empty());
        let clean = json!({ "records": [{ "secret": "redacted", "n": 3 }] });
        assert!(find_canaries_in_value(&clean, &canaries).is_empty());
    }

    #[test]
    fn value_search_finds_canaries_in_nested_values_and_keys() {
        let secret = Canary::new(4).to_string();
        let value = json!({
            "records": [{ "detail": format!("used {secret}") }],
            "by_secret": { secret.clone(): 1 },
            "a/b": secret,
        });
        let hits = find_canaries_in_value(&value, std::slice::from_ref(&secret));
        let pointers: Vec<(&str, bool)> = hits
            .iter()
            .map(|h| (h.pointer.as_str(), h.in_key))
            .collect();
        assert_eq!(
            pointers,
            vec![
                ("/a~1b", false),
                ("/by_secret", true),
                ("/records/0/detail", false)
            ]
        );
    }
}
