//! The JSON text of each observation in a history, written once per part that changed (TC4 searches it for secrets).
//!
//! Consecutive observations share most of what they hold: the decision
//! records are the same shared records plus the new ones, and most
//! instances, approvals and capabilities are unchanged. Writing every
//! observation out whole made TC4 the costliest checker, so the text of each
//! list element is kept from the previous observation and reused where the
//! element is the same. The text is exactly `serde_json::to_string` of the
//! observation (debug builds check it on every observation): the secret
//! search runs over the same text as before, matches across fields and
//! escapes included.

use std::sync::Arc;

use serde::Serialize;

use crate::wire::{DecisionRecord, Observed};

/// Each list element's text from the previous observation, at its index.
struct ElementTexts<T> {
    previous: Vec<(T, String)>,
}

impl<T> Default for ElementTexts<T> {
    fn default() -> Self {
        ElementTexts {
            previous: Vec::new(),
        }
    }
}

impl<T: Serialize> ElementTexts<T> {
    /// Appends `,"key":[...]` to `out`, reusing the text of each element
    /// that `same` finds unchanged at its index since the last call.
    fn write_list(
        &mut self,
        out: &mut String,
        key: &str,
        items: &[T],
        same: impl Fn(&T, &T) -> bool,
        keep: impl Fn(&T) -> T,
    ) {
        out.push_str(",\"");
        out.push_str(key);
        out.push_str("\":[");
        self.previous.truncate(items.len());
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match self.previous.get_mut(i) {
                Some((seen, text)) if same(seen, item) => out.push_str(text),
                slot => {
                    let text = serde_json::to_string(item).unwrap_or_default();
                    out.push_str(&text);
                    match slot {
                        Some(slot) => *slot = (keep(item), text),
                        None => self.previous.push((keep(item), text)),
                    }
                }
            }
        }
        out.push(']');
    }
}

/// The texts kept between observations of one history.
#[derive(Default)]
pub(super) struct ObservationWriter {
    instances: ElementTexts<crate::wire::ObservedInstance>,
    approvals: ElementTexts<crate::wire::ObservedApproval>,
    receipts: ElementTexts<crate::wire::ObservedReceipt>,
    grants: ElementTexts<crate::wire::ObservedGrant>,
    capabilities: ElementTexts<crate::wire::ObservedCapability>,
    questions: ElementTexts<crate::wire::ObservedQuestion>,
    records: ElementTexts<Arc<DecisionRecord>>,
    /// The length of the last text: the next is about as long, or a little longer.
    last_length: usize,
}

impl ObservationWriter {
    /// `serde_json::to_string(observed)`, from the parts that changed since the last call.
    pub(super) fn write(&mut self, observed: &Observed) -> String {
        // Every field named: a field added to `Observed` does not compile
        // here until it is written below, in its declared order.
        let Observed {
            now,
            auto_approve,
            instances,
            approvals,
            receipts,
            grants,
            capabilities,
            questions,
            records,
            inferred,
        } = observed;
        let mut out = String::with_capacity(self.last_length + 256);
        out.push_str("{\"now\":");
        out.push_str(&serde_json::to_string(now).unwrap_or_default());
        out.push_str(",\"auto_approve\":");
        out.push_str(if *auto_approve { "true" } else { "false" });
        self.instances.write_list(
            &mut out,
            "instances",
            instances,
            PartialEq::eq,
            Clone::clone,
        );
        self.approvals.write_list(
            &mut out,
            "approvals",
            approvals,
            PartialEq::eq,
            Clone::clone,
        );
        self.receipts
            .write_list(&mut out, "receipts", receipts, PartialEq::eq, Clone::clone);
        self.grants
            .write_list(&mut out, "grants", grants, PartialEq::eq, Clone::clone);
        self.capabilities.write_list(
            &mut out,
            "capabilities",
            capabilities,
            PartialEq::eq,
            Clone::clone,
        );
        if !questions.is_empty() {
            self.questions.write_list(
                &mut out,
                "questions",
                questions,
                PartialEq::eq,
                Clone::clone,
            );
        }
        // Records are shared between observations: the same record is the same allocation.
        self.records
            .write_list(&mut out, "records", records, Arc::ptr_eq, Arc::clone);
        if !inferred.is_empty() {
            out.push_str(",\"inferred\":");
            out.push_str(&serde_json::to_string(inferred).unwrap_or_default());
        }
        out.push('}');
        self.last_length = out.len();
        debug_assert_eq!(
            out,
            serde_json::to_string(observed).unwrap_or_default(),
            "the observation's text, written in parts, differs from serde_json's"
        );
        out
    }
}

#[cfg(all(test, feature = "fuzzing"))]
mod tests {
    use super::*;
    use crate::fuzzing::{Driver, MAX_OPS, Op, corpus_dir, decode_ops, encode_ops, noise};

    /// The committed seeds and long pseudo-random sequences: instances,
    /// approvals, receipts, grants, capabilities and records appear, change
    /// in place and disappear between consecutive observations.
    fn histories() -> Vec<Vec<crate::wire::HistoryEntry>> {
        let dir = corpus_dir("model_sequence");
        let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| std::fs::read(entry.expect("an entry").path()).expect("a seed"))
            .collect();
        for seed in 0..24u64 {
            let mut bytes = encode_ops(&[Op::Start {
                sandbox: 1,
                policy: (seed % 3) as u8,
                tools: 7,
            }]);
            bytes.extend(noise(seed + 1, 16 * MAX_OPS));
            inputs.push(bytes);
        }
        inputs
            .iter()
            .map(|input| {
                let mut driver = Driver::new();
                for op in decode_ops(input) {
                    driver.step(&op);
                }
                driver.world.history
            })
            .collect()
    }

    #[test]
    fn every_observation_written_in_parts_is_serde_jsons_text() {
        let mut compared = 0;
        let mut distinct_element_texts_reused = false;
        for history in histories() {
            let mut writer = ObservationWriter::default();
            for entry in &history {
                let Some(observed) = &entry.observed else {
                    continue;
                };
                let reusable = !writer.records.previous.is_empty();
                assert_eq!(
                    writer.write(observed),
                    serde_json::to_string(&**observed).unwrap(),
                    "step {}",
                    entry.step
                );
                distinct_element_texts_reused |= reusable && !observed.records.is_empty();
                compared += 1;
            }
        }
        assert!(compared > 1000, "only {compared} observations compared");
        assert!(
            distinct_element_texts_reused,
            "no observation reused a kept text: the comparison tested nothing"
        );
    }
}
