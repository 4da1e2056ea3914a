//! What a fuzz run reached: operation kinds and pairs, and the model's decisions (outcomes and deny reasons) its cases met.
//!
//! Counted over what was translated (a shortened case counts its prefix
//! only) from the model's own predictions, so the figures say what the
//! generator drove the model through, whatever the host did. Reach from
//! several runs (a CI matrix's seed partitions) adds up with [`Reach::merge`].

use std::collections::BTreeMap;

use delegation_model::DenyReason;
use delegation_model::fuzzing::Op;
use serde::{Deserialize, Serialize};

use super::Translation;

/// Counts by name; the names are stable, so reports of several runs merge.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reach {
    /// Operations by kind ([`Op::kind`]).
    pub operations: BTreeMap<String, u64>,
    /// Consecutive operations, `first>second`.
    pub pairs: BTreeMap<String, u64>,
    /// Decisions the model made: `method ok`, `method denied`, and the
    /// nested ones (`turn spawn denied`, `tool call ok`, ...).
    pub decisions: BTreeMap<String, u64>,
    /// Deny reasons the model gave, anywhere in an answer.
    pub deny_reasons: BTreeMap<String, u64>,
}

/// One decision the model predicted for a translated step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    /// What decided: the action's method, or a nested decision of it.
    pub what: String,
    /// `ok`, `denied`, or a tool call's outcome (`executed`, `pending_approval`, ...).
    pub outcome: String,
    pub reason: Option<DenyReason>,
}

/// The snake_case name a value serialises to.
pub fn wire_name(value: impl Serialize + std::fmt::Debug) -> String {
    serde_json::to_value(&value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{value:?}"))
}

fn reason_name(reason: DenyReason) -> String {
    wire_name(reason)
}

impl Reach {
    /// Adds one case: its translated operations and the decisions predicted for them.
    pub fn record(&mut self, ops: &[Op], translation: &Translation) {
        let ops = &ops[..translation.translated_ops.min(ops.len())];
        for op in ops {
            *self.operations.entry(op.kind().to_string()).or_default() += 1;
        }
        for pair in ops.windows(2) {
            *self
                .pairs
                .entry(format!("{}>{}", pair[0].kind(), pair[1].kind()))
                .or_default() += 1;
        }
        for d in &translation.decisions {
            *self
                .decisions
                .entry(format!("{} {}", d.what, d.outcome))
                .or_default() += 1;
            if let Some(reason) = d.reason {
                *self.deny_reasons.entry(reason_name(reason)).or_default() += 1;
            }
        }
    }

    pub fn merge(&mut self, other: &Reach) {
        for (mine, theirs) in [
            (&mut self.operations, &other.operations),
            (&mut self.pairs, &other.pairs),
            (&mut self.decisions, &other.decisions),
            (&mut self.deny_reasons, &other.deny_reasons),
        ] {
            for (k, n) in theirs {
                *mine.entry(k.clone()).or_default() += n;
            }
        }
    }

    /// Operation kinds never generated.
    pub fn missing_operations(&self) -> Vec<&'static str> {
        Op::KINDS
            .iter()
            .copied()
            .filter(|k| !self.operations.contains_key(*k))
            .collect()
    }

    /// Deny reasons the model never gave.
    pub fn missing_reasons(&self) -> Vec<String> {
        DenyReason::ALL
            .iter()
            .map(|r| reason_name(*r))
            .filter(|r| !self.deny_reasons.contains_key(r))
            .collect()
    }

    /// Lines for the fuzz summary.
    pub fn summary(&self) -> String {
        let kinds = Op::KINDS.len();
        let missing_ops = self.missing_operations();
        let missing_reasons = self.missing_reasons();
        let list = |items: &[String]| {
            if items.is_empty() {
                String::new()
            } else {
                format!(" (not reached: {})", items.join(", "))
            }
        };
        format!(
            "reach: {} of {kinds} operation kinds{}; {} of {} operation pairs; {} decision kinds; {} of {} deny reasons{}",
            kinds - missing_ops.len(),
            list(
                &missing_ops
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
            ),
            self.pairs.len(),
            kinds * kinds,
            self.decisions.len(),
            DenyReason::ALL.len() - missing_reasons.len(),
            DenyReason::ALL.len(),
            list(&missing_reasons),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::differential::translate;

    #[test]
    fn reach_counts_kinds_pairs_and_reasons_and_merges() {
        let ops = [
            Op::Start {
                sandbox: 1,
                policy: 2,
                tools: 1,
            },
            Op::Delegate {
                parent: 0,
                sandbox: Some(3),
                tools: None,
                role: 0,
            },
        ];
        let t = translate(&ops, "fuzz/001-x", "x");
        let mut reach = Reach::default();
        reach.record(&ops, &t);
        assert_eq!(reach.operations["start"], 1);
        assert_eq!(reach.pairs["start>delegate"], 1);
        assert_eq!(reach.deny_reasons["ceiling_exceeded"], 1);
        assert_eq!(reach.decisions["instance/delegate denied"], 1);
        assert!(reach.missing_operations().contains(&"issue"));
        assert!(!reach.missing_operations().contains(&"start"));
        let text = reach.summary();
        assert!(text.contains("2 of 37 operation kinds"), "{text}");
        assert!(text.contains("1 of 21 deny reasons"), "{text}");

        let mut twice = reach.clone();
        twice.merge(&reach);
        assert_eq!(twice.operations["start"], 2);
        assert_eq!(twice.pairs.len(), reach.pairs.len());
    }
}
