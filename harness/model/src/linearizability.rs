//! Judging actions that were in flight at once: linearizability against the sequential model, by trying every order.
//!
//! The model decides one action at a time. A host given several requests at
//! once is correct when what it answered, and the state it ended in, are
//! those of *some* order of the same actions applied one at a time: two
//! consumes of one receipt may be won by either, but not by both (RC1); a
//! follow-up racing a close may run before it or be refused after it, but a
//! refused follow-up must not have cost a model request (TR4); a capability
//! call racing its revoke may run before it or be refused after it (TC2).
//! The number of actions raced is small (at most [`MAX_RACED`]), so every
//! order is tried.
//!
//! Besides answers and state, real time counts where the observers can
//! place it: when the tool server saw a call's handler run only after the
//! harness had the revoke's answer, the revoke had committed before the
//! call did anything, so only orders with the revoke first may explain the
//! step (a call admitted before the revoke may finish; none starts after).
//!
//! [`RaceState`] is what the harness can observe of the state the raced
//! actions touch, and [`RaceState::apply`] the model's decision for each
//! raced action on it, in the model's order of checks (`admit_receipt`,
//! `revoke_receipt`, `turn`, `end`, `plan_capability_call`'s revocation
//! check, `revoke_capability`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::wire::{Action, HandlerCall, Id, LifecycleState, Observed, Outcome, ReceiptState};
use crate::{DenyReason, InvariantId};

/// At most this many actions are raced in one step: 6! = 720 orders.
pub const MAX_RACED: usize = 6;

/// One raced action, as far as the sequential rules need it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RacedAction {
    Consume {
        receipt: Id,
        parent: Id,
    },
    RevokeReceipt {
        receipt: Id,
    },
    Turn {
        instance: Id,
    },
    End {
        instance: Id,
        to: LifecycleState,
    },
    /// A capability call, by the capability its secret names; a race
    /// decides its revocation check only, so a scenario races calls that
    /// pass every other check (binding, expiry, allowlist, the agent, drift).
    CapabilityCall {
        capability: Id,
        tool: String,
        arguments: Value,
    },
    RevokeCapability {
        capability: Id,
    },
}

impl RacedAction {
    /// The raced form of a protocol action; `None` for an action whose
    /// outcome under a race these rules do not decide, or a capability call
    /// whose secret `capability_of` (secret to capability id) does not know.
    pub fn from_action(
        action: &Action,
        capability_of: &dyn Fn(&str) -> Option<Id>,
    ) -> Option<RacedAction> {
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
            Action::CapabilityCall {
                secret,
                tool,
                arguments,
                ..
            } => RacedAction::CapabilityCall {
                capability: capability_of(secret)?,
                tool: tool.clone(),
                arguments: arguments.clone(),
            },
            Action::RevokeCapability { capability } => RacedAction::RevokeCapability {
                capability: capability.clone(),
            },
            _ => return None,
        })
    }

    /// The invariant a wrong answer to this action under a race breaks:
    /// receipts are single use (RC1), nothing starts after a close (TR4),
    /// no capability call starts after its revoke (TC2).
    pub fn invariant(&self) -> InvariantId {
        match self {
            RacedAction::Consume { .. } | RacedAction::RevokeReceipt { .. } => InvariantId::RC1,
            RacedAction::Turn { .. } | RacedAction::End { .. } => InvariantId::TR4,
            RacedAction::CapabilityCall { .. } | RacedAction::RevokeCapability { .. } => {
                InvariantId::TC2
            }
        }
    }

    /// Whether a handler call the tool server saw is this capability call's.
    fn ran(&self, call: &HandlerCall) -> bool {
        matches!(self, RacedAction::CapabilityCall { tool, arguments, .. }
            if *tool == call.tool && *arguments == call.arguments)
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
    /// The touched capabilities by id, and whether each is revoked; absent: never issued.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub capabilities: BTreeMap<Id, bool>,
    /// Handler calls of the raced capability calls the tool server saw.
    pub handler_calls: u64,
}

impl RaceState {
    /// The part of `observed` the actions touch, before the race: no children, no requests yet.
    pub fn before(observed: &Observed, actions: &[RacedAction]) -> RaceState {
        let (receipts, instances, capabilities) = touched(actions);
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
            capabilities: capabilities
                .iter()
                .filter_map(|id| {
                    let c = observed.capabilities.iter().find(|c| &c.id == id)?;
                    Some((id.clone(), c.revoked))
                })
                .collect(),
            handler_calls: 0,
        }
    }

    /// The same part of `after`, with the children, model requests and
    /// handler calls the step's observers saw (`model_requests`, by instance
    /// id; `handler_calls`, of which those of the raced capability calls count).
    pub fn after(
        before: &Observed,
        after: &Observed,
        model_requests: &BTreeMap<Id, u64>,
        handler_calls: &[HandlerCall],
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
        state.handler_calls = handler_calls
            .iter()
            .filter(|call| actions.iter().any(|a| a.ran(call)))
            .count() as u64;
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
            RacedAction::CapabilityCall { capability, .. } => {
                match self.capabilities.get(capability) {
                    None | Some(true) => denied(DenyReason::CapabilityDenied),
                    Some(false) => {
                        self.handler_calls += 1;
                        (Outcome::Ok, None)
                    }
                }
            }
            RacedAction::RevokeCapability { capability } => {
                match self.capabilities.get_mut(capability) {
                    None => denied(DenyReason::CapabilityDenied),
                    Some(revoked) => {
                        *revoked = true;
                        (Outcome::Ok, None)
                    }
                }
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

/// The ids of receipts, instances and capabilities the actions name.
fn touched(actions: &[RacedAction]) -> (BTreeSet<Id>, BTreeSet<Id>, BTreeSet<Id>) {
    let mut receipts = BTreeSet::new();
    let mut instances = BTreeSet::new();
    let mut capabilities = BTreeSet::new();
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
            RacedAction::CapabilityCall { capability, .. }
            | RacedAction::RevokeCapability { capability } => {
                capabilities.insert(capability.clone());
            }
        }
    }
    (receipts, instances, capabilities)
}

/// Which raced action must come before which in any order that explains
/// the step, from real time: `(revoke, call)` when the tool server saw a
/// handler run of `call` (and of no other raced call: an ambiguous run
/// orders nothing) only after the harness had `revoke`'s `ok` answer.
/// `late_handler_calls[i]` are the handler calls seen after action `i`'s
/// answer arrived (empty when it was refused or its arrival is unknown).
pub fn real_time_order(
    actions: &[RacedAction],
    answers: &[Answer],
    late_handler_calls: &[&[HandlerCall]],
) -> Vec<(usize, usize)> {
    let mut before = Vec::new();
    for (revoke, late) in late_handler_calls.iter().enumerate() {
        let revoked_ok = matches!(
            actions.get(revoke),
            Some(RacedAction::RevokeCapability { .. })
        ) && answers.get(revoke).is_some_and(|a| a.0 == Outcome::Ok);
        if !revoked_ok {
            continue;
        }
        for call in late.iter() {
            let ran: Vec<usize> = (0..actions.len())
                .filter(|&j| actions[j].ran(call))
                .collect();
            if let [only] = ran[..]
                && !before.contains(&(revoke, only))
            {
                before.push((revoke, only));
            }
        }
    }
    before
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
/// a time from `start`, answer exactly `observed` and end in `after`, with
/// `a` before `b` for each pair of `precedes` (real time, see [`real_time_order`]).
pub fn linearize(
    start: &RaceState,
    actions: &[RacedAction],
    observed: &[Answer],
    after: &RaceState,
    precedes: &[(usize, usize)],
) -> Result<Vec<usize>, NotLinearizable> {
    let mut possible: Vec<Possible> = Vec::new();
    let mut found = None;
    for_each_order(actions.len(), &mut |order| {
        let position = |i: usize| order.iter().position(|&x| x == i);
        if precedes.iter().any(|&(a, b)| position(a) > position(b)) {
            return true;
        }
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
        let order = linearize(
            &issued(),
            &actions,
            &[CONSUMED, OK, CONSUMED],
            &one_child(),
            &[],
        )
        .unwrap();
        assert_eq!(order[0], 1);
    }

    #[test]
    fn two_winners_of_one_receipt_are_not_linearizable() {
        let actions = vec![consume(), consume(), consume()];
        let mut two_children = one_child();
        two_children.children = 2;
        two_children.child_model_requests = 2;
        let err =
            linearize(&issued(), &actions, &[OK, OK, CONSUMED], &two_children, &[]).unwrap_err();
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
        assert!(linearize(&issued(), &actions, &[OK, CONSUMED], &after, &[]).is_err());
        // Positive control: the same answers with one child.
        assert!(linearize(&issued(), &actions, &[OK, CONSUMED], &one_child(), &[]).is_ok());
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
        assert_eq!(
            linearize(&start, &actions, &[OK, OK], &ran, &[]),
            Ok(vec![0, 1])
        );
        // Refused after the close, with no request: fine.
        assert_eq!(
            linearize(&start, &actions, &[TERMINAL, OK], &closed, &[]),
            Ok(vec![1, 0])
        );
        // Refused, yet a model request went out: no order explains it.
        assert!(linearize(&start, &actions, &[TERMINAL, OK], &ran, &[]).is_err());
    }

    #[test]
    fn a_call_whose_handler_ran_after_the_revoke_answered_must_be_refused() {
        let call = RacedAction::CapabilityCall {
            capability: "c-1".into(),
            tool: "fs.read".into(),
            arguments: serde_json::json!({"path": "a"}),
        };
        let revoke = RacedAction::RevokeCapability {
            capability: "c-1".into(),
        };
        let actions = vec![call, revoke];
        let start = RaceState {
            capabilities: [("c-1".to_string(), false)].into(),
            ..RaceState::default()
        };
        let mut ran = start.clone();
        ran.capabilities.insert("c-1".into(), true);
        ran.handler_calls = 1;
        let mut refused = ran.clone();
        refused.handler_calls = 0;
        const DENIED: Answer = (Outcome::Denied, Some(DenyReason::CapabilityDenied));
        // Without real time, a run before the revoke explains it.
        assert_eq!(
            linearize(&start, &actions, &[OK, OK], &ran, &[]),
            Ok(vec![0, 1])
        );
        // The handler ran after the revoke's answer: only revoke-first
        // orders count, and in them the call is refused.
        let handler = HandlerCall {
            tool: "fs.read".into(),
            arguments: serde_json::json!({"path": "a"}),
        };
        let late: Vec<&[HandlerCall]> = vec![&[], std::slice::from_ref(&handler)];
        let precedes = real_time_order(&actions, &[OK, OK], &late);
        assert_eq!(precedes, vec![(1, 0)]);
        assert!(linearize(&start, &actions, &[OK, OK], &ran, &precedes).is_err());
        // Positive control: refused after the revoke, no handler run.
        assert_eq!(
            linearize(&start, &actions, &[DENIED, OK], &refused, &precedes),
            Ok(vec![1, 0])
        );
        // A handler run of another call, or a refused revoke, orders nothing.
        let other = HandlerCall {
            tool: "fs.read".into(),
            arguments: serde_json::json!({"path": "b"}),
        };
        let late: Vec<&[HandlerCall]> = vec![&[], std::slice::from_ref(&other)];
        assert!(real_time_order(&actions, &[OK, OK], &late).is_empty());
        let late: Vec<&[HandlerCall]> = vec![&[], std::slice::from_ref(&handler)];
        assert!(real_time_order(&actions, &[OK, DENIED], &late).is_empty());
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
