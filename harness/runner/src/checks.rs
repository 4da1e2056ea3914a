//! The seam between the runner and the model's invariant checkers, plus the
//! checks only the runner can make (the canary search of TC4).

use delegation_model::HistoryEntry;
pub use delegation_model::invariants::{Checking, Violation};
use std::fmt::Write as _;

use serde::Serialize;
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
        search_serialised(result, "result", canaries, &mut hits);
    }
    if let Some(observed) = &entry.observed {
        search_serialised(observed.as_ref(), "observed", canaries, &mut hits);
    }
    hits
}

/// Searches `item` as JSON. Nearly every entry holds no canary, so its text
/// is searched first and the tree is built and walked (for the paths) only
/// when the text has one: JSON writes a string's characters as they are,
/// apart from quotes, backslashes and control characters, so a canary free
/// of those that is in some string or key is in the text too. A canary with
/// them is always searched in the tree.
fn search_serialised<T: Serialize>(
    item: &T,
    root: &str,
    canaries: &[String],
    hits: &mut Vec<String>,
) {
    if canaries.iter().all(|c| written_as_is(c))
        && let Ok(text) = serde_json::to_string(item)
        && !canaries.iter().any(|c| text.contains(c.as_str()))
    {
        return;
    }
    let value = serde_json::to_value(item).unwrap_or(Value::Null);
    let mut path = root.to_string();
    search(&value, &mut path, canaries, hits);
}

/// Whether JSON writes `text` inside a string unchanged.
fn written_as_is(text: &str) -> bool {
    !text
        .chars()
        .any(|c| c == '"' || c == '\\' || c.is_control())
}

/// `path` is the JSON path of `value`; it is extended for each child and
/// cut back after, so a path is only copied where a canary is.
fn search(value: &Value, path: &mut String, canaries: &[String], hits: &mut Vec<String>) {
    let holds_canary = |text: &str| canaries.iter().any(|c| text.contains(c.as_str()));
    match value {
        Value::String(s) if holds_canary(s) => hits.push(path.clone()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let parent = path.len();
                let _ = write!(path, "[{i}]");
                search(item, path, canaries, hits);
                path.truncate(parent);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                let parent = path.len();
                path.push('.');
                path.push_str(k);
                if holds_canary(k) {
                    hits.push(path.clone());
                }
                search(v, path, canaries, hits);
                path.truncate(parent);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use delegation_model::{ActionResult, Evidence, Observed, StepKind};
    use serde_json::json;

    use super::*;

    fn entry(result: Value, observed: Value) -> HistoryEntry {
        let result: ActionResult = serde_json::from_value(result).expect("an action result");
        let observed: Observed = serde_json::from_value(observed).expect("an observed state");
        HistoryEntry {
            step: 3,
            kind: StepKind::Action {
                action: delegation_model::Action::Observe,
                result: Ok(result),
            },
            evidence: Evidence::default(),
            observed: Some(Arc::new(observed)),
        }
    }

    fn observed_with_question(text: &str) -> Value {
        json!({
            "now": 0,
            "auto_approve": false,
            "questions": [{"id": "q-1", "instance": "i-1", "text": text, "state": "pending"}],
        })
    }

    fn canaries(list: &[&str]) -> Vec<String> {
        list.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn a_canary_in_a_reply_or_an_observed_string_is_found_at_its_path() {
        let hits = canary_hits(
            &entry(
                json!({"outcome": "ok", "detail": "echoed CANARY-7 back"}),
                observed_with_question("what is CANARY-7?"),
            ),
            &canaries(&["CANARY-7"]),
        );
        assert_eq!(hits, vec!["result.detail", "observed.questions[0].text"]);
    }

    #[test]
    fn an_entry_without_the_canary_has_no_hit() {
        let hits = canary_hits(
            &entry(
                json!({"outcome": "ok", "detail": "CANARY-8 is not this one"}),
                observed_with_question("CANARY-"),
            ),
            &canaries(&["CANARY-7"]),
        );
        assert_eq!(hits, Vec::<String>::new());
    }

    #[test]
    fn a_canary_json_would_escape_is_still_found() {
        // Written out, the quote and the newline are escaped, so the
        // canary is not in the text; it is in the string.
        let canary = "sec\"ret\nline";
        let hits = canary_hits(
            &entry(
                json!({"outcome": "ok", "detail": format!("leaked {canary}")}),
                observed_with_question("nothing here"),
            ),
            &canaries(&["CANARY-1", canary]),
        );
        assert_eq!(hits, vec!["result.detail"]);
    }

    #[test]
    fn a_canary_only_across_json_punctuation_is_no_hit() {
        // `0,` is in the written observed state (`"now":0,"auto_approve"`)
        // but in no string: the text search lets it through to the tree,
        // which finds nothing.
        let observed = observed_with_question("y");
        let written =
            serde_json::to_string(&serde_json::from_value::<Observed>(observed.clone()).unwrap())
                .unwrap();
        assert!(
            written.contains("0,"),
            "the canary must be in the text: {written}"
        );
        let hits = canary_hits(
            &entry(json!({"outcome": "ok", "detail": "x"}), observed),
            &canaries(&["0,"]),
        );
        assert_eq!(hits, Vec::<String>::new());
    }
}
