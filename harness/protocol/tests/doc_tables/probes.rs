//! Small runs of the harness's model that show which reason each documented check gives.
//!
//! Each probe sets up exactly the situation one table row describes and
//! returns the reason the model refuses it with, so a row that names another
//! reason (or a model that changes its mind) fails the table's test.

use delegation_model::state::{
    AuthorizerAnswer, HostState, LiveTools, MemoryJournal, STRICT_REVIEW_REQUIRED, ToolPlan,
};
use delegation_model::{
    Configuration, Decision, DenyReason, FaultPoint, Id, LifecycleState, SpawnRequest,
    StartRequest, ToolDefinition,
};
use serde_json::{Value, json};

/// A host state with its store and the tools its MCP servers serve now.
pub struct Probe {
    pub s: HostState,
    pub j: MemoryJournal,
    pub live: LiveTools,
}

fn definition(name: &str, class: &str, description: &str) -> ToolDefinition {
    ToolDefinition::from_value(json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object"},
        "annotations": {"x-delegation-class": class},
    }))
    .expect("a valid tool definition")
}

pub fn spawn(request: Value) -> SpawnRequest {
    serde_json::from_value(request).expect("a valid spawn request")
}

fn reason_of(result: delegation_model::ActionResult) -> DenyReason {
    result
        .reason
        .unwrap_or_else(|| panic!("expected a refusal, got {result:?}"))
}

fn plan_reason(plan: ToolPlan) -> DenyReason {
    match plan {
        ToolPlan::Denied(d) => d.reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

impl Probe {
    pub fn new() -> Probe {
        Probe::configured(Configuration::default())
    }

    pub fn configured(config: Configuration) -> Probe {
        let mut p = Probe {
            s: HostState::new("probe-seal-key".into()),
            j: MemoryJournal::default(),
            live: LiveTools::new(),
        };
        for (name, class) in [
            ("t.mcp", "mcp"),
            ("t.write", "file-write"),
            ("t.delegate", "delegation"),
        ] {
            p.live
                .insert(name.into(), definition(name, class, "a probe tool"));
        }
        let r = p.s.configure(&mut p.j, config);
        assert!(r.is_ok(), "{r:?}");
        p
    }

    /// Starts a root and returns its id; `extra` overrides the defaults.
    pub fn root(&mut self, extra: Value) -> Id {
        let mut request = json!({
            "role": "lead",
            "sandbox": {"workspace-write": {"writable_roots": ["/w/repo"], "network": false}},
            "approval_policy": "on-request",
            "tools": ["t.mcp", "t.write", "t.delegate"],
            "cwd": "/w/repo",
        });
        for (k, v) in extra.as_object().expect("an object") {
            request[k] = v.clone();
        }
        let request: StartRequest = serde_json::from_value(request).expect("a start request");
        let r = self.s.start(&mut self.j, &request, &self.live);
        r.instance
            .clone()
            .unwrap_or_else(|| panic!("the root did not start: {r:?}"))
    }

    pub fn start_reason(&mut self, extra: Value) -> DenyReason {
        let mut request = json!({
            "role": "lead", "sandbox": "read-only", "approval_policy": "never", "cwd": "/w/repo",
        });
        for (k, v) in extra.as_object().expect("an object") {
            request[k] = v.clone();
        }
        let request: StartRequest = serde_json::from_value(request).expect("a start request");
        reason_of(self.s.start(&mut self.j, &request, &self.live))
    }

    pub fn delegate_reason(&mut self, parent: &str, request: Value) -> DenyReason {
        match self.s.admit_delegation(parent, &spawn(request), &self.live) {
            Ok(a) => panic!("expected a refusal, the model admitted {a:?}"),
            Err(d) => d.reason,
        }
    }

    /// Admits and commits a child; returns its id.
    pub fn child(&mut self, parent: &str, request: Value) -> Id {
        let admission = self
            .s
            .admit_delegation(parent, &spawn(request), &self.live)
            .expect("admitted");
        self.s
            .commit_child(&mut self.j, admission, None)
            .expect("committed")
            .0
    }

    pub fn prepare(&mut self, parent: &str, request: Value, ttl: Option<u64>) -> Value {
        let r = self.s.prepare_receipt(
            &mut self.j,
            parent,
            "call-1",
            &spawn(request),
            ttl,
            &self.live,
        );
        serde_json::to_value(
            r.receipt
                .clone()
                .unwrap_or_else(|| panic!("no receipt: {r:?}")),
        )
        .expect("a receipt serialises")
    }

    pub fn consume_reason(&mut self, receipt: &Value, parent: &str, request: Value) -> DenyReason {
        match self
            .s
            .admit_receipt(&mut self.j, receipt, parent, &spawn(request), &self.live)
        {
            Ok(a) => panic!("expected a refusal, the model admitted {a:?}"),
            Err(d) => d.reason,
        }
    }

    pub fn consume(&mut self, receipt: &Value, parent: &str, request: Value) -> Id {
        let admission = self
            .s
            .admit_receipt(&mut self.j, receipt, parent, &spawn(request), &self.live)
            .expect("admitted");
        self.s
            .commit_child(&mut self.j, admission, None)
            .expect("committed")
            .0
    }

    pub fn close(&mut self, id: &str) {
        let r = self.s.end(&mut self.j, id, LifecycleState::Closed);
        assert!(r.is_ok(), "{r:?}");
    }

    pub fn list_changed(&mut self) {
        self.s
            .tool_list_changed(&mut self.j)
            .expect("the invalidation commits");
    }

    /// The live definition of `name` changes behind the same name.
    pub fn drift(&mut self, name: &str) {
        let class = delegation_model::class_of(&self.live[name].raw);
        let class = serde_json::to_value(class).expect("a class");
        let class = class.as_str().expect("a class name").to_string();
        self.live.insert(
            name.into(),
            definition(name, &class, "edited behind the name"),
        );
    }

    pub fn tool_reason(&mut self, instance: &str, tool: &str) -> DenyReason {
        plan_reason(
            self.s
                .plan_tool_call(&mut self.j, instance, tool, &json!({}), &self.live),
        )
    }

    /// Issues a capability for `agent` over `tools`; returns (id, secret).
    pub fn issue(&mut self, agent: &str, tools: &[&str], expires_at: u64) -> (Id, String) {
        let tools: Vec<String> = tools.iter().map(|t| t.to_string()).collect();
        let r = self
            .s
            .issue_capability(&mut self.j, "task-1", agent, &tools, expires_at, None);
        let token = r
            .capability
            .clone()
            .unwrap_or_else(|| panic!("not issued: {r:?}"));
        (token.id, token.secret.expect("a generated secret"))
    }

    pub fn capability_reason(
        &mut self,
        secret: &str,
        task: &str,
        agent: &str,
        tool: &str,
        call_id: Option<&str>,
    ) -> DenyReason {
        let (plan, _) =
            self.s
                .plan_capability_call(secret, task, agent, tool, &json!({}), call_id, &self.live);
        plan_reason(plan)
    }
}

const CHILD: &str = r#"{"role": "worker", "task": "t"}"#;

fn child_request() -> Value {
    serde_json::from_str(CHILD).expect("json")
}

/// `instance/delegate`, row by row of "Delegation, in order". `None`: the row
/// is the authorizer's, whose reasons ENDPOINTS.md's table gives.
pub fn delegation_checks() -> Vec<Option<DenyReason>> {
    let rows: Vec<fn() -> DenyReason> = vec![
        || Probe::new().delegate_reason("never-issued", child_request()),
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.close(&root);
            p.delegate_reason(&root, child_request())
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.delegate_reason(
                &root,
                json!({"role": "worker", "task": "t", "target": "remote:x"}),
            )
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.delegate_reason(
                &root,
                json!({"role": "worker", "task": "t", "worktree": true}),
            )
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({"delegation_depth": 0}));
            p.delegate_reason(&root, child_request())
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.delegate_reason(
                &root,
                json!({"role": "worker", "task": "t", "authority": {"provider": "other"}}),
            )
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({"tools": ["t.mcp"]}));
            p.delegate_reason(
                &root,
                json!({"role": "worker", "task": "t", "authority": {"tools": ["t.write"]}}),
            )
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.delegate_reason(
                &root,
                json!({"role": "worker", "task": "t", "authority": {"cwd": "relative/dir"}}),
            )
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.delegate_reason(
                &root,
                json!({"role": "worker", "task": "t", "authority": {"sandbox": "full-access"}}),
            )
        },
        || {
            let mut p = Probe::configured(Configuration {
                strict_mode: true,
                ..Configuration::default()
            });
            let root = p.root(json!({"sandbox": "full-access"}));
            p.delegate_reason(&root, child_request())
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.list_changed();
            p.delegate_reason(&root, child_request())
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.drift("t.mcp");
            p.delegate_reason(&root, child_request())
        },
    ];
    rows.into_iter().map(|f| Some(f())).chain([None]).collect()
}

/// `receipt/consume`, row by row of "Receipts, in order".
pub fn receipt_checks() -> Vec<Option<DenyReason>> {
    let rows: Vec<fn() -> DenyReason> = vec![
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.consume_reason(&json!({"parent": root}), &root, child_request())
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.consume_reason(&json!({"id": "never-issued"}), &root, child_request())
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            let mut receipt = p.prepare(&root, child_request(), None);
            receipt["call_id"] = json!("call-2");
            p.consume_reason(&receipt, &root, child_request())
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            let receipt = p.prepare(&root, child_request(), None);
            p.consume(&receipt, &root, child_request());
            p.consume_reason(&receipt, &root, child_request())
        },
        consume_revoked_receipt,
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            let receipt = p.prepare(&root, child_request(), Some(0));
            p.consume_reason(&receipt, &root, child_request())
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            let receipt = p.prepare(&root, child_request(), None);
            p.consume_reason(&receipt, &root, json!({"role": "worker", "task": "other"}))
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            let receipt = p.prepare(&root, child_request(), None);
            p.close(&root);
            p.consume_reason(&receipt, &root, child_request())
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            let receipt = p.prepare(&root, child_request(), None);
            p.list_changed();
            p.consume_reason(&receipt, &root, child_request())
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            let receipt = p.prepare(&root, child_request(), None);
            p.drift("t.write");
            p.consume_reason(&receipt, &root, child_request())
        },
    ];
    rows.into_iter().map(|f| Some(f())).chain([None]).collect()
}

/// A tool call, row by row of "Tool calls, in order".
pub fn tool_call_checks() -> Vec<Option<DenyReason>> {
    let rows: Vec<fn() -> DenyReason> = vec![
        || Probe::new().tool_reason("never-issued", "t.mcp"),
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.close(&root);
            p.tool_reason(&root, "t.mcp")
        },
        tool_not_sealed,
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.list_changed();
            p.tool_reason(&root, "t.mcp")
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.drift("t.mcp");
            p.tool_reason(&root, "t.mcp")
        },
        || {
            let mut p = Probe::new();
            let root = p.root(json!({"sandbox": "read-only"}));
            p.tool_reason(&root, "t.write")
        },
    ];
    rows.into_iter().map(|f| Some(f())).collect()
}

/// `capability/call`, row by row of "Task capabilities".
pub fn capability_checks() -> Vec<Option<DenyReason>> {
    /// A root holding every probe tool and a capability over `t.mcp` for it.
    fn setup(policy: &str) -> (Probe, Id, String) {
        let mut p = Probe::new();
        let root = p.root(json!({"approval_policy": policy}));
        let (_, secret) = p.issue(&root, &["t.mcp", "t.delegate"], 10_000);
        (p, root, secret)
    }
    let rows: Vec<fn() -> DenyReason> = vec![
        || {
            let (mut p, root, _) = setup("on-request");
            p.capability_reason("never-issued", "task-1", &root, "t.mcp", None)
        },
        || {
            let (mut p, root, secret) = setup("on-request");
            p.capability_reason(&secret, "task-2", &root, "t.mcp", None)
        },
        || {
            let (mut p, root, secret) = setup("on-request");
            let id = p.s.capabilities.keys().next().expect("issued").clone();
            assert!(p.s.revoke_capability(&mut p.j, &id).is_ok());
            p.capability_reason(&secret, "task-1", &root, "t.mcp", None)
        },
        || {
            let (mut p, root, secret) = setup("on-request");
            assert!(p.s.set_clock(&mut p.j, 10_000).is_ok());
            p.capability_reason(&secret, "task-1", &root, "t.mcp", None)
        },
        || {
            let (mut p, root, secret) = setup("on-request");
            p.capability_reason(&secret, "task-1", &root, "t.write", None)
        },
        || {
            let (mut p, root, secret) = setup("on-request");
            let id = p.s.capabilities.keys().next().expect("issued").clone();
            p.s.capability_finished(&mut p.j, &format!("{id}/k-1"), "done")
                .expect("kept");
            p.capability_reason(&secret, "task-1", &root, "t.mcp", Some("k-1"))
        },
        || {
            let (mut p, root, secret) = setup("on-request");
            p.close(&root);
            p.capability_reason(&secret, "task-1", &root, "t.mcp", None)
        },
        || {
            let (mut p, root, secret) = setup("on-request");
            p.list_changed();
            p.capability_reason(&secret, "task-1", &root, "t.mcp", None)
        },
        || {
            let (mut p, root, secret) = setup("on-request");
            p.drift("t.mcp");
            p.capability_reason(&secret, "task-1", &root, "t.mcp", None)
        },
        || {
            let (mut p, root, secret) = setup("never");
            p.capability_reason(&secret, "task-1", &root, "t.mcp", None)
        },
    ];
    // The bounded row's control: the same bounded agent reaches a delegation-class tool.
    let (mut p, root, secret) = setup("never");
    let (plan, _) = p.s.plan_capability_call(
        &secret,
        "task-1",
        &root,
        "t.delegate",
        &json!({}),
        None,
        &p.live,
    );
    assert!(
        matches!(plan, ToolPlan::Execute { .. }),
        "control: a bounded agent's capability must reach a delegation tool, got {plan:?}"
    );
    rows.into_iter().map(|f| Some(f())).collect()
}

/// The authorizer's answers, row by row of ENDPOINTS.md's table: each the
/// first answer that fails only that row's check.
pub fn authorizer_checks() -> Vec<Option<DenyReason>> {
    let mut p = Probe::configured(Configuration {
        authorizer_required: true,
        ..Configuration::default()
    });
    let root = p.root(json!({}));
    let request = json!({"role": "worker", "task": "t", "authority": {"sandbox": "read-only"}});
    let admission =
        p.s.admit_delegation(&root, &spawn(request), &p.live)
            .expect("admitted");
    let digest = admission.commitment.clone();
    let now = p.s.now;
    let allow = |edit: &dyn Fn(&mut Value)| {
        let mut reply = json!({
            "version": "1", "decision": "allow",
            "receipt": {"id": "authz-1", "binding": digest, "expires_at": now + 60_000},
            "decided_at": now,
        });
        edit(&mut reply);
        AuthorizerAnswer::Body(reply.to_string())
    };
    let answers = vec![
        AuthorizerAnswer::TimedOut,
        AuthorizerAnswer::Body("<<not json".into()),
        allow(&|r| r["version"] = json!("99")),
        allow(&|r| r["decision"] = json!("deny")),
        allow(&|r| r["decision"] = json!("maybe")),
        allow(&|r| r["receipt"] = json!({"id": "authz-1"})),
        allow(&|r| r["receipt"]["binding"] = json!("sha256:00")),
        allow(&|r| r["receipt"]["expires_at"] = json!(now)),
        allow(&|r| r["receipt"]["id"] = json!("authz-used")),
        allow(&|r| {
            r.as_object_mut().expect("an object").remove("decided_at");
        }),
        allow(&|r| r["decided_at"] = json!(now + delegation_model::state::AUTHORIZER_DEADLINE_MS)),
        allow(&|r| r["constraints"] = json!({"sandbox": "no-such-sandbox"})),
        allow(&|r| r["constraints"] = json!({"sandbox": "full-access"})),
    ];
    p.s.used_authorizations.insert("authz-used".into());
    // The control: the unedited allow passes every check, so each row's
    // refusal comes from its one edit.
    let control = p.s.apply_authorizer(admission.clone(), &allow(&|_| {}));
    assert!(
        control.is_ok(),
        "control: a well-formed allow is refused: {control:?}"
    );
    answers
        .iter()
        .map(|answer| {
            Some(match p.s.apply_authorizer(admission.clone(), answer) {
                Ok(_) => panic!("the model accepted {answer:?}"),
                Err(d) => d.reason,
            })
        })
        .collect()
}

/// Probes named in the deny-reason table's evidence column.
pub fn named(name: &str) -> Option<DenyReason> {
    Some(match name {
        "revoke-unknown-receipt" => reason_of(
            Probe::new()
                .s
                .revoke_receipt(&mut MemoryJournal::default(), "never-issued"),
        ),
        "consume-revoked-receipt" => consume_revoked_receipt(),
        "revoke-consumed-receipt" => {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            let receipt = p.prepare(&root, child_request(), None);
            p.consume(&receipt, &root, child_request());
            let id = receipt["id"].as_str().expect("an id").to_string();
            reason_of(p.s.revoke_receipt(&mut p.j, &id))
        }
        "start-relative-cwd" => Probe::new().start_reason(json!({"cwd": "w/repo"})),
        "start-unserved-tool" => Probe::new().start_reason(json!({"tools": ["never-served"]})),
        "answer-unknown-approval" => {
            let mut p = Probe::new();
            plan_reason(p.s.answer(&mut p.j, "never-issued", Decision::Allow, &p.live))
        }
        "model-call-fault" => {
            let mut p = Probe::new();
            let root = p.root(json!({}));
            p.s.arm_fault(FaultPoint::ModelCall, Some(1));
            let reason = p.s.begin_turn(&mut p.j, &root).expect_err("refused").reason;
            assert_eq!(p.s.instances[&root].state, LifecycleState::Failed);
            reason
        }
        "tool-not-sealed" => tool_not_sealed(),
        "revoke-unknown-grant" => reason_of(Probe::new().s.revoke_grant("never-issued")),
        "revoke-unknown-capability" => reason_of(
            Probe::new()
                .s
                .revoke_capability(&mut MemoryJournal::default(), "never-issued"),
        ),
        _ => return None,
    })
}

fn consume_revoked_receipt() -> DenyReason {
    let mut p = Probe::new();
    let root = p.root(json!({}));
    let receipt = p.prepare(&root, child_request(), None);
    let id = receipt["id"].as_str().expect("an id").to_string();
    assert!(p.s.revoke_receipt(&mut p.j, &id).is_ok());
    p.consume_reason(&receipt, &root, child_request())
}

fn tool_not_sealed() -> DenyReason {
    let mut p = Probe::new();
    let root = p.root(json!({"tools": ["t.mcp"]}));
    p.tool_reason(&root, "t.write")
}

/// The transitions of the decision records the model writes, over a run
/// that does everything a record is written for.
pub fn record_transitions() -> std::collections::BTreeSet<String> {
    let mut p = Probe::new();
    let root = p.root(json!({}));
    // delegate, allowed and refused.
    let child = p.child(&root, child_request());
    let denied = p.s.admit_delegation(
        &root,
        &spawn(json!({"role": "w", "task": "t", "authority": {"sandbox": "full-access"}})),
        &p.live,
    );
    let denial = denied.expect_err("refused");
    let request = spawn(json!({"role": "w", "task": "t"}));
    p.s.deny_delegation(&mut p.j, "delegate", &root, &request, denial);
    // prepare refused, then consume.
    let r = p.s.prepare_receipt(
        &mut p.j,
        &root,
        "c",
        &spawn(json!({"role": "w", "task": "t", "target": "remote:x"})),
        None,
        &p.live,
    );
    assert!(!r.is_ok());
    let receipt = p.prepare(&root, child_request(), None);
    let consumed = p.consume(&receipt, &root, child_request());
    // close, cancel, fail, fork.
    p.close(&child);
    assert!(
        p.s.end(&mut p.j, &consumed, LifecycleState::Cancelled)
            .is_ok()
    );
    let forked = p.s.fork(&mut p.j, &root).instance.expect("forked");
    assert!(p.s.end(&mut p.j, &forked, LifecycleState::Failed).is_ok());
    // approval by policy, then a full review held back under elevated risk.
    assert!(p.s.set_auto_approve(&mut p.j, true).is_ok());
    let plan =
        p.s.plan_tool_call(&mut p.j, &root, "t.mcp", &json!({"n": 1}), &p.live);
    assert!(matches!(plan, ToolPlan::Execute { .. }), "{plan:?}");
    assert!(p.s.score_risk(&mut p.j, &root, "elevated").is_ok());
    let plan =
        p.s.plan_tool_call(&mut p.j, &root, "t.mcp", &json!({"n": 2}), &p.live);
    assert!(matches!(plan, ToolPlan::Pending { .. }), "{plan:?}");
    let seen: std::collections::BTreeSet<String> =
        p.s.records.iter().map(|r| r.transition.clone()).collect();
    assert!(seen.contains(STRICT_REVIEW_REQUIRED), "{seen:?}");
    seen
}
