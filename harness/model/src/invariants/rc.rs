//! The RC checkers (receipts): MODEL.md section 3, family RC.

use super::*;

/// One consume, with what it presented.
pub(super) struct Consume<'h> {
    pub(super) receipt: &'h Value,
    pub(super) parent: &'h str,
    pub(super) request: &'h SpawnRequest,
}

pub(super) fn consume(entry: &HistoryEntry) -> Option<Consume<'_>> {
    match action_of(entry)? {
        (
            Action::ConsumeReceipt {
                receipt,
                parent,
                request,
            },
            _,
        ) => Some(Consume {
            receipt,
            parent,
            request,
        }),
        _ => None,
    }
}

pub(super) fn must_refuse_consume(
    id: InvariantId,
    entry: &HistoryEntry,
    receipt: Option<&str>,
    why: String,
    out: &mut Vec<Violation>,
) {
    if succeeded(entry) {
        out.push(violation(
            id,
            entry.step,
            format!("consume of receipt {receipt:?} succeeded although {why}"),
            json!({"receipt": receipt, "action": action_of(entry).map(|(a, _)| a)}),
        ));
    }
}

/// RC1. A receipt id admits at most one instance: at most one successful consume per id.
#[derive(Default)]
pub(super) struct Rc1 {
    /// Each receipt id that admitted an instance, and the step it did.
    won: BTreeMap<String, usize>,
}

impl Checker for Rc1 {
    fn take(&mut self, _: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        let Some(c) = consume(entry) else { return };
        let Some(id) = presented_receipt_id(c.receipt) else {
            return;
        };
        if let Some(first) = self.won.get(id) {
            must_refuse_consume(
                InvariantId::RC1,
                entry,
                Some(id),
                format!(
                    "it already admitted an instance at step {first}; expected receipt_consumed"
                ),
                out,
            );
        } else if succeeded(entry) {
            self.won.insert(id.to_string(), entry.step);
        }
    }
}

/// RC2. A consume at a clock at or past the receipt's `expires_at` (the
/// issued one, or the presented one for a receipt the run did not issue) is
/// not successful.
pub(super) fn rc2(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    let Some(c) = consume(entry) else { return };
    let id = presented_receipt_id(c.receipt);
    let expires_at = id
        .and_then(|id| facts.issued(id))
        .map(|i| i.receipt.expires_at)
        .or_else(|| c.receipt.get("expires_at").and_then(Value::as_u64));
    if let Some(expires_at) = expires_at
        && facts.now >= expires_at
    {
        must_refuse_consume(
            InvariantId::RC2,
            entry,
            id,
            format!(
                "the clock ({}) is at or past its expiry ({expires_at}); expected receipt_expired",
                facts.now
            ),
            out,
        );
    }
}

/// RC3. A consume presented by another parent than the receipt was prepared
/// for, or with another spawn request, is not successful.
pub(super) fn rc3(facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
    let Some(c) = consume(entry) else { return };
    let Some(id) = presented_receipt_id(c.receipt) else {
        return;
    };
    let Some(issue) = facts.receipt(id, entry.step) else {
        return;
    };
    if c.parent != issue.parent {
        must_refuse_consume(
            InvariantId::RC3,
            entry,
            Some(id),
            format!(
                "it was presented by `{}` but bound to parent `{}`; expected binding_mismatch",
                c.parent, issue.parent
            ),
            out,
        );
    } else if *c.request != issue.request {
        must_refuse_consume(InvariantId::RC3, entry, Some(id), "the presented spawn request differs from the one it was prepared for; expected binding_mismatch".into(), out);
    }
}

/// RC4. A consume presenting a receipt that differs in any field from the one
/// the host issued (or one it never issued) is not successful; and a receipt
/// once observed consumed stays listed as consumed, across restarts.
#[derive(Default)]
pub(super) struct Rc4 {
    /// Each receipt seen consumed, and the step it first was.
    tombstones: BTreeMap<String, usize>,
}

impl Checker for Rc4 {
    fn take(&mut self, facts: &Facts, entry: &HistoryEntry, out: &mut Vec<Violation>) {
        if let Some(c) = consume(entry) {
            let id = presented_receipt_id(c.receipt);
            match id.and_then(|id| facts.receipt(id, entry.step)) {
                None => must_refuse_consume(
                    InvariantId::RC4,
                    entry,
                    id,
                    "the host never issued a receipt with this id; expected receipt_missing".into(),
                    out,
                ),
                Some(issue) => {
                    let original = serde_json::to_value(&issue.receipt).unwrap_or(Value::Null);
                    if *c.receipt != original {
                        let fields: Vec<&String> = original
                            .as_object()
                            .into_iter()
                            .flatten()
                            .filter(|(k, v)| c.receipt.get(k.as_str()) != Some(v))
                            .map(|(k, _)| k)
                            .collect();
                        must_refuse_consume(
                            InvariantId::RC4,
                            entry,
                            id,
                            format!(
                                "it was tampered with (fields {fields:?} differ from the issued receipt); expected binding_mismatch"
                            ),
                            out,
                        );
                    }
                }
            }
        }
        if let Some(observed) = observed_of(entry) {
            for (id, since) in &self.tombstones {
                let now = observed
                    .receipts
                    .iter()
                    .find(|r| r.id == *id)
                    .map(|r| r.state);
                if now != Some(ReceiptState::Consumed) {
                    out.push(violation(
                        InvariantId::RC4,
                        entry.step,
                        format!("receipt `{id}` was consumed (seen at step {since}) and is now {now:?}; tombstones are permanent"),
                        json!({"receipt": id, "now": now}),
                    ));
                }
            }
            for receipt in &observed.receipts {
                if receipt.state == ReceiptState::Consumed
                    && !self.tombstones.contains_key(&receipt.id)
                {
                    self.tombstones.insert(receipt.id.clone(), entry.step);
                }
            }
        }
    }
}
