//! Judging actions that were in flight at once: linearizability against the sequential model, by trying every order.
//!
//! The model decides one action at a time. A host given several requests at
//! once is correct when what it answered, and the state it ended in, are
//! those of *some* order of the same actions applied one at a time: two
//! consumes of one receipt may be won by either, but not by both (RC1); a
//! follow-up racing a close may run before it or be refused after it, but a
//! refused follow-up must not have cost a model request (TR4). The number of
//! actions raced is small (at most [`MAX_RACED`]), so every order is tried.
//!
//! [`RaceState`] is what the harness can observe of the state the raced
//! actions touch, and [`RaceState::apply`] the model's decision for each
//! raced action on it, in the model's order of checks (`admit_receipt`,
//! `revoke_receipt`, `turn`, `end`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::wire::{Action, Id, LifecycleState, Observed, Outcome, ReceiptState};
use crate::{DenyReason, InvariantId};

/// At most this many actions are raced in one step: 6! = 720 orders.
pub const MAX_RACED: usize = 6;

/// One raced action, as far as the sequential rules need it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RacedAction {
    Consume { receipt: Id, parent: Id },
    RevokeReceipt { receipt: Id },
    Turn { instance: Id },
    End { instance: Id, to: LifecycleState },
}

impl RacedAction {
    /// The raced form of a protocol action; `None` for an action whose
    /// outcome under a race these rules do not decide.
    pub fn from_action(action: &Action) -> Option<RacedAction> {
        Some(match action {
            Action::ConsumeReceipt {
                receipt, parent, ..
            } => RacedAction::Consume {
                receipt: receipt.get("id").and_then(Value::as_str)?.to_string(),
                parent: parent.clone(),
            },
            Action::RevokeReceipt { receipt } => RacedAction::RevokeReceipt {
                receipt: receipt.clone(),
            },
            Action::Turn { instance, .. } => RacedAction::Turn {
                instance: instance.clone(),
            },
            Action::Close { instance } => RacedAction::End {
                instance: instance.clone(),
                to: LifecycleState::Closed,
            },
            Action::Cancel { instance } => RacedAction::End {
                instance: instance.clone(),
                to: LifecycleState::Cancelled,
            },
            _ => return None,
        })
    }

    /// The invariant a wrong answer to this action under a race breaks:
    /// receipts are single use (RC1), nothing starts after a close (TR4).
    pub fn invariant(&self) -> InvariantId {
        match self {
            RacedAction::Consume { .. } | RacedAction::RevokeReceipt { .. } => InvariantId::RC1,
            RacedAction::Turn { .. } | RacedAction::End { .. } => InvariantId::TR4,
        }
    }
}

/// An action's answer as the rules decide it: its outcome and, when refused, the reason.
pub type Answer = (Outcome, Option<DenyReason>);

/// What the harness observes of the state the raced actions touch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RaceState {
    /// The touched receipts by id; absent: never issued.
    pub receipts: BTreeMap<Id, ReceiptState>,
    /// The touched instances by id; absent: unknown to the host.
    pub instances: BTreeMap<Id, LifecycleState>,
    /// Children the raced consumes admitted.
    pub children: u64,
    /// Model requests for each touched instance during the step.
    pub model_requests: BTreeMap<Id, u64>,
    /// Model requests for instances that did not exist before the step (the children's first turns).
    pub child_model_requests: u64,
}

impl RaceState {
    /// The part of `observed` the actions touch, before the race: no children, no requests yet.
    pub fn before(observed: &Observed, actions: &[RacedAction]) -> RaceState {
        let (receipts, instances) = touched(actions);
        RaceState {
            receipts: receipts
                .iter()
                .filter_map(|id| {
                    let r = observed.receipts.iter().find(|r| &r.id == id)?;
                    Some((id.clone(), r.state))
                })
                .collect(),
            instances: instances
                .iter()
                .filter_map(|id| Some((id.clone(), observed.instance(id)?.state)))
                .collect(),
            children: 0,
            model_requests: instances.iter().map(|id| (id.clone(), 0)).collect(),
            child_model_requests: 0,
        }
    }

    /// The same part of `after`, with the children and model requests the
    /// step's observers saw (`model_requests`, by instance id).
    pub fn after(
        before: &Observed,
        after: &Observed,
        model_requests: &BTreeMap<Id, u64>,
        actions: &[RacedAction],
    ) -> RaceState {
        let mut state = RaceState::before(after, actions);
        let existed: BTreeSet<&str> = before.instances.iter().map(|i| i.id.as_str()).collect();
        state.children = after
            .instances
            .iter()
            .filter(|i| !existed.contains(i.id.as_str()))
            .count() as u64;
        for (id, n) in model_requests {
            if let Some(count) = state.model_requests.get_mut(id) {
                *count += n;
            } else if !existed.contains(id.as_str()) {
                state.child_model_requests += n;
            }
        }
        state
    }

    /// The model's decision on one action, applied.
    pub fn apply(&mut self, action: &RacedAction) -> Answer {
        let denied = |reason| (Outcome::Denied, Some(reason));
        match action {
            RacedAction::Consume { receipt, parent } => {
                match self.receipts.get(receipt) {
                    None => return denied(DenyReason::ReceiptMissing),
                    Some(ReceiptState::Consumed) => return denied(DenyReason::ReceiptConsumed),
                    Some(ReceiptState::Revoked | ReceiptState::Expired) => {
                        return denied(DenyReason::ReceiptExpired);
                    }
                    Some(ReceiptState::Issued) => {}
                }
                if let Some(refused) = self.refused_as_addressed(parent) {
                    return refused;
                }
                self.receipts
                    .insert(receipt.clone(), ReceiptState::Consumed);
                self.children += 1;
                // The child starts on its task: its first model request.
                self.child_model_requests += 1;
                (Outcome::Ok, None)
            }
            RacedAction::RevokeReceipt { receipt } => match self.receipts.get(receipt) {
                None => denied(DenyReason::ReceiptMissing),
                Some(ReceiptState::Issued) => {
                    self.receipts.insert(receipt.clone(), ReceiptState::Revoked);
                    (Outcome::Ok, None)
                }
                Some(_) => denied(DenyReason::ReceiptConsumed),
            },
            RacedAction::Turn { instance } => {
                if let Some(refused) = self.refused_as_addressed(instance) {
                    return refused;
                }
                *self.model_requests.entry(instance.clone()).or_default() += 1;
                (Outcome::Ok, None)
            }
            RacedAction::End { instance, to } => {
                if let Some(refused) = self.refused_as_addressed(instance) {
                    return refused;
                }
                self.instances.insert(instance.clone(), *to);
                (Outcome::Ok, None)
            }
        }
    }

    /// The refusal of an action addressed to an unknown or terminal instance.
    fn refused_as_addressed(&self, instance: &str) -> Option<Answer> {
        match self.instances.get(instance) {
            None => Some((Outcome::Denied, Some(DenyReason::InstanceUnknown))),
            Some(s) if s.is_terminal() => {
                Some((Outcome::Denied, Some(DenyReason::InstanceTerminal)))
            }
            Some(_) => None,
        }
    }
}

/// The ids of receipts and instances the actions name.
fn touched(actions: &[RacedAction]) -> (BTreeSet<Id>, BTreeSet<Id>) {
    let mut receipts = BTreeSet::new();
    let mut instances = BTreeSet::new();
    for a in actions {
        match a {
            RacedAction::Consume { receipt, parent } => {
                receipts.insert(receipt.clone());
                instances.insert(parent.clone());
            }
            RacedAction::RevokeReceipt { receipt } => {
                receipts.insert(receipt.clone());
            }
            RacedAction::Turn { instance } | RacedAction::End { instance, .. } => {
                instances.insert(instance.clone());
            }
        }
    }
    (receipts, instances)
}

/// No order explains what was observed: every distinct thing the orders
/// would have given instead, for the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotLinearizable {
    pub observed: Vec<Answer>,
    pub observed_after: RaceState,
    /// Each distinct (answers, state after) some order gives, with one order giving it.
    pub possible: Vec<Possible>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Possible {
    pub order: Vec<usize>,
    pub answers: Vec<Answer>,
    pub after: RaceState,
}

/// An order (indices into `actions`) in which the actions, applied one at
/// a time from `start`, answer exactly `observed` and end in `after`.
pub fn linearize(
    start: &RaceState,
    actions: &[RacedAction],
    observed: &[Answer],
    after: &RaceState,
) -> Result<Vec<usize>, NotLinearizable> {
    let mut possible: Vec<Possible> = Vec::new();
    let mut found = None;
    for_each_order(actions.len(), &mut |order| {
        let mut state = start.clone();
        let mut answers = vec![(Outcome::Ok, None); actions.len()];
        for &i in order {
            answers[i] = state.apply(&actions[i]);
        }
        if answers == observed && &state == after {
            found = Some(order.to_vec());
            return false;
        }
        if !possible
            .iter()
            .any(|p| p.answers == answers && p.after == state)
        {
            possible.push(Possible {
                order: order.to_vec(),
                answers,
                after: state,
            });
        }
        true
    });
    found.ok_or_else(|| NotLinearizable {
        observed: observed.to_vec(),
        observed_after: after.clone(),
        possible,
    })
}

/// Calls `visit` with every permutation of `0..n`, in lexicographic order,
/// until it returns `false`.
fn for_each_order(n: usize, visit: &mut dyn FnMut(&[usize]) -> bool) {
    fn extend(
        order: &mut Vec<usize>,
        used: &mut [bool],
        visit: &mut dyn FnMut(&[usize]) -> bool,
    ) -> bool {
        if order.len() == used.len() {
            return visit(order);
        }
        for i in 0..used.len() {
            if used[i] {
                continue;
            }
            used[i] = true;
            order.push(i);
            let go_on = extend(order, used, visit);
            order.pop();
            used[i] = false;
            if !go_on {
                return false;
            }
        }
        true
    }
    extend(&mut Vec::with_capacity(n), &mut vec![false; n], visit);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consume() -> RacedAction {
        RacedAction::Consume {
            receipt: "r-1".into(),
            parent: "i-1".into(),
        }
    }

    fn issued() -> RaceState {
        RaceState {
            receipts: [("r-1".to_string(), ReceiptState::Issued)].into(),
            instances: [("i-1".to_string(), LifecycleState::Running)].into(),
            model_requests: [("i-1".to_string(), 0)].into(),
            ..RaceState::default()
        }
    }

    const OK: Answer = (Outcome::Ok, None);
    const CONSUMED: Answer = (Outcome::Denied, Some(DenyReason::ReceiptConsumed));
    const TERMINAL: Answer = (Outcome::Denied, Some(DenyReason::InstanceTerminal));

    fn one_child() -> RaceState {
        let mut after = issued();
        after.receipts.insert("r-1".into(), ReceiptState::Consumed);
        after.children = 1;
        after.child_model_requests = 1;
        after
    }

    #[test]
    fn one_winner_among_three_consumes_is_linearizable_whichever_wins() {
        let actions = vec![consume(), consume(), consume()];
        // Positive: the second request won; the order found puts it first.
        let order =
            linearize(&issued(), &actions, &[CONSUMED, OK, CONSUMED], &one_child()).unwrap();
        assert_eq!(order[0], 1);
    }

    #[test]
    fn two_winners_of_one_receipt_are_not_linearizable() {
        let actions = vec![consume(), consume(), consume()];
        let mut two_children = one_child();
        two_children.children = 2;
        two_children.child_model_requests = 2;
        let err = linearize(&issued(), &actions, &[OK, OK, CONSUMED], &two_children).unwrap_err();
        // Every order gives exactly one winner: what the report shows instead.
        assert!(
            err.possible
                .iter()
                .all(|p| p.answers.iter().filter(|a| **a == OK).count() == 1)
        );
        assert_eq!(err.possible.len(), 3, "{:?}", err.possible);
    }

    #[test]
    fn right_answers_with_the_wrong_state_after_are_not_linearizable() {
        // One winner answered, but two children exist: the answers alone would pass.
        let mut after = one_child();
        after.children = 2;
        let actions = vec![consume(), consume()];
        assert!(linearize(&issued(), &actions, &[OK, CONSUMED], &after).is_err());
        // Positive control: the same answers with one child.
        assert!(linearize(&issued(), &actions, &[OK, CONSUMED], &one_child()).is_ok());
    }

    #[test]
    fn a_followup_racing_a_close_may_run_before_it_but_not_cost_a_request_after_it() {
        let turn = RacedAction::Turn {
            instance: "i-1".into(),
        };
        let close = RacedAction::End {
            instance: "i-1".into(),
            to: LifecycleState::Closed,
        };
        let actions = vec![turn, close];
        let mut closed = issued();
        closed.receipts.clear();
        closed
            .instances
            .insert("i-1".into(), LifecycleState::Closed);
        let mut start = issued();
        start.receipts.clear();
        // The follow-up ran first: one request, then the close.
        let mut ran = closed.clone();
        ran.model_requests.insert("i-1".into(), 1);
        assert_eq!(linearize(&start, &actions, &[OK, OK], &ran), Ok(vec![0, 1]));
        // Refused after the close, with no request: fine.
        assert_eq!(
            linearize(&start, &actions, &[TERMINAL, OK], &closed),
            Ok(vec![1, 0])
        );
        // Refused, yet a model request went out: no order explains it.
        assert!(linearize(&start, &actions, &[TERMINAL, OK], &ran).is_err());
    }

    #[test]
    fn every_order_is_tried_once() {
        let mut seen = BTreeSet::new();
        for_each_order(4, &mut |order| {
            assert!(seen.insert(order.to_vec()));
            true
        });
        assert_eq!(seen.len(), 24);
        let mut visits = 0;
        for_each_order(3, &mut |_| {
            visits += 1;
            visits < 2
        });
        assert_eq!(visits, 2, "stops when told");
    }
}
