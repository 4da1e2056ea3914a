//! The provenance rule: a verdict never rests on what an adapter inferred.
//!
//! Adapters declare, with `inferred` lists on their answers, observations and
//! observed instances, which values they worked out themselves instead of
//! reading them from the host (see PROTOCOL.md, "Provenance"). The harness's
//! own observers (model endpoint, tool server, authorizer, the restart) are
//! never inferred. A check whose verdict reads an inferred value and no
//! observer evidence decides nothing: the scenario is `unverified`, not a
//! pass, and such a failure is not blamed on the host.

use std::collections::BTreeSet;

use delegation_model::invariants::values_read;
use delegation_model::{
    ActionResult, HistoryEntry, InvariantId, Observed, ReportedValue, StepKind,
};
use serde::Serialize;

/// A check that held, or failed, only on values an adapter declared inferred.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InferredCheck {
    /// The expectation's place in the scenario file, or the invariant id.
    pub at: String,
    /// The inferred values it read.
    pub values: Vec<ReportedValue>,
}

impl InferredCheck {
    /// `steps[2].expect.state.child (state inferred by the adapter)`, as reports print it.
    pub fn text(&self) -> String {
        let names: Vec<&str> = self.values.iter().map(|v| v.name()).collect();
        format!("{} ({} inferred by the adapter)", self.at, names.join(", "))
    }
}

/// Where an expectation's observed value comes from.
#[derive(Clone, Copy, Debug)]
pub enum Basis<'a> {
    /// The harness's own observers: never inferred.
    Observers,
    /// A value of the step's answer.
    Result(ReportedValue),
    /// A value of the whole observation (before and after the step).
    Observed(ReportedValue),
    /// A value of one observed instance (by host id), or of the observation.
    Instance(ReportedValue, Option<&'a str>),
}

/// The inferred values behind `basis` at one step; empty when it rests on the
/// host or the observers. An inferred `outcome` taints everything the answer says.
pub fn inferred_behind(
    basis: Basis<'_>,
    result: Option<&ActionResult>,
    observations: &[&Observed],
) -> Vec<ReportedValue> {
    let in_result = |v: ReportedValue| {
        result.is_some_and(|r| {
            r.inferred.contains(&v) || r.inferred.contains(&ReportedValue::Outcome)
        })
    };
    let in_observed = |v: ReportedValue| observations.iter().any(|o| o.inferred.contains(&v));
    let found = match basis {
        Basis::Observers => None,
        Basis::Result(v) => in_result(v).then_some(v),
        Basis::Observed(v) => in_observed(v).then_some(v),
        Basis::Instance(v, id) => {
            let in_instance = observations.iter().any(|o| {
                o.instances
                    .iter()
                    .filter(|i| id.is_none_or(|id| i.id == id))
                    .any(|i| i.inferred.contains(&v))
            });
            (in_observed(v) || in_instance).then_some(v)
        }
    };
    found.into_iter().collect()
}

/// Every value declared inferred anywhere in a history: answers, observations, instances.
pub fn inferred_in_history(history: &[HistoryEntry]) -> BTreeSet<ReportedValue> {
    let mut out = BTreeSet::new();
    for entry in history {
        if let StepKind::Action { result: Ok(r), .. } = &entry.kind {
            out.extend(r.inferred.iter().copied());
            if let Some(o) = &r.observed {
                add_observed(&mut out, o);
            }
        }
        if let Some(o) = &entry.observed {
            add_observed(&mut out, o);
        }
    }
    out
}

fn add_observed(out: &mut BTreeSet<ReportedValue>, observed: &Observed) {
    out.extend(observed.inferred.iter().copied());
    for i in &observed.instances {
        out.extend(i.inferred.iter().copied());
    }
}

/// The inferred values an invariant's checker would rest on alone, given what
/// a run declared inferred; empty when the checker reads observer evidence or
/// none of its values was inferred.
pub fn invariant_inferred(
    id: InvariantId,
    inferred: &BTreeSet<ReportedValue>,
) -> Vec<ReportedValue> {
    let read = values_read(id);
    if read.observers {
        return Vec::new();
    }
    let mut out: Vec<ReportedValue> = read
        .host
        .iter()
        .copied()
        .filter(|v| inferred.contains(v))
        .collect();
    if inferred.contains(&ReportedValue::Outcome) {
        out.push(ReportedValue::Outcome);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use delegation_model::ObservedInstance;

    fn instance(id: &str, inferred: Vec<ReportedValue>) -> ObservedInstance {
        serde_json::from_value::<ObservedInstance>(serde_json::json!({
            "id": id, "state": "running", "role": "lead", "model": "m",
            "ceiling": {"sandbox": "read-only", "approval_policy": "never", "tools": {},
                        "cwd": "/w", "provider": "harness", "delegation_depth": 0},
            "inferred": inferred,
        }))
        .unwrap()
    }

    #[test]
    fn an_instance_value_is_inferred_only_for_the_instance_that_says_so() {
        let observed = Observed {
            instances: vec![
                instance("i-1", vec![]),
                instance("i-2", vec![ReportedValue::Ceiling]),
            ],
            ..Observed::default()
        };
        let at = |id| {
            inferred_behind(
                Basis::Instance(ReportedValue::Ceiling, Some(id)),
                None,
                &[&observed],
            )
        };
        assert_eq!(at("i-1"), vec![]);
        assert_eq!(at("i-2"), vec![ReportedValue::Ceiling]);
        assert_eq!(
            inferred_behind(
                Basis::Instance(ReportedValue::State, Some("i-2")),
                None,
                &[&observed]
            ),
            vec![]
        );
    }

    #[test]
    fn observers_are_never_inferred_and_an_inferred_outcome_taints_the_answer() {
        let mut result = ActionResult::ok();
        result.inferred = vec![ReportedValue::Outcome];
        let everything = Observed {
            inferred: vec![ReportedValue::Instances],
            ..Observed::default()
        };
        assert!(inferred_behind(Basis::Observers, Some(&result), &[&everything]).is_empty());
        assert_eq!(
            inferred_behind(Basis::Result(ReportedValue::Reason), Some(&result), &[]),
            vec![ReportedValue::Reason]
        );
        assert_eq!(
            inferred_behind(
                Basis::Observed(ReportedValue::Instances),
                None,
                &[&everything]
            ),
            vec![ReportedValue::Instances]
        );
        assert!(
            inferred_behind(
                Basis::Result(ReportedValue::Reason),
                Some(&ActionResult::ok()),
                &[]
            )
            .is_empty()
        );
    }

    #[test]
    fn an_invariant_with_observer_evidence_never_rests_on_inference_alone() {
        let all: BTreeSet<ReportedValue> = [ReportedValue::Ceiling, ReportedValue::State].into();
        assert_eq!(
            invariant_inferred(InvariantId::CE1, &all),
            vec![ReportedValue::Ceiling]
        );
        // TR1 reads states but also counts model requests at the harness's endpoint.
        assert!(invariant_inferred(InvariantId::TR1, &all).is_empty());
        assert!(invariant_inferred(InvariantId::CE1, &BTreeSet::new()).is_empty());
    }
}
