//! The race defects: an action that checks under the lock, lets go of it, and later acts on what it read.
//!
//! A correct host holds its state's lock from an action's first check to
//! its last commit (`reference::Worker`). These defects split that in two,
//! as a host does that reads a row, awaits something, and writes: run one
//! action at a time they behave exactly like the correct host, so only
//! requests in flight at once can catch them.

use std::time::Duration;

use delegation_model::digest::sha256_hex;
use delegation_model::state::HostState;
use delegation_model::{Action, ReceiptState};
use serde_json::{Value, json};

use super::Defect;

/// How long a racing action waits between its check and its act: long
/// enough that every other request of the same batch, sent together with
/// it, runs its own check in between, even on a loaded machine.
pub const STALE_CHECK_WINDOW: Duration = Duration::from_millis(150);

/// What a racing action read before it let go of the lock.
#[derive(Clone, Debug, PartialEq)]
pub enum StaleCheck {
    /// receipt-consume-check-then-act: the receipt was issued when checked.
    ReceiptIssued { receipt: String },
    /// followup-races-close: the instance was live when checked.
    InstanceLive { instance: String, input: String },
    /// capability-call-check-then-act: the capability was not revoked when checked.
    CapabilityUnrevoked { capability: String },
}

/// What acting on a stale check changed in memory only, to be put back
/// once the action is done: the store keeps what was committed.
#[derive(Clone, Debug, PartialEq)]
pub enum StaleUndo {
    Nothing,
    /// The call ran on a capability revoked meanwhile: it is revoked again.
    Revoke {
        capability: String,
    },
}

/// The check a racing defect does before letting go of the lock; `None`
/// when `defect` is no race defect or the action is not the one it breaks.
pub fn check_before_acting(
    state: &HostState,
    defect: Option<Defect>,
    action: &Action,
) -> Option<StaleCheck> {
    match (defect?, action) {
        (Defect::ReceiptConsumeCheckThenAct, Action::ConsumeReceipt { receipt, .. }) => {
            let id = receipt.get("id").and_then(Value::as_str)?;
            (state.receipts.get(id)?.state == ReceiptState::Issued).then(|| {
                StaleCheck::ReceiptIssued {
                    receipt: id.to_string(),
                }
            })
        }
        (Defect::CapabilityCallCheckThenAct, Action::CapabilityCall { secret, .. }) => {
            let digest = sha256_hex(secret.as_bytes());
            let c = state
                .capabilities
                .values()
                .find(|c| c.secret_digest == digest)?;
            (!c.capability.revoked).then(|| StaleCheck::CapabilityUnrevoked {
                capability: c.capability.id.clone(),
            })
        }
        (Defect::FollowupRacesClose, Action::Turn { instance, input }) => {
            (!state.instances.get(instance)?.state.is_terminal()).then(|| {
                StaleCheck::InstanceLive {
                    instance: instance.clone(),
                    input: input.clone(),
                }
            })
        }
        _ => None,
    }
}

/// Acts on the stale check, with the lock held again: the consume takes the
/// receipt as still issued, tombstone or not; the follow-up's model request
/// goes out although a close committed meanwhile (the turn itself is then
/// refused, as the instance is terminal); the capability call runs on the
/// capability as unrevoked, although a revoke committed meanwhile.
pub async fn act_on_stale_check(
    state: &mut HostState,
    stale: &StaleCheck,
    http: &reqwest::Client,
    model_endpoint: &str,
) -> StaleUndo {
    match stale {
        StaleCheck::ReceiptIssued { receipt } => {
            if let Some(r) = state.receipts.get_mut(receipt) {
                r.state = ReceiptState::Issued;
            }
        }
        StaleCheck::CapabilityUnrevoked { capability } => {
            if let Some(c) = state.capabilities.get_mut(capability)
                && c.capability.revoked
            {
                c.capability.revoked = false;
                return StaleUndo::Revoke {
                    capability: capability.clone(),
                };
            }
        }
        StaleCheck::InstanceLive { instance, input } => {
            let closed = state
                .instances
                .get(instance)
                .is_some_and(|i| i.state.is_terminal());
            if closed {
                let body = json!({"instance": instance, "role": "", "input": input, "tools": []});
                let _ = http
                    .post(format!(
                        "{}/neutral/turn",
                        model_endpoint.trim_end_matches('/')
                    ))
                    .header("x-delegation-instance", instance.as_str())
                    .json(&body)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await;
            }
        }
    }
    StaleUndo::Nothing
}

/// Puts back what acting on a stale check changed in memory only.
pub fn undo_stale_act(state: &mut HostState, undo: StaleUndo) {
    if let StaleUndo::Revoke { capability } = undo
        && let Some(c) = state.capabilities.get_mut(&capability)
    {
        c.capability.revoked = true;
    }
}
