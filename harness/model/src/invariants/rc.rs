//! The RC checkers (receipts): MODEL.md section 3, family RC.

use super::*;

/// A receipt the host issued, with what it was prepared for.
pub(super) struct Issued<'h> {
    pub(super) receipt: &'h Receipt,
    pub(super) parent: &'h str,
    pub(super) request: &'h SpawnRequest,
    pub(super) step: usize,
    pub(super) authorizer_calls: u64,
}

pub(super) fn issued_receipts(history: &[HistoryEntry]) -> BTreeMap<&str, Issued<'_>> {
    let mut issued = BTreeMap::new();
    for entry in history {
        if let Some((
            Action::PrepareReceipt {
                parent, request, ..
            },
            result,
        )) = ok_result(entry)
            && let Some(receipt) = &result.receipt
        {
            issued.entry(receipt.id.as_str()).or_insert(Issued {
                receipt,
                parent,
                request,
                step: entry.step,
                authorizer_calls: entry.evidence.authorizer_calls,
            });
        }
    }
    issued
}

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
pub(super) fn rc1(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let mut won: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in history {
        let Some(c) = consume(entry) else { continue };
        let Some(id) = presented_receipt_id(c.receipt) else {
            continue;
        };
        if let Some(first) = won.get(id) {
            must_refuse_consume(
                InvariantId::RC1,
                entry,
                Some(id),
                format!(
                    "it already admitted an instance at step {first}; expected receipt_consumed"
                ),
                &mut out,
            );
        } else if succeeded(entry) {
            won.insert(id, entry.step);
        }
    }
    out
}

/// RC2. A consume at a clock at or past the receipt's `expires_at` (the
/// issued one, or the presented one for a receipt the run did not issue) is
/// not successful.
pub(super) fn rc2(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = issued_receipts(history);
    run.walk(|facts, entry| {
        let Some(c) = consume(entry) else { return };
        let id = presented_receipt_id(c.receipt);
        let expires_at = id
            .and_then(|id| issued.get(id))
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
                &mut out,
            );
        }
    });
    out
}

/// RC3. A consume presented by another parent than the receipt was prepared
/// for, or with another spawn request, is not successful.
pub(super) fn rc3(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = issued_receipts(history);
    for entry in history {
        let Some(c) = consume(entry) else { continue };
        let Some(id) = presented_receipt_id(c.receipt) else {
            continue;
        };
        let Some(issue) = issued.get(id).filter(|i| i.step < entry.step) else {
            continue;
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
                &mut out,
            );
        } else if c.request != issue.request {
            must_refuse_consume(InvariantId::RC3, entry, Some(id), "the presented spawn request differs from the one it was prepared for; expected binding_mismatch".into(), &mut out);
        }
    }
    out
}

/// RC4. A consume presenting a receipt that differs in any field from the one
/// the host issued (or one it never issued) is not successful; and a receipt
/// once observed consumed stays listed as consumed, across restarts.
pub(super) fn rc4(run: &Run) -> Vec<Violation> {
    let history = run.history;
    let mut out = Vec::new();
    let issued = issued_receipts(history);
    let mut tombstones: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in history {
        if let Some(c) = consume(entry) {
            let id = presented_receipt_id(c.receipt);
            match id
                .and_then(|id| issued.get(id))
                .filter(|i| i.step < entry.step)
            {
                None => must_refuse_consume(
                    InvariantId::RC4,
                    entry,
                    id,
                    "the host never issued a receipt with this id; expected receipt_missing".into(),
                    &mut out,
                ),
                Some(issue) => {
                    let original = serde_json::to_value(issue.receipt).unwrap_or(Value::Null);
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
                            &mut out,
                        );
                    }
                }
            }
        }
        if let Some(observed) = observed_of(entry) {
            for (id, since) in &tombstones {
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
                if receipt.state == ReceiptState::Consumed {
                    tombstones.entry(&receipt.id).or_insert(entry.step);
                }
            }
        }
    }
    out
}
