//! The [`Driver`]: applies operations to the simulated world, resolving each index against what exists when it is applied.

use serde_json::{Value, json};

use super::ops::*;
use super::written::*;
use crate::invariants::{self, Violation};
use crate::state::AuthorizerAnswer;
use crate::world::{SimChange, SimReply, World};
use crate::*;

/// The world plus what it has handed out so far, to resolve indexes.
pub struct Driver {
    pub world: World,
    pub(super) instances: Vec<String>,
    pub(super) receipts: Vec<(Value, SpawnRequest, String)>,
    /// Issued capabilities: id, the secret it was issued with, task, agent.
    capabilities: Vec<(String, String, String, String)>,
    /// The deadline of the last wait, a boundary for `ClockTo`.
    last_wait_deadline: Option<Millis>,
    /// The approval request the last tool call raised, for `GrantCall`'s answer.
    last_raised: Option<String>,
    /// The receipt a `ReceiptUse` prepared (an index into `receipts`), if it was issued.
    last_prepared: Option<usize>,
    /// The capability a `CapabilityUse` issued (an index into `capabilities`), if it was issued.
    last_issued: Option<usize>,
    /// The capability the last capability call presented, for the translation.
    presented: Option<String>,
    /// What the last `Authorizer` operation scripted.
    authorizer: Option<AuthorizerBehaviour>,
    authorizer_on: bool,
    /// A replay was asked for before any receipt was spent: the authorizer
    /// allows until one is, then replays it (see [`Driver::take_deferred_replay`]).
    replay_deferred: bool,
    /// Tools the server serves written otherwise than their canonical
    /// text (`RewriteTool`), by name: the translation serves those bytes.
    written: std::collections::BTreeMap<String, String>,
    /// The tool a `DriftDelegate` or `RewriteTool` picked in its first part.
    picked_tool: Option<String>,
    /// The last part applied was a race: its actions were sent at once.
    raced: bool,
    /// `Authorizer { allow: true }` allows with a receipt bound to each
    /// request (children admitted), as the harness's real authorizer does;
    /// off, its receipt is bound to nothing and every child is refused (the
    /// authorizer's `mismatched` answer), which a test may want on its own.
    pub bound_allows: bool,
}

/// The definition a changed tool is served with: another class and description.
fn changed_tool(name: &str) -> Value {
    let mut def = probe_tool(name, "mcp");
    def["description"] = json!(format!("{name}, changed"));
    def
}

impl Default for Driver {
    fn default() -> Self {
        Driver::new()
    }
}

impl Driver {
    /// Three probe tools (read, file-write, mcp), a scripted model that spawns,
    /// calls a tool or fails on its markers, and a 60 s receipt TTL so that
    /// `Clock` operations can expire receipts.
    pub fn new() -> Driver {
        Driver::with_configuration(fuzz_configuration(false, false))
    }

    /// [`Driver::new`] with another host configuration, applied as the first
    /// action. Differential host fuzzing configures the external authorizer
    /// from the start (`authorizer_required`): a scenario file has no
    /// configure step, and its runner re-sends the setup's configuration
    /// after every restart, so a mid-sequence change could not be replayed.
    pub fn with_configuration(configuration: Configuration) -> Driver {
        // Every input starts from the same three definitions: digest them
        // once per process rather than once per input.
        static PROBE_TOOLS: std::sync::OnceLock<std::sync::Arc<crate::state::LiveTools>> =
            std::sync::OnceLock::new();
        let probe_tools = PROBE_TOOLS.get_or_init(|| {
            let definitions = vec![
                probe_tool("probe.read", "read"),
                probe_tool("probe.write", "file-write"),
                probe_tool("probe.spawn", "mcp"),
            ];
            World::new(definitions, vec![]).tools
        });
        let replies = vec![
            (
                "SPAWN".to_string(),
                SimReply::Spawn(spawn_request(Some(0), None, 0)),
            ),
            (
                "CALL".to_string(),
                SimReply::ToolCall {
                    tool: "probe.spawn".into(),
                    arguments: json!({"x": 1}),
                },
            ),
            ("BREAK".to_string(), SimReply::Fail),
        ];
        let mut world = World::new(vec![], replies);
        world.tools = probe_tools.clone();
        let authorizer_on = configuration.authorizer_required;
        world.apply(&Action::Configure(configuration));
        Driver {
            world,
            instances: vec![],
            receipts: vec![],
            capabilities: vec![],
            last_wait_deadline: None,
            last_raised: None,
            last_prepared: None,
            last_issued: None,
            presented: None,
            authorizer: None,
            authorizer_on,
            replay_deferred: false,
            written: Default::default(),
            picked_tool: None,
            raced: false,
            bound_allows: true,
        }
    }

    /// Every invariant of the catalogue over the history so far.
    pub fn violations(&self) -> Vec<Violation> {
        invariants::check_all(&self.world.history)
    }

    fn note(&mut self, result: Option<&ActionResult>) {
        let Some(r) = result else { return };
        if let Some(id) = &r.instance
            && !self.instances.contains(id)
        {
            self.instances.push(id.clone());
        }
        if let Some(TurnReport::Spawn { spawn }) = &r.turn
            && let Some(id) = &spawn.instance
        {
            self.instances.push(id.clone());
        }
    }

    fn act(&mut self, action: Action) {
        let entry = self.world.apply(&action);
        let result = match &entry.kind {
            StepKind::Action { result: Ok(r), .. } => Some(r.clone()),
            _ => None,
        };
        if let (
            Action::PrepareReceipt {
                parent, request, ..
            },
            Some(r),
        ) = (&action, &result)
            && let Some(receipt) = &r.receipt
        {
            self.receipts.push((
                serde_json::to_value(receipt).expect("a receipt serialises"),
                request.clone(),
                parent.clone(),
            ));
        }
        if let (
            Action::IssueCapability {
                task,
                agent,
                secret: Some(secret),
                ..
            },
            Some(r),
        ) = (&action, &result)
            && let Some(token) = &r.capability
        {
            self.capabilities.push((
                token.id.clone(),
                secret.clone(),
                task.clone(),
                agent.clone(),
            ));
        }
        if let Some(approval) = result
            .as_ref()
            .and_then(|r| r.tool_call.as_ref())
            .and_then(|c| c.approval.clone())
        {
            self.last_raised = Some(approval);
        }
        self.note(result.as_ref());
    }

    fn instance(&self, i: u8) -> String {
        // An id that was never handed out: the host must refuse it, not panic.
        pick(&self.instances, i).unwrap_or_else(|| "inst-missing".into())
    }

    /// Scripts a deferred replay once a receipt has been spent, returning
    /// the new behaviour for the scenario's own authorizer step. Called after
    /// every operation; a replay asked for before any child was admitted
    /// would otherwise be an allow for the rest of the sequence, and the
    /// replay defects need an allow, a child and a replay, in that order.
    pub fn take_deferred_replay(&mut self) -> Option<AuthorizerBehaviour> {
        if !(self.replay_deferred && self.bound_allows && self.world.authorizer_last_receipt_used())
        {
            return None;
        }
        self.replay_deferred = false;
        let replay = AuthorizerBehaviour::ReplayedReceipt;
        self.authorizer = Some(replay.clone());
        self.world
            .change(SimChange::AuthorizerAnswers(replay.clone()));
        Some(replay)
    }

    /// What the last `Authorizer` operation scripted (a replay before any
    /// spent receipt is scripted as an allow).
    pub fn authorizer_behaviour(&self) -> Option<&AuthorizerBehaviour> {
        self.authorizer.as_ref()
    }

    /// The id of the capability the last capability call presented (or
    /// presented a wrong secret in place of).
    pub fn presented_capability(&self) -> Option<String> {
        self.presented.clone()
    }

    /// Calls through capability `index` of those issued, presenting its
    /// secret, task and agent or, by `binding % 6`, a near miss of one (see
    /// [`Op::CapabilityCall`]).
    fn capability_call(
        &mut self,
        index: usize,
        binding: u8,
        tool: &str,
        arguments: Value,
        call_id: Option<&str>,
    ) {
        let Some((id, secret, task, agent)) = self.capabilities.get(index).cloned() else {
            return;
        };
        let (secret, task, agent) = match binding % 6 {
            3 => (secret, other_task(&task), agent),
            4 => (secret, task, self.other_instance(&agent)),
            5 => (WRONG_SECRET.to_string(), task, agent),
            _ => (secret, task, agent),
        };
        self.presented = Some(id);
        self.act(Action::CapabilityCall {
            secret,
            task,
            agent,
            tool: tool.into(),
            arguments,
            call_id: call_id.map(str::to_string),
        })
    }

    /// Consumes the receipt `ReceiptUse` prepared, as prepared.
    fn consume_prepared(&mut self) {
        let Some((value, request, parent)) = self.last_prepared.map(|i| self.receipts[i].clone())
        else {
            return;
        };
        self.act(Action::ConsumeReceipt {
            receipt: value,
            parent,
            request,
        })
    }

    /// Sets the clock to `at`, if that is not in the past.
    fn clock_to(&mut self, at: Millis) {
        if at > self.world.state.now {
            self.act(Action::SetClock { now: at })
        }
    }

    /// Redefines `name` without announcing it: another class and description.
    fn redefine(&mut self, name: &str) {
        self.written.remove(name);
        self.world.change(SimChange::ChangeTool {
            name: name.into(),
            definition: changed_tool(name),
            announce: false,
        })
    }

    /// The text the tool server serves for `tool` when it is not the
    /// definition's canonical text (after a `RewriteTool`): the same value,
    /// other bytes.
    pub fn written_definition(&self, tool: &str) -> Option<&str> {
        self.written.get(tool).map(String::as_str)
    }

    /// The tools instance `id` sealed that the server still serves, the
    /// read probe last: a drifted tool the read-probe role would drop comes first.
    fn sealed_served(&self, id: &str) -> Vec<String> {
        let Some(instance) = self.world.state.instances.get(id) else {
            return vec![];
        };
        let mut tools: Vec<String> = instance
            .ceiling
            .tools
            .keys()
            .filter(|t| self.world.tools.contains_key(*t))
            .cloned()
            .collect();
        tools.sort_by_key(|t| t == "probe.read");
        tools
    }

    /// Whether the part just applied was a race (and forgets it): its
    /// actions are one `concurrently` step in a scenario.
    pub fn take_raced(&mut self) -> bool {
        std::mem::take(&mut self.raced)
    }

    /// A race is sent only where the linearizability rules decide every
    /// order of it: they leave out armed faults (which of the racers meets
    /// one is the host's choice) and the external authorizer.
    fn can_race(&self) -> bool {
        !self.authorizer_on && self.world.state.faults.is_empty()
    }

    /// Applies `actions` as one race: one at a time in the model, in the
    /// order written (one the rules allow). A child a raced consume admits
    /// is not handed out to later operations: a concurrent step binds no
    /// alias, so a scenario could not name it.
    fn race(&mut self, actions: Vec<Action>) {
        self.raced = true;
        for action in actions {
            self.world.apply(&action);
        }
    }

    /// The result of the last `method` action applied, if it was answered.
    fn last_result(&self, method: &str) -> Option<&ActionResult> {
        self.world.history.iter().rev().find_map(|e| match &e.kind {
            StepKind::Action { action, result } if action.method() == method => {
                result.as_ref().ok()
            }
            _ => None,
        })
    }

    /// The id of the capability issued with `secret` (a raced call names
    /// its capability by secret only).
    pub fn capability_with_secret(&self, secret: &str) -> Option<String> {
        self.capabilities
            .iter()
            .find(|(_, s, ..)| s == secret)
            .map(|(id, ..)| id.clone())
    }

    /// An instance other than `id`, or one never issued.
    fn other_instance(&self, id: &str) -> String {
        self.instances
            .iter()
            .find(|i| *i != id)
            .cloned()
            .unwrap_or_else(|| "inst-missing".into())
    }

    /// Resolves the operation's indexes against the world as it is now and applies it.
    /// Applies one operation and then observes the host, as the runner does
    /// after every step. An observation is where a host takes in a
    /// `tools/list_changed` it received: without it an announcement followed
    /// by a restart (which drops what was not taken in) reads as a silent
    /// refresh. Sequences checked on their own (fuzz target, property test)
    /// step this way; the differential translation observes where its
    /// scenario does.
    /// A composite operation is stepped part by part, observed after each
    /// as the runner observes after each of its steps.
    pub fn step(&mut self, op: &Op) {
        let mut stage = 0;
        loop {
            let more = self.apply_stage(op, stage);
            self.take_deferred_replay();
            self.world.apply(&Action::Observe);
            if !more {
                break;
            }
            stage += 1;
        }
    }

    /// Applies every part of `op` with no observation in between.
    pub fn apply(&mut self, op: &Op) {
        let mut stage = 0;
        while self.apply_stage(op, stage) {
            stage += 1;
        }
    }

    /// Applies part `stage` of `op` (counted from 0), resolved against the
    /// world as the earlier parts left it; true while a part follows. A
    /// plain operation is one part; a part may apply nothing (automatic
    /// approval already on, no request raised to answer).
    pub fn apply_stage(&mut self, op: &Op, stage: usize) -> bool {
        match (op, stage) {
            (Op::AutoCall { .. }, 0) => {
                if !self.world.state.auto_approve {
                    self.act(Action::SetAutoApprove { enabled: true });
                }
                true
            }
            (
                Op::AutoCall {
                    instance, prelude, ..
                },
                1,
            ) => {
                if prelude % 5 == 4 {
                    return true;
                }
                self.act(match prelude % 5 {
                    risk @ (0 | 1) => Action::ScoreRisk {
                        instance: self.instance(*instance),
                        risk: RISKS[1 + risk as usize].into(),
                    },
                    2 => Action::ArmFault {
                        point: FaultPoint::StoreWriteDecision,
                        times: Some(1),
                    },
                    _ => Action::ArmFault {
                        point: FaultPoint::CrashAfterDecisionCommit,
                        times: Some(1),
                    },
                });
                true
            }
            (
                Op::AutoCall {
                    instance,
                    tool,
                    arguments: a,
                    prelude,
                },
                2,
            ) => {
                self.act(Action::ToolCall {
                    instance: self.instance(*instance),
                    tool: TOOLS[*tool as usize % 3].into(),
                    arguments: arguments(*a),
                });
                prelude % 5 == 4
            }
            (Op::AutoCall { .. }, _) => {
                self.act(Action::SetAutoApprove { enabled: false });
                false
            }
            (Op::ReceiptUse { parent, .. }, 0) => {
                let before = self.receipts.len();
                self.act(Action::PrepareReceipt {
                    parent: self.instance(*parent),
                    call_id: "call".into(),
                    request: spawn_request(Some(0), None, 0),
                    ttl_ms: None,
                });
                self.last_prepared = (self.receipts.len() > before).then_some(before);
                true
            }
            (Op::ReceiptUse { then, tool, .. }, 1) => match ReceiptThen::of(*then) {
                ReceiptThen::ConsumeTwice => {
                    self.consume_prepared();
                    true
                }
                ReceiptThen::RedefineSealed => {
                    if self.last_prepared.is_some() {
                        self.redefine(TOOLS[*tool as usize % 3]);
                    }
                    true
                }
                ReceiptThen::AtExpiry { offset } => {
                    if let Some(i) = self.last_prepared
                        && let Some(expires_at) = self.receipts[i].0["expires_at"].as_u64()
                    {
                        self.clock_to((expires_at + offset as Millis).saturating_sub(1));
                    }
                    true
                }
                ReceiptThen::Consume => {
                    self.consume_prepared();
                    false
                }
                ReceiptThen::ConsumeNeverIssued => {
                    if let Some((mut receipt, request, parent)) =
                        self.last_prepared.map(|i| self.receipts[i].clone())
                    {
                        receipt["id"] = json!(NEVER_ISSUED_RECEIPT);
                        self.act(Action::ConsumeReceipt {
                            receipt,
                            parent,
                            request,
                        });
                    }
                    false
                }
            },
            (Op::ReceiptUse { .. }, _) => {
                self.consume_prepared();
                false
            }
            (
                Op::CapabilityUse {
                    agent, task, tools, ..
                },
                0,
            ) => {
                let before = self.capabilities.len();
                self.act(Action::IssueCapability {
                    task: TASKS[*task as usize % TASKS.len()].into(),
                    agent: self.instance(*agent),
                    tools: tool_subset(*tools | 1),
                    expires_at: self.world.state.now + 60_000,
                    secret: Some(format!("CANARY-fuzz-{before}")),
                });
                self.last_issued = (self.capabilities.len() > before).then_some(before);
                true
            }
            (Op::CapabilityUse { tools, then, .. }, stage) => {
                let Some(index) = self.last_issued else {
                    return false;
                };
                let tool = pick(&tool_subset(*tools | 1), *tools >> 3).unwrap_or_default();
                match (stage, CapabilityThen::of(*then)) {
                    (1, _) | (2, CapabilityThen::Retry) => {
                        self.capability_call(index, 0, &tool, arguments(0), Some("c0"));
                        stage == 1
                    }
                    (2, CapabilityThen::RevokeAndCall) => {
                        let id = self.capabilities[index].0.clone();
                        self.act(Action::RevokeCapability { capability: id });
                        true
                    }
                    (2, CapabilityThen::RaceRevoke) => {
                        // Raced only after a call that ran: the race rules
                        // decide the revocation check alone.
                        let ran = self
                            .last_result("capability/call")
                            .is_some_and(ActionResult::is_ok);
                        if ran && self.can_race() {
                            let (id, secret, task, agent) = self.capabilities[index].clone();
                            self.presented = Some(id.clone());
                            self.race(vec![
                                Action::CapabilityCall {
                                    secret,
                                    task,
                                    agent,
                                    tool,
                                    arguments: arguments(1),
                                    call_id: None,
                                },
                                Action::RevokeCapability { capability: id },
                            ]);
                        }
                        false
                    }
                    (2, CapabilityThen::CallAtExpiry) => {
                        let expires_at = self.world.state.capabilities[&self.capabilities[index].0]
                            .capability
                            .expires_at;
                        self.clock_to(expires_at);
                        true
                    }
                    (_, then) => {
                        let binding = match then {
                            CapabilityThen::OtherTask => 3,
                            CapabilityThen::OtherAgent => 4,
                            _ => 0,
                        };
                        self.capability_call(index, binding, &tool, arguments(0), None);
                        false
                    }
                }
            }
            (Op::DriftDelegate { parent, tool, .. }, 0) => {
                // A tool the parent sealed other than the read probe, which
                // the read-probe role's default drops; the read probe only
                // when the parent sealed nothing else.
                let sealed = self.sealed_served(&self.instance(*parent));
                let droppable: Vec<String> = sealed
                    .iter()
                    .filter(|t| *t != "probe.read")
                    .cloned()
                    .collect();
                let name = pick(&droppable, *tool)
                    .or_else(|| pick(&sealed, *tool))
                    .unwrap_or_else(|| TOOLS[*tool as usize % 3].to_string());
                self.redefine(&name);
                true
            }
            (Op::DriftDelegate { parent, role, .. }, _) => {
                let parent = self.instance(*parent);
                // Every tool the parent sealed (the drifted one among them), so
                // that nothing but the drift can refuse it; all three probes
                // when the parent is unknown.
                let mut tools = self
                    .world
                    .state
                    .instances
                    .get(&parent)
                    .map(|p| p.ceiling.tools.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_else(|| tool_subset(7));
                tools.sort();
                let mut request = spawn_request(None, None, drift_role(*role));
                request.authority.tools = Some(tools);
                self.act(Action::Delegate { parent, request });
                false
            }
            (
                Op::RewriteTool {
                    instance,
                    tool,
                    form,
                },
                0,
            ) => {
                let sealed = self.sealed_served(&self.instance(*instance));
                let name = pick(&sealed, *tool).unwrap_or_else(|| TOOLS[*tool as usize % 3].into());
                self.picked_tool = Some(name.clone());
                let Some(current) = self.world.tools.get(&name) else {
                    // Not served: nothing to write otherwise.
                    return true;
                };
                let text = written_form(&current.raw, *form);
                let definition =
                    crate::digest::parse_strict(&text).expect("a written form parses strictly");
                self.written.insert(name.clone(), text);
                self.world.change(SimChange::ChangeTool {
                    name,
                    definition,
                    announce: false,
                });
                true
            }
            (Op::RewriteTool { instance, .. }, _) => {
                let tool = self.picked_tool.take().unwrap_or_else(|| TOOLS[0].into());
                self.act(Action::ToolCall {
                    instance: self.instance(*instance),
                    tool,
                    arguments: arguments(1),
                });
                false
            }
            (Op::Race { what, instance, .. }, 0) if what % 2 == 0 => {
                let before = self.receipts.len();
                self.act(Action::PrepareReceipt {
                    parent: self.instance(*instance),
                    call_id: "call".into(),
                    request: spawn_request(Some(0), None, 0),
                    ttl_ms: None,
                });
                self.last_prepared = (self.receipts.len() > before).then_some(before);
                true
            }
            (Op::Race { what, count, .. }, _) if what % 2 == 0 => {
                if let Some(i) = self.last_prepared
                    && self.can_race()
                {
                    let (receipt, request, parent) = self.receipts[i].clone();
                    let consume = Action::ConsumeReceipt {
                        receipt,
                        parent,
                        request,
                    };
                    self.race(vec![consume; 2 + *count as usize % 3]);
                }
                false
            }
            (
                Op::Race {
                    instance, count, ..
                },
                _,
            ) => {
                let live: Vec<String> = self
                    .instances
                    .iter()
                    .filter(|id| {
                        self.world
                            .state
                            .instances
                            .get(*id)
                            .is_some_and(|i| !i.state.is_terminal())
                    })
                    .cloned()
                    .collect();
                if let Some(target) = pick(&live, *instance)
                    && self.can_race()
                {
                    // A plain input: a marker would spawn or call, which
                    // the race rules do not decide.
                    let turn = Action::Turn {
                        instance: target.clone(),
                        input: "hello".into(),
                    };
                    let mut actions = vec![turn; 1 + *count as usize % 3];
                    actions.push(if count / 3 % 2 == 0 {
                        Action::Close { instance: target }
                    } else {
                        Action::Cancel { instance: target }
                    });
                    self.race(actions);
                }
                false
            }
            (
                Op::GrantCall {
                    instance,
                    tool,
                    first,
                    ..
                },
                0,
            ) => {
                self.last_raised = None;
                self.act(Action::ToolCall {
                    instance: self.instance(*instance),
                    tool: TOOLS[*tool as usize % 3].into(),
                    arguments: arguments(*first),
                });
                true
            }
            (Op::GrantCall { .. }, 1) => {
                let raised = self.last_raised.take().filter(|id| {
                    self.world
                        .state
                        .approvals
                        .get(id)
                        .is_some_and(|a| a.approval.state == ApprovalState::Pending)
                });
                if let Some(request) = raised {
                    self.act(Action::Answer {
                        request,
                        decision: Decision::AllowExact,
                    });
                }
                true
            }
            (
                Op::GrantCall {
                    instance,
                    tool,
                    second,
                    ..
                },
                _,
            ) => {
                self.act(Action::ToolCall {
                    instance: self.instance(*instance),
                    tool: TOOLS[*tool as usize % 3].into(),
                    arguments: arguments(*second),
                });
                false
            }
            (Op::Question { instance, .. }, 0) => {
                self.act(Action::Ask {
                    instance: self.instance(*instance),
                    question: QUESTION.into(),
                });
                true
            }
            (Op::Question { answer, .. }, stage) => {
                let asked = self
                    .last_result("instance/ask")
                    .and_then(|r| r.question.clone());
                let Some(question) = asked.filter(|_| answer % 3 != 2) else {
                    return false;
                };
                self.act(Action::AnswerQuestion {
                    question,
                    answer: "main".into(),
                });
                stage == 1 && answer % 3 == 1
            }
            (
                Op::GrantDrift {
                    instance,
                    tool,
                    arguments,
                },
                stage,
            ) => {
                let grant_call = Op::GrantCall {
                    instance: *instance,
                    tool: *tool,
                    first: *arguments,
                    second: *arguments,
                };
                match stage {
                    0 | 1 => self.apply_stage(&grant_call, stage),
                    2 => {
                        self.redefine(TOOLS[*tool as usize % 3]);
                        true
                    }
                    _ => self.apply_stage(&grant_call, 2),
                }
            }
            (op, _) => {
                self.apply_plain(op);
                false
            }
        }
    }

    fn apply_plain(&mut self, op: &Op) {
        match op {
            // Applied part by part in `apply_stage`, never here.
            Op::AutoCall { .. }
            | Op::GrantCall { .. }
            | Op::ReceiptUse { .. }
            | Op::CapabilityUse { .. }
            | Op::DriftDelegate { .. }
            | Op::RewriteTool { .. }
            | Op::Race { .. }
            | Op::Question { .. }
            | Op::GrantDrift { .. } => {}
            Op::LookAlikeCall { instance, name } => self.act(Action::ToolCall {
                instance: self.instance(*instance),
                tool: WRITTEN_NAMES[*name as usize % WRITTEN_NAMES.len()].into(),
                arguments: arguments(0),
            }),
            Op::WrittenDelegate { parent, root, name } => self.act(Action::Delegate {
                parent: self.instance(*parent),
                request: written_request(*root, *name),
            }),
            Op::ModelLifecycle {
                instance,
                target,
                call,
            } => {
                let caller = self.instance(*instance);
                // Another instance: a model's lifecycle tool acts on a child, not on itself.
                let others: Vec<String> = self
                    .instances
                    .iter()
                    .filter(|i| **i != caller)
                    .cloned()
                    .collect();
                let target = pick(&others, *target).unwrap_or_else(|| "inst-missing".into());
                let marker = lifecycle_marker(
                    self.world
                        .replies
                        .iter()
                        .filter(|(_, r)| matches!(r, SimReply::Lifecycle(_)))
                        .count(),
                );
                self.world.replies.push((
                    marker.clone(),
                    SimReply::Lifecycle(lifecycle_call(*call, target)),
                ));
                self.act(Action::Turn {
                    instance: caller,
                    input: marker,
                })
            }
            Op::Start {
                sandbox: s,
                policy: p,
                tools,
            } => self.act(Action::Start(StartRequest {
                role: "root".into(),
                model: default_model(),
                sandbox: sandbox(*s).into(),
                approval_policy: policy(*p),
                tools: tool_subset(*tools | 1),
                cwd: "/w/repo".into(),
                provider: default_provider(),
                delegation_depth: 2,
            })),
            Op::Delegate {
                parent,
                sandbox,
                tools,
                role,
            } => self.act(Action::Delegate {
                parent: self.instance(*parent),
                request: spawn_request(*sandbox, *tools, *role),
            }),
            Op::Turn { instance, marker } => self.act(Action::Turn {
                instance: self.instance(*instance),
                input: ["hello", "SPAWN", "CALL", "BREAK"][*marker as usize % 4].into(),
            }),
            Op::ToolCall {
                instance,
                tool,
                arguments: a,
            } => self.act(Action::ToolCall {
                instance: self.instance(*instance),
                tool: TOOLS[*tool as usize % 3].into(),
                arguments: arguments(*a),
            }),
            Op::End { instance, how } => {
                let instance = self.instance(*instance);
                self.act(match how % 3 {
                    0 => Action::Close { instance },
                    1 => Action::Cancel { instance },
                    _ => Action::Fail { instance },
                })
            }
            Op::Resume { instance } => self.act(Action::Resume {
                instance: self.instance(*instance),
            }),
            Op::Fork { instance } => self.act(Action::Fork {
                instance: self.instance(*instance),
            }),
            Op::Answer { approval, decision } => {
                let ids: Vec<String> = self.world.state.approvals.keys().cloned().collect();
                let request = pick(&ids, *approval).unwrap_or_else(|| "appr-missing".into());
                let decision =
                    [Decision::Allow, Decision::Deny, Decision::AllowExact][*decision as usize % 3];
                self.act(Action::Answer { request, decision })
            }
            Op::Auto { enabled } => self.act(Action::SetAutoApprove { enabled: *enabled }),
            Op::Prepare { parent } => self.act(Action::PrepareReceipt {
                parent: self.instance(*parent),
                call_id: "call".into(),
                request: spawn_request(Some(0), None, 0),
                ttl_ms: None,
            }),
            Op::Consume {
                receipt,
                tamper,
                other_parent,
            } => {
                let Some((mut value, request, parent)) = pick(&self.receipts, *receipt) else {
                    return;
                };
                if *tamper {
                    value["expires_at"] = json!(u64::MAX / 2);
                }
                let parent = if *other_parent {
                    self.instance(receipt.wrapping_add(1))
                } else {
                    parent
                };
                self.act(Action::ConsumeReceipt {
                    receipt: value,
                    parent,
                    request,
                })
            }
            Op::Clock { advance } => {
                let now = self.world.state.now + (*advance % 120_000) as u64;
                self.act(Action::SetClock { now })
            }
            Op::Fault { point, times } => {
                let points = [
                    FaultPoint::StoreWriteApprovalRequest,
                    FaultPoint::StoreWriteDecision,
                    FaultPoint::StoreWriteInstance,
                    FaultPoint::AuthorizerCall,
                    FaultPoint::ModelCall,
                    FaultPoint::EventDeliver,
                    FaultPoint::CrashAfterDecisionCommit,
                ];
                self.act(Action::ArmFault {
                    point: points[*point as usize % points.len()],
                    times: Some((*times % 3) as u32 + 1),
                })
            }
            // Not while an announced tool-list change is held in memory only
            // (the store refused its invalidation): the restarted host cannot
            // know of it, while SD3 holds every later call to it. What a host
            // owes then is not settled (MODEL.md says nothing of it), so the
            // generator does not ask.
            Op::Restart if self.world.list_changed_uncommitted() => {}
            Op::Restart => self.world.restart(),
            Op::ChangeTool { tool, announce } => {
                let name = TOOLS[*tool as usize % 3];
                self.written.remove(name);
                self.world.change(SimChange::ChangeTool {
                    name: name.into(),
                    definition: changed_tool(name),
                    announce: *announce,
                })
            }
            Op::RemoveTool { tool, announce } => {
                let name = TOOLS[*tool as usize % 3];
                self.written.remove(name);
                self.world.change(SimChange::RemoveTool {
                    name: name.into(),
                    announce: *announce,
                })
            }
            Op::Authorizer { mode } => {
                if !self.authorizer_on {
                    self.authorizer_on = true;
                    self.act(Action::Configure(Configuration {
                        authorizer_required: true,
                        ..self.world.state.config.clone()
                    }));
                }
                let now = self.world.state.now;
                let wanted = authorizer_behaviour(*mode);
                // EA4 forbids any child under a replay, so a replay is
                // scripted only when there is a spent receipt to replay;
                // until then the authorizer allows, and the replay follows
                // the first child it admits.
                self.replay_deferred = wanted == AuthorizerBehaviour::ReplayedReceipt
                    && !self.world.authorizer_last_receipt_used();
                let behaviour = if self.replay_deferred {
                    AuthorizerBehaviour::Allow
                } else {
                    wanted
                };
                self.authorizer = Some(behaviour.clone());
                self.world.change(match (behaviour, self.bound_allows) {
                    (AuthorizerBehaviour::Deny, _) => SimChange::Authorizer(AuthorizerAnswer::Body(
                        json!({"version": "1", "decision": "deny"}).to_string(),
                    )),
                    // A fresh receipt id per answer: replaying one is a different test.
                    (_, false) => SimChange::Authorizer(AuthorizerAnswer::Body(
                        json!({"version": "1", "decision": "allow", "decided_at": now,
                               "receipt": {"id": format!("authz-{now}-{}", self.world.history.len()),
                                           "binding": "unknown", "expires_at": now + 1000}})
                        .to_string(),
                    )),
                    (behaviour, true) => SimChange::AuthorizerAnswers(behaviour),
                })
            }
            Op::Event { event, instance } => self.act(Action::DeliverEvent {
                event: format!("evt-{}", event % 4),
                instance: self.instance(*instance),
                kind: "completed".into(),
            }),
            Op::Wait { instance } => {
                let deadline = self.world.state.now + 1000;
                self.last_wait_deadline = Some(deadline);
                self.act(Action::Wait {
                    instance: self.instance(*instance),
                    deadline,
                })
            }
            Op::Strict => {
                if !self.world.state.config.strict_mode {
                    self.act(Action::Configure(Configuration {
                        strict_mode: true,
                        ..self.world.state.config.clone()
                    }));
                }
            }
            Op::Score { instance, risk } => self.act(Action::ScoreRisk {
                instance: self.instance(*instance),
                risk: RISKS[*risk as usize % RISKS.len()].into(),
            }),
            Op::Issue {
                agent,
                task,
                tools,
                lifetime,
            } => {
                let n = self.capabilities.len();
                self.act(Action::IssueCapability {
                    task: TASKS[*task as usize % TASKS.len()].into(),
                    agent: self.instance(*agent),
                    tools: tool_subset(*tools | 1),
                    expires_at: self.world.state.now
                        + CAPABILITY_LIFETIMES[*lifetime as usize % CAPABILITY_LIFETIMES.len()],
                    // The runner plants its own canary; the model only needs one of its own.
                    secret: Some(format!("CANARY-fuzz-{n}")),
                })
            }
            Op::CapabilityCall {
                capability,
                binding,
                tool,
                call_id,
            } => {
                if self.capabilities.is_empty() {
                    return;
                }
                self.capability_call(
                    *capability as usize % self.capabilities.len(),
                    *binding,
                    TOOLS[*tool as usize % 3],
                    arguments(*tool / 3),
                    ["c0", "c1"].get(*call_id as usize % 3).copied(),
                )
            }
            Op::Revoke { what, index } => match what % 3 {
                0 => {
                    if let Some((id, ..)) = pick(&self.capabilities, *index) {
                        self.act(Action::RevokeCapability { capability: id })
                    }
                }
                1 => {
                    // The runner names a grant only as the host's latest, so
                    // only a sole grant is revoked: no order to agree on.
                    let grants: Vec<String> = self.world.state.grants.keys().cloned().collect();
                    if let [grant] = grants.as_slice() {
                        self.act(Action::RevokeGrant {
                            grant: grant.clone(),
                        })
                    }
                }
                _ => {
                    if let Some((receipt, ..)) = pick(&self.receipts, *index)
                        && let Some(id) = receipt["id"].as_str()
                    {
                        self.act(Action::RevokeReceipt { receipt: id.into() })
                    }
                }
            },
            Op::ClockTo { deadline, offset } => {
                let state = &self.world.state;
                let mut deadlines: Vec<Millis> = state
                    .receipts
                    .values()
                    .map(|r| r.receipt.expires_at)
                    .chain(state.capabilities.values().map(|c| c.capability.expires_at))
                    .chain(self.last_wait_deadline)
                    .collect();
                deadlines.sort_unstable();
                deadlines.dedup();
                let Some(at) = pick(&deadlines, *deadline) else {
                    return;
                };
                let now = (at + (offset % 3) as Millis).saturating_sub(1);
                // The clock only moves forward.
                if now > state.now {
                    self.act(Action::SetClock { now })
                }
            }
        }
    }
}
