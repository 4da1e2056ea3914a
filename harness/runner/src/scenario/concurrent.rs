//! The concurrent step: several actions sent to the host at once, and what must hold over their answers as a set.
//!
//! `{"concurrently": [{"consume_receipt": {...}}, {"consume_receipt": {...}}], "expect": {"set": {"ok": 1, "denied": {"receipt_consumed": 1}}}}`.
//! Whatever the expectations say, the runner also judges the answers by
//! linearizability ([`delegation_model::linearizability`]): they and the
//! state after must be those of some one-at-a-time order of the actions.

use std::collections::BTreeMap;
use std::path::Path;

use delegation_model::DenyReason;
use delegation_model::linearizability::MAX_RACED;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Expect, Scenario, ScenarioError, Step, StepAction};

/// The actions of a concurrent step, each written as a step of its own
/// (one action key, no `expect`, no `note`), all sent before any is answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct ConcurrentSteps(pub Vec<Step>);

/// The action keys a concurrent step may race: those whose answers under a
/// race the model's linearizability rules decide.
pub const RACEABLE_KEYS: &[&str] = &[
    "consume_receipt",
    "revoke_receipt",
    "turn",
    "close",
    "cancel",
    "capability_call",
    "revoke_capability",
];

/// What must hold over the answers of a concurrent step, as a set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetExpect {
    /// How many of the actions answered `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<u64>,
    /// How many were refused, by reason; given, no refusal with another reason may occur.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub denied: BTreeMap<DenyReason, u64>,
}

/// Expectations about one action's answer, which a set of answers does not have.
const SINGLE_ANSWER_FIELDS: &[&str] = &[
    "outcome",
    "reason",
    "spawn",
    "tool_call",
    "woke",
    "effective",
    "effective_equals_ceiling_of",
    "host_exits",
    "model_saw",
];

impl Scenario {
    /// Every concurrent step: the scenario needs `concurrent-requests`; two
    /// to [`MAX_RACED`] raceable actions, none binding an alias or carrying
    /// its own `expect` or `note`; the step's expectations are about the set
    /// and the state; `expect.set` only on a concurrent step.
    pub(super) fn validate_concurrent(&self, file: &Path) -> Result<(), ScenarioError> {
        let invalid = |path: String, message: String| ScenarioError::Invalid {
            file: file.to_path_buf(),
            path,
            message,
        };
        for (i, step) in self.steps.iter().enumerate() {
            let StepAction::Concurrently(ConcurrentSteps(actions)) = &step.action else {
                if step.expect.as_ref().is_some_and(|e| e.set.is_some()) {
                    return Err(invalid(
                        format!("steps[{i}].expect.set"),
                        "`set` is about the answers of a `concurrently` step; this step sends one action: expect its `outcome` and `reason` instead".into(),
                    ));
                }
                continue;
            };
            let need = delegation_protocol::capability::CONCURRENT_REQUESTS;
            if !self.needs.iter().any(|n| n == need) {
                return Err(invalid(
                    "needs".into(),
                    format!(
                        "steps[{i}] is `concurrently`: add \"{need}\" to `needs`, so that a host that cannot take requests in flight at once reports this scenario unsupported"
                    ),
                ));
            }
            if !(2..=MAX_RACED).contains(&actions.len()) {
                return Err(invalid(
                    format!("steps[{i}].concurrently"),
                    format!(
                        "races {} action(s); a concurrent step races 2 to {MAX_RACED} (every order of them is tried)",
                        actions.len()
                    ),
                ));
            }
            for (j, inner) in actions.iter().enumerate() {
                let at = format!("steps[{i}].concurrently[{j}]");
                let key = inner.action.key();
                if !RACEABLE_KEYS.contains(&key) {
                    return Err(invalid(
                        format!("{at}.{key}"),
                        format!(
                            "`{key}` cannot be raced; a concurrent step races only: {}",
                            RACEABLE_KEYS.join(", ")
                        ),
                    ));
                }
                if let StepAction::CapabilityCall(call) = &inner.action
                    && (call.wrong_secret || call.capability == super::UNKNOWN_ALIAS)
                {
                    return Err(invalid(
                        format!("{at}.{key}"),
                        "a raced capability call presents the secret of a capability issued in an earlier step (no `wrong_secret`, no `@unknown`): the race is about its revocation".into(),
                    ));
                }
                if inner.expect.is_some() || inner.note.is_some() {
                    return Err(invalid(
                        at,
                        "an action inside `concurrently` has no `expect` or `note` of its own: put them on the concurrent step (`expect.set` for the answers)".into(),
                    ));
                }
                if let Some((alias, _)) = inner.action.binds().into_iter().next() {
                    return Err(invalid(
                        format!("{at}.{key}.as"),
                        format!(
                            "`{alias}`: an action inside `concurrently` binds no alias (which of them wins is the host's choice); bind it in a step of its own"
                        ),
                    ));
                }
            }
            if let Some(expect) = &step.expect
                && let Some(field) = single_answer_field(expect)
            {
                return Err(invalid(
                    format!("steps[{i}].expect.{field}"),
                    format!(
                        "`{field}` is about one action's answer; a concurrent step has a set of them: use `expect.set` (`ok`, `denied` by reason), and the state fields (`receipts`, `state`, `instances`, `delta`)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The first expectation of `expect` that is about one action's answer.
fn single_answer_field(expect: &Expect) -> Option<&'static str> {
    let value = serde_json::to_value(expect).ok()?;
    SINGLE_ANSWER_FIELDS
        .iter()
        .copied()
        .find(|f| value.get(f).is_some())
}
