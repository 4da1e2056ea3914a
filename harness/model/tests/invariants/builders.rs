//! Small builders that keep the hand-made histories of the invariant suite readable.

use std::collections::BTreeSet;

use delegation_model::digest::sha256_hex;
use delegation_model::*;

/// A history under construction; each call appends one step or amends the last.
pub struct H {
    entries: Vec<HistoryEntry>,
}

impl H {
    pub fn new() -> H {
        H {
            entries: Vec::new(),
        }
    }

    fn push(mut self, kind: StepKind) -> H {
        let step = self.entries.len();
        self.entries.push(HistoryEntry {
            step,
            kind,
            evidence: Evidence::default(),
            observed: None,
        });
        self
    }

    pub fn act(self, action: Action, result: ActionResult) -> H {
        self.push(StepKind::Action {
            action,
            result: Ok(result),
        })
    }

    /// An action the host answered with no result (it exited, for one): nothing is observed.
    pub fn act_failed(self, action: Action, error: &str) -> H {
        self.push(StepKind::Action {
            action,
            result: Err(error.into()),
        })
    }

    pub fn restart(self) -> H {
        self.push(StepKind::Restart)
    }

    pub fn world(self, change: WorldChange) -> H {
        self.push(StepKind::World {
            description: format!("{change:?}"),
            change: Some(change),
        })
    }

    /// Applies a reusable sequence of steps.
    pub fn then(self, steps: impl FnOnce(H) -> H) -> H {
        steps(self)
    }

    fn last(&mut self) -> &mut HistoryEntry {
        self.entries
            .last_mut()
            .expect("amend a step only after adding one")
    }

    /// The host's state after the last step; after a restart, a step of its own.
    pub fn observe(mut self, observed: Observed) -> H {
        if matches!(self.last().kind, StepKind::Restart) {
            self = self.act(Action::Observe, ActionResult::ok());
        }
        self.last().observed = Some(observed.into());
        self
    }

    /// Model requests the endpoint attributed to `instance` during the last step.
    pub fn requests(mut self, instance: &str, count: u64) -> H {
        self.last()
            .evidence
            .model_requests
            .insert(instance.into(), count);
        self
    }

    pub fn handler_calls(mut self, tools: &[&str]) -> H {
        self.last().evidence.handler_calls = tools
            .iter()
            .map(|t| HandlerCall {
                tool: (*t).into(),
                arguments: serde_json::json!({}),
            })
            .collect();
        self
    }

    pub fn authorizer_calls(mut self, count: u64) -> H {
        self.last().evidence.authorizer_calls = count;
        self
    }

    pub fn build(self) -> Vec<HistoryEntry> {
        self.entries
    }
}

pub fn digest_of(text: &str) -> String {
    sha256_hex(text.as_bytes())
}

pub fn workspace_write(roots: &[&str], network: bool) -> Sandbox {
    Sandbox::WorkspaceWrite {
        writable_roots: roots
            .iter()
            .map(|r| NormalPath::parse(r).unwrap())
            .collect::<BTreeSet<_>>(),
        network,
    }
}

/// The root's authority: workspace-write on /w/repo without network, on-request, one sealed tool.
pub fn root_authority() -> Authority {
    Authority {
        sandbox: workspace_write(&["/w/repo"], false),
        approval_policy: ApprovalPolicy::OnRequest,
        tools: [("fs.write".to_string(), digest_of("fs.write v1"))].into(),
        cwd: NormalPath::parse("/w/repo").unwrap(),
        provider: "harness".into(),
        delegation_depth: 2,
    }
}

pub fn child_authority() -> Authority {
    root_authority().child_ceiling()
}

pub fn start_action() -> Action {
    Action::Start(StartRequest {
        role: "lead".into(),
        model: default_model(),
        sandbox: workspace_write(&["/w/repo"], false).into(),
        approval_policy: ApprovalPolicy::OnRequest,
        tools: vec!["fs.write".into()],
        cwd: "/w/repo".into(),
        provider: default_provider(),
        delegation_depth: 2,
    })
}

pub fn start_root(h: H) -> H {
    h.act(start_action(), created("root", root_authority()))
}

pub fn created(instance: &str, effective: Authority) -> ActionResult {
    ActionResult {
        instance: Some(instance.into()),
        effective: Some(effective),
        ..ActionResult::ok()
    }
}

pub fn spawn_request() -> SpawnRequest {
    SpawnRequest {
        role: "worker".into(),
        task: "CHILD_TASK".into(),
        authority: AuthorityRequest::default(),
        model: None,
        target: None,
        worktree: false,
    }
}

pub fn delegate(parent: &str) -> Action {
    Action::Delegate {
        parent: parent.into(),
        request: spawn_request(),
    }
}

pub fn turn(instance: &str) -> Action {
    Action::Turn {
        instance: instance.into(),
        input: "follow-up".into(),
    }
}

pub fn close(instance: &str) -> Action {
    Action::Close {
        instance: instance.into(),
    }
}

pub fn tool_call(instance: &str, tool: &str) -> Action {
    Action::ToolCall {
        instance: instance.into(),
        tool: tool.into(),
        arguments: serde_json::json!({"text": "x"}),
    }
}

pub fn tool_result(
    outcome: ToolCallOutcome,
    reason: Option<DenyReason>,
    approval: Option<&str>,
) -> ActionResult {
    let report = ToolCallReport {
        tool: "fs.write".into(),
        outcome,
        reason,
        approval: approval.map(Into::into),
        result: None,
    };
    let mut result = match reason {
        Some(reason) => ActionResult::denied(reason, "refused"),
        None => ActionResult::ok(),
    };
    result.tool_call = Some(report);
    result
}

/// A direct `fs.write` call by `instance`: it runs with a handler call when
/// `ran`, and is refused with `reason` and no handler call otherwise.
pub fn call_fs_write(h: H, instance: &str, ran: bool, reason: DenyReason) -> H {
    if ran {
        h.act(
            tool_call(instance, "fs.write"),
            tool_result(ToolCallOutcome::Executed, None, None),
        )
        .handler_calls(&["fs.write"])
    } else {
        h.act(
            tool_call(instance, "fs.write"),
            tool_result(ToolCallOutcome::Denied, Some(reason), None),
        )
    }
}

pub fn answer(request: &str, decision: Decision) -> Action {
    Action::Answer {
        request: request.into(),
        decision,
    }
}

pub fn observed(instances: Vec<ObservedInstance>) -> Observed {
    Observed {
        instances,
        ..Observed::default()
    }
}

pub fn inst(
    id: &str,
    parent: Option<&str>,
    state: LifecycleState,
    ceiling: Authority,
) -> ObservedInstance {
    ObservedInstance {
        id: id.into(),
        parent: parent.map(Into::into),
        state,
        role: if parent.is_some() { "worker" } else { "lead" }.into(),
        model: default_model(),
        requested: None,
        ceiling,
        risk: None,
        inferred: Vec::new(),
    }
}

/// An approval of an `fs.write` call by the root.
pub fn approval(
    id: &str,
    class: ActionClass,
    state: ApprovalState,
    decided: Option<(Decision, DecidedBy)>,
) -> ObservedApproval {
    ObservedApproval {
        id: id.into(),
        instance: "root".into(),
        class,
        tool: "fs.write".into(),
        tool_digest: digest_of("fs.write v1"),
        arguments_digest: digest_of("{\"text\":\"x\"}"),
        state,
        decision: decided.map(|d| d.0),
        decided_by: decided.map(|d| d.1),
    }
}

pub fn grant(id: &str) -> ObservedGrant {
    ObservedGrant {
        id: id.into(),
        instance: "root".into(),
        tool: "fs.write".into(),
        tool_digest: digest_of("fs.write v1"),
        arguments_digest: digest_of("{\"text\":\"x\"}"),
    }
}

pub const R1_EXPIRES_AT: Millis = 60_000;

pub fn receipt_r1() -> Receipt {
    Receipt {
        id: "r1".into(),
        parent: "root".into(),
        call_id: "call-1".into(),
        commitment: digest_of("spawn request"),
        role: "worker".into(),
        authority: child_authority(),
        authorization: None,
        issued_at: 0,
        expires_at: R1_EXPIRES_AT,
        seal: digest_of("seal"),
    }
}

pub fn prepare_r1(h: H) -> H {
    h.act(
        Action::PrepareReceipt {
            parent: "root".into(),
            call_id: "call-1".into(),
            request: spawn_request(),
            ttl_ms: None,
        },
        ActionResult {
            receipt: Some(receipt_r1()),
            ..ActionResult::ok()
        },
    )
}

pub fn consume(receipt: Receipt, parent: &str) -> Action {
    Action::ConsumeReceipt {
        receipt: serde_json::to_value(receipt).unwrap(),
        parent: parent.into(),
        request: spawn_request(),
    }
}

/// The harness-chosen capability secret, planted to be searched for.
pub const CANARY: &str = "canary-7f3a9c";
pub const CAP_EXPIRES_AT: Millis = 30_000;

/// Issues capability `cap1` for task `t1` and agent `root`, allowing `task.status`.
pub fn issue_canary(h: H) -> H {
    h.act(
        Action::IssueCapability {
            task: "t1".into(),
            agent: "root".into(),
            tools: vec!["task.status".into()],
            expires_at: CAP_EXPIRES_AT,
            secret: Some(CANARY.into()),
        },
        ActionResult {
            capability: Some(CapabilityToken {
                id: "cap1".into(),
                secret: None,
            }),
            ..ActionResult::ok()
        },
    )
}

/// A call with the canary: it goes through with a handler call when `ran`,
/// and is refused with `capability_denied` otherwise.
pub fn capability_call_step(h: H, task: &str, agent: &str, tool: &str, ran: bool) -> H {
    let action = Action::CapabilityCall {
        secret: CANARY.into(),
        task: task.into(),
        agent: agent.into(),
        tool: tool.into(),
        arguments: serde_json::json!({}),
        call_id: None,
    };
    if ran {
        h.act(action, ActionResult::ok()).handler_calls(&[tool])
    } else {
        h.act(
            action,
            ActionResult::denied(DenyReason::CapabilityDenied, "refused"),
        )
    }
}
