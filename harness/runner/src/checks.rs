//! The seam between the runner and the model's invariant checkers, plus the
//! checks only the runner can make (the canary search of TC4).

use delegation_model::HistoryEntry;
pub use delegation_model::invariants::{Checking, Violation};
use serde_json::Value;

/// Whether the model's checkers are wired in; reports say so when they are not.
pub const MODEL_CHECKERS_WIRED: bool = true;

/// Every place a canary secret appears in a host reply or observed state of
/// `entry`, as JSON paths. A capability secret the harness chose must never
/// come back (TC4), not even in the reply that issued it.
pub fn canary_hits(entry: &HistoryEntry, canaries: &[String]) -> Vec<String> {
    let mut hits = Vec::new();
    if canaries.is_empty() {
        return hits;
    }
    if let delegation_model::StepKind::Action {
        result: Ok(result), ..
    } = &entry.kind
    {
        let value = serde_json::to_value(result).unwrap_or(Value::Null);
        search(&value, "result", canaries, &mut hits);
    }
    if let Some(observed) = &entry.observed {
        let value = serde_json::to_value(observed).unwrap_or(Value::Null);
        search(&value, "observed", canaries, &mut hits);
    }
    hits
}

fn search(value: &Value, path: &str, canaries: &[String], hits: &mut Vec<String>) {
    match value {
        Value::String(s) if canaries.iter().any(|c| s.contains(c.as_str())) => {
            hits.push(path.to_string());
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                search(item, &format!("{path}[{i}]"), canaries, hits);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                if canaries.iter().any(|c| k.contains(c.as_str())) {
                    hits.push(format!("{path}.{k}"));
                }
                search(v, &format!("{path}.{k}"), canaries, hits);
            }
        }
        _ => {}
    }
}
