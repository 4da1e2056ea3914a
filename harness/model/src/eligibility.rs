//! The one eligibility rule for tool calls: manual and automatic approval both ask it (PG3).
//!
//! Seed 002's second review found an automatic path that allowed what the
//! manual path refused. Here there is only one function; the automatic path
//! may answer only where it says `Approvable`, exactly where a person could.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::authority::{ActionClass, ApprovalPolicy, PolicyVerdict, Sandbox};
use crate::vocabulary::DenyReason;

/// What may happen to a call of a given class under an instance's authority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "eligibility", content = "reason")]
pub enum Eligibility {
    /// Runs with no one asked.
    Runs,
    /// Runs only after an approval, by a person or (when on) by the automatic path.
    Approvable,
    /// Never runs, whoever answers.
    Denied(DenyReason),
}

/// Decides a call before any session allowance, exact-call grant or pending
/// request is consulted, so that `never` and bounded ceilings deny first (PG4).
pub fn eligibility(policy: &ApprovalPolicy, sandbox: &Sandbox, class: ActionClass) -> Eligibility {
    let read_only_refuses = matches!(
        class,
        ActionClass::Shell | ActionClass::FileWrite | ActionClass::Generic
    );
    if matches!(sandbox, Sandbox::ReadOnly) && read_only_refuses {
        return Eligibility::Denied(DenyReason::ReadOnlyContext);
    }
    if class == ActionClass::Network
        && matches!(
            sandbox,
            Sandbox::WorkspaceWrite { network: false, .. } | Sandbox::ReadOnly
        )
    {
        return Eligibility::Denied(DenyReason::PolicyDenied);
    }
    match policy.verdict(class) {
        PolicyVerdict::Run => Eligibility::Runs,
        PolicyVerdict::Ask => Eligibility::Approvable,
        PolicyVerdict::Deny => Eligibility::Denied(DenyReason::PolicyDenied),
    }
}

/// Which class a tool belongs to: the tool server's definition says so in
/// `annotations.x-delegation-class`; otherwise MCP tools are `mcp`.
pub fn class_of(definition: &serde_json::Value) -> ActionClass {
    definition
        .get("annotations")
        .and_then(|a| a.get("x-delegation-class"))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or(ActionClass::Mcp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn read_only_context_refuses_writes_but_mcp_under_ask_stays_approvable() {
        let p = ApprovalPolicy::OnRequest;
        assert_eq!(
            eligibility(&p, &Sandbox::ReadOnly, ActionClass::Shell),
            Eligibility::Denied(DenyReason::ReadOnlyContext)
        );
        assert_eq!(
            eligibility(&p, &Sandbox::ReadOnly, ActionClass::Mcp),
            Eligibility::Approvable
        );
        assert_eq!(
            eligibility(&p, &Sandbox::ReadOnly, ActionClass::Read),
            Eligibility::Runs
        );
    }

    #[test]
    fn never_denies_what_would_need_asking() {
        let ws = Sandbox::WorkspaceWrite {
            writable_roots: BTreeSet::new(),
            network: true,
        };
        assert_eq!(
            eligibility(&ApprovalPolicy::Never, &ws, ActionClass::Mcp),
            Eligibility::Denied(DenyReason::PolicyDenied)
        );
    }
}
