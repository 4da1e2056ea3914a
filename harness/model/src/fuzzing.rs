//! Fuzzing entry points for the model: operation sequences over the simulated world, and digest round trips.
//!
//! The logic lives here rather than in `fuzz/` so that it builds and is
//! tested on stable, and so the proptest state machine, the libFuzzer targets
//! and later differential host fuzzing all drive the world through the same
//! [`Op`] and [`Driver`]. Operations carry indexes, not ids: an index is
//! resolved against what exists when it is applied, so every byte string is a
//! meaningful sequence and a mutated or shrunk one stays meaningful.

use arbitrary::{Arbitrary, Unstructured};
use serde_json::{Value, json};

use crate::digest::{DefinitionError, canonical_json, digest_value, parse_strict};
use crate::invariants::{self, Violation};
use crate::state::AuthorizerAnswer;
use crate::world::{SimChange, SimReply, World, sample_tool};
use crate::*;

/// One operation with its references left as indexes.
///
/// The derived [`Arbitrary`] layout is what the seed corpus under
/// `fuzz/corpus/model_sequence/` was written in (see [`encode_ops`]):
/// changing the variants or their fields invalidates those seeds.
#[derive(Clone, Debug, PartialEq, Eq, Arbitrary)]
pub enum Op {
    Start {
        sandbox: u8,
        policy: u8,
        tools: u8,
    },
    Delegate {
        parent: u8,
        sandbox: Option<u8>,
        tools: Option<u8>,
        role: u8,
    },
    Turn {
        instance: u8,
        marker: u8,
    },
    /// `arguments` picks one of [`ARGUMENTS`]: equal numbers in another
    /// RFC 8785 form, paths sharing a prefix or carrying `..`, names that
    /// normalise alike, so an exact-call grant meets near misses.
    ToolCall {
        instance: u8,
        tool: u8,
        arguments: u8,
    },
    End {
        instance: u8,
        how: u8,
    },
    Resume {
        instance: u8,
    },
    Fork {
        instance: u8,
    },
    Answer {
        approval: u8,
        decision: u8,
    },
    Auto {
        enabled: bool,
    },
    Prepare {
        parent: u8,
    },
    Consume {
        receipt: u8,
        tamper: bool,
        other_parent: bool,
    },
    /// Advances the clock by `advance % 120_000` ms: enough to cross receipt
    /// TTLs and wait deadlines without jumping past everything at once.
    Clock {
        advance: u32,
    },
    /// Arms a fault for `times % 3 + 1` firings.
    Fault {
        point: u8,
        times: u8,
    },
    Restart,
    ChangeTool {
        tool: u8,
        announce: bool,
    },
    RemoveTool {
        tool: u8,
        announce: bool,
    },
    /// Scripts the external authorizer's answers from here on:
    /// `mode % 5` is allow, deny, replay an earlier receipt id, allow with a
    /// widening constraint, allow narrowed to read-only. Any one makes the
    /// whole sequence run with a required authorizer.
    Authorizer {
        mode: u8,
    },
    /// Delivers event `evt-{event % 4}`: few distinct ids, so replays happen.
    Event {
        event: u8,
        instance: u8,
    },
    Wait {
        instance: u8,
    },
    /// Strict mode (CE4) for the whole sequence: like the authorizer, a
    /// setting a scenario carries from its start.
    Strict,
    /// The reviewer scores an instance's risk: `low`, `elevated` or `stale`.
    Score {
        instance: u8,
        risk: u8,
    },
    /// Issues a task capability to an instance with a canary secret, for a
    /// task of [`TASKS`], expiring at one of [`CAPABILITY_LIFETIMES`] from now.
    Issue {
        agent: u8,
        task: u8,
        tools: u8,
        lifetime: u8,
    },
    /// Calls through an issued capability. `binding % 6`: 0 to 2 present
    /// the task and agent it is bound to, 3 another task (one code point
    /// off or normalising alike), 4 another agent, 5 a wrong secret;
    /// `call_id % 3` is none or one of two ids, so retries happen.
    CapabilityCall {
        capability: u8,
        binding: u8,
        tool: u8,
        call_id: u8,
    },
    /// `what % 3`: revokes a capability, the only exact-call grant, or a receipt.
    Revoke {
        what: u8,
        index: u8,
    },
    /// Sets the clock to a pending deadline (a receipt's or capability's
    /// expiry, the last wait's deadline) one millisecond before, at or after
    /// it: the boundaries `Clock`'s random steps almost never land on.
    ClockTo {
        deadline: u8,
        offset: u8,
    },
}

impl Op {
    /// Operations that configure the whole sequence (a scenario's setup),
    /// wherever they stand in it: deleting the operations after a failure
    /// must keep them.
    pub fn is_sequence_wide(&self) -> bool {
        matches!(self, Op::Authorizer { .. } | Op::Strict)
    }

    /// The variant's name, for reach statistics.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Start { .. } => "start",
            Op::Delegate { .. } => "delegate",
            Op::Turn { .. } => "turn",
            Op::ToolCall { .. } => "tool_call",
            Op::End { .. } => "end",
            Op::Resume { .. } => "resume",
            Op::Fork { .. } => "fork",
            Op::Answer { .. } => "answer",
            Op::Auto { .. } => "auto",
            Op::Prepare { .. } => "prepare",
            Op::Consume { .. } => "consume",
            Op::Clock { .. } => "clock",
            Op::Fault { .. } => "fault",
            Op::Restart => "restart",
            Op::ChangeTool { .. } => "change_tool",
            Op::RemoveTool { .. } => "remove_tool",
            Op::Authorizer { .. } => "authorizer",
            Op::Event { .. } => "event",
            Op::Wait { .. } => "wait",
            Op::Strict => "strict",
            Op::Score { .. } => "score",
            Op::Issue { .. } => "issue",
            Op::CapabilityCall { .. } => "capability_call",
            Op::Revoke { .. } => "revoke",
            Op::ClockTo { .. } => "clock_to",
        }
    }

    /// Every variant's [`Op::kind`], in declaration order.
    pub const KINDS: [&'static str; OP_VARIANTS as usize] = [
        "start",
        "delegate",
        "turn",
        "tool_call",
        "end",
        "resume",
        "fork",
        "answer",
        "auto",
        "prepare",
        "consume",
        "clock",
        "fault",
        "restart",
        "change_tool",
        "remove_tool",
        "authorizer",
        "event",
        "wait",
        "strict",
        "score",
        "issue",
        "capability_call",
        "revoke",
        "clock_to",
    ];
}

/// Arguments of generated tool calls. Equal under RFC 8785 (`1`, `1.0`), or differing in one code point, in a path's prefix or in `..`:
/// what an exact-call grant must tell apart or must not.
pub fn arguments(i: u8) -> Value {
    let forms = [
        r#"{"n":0}"#,
        r#"{"n":1}"#,
        r#"{"n":1.0}"#,
        r#"{"path":"/w/repo/a"}"#,
        r#"{"path":"/w/repo2/a"}"#,
        r#"{"path":"/w/repo/../repo2/a"}"#,
        r#"{"name":"caf\u00e9"}"#,
        r#"{"name":"cafe\u0301"}"#,
    ];
    serde_json::from_str(forms[i as usize % forms.len()]).expect("a literal JSON object")
}

/// Tasks of issued capabilities: two distinct, one a code point away from
/// the first, one normalising to the third (NFC and NFD of the same text).
pub const TASKS: [&str; 4] = ["task-a", "task-b", "task-\u{e1}", "task-a\u{301}"];

/// Lifetimes of issued capabilities: expired at once, one millisecond, a
/// second, a minute.
pub const CAPABILITY_LIFETIMES: [Millis; 4] = [0, 1, 1_000, 60_000];

/// Roles a delegation asks for: one without a default, one with a read-only
/// default, and a name one code point away from a configured one (NFD of a
/// configured NFC name), which has no default.
pub const ROLES: [&str; 4] = ["worker", "reviewer", "r\u{e9}viewer", "re\u{301}viewer"];

/// The role defaults every fuzzed host is configured with (CE3).
pub fn role_defaults() -> std::collections::BTreeMap<String, AuthorityRequest> {
    let read_only = AuthorityRequest {
        sandbox: Some(Sandbox::ReadOnly),
        ..AuthorityRequest::default()
    };
    [
        ("reviewer".to_string(), read_only.clone()),
        (
            "r\u{e9}viewer".to_string(),
            AuthorityRequest {
                tools: Some(vec!["probe.read".to_string()]),
                ..read_only
            },
        ),
    ]
    .into()
}

/// Number of [`Op`] variants; the derived decoder picks a variant from a u32 tag scaled by it.
const OP_VARIANTS: u64 = 25;

/// Longest sequence one fuzz input is decoded into. Checking every invariant
/// over the whole history after every step costs quadratic time; 48 steps
/// covers delegation chains, restarts and approval round trips while keeping
/// an input in the tens of microseconds.
pub const MAX_OPS: usize = 48;

const TOOLS: [&str; 3] = ["probe.read", "probe.write", "probe.spawn"];

fn sandbox(i: u8) -> Sandbox {
    match i % 4 {
        0 => Sandbox::ReadOnly,
        1 => Sandbox::WorkspaceWrite {
            writable_roots: [NormalPath::parse("/w/repo").expect("a valid path")].into(),
            network: false,
        },
        2 => Sandbox::WorkspaceWrite {
            writable_roots: [NormalPath::parse("/w/repo").expect("a valid path")].into(),
            network: true,
        },
        _ => Sandbox::FullAccess,
    }
}

fn policy(i: u8) -> ApprovalPolicy {
    [
        ApprovalPolicy::Never,
        ApprovalPolicy::Untrusted,
        ApprovalPolicy::OnRequest,
    ][i as usize % 3]
        .clone()
}

fn tool_subset(mask: u8) -> Vec<String> {
    TOOLS
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, t)| t.to_string())
        .collect()
}

fn spawn_request(sandbox_choice: Option<u8>, tools: Option<u8>, role: u8) -> SpawnRequest {
    SpawnRequest {
        role: ROLES[role as usize % ROLES.len()].into(),
        task: "CHILD_TASK".into(),
        authority: AuthorityRequest {
            sandbox: sandbox_choice.map(sandbox),
            tools: tools.map(tool_subset),
            ..AuthorityRequest::default()
        },
        model: None,
        target: None,
        worktree: false,
    }
}

/// Risk scores the reviewer gives.
pub const RISKS: [&str; 3] = ["low", "elevated", "stale"];

/// The secret a capability call presents when it presents the wrong one.
pub const WRONG_SECRET: &str = "not-the-issued-secret";

/// The external authorizer's answer for an `Authorizer` operation's mode.
pub fn authorizer_behaviour(mode: u8) -> AuthorizerBehaviour {
    match mode % 5 {
        0 => AuthorizerBehaviour::Allow,
        1 => AuthorizerBehaviour::Deny,
        2 => AuthorizerBehaviour::ReplayedReceipt,
        3 => AuthorizerBehaviour::AllowWidening,
        _ => AuthorizerBehaviour::AllowNarrowed {
            constraint: AuthorityRequest {
                sandbox: Some(Sandbox::ReadOnly),
                ..AuthorityRequest::default()
            },
        },
    }
}

/// The task of [`TASKS`] that differs from `task` by one code point or
/// only in normalisation.
fn other_task(task: &str) -> String {
    let i = TASKS.iter().position(|t| *t == task).unwrap_or(0);
    TASKS[[3, 0, 3, 2][i]].to_string()
}

fn pick<T: Clone>(items: &[T], i: u8) -> Option<T> {
    (!items.is_empty()).then(|| items[i as usize % items.len()].clone())
}

/// The configuration a fuzzed host runs with: role defaults, a 60 s
/// receipt TTL so that clock steps can expire receipts, and the settings
/// the sequence-wide operations ask for.
pub fn fuzz_configuration(authorizer_required: bool, strict_mode: bool) -> Configuration {
    Configuration {
        receipt_ttl_ms: 60_000,
        roles: role_defaults(),
        authorizer_required,
        strict_mode,
        ..Configuration::default()
    }
}

/// The world plus what it has handed out so far, to resolve indexes.
pub struct Driver {
    pub world: World,
    instances: Vec<String>,
    receipts: Vec<(Value, SpawnRequest, String)>,
    /// Issued capabilities: id, the secret it was issued with, task, agent.
    capabilities: Vec<(String, String, String, String)>,
    /// The deadline of the last wait, a boundary for `ClockTo`.
    last_wait_deadline: Option<Millis>,
    /// What the last `Authorizer` operation scripted.
    authorizer: Option<AuthorizerBehaviour>,
    authorizer_on: bool,
    /// A replay was asked for before any receipt was spent: the authorizer
    /// allows until one is, then replays it (see [`Driver::take_deferred_replay`]).
    replay_deferred: bool,
    /// `Authorizer { allow: true }` allows with a receipt bound to each
    /// request (children admitted), as the harness's real authorizer does;
    /// off, its receipt is bound to nothing and every child is refused (the
    /// authorizer's `mismatched` answer), which a test may want on its own.
    pub bound_allows: bool,
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
        static PROBE_TOOLS: std::sync::OnceLock<crate::state::LiveTools> =
            std::sync::OnceLock::new();
        let probe_tools = PROBE_TOOLS.get_or_init(|| {
            let definitions = vec![
                sample_tool("probe.read", "read"),
                sample_tool("probe.write", "file-write"),
                sample_tool("probe.spawn", "mcp"),
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
            authorizer: None,
            authorizer_on,
            replay_deferred: false,
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

    /// The id of the capability a `CapabilityCall` with this index presents.
    pub fn capability_id(&self, i: u8) -> Option<String> {
        pick(&self.capabilities, i).map(|(id, ..)| id)
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
    pub fn step(&mut self, op: &Op) {
        self.apply(op);
        self.take_deferred_replay();
        self.world.apply(&Action::Observe);
    }

    pub fn apply(&mut self, op: &Op) {
        match op {
            Op::Start {
                sandbox: s,
                policy: p,
                tools,
            } => self.act(Action::Start(StartRequest {
                role: "root".into(),
                model: default_model(),
                sandbox: sandbox(*s),
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
                let mut def = sample_tool(name, "mcp");
                def["description"] = json!(format!("{name}, changed"));
                self.world.change(SimChange::ChangeTool {
                    name: name.into(),
                    definition: def,
                    announce: *announce,
                })
            }
            Op::RemoveTool { tool, announce } => self.world.change(SimChange::RemoveTool {
                name: TOOLS[*tool as usize % 3].into(),
                announce: *announce,
            }),
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
                let Some((_, secret, task, agent)) = pick(&self.capabilities, *capability) else {
                    return;
                };
                let (secret, task, agent) = match binding % 6 {
                    3 => (secret, other_task(&task), agent),
                    4 => (secret, task, self.other_instance(&agent)),
                    5 => (WRONG_SECRET.to_string(), task, agent),
                    _ => (secret, task, agent),
                };
                self.act(Action::CapabilityCall {
                    secret,
                    task,
                    agent,
                    tool: TOOLS[*tool as usize % 3].into(),
                    arguments: arguments(*tool / 3),
                    call_id: ["c0", "c1"]
                        .get(*call_id as usize % 3)
                        .map(|c| c.to_string()),
                })
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

/// Decodes at most [`MAX_OPS`] operations; trailing bytes too short for a
/// whole operation are zero-filled by `arbitrary`, as libFuzzer expects.
pub fn decode_ops(data: &[u8]) -> Vec<Op> {
    let mut u = Unstructured::new(data);
    let mut ops = Vec::new();
    // `arbitrary` never runs dry (it pads with zeros), so stop on empty input
    // explicitly or every input would end in a run of `Start`s.
    while ops.len() < MAX_OPS && !u.is_empty() {
        match Op::arbitrary(&mut u) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    ops
}

/// The inverse of [`decode_ops`]: the bytes the derived decoder reads back as
/// `ops`. Seed corpora are written with it, from sequences a reader can follow.
pub fn encode_ops(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops {
        let (index, fields): (u64, Vec<u8>) = match op {
            Op::Start {
                sandbox,
                policy,
                tools,
            } => (0, vec![*sandbox, *policy, *tools]),
            Op::Delegate {
                parent,
                sandbox,
                tools,
                role,
            } => {
                let mut f = vec![*parent];
                for o in [sandbox, tools] {
                    match o {
                        Some(v) => f.extend([1, *v]),
                        None => f.push(0),
                    }
                }
                f.push(*role);
                (1, f)
            }
            Op::Turn { instance, marker } => (2, vec![*instance, *marker]),
            Op::ToolCall {
                instance,
                tool,
                arguments,
            } => (3, vec![*instance, *tool, *arguments]),
            Op::End { instance, how } => (4, vec![*instance, *how]),
            Op::Resume { instance } => (5, vec![*instance]),
            Op::Fork { instance } => (6, vec![*instance]),
            Op::Answer { approval, decision } => (7, vec![*approval, *decision]),
            Op::Auto { enabled } => (8, vec![*enabled as u8]),
            Op::Prepare { parent } => (9, vec![*parent]),
            Op::Consume {
                receipt,
                tamper,
                other_parent,
            } => (10, vec![*receipt, *tamper as u8, *other_parent as u8]),
            Op::Clock { advance } => (11, advance.to_le_bytes().to_vec()),
            Op::Fault { point, times } => (12, vec![*point, *times]),
            Op::Restart => (13, vec![]),
            Op::ChangeTool { tool, announce } => (14, vec![*tool, *announce as u8]),
            Op::RemoveTool { tool, announce } => (15, vec![*tool, *announce as u8]),
            Op::Authorizer { mode } => (16, vec![*mode]),
            Op::Event { event, instance } => (17, vec![*event, *instance]),
            Op::Wait { instance } => (18, vec![*instance]),
            Op::Strict => (19, vec![]),
            Op::Score { instance, risk } => (20, vec![*instance, *risk]),
            Op::Issue {
                agent,
                task,
                tools,
                lifetime,
            } => (21, vec![*agent, *task, *tools, *lifetime]),
            Op::CapabilityCall {
                capability,
                binding,
                tool,
                call_id,
            } => (22, vec![*capability, *binding, *tool, *call_id]),
            Op::Revoke { what, index } => (23, vec![*what, *index]),
            Op::ClockTo { deadline, offset } => (24, vec![*deadline, *offset]),
        };
        // The derive picks variant `(tag * OP_VARIANTS) >> 32` from a
        // little-endian u32 tag; the smallest tag mapping to `index` is exact.
        let tag = ((index << 32).div_ceil(OP_VARIANTS)) as u32;
        out.extend(tag.to_le_bytes());
        out.extend(fields);
    }
    out
}

/// Fuzz target body: decode a sequence, apply it, and panic with the
/// violations if any invariant checker fires.
///
/// The checkers read the whole history and name the step of each violation,
/// so one check after the last operation finds everything a check after every
/// step would, at linear rather than quadratic cost.
pub fn fuzz_model_sequence(data: &[u8]) {
    let mut driver = Driver::new();
    let ops = decode_ops(data);
    // Strict mode is a setting a scenario carries from its start, as the
    // host fuzzer's translation sets it: wherever it stands, it holds from
    // the first operation (switched on after full-access instances exist,
    // the checker rightly finds them running with full access).
    let strict = ops.iter().any(|op| matches!(op, Op::Strict));
    if strict {
        driver.step(&Op::Strict);
    }
    for op in ops.iter().filter(|op| !matches!(op, Op::Strict)) {
        driver.step(op);
    }
    let violations = driver.violations();
    assert!(
        violations.is_empty(),
        "the sequence {ops:?} broke an invariant: {violations:#?}"
    );
}

/// Fuzz target body: strict parsing, canonicalisation and digests agree with themselves.
///
/// For every input the strict parser accepts: the canonical text is a fixed
/// point, and the digest does not depend on the order keys were written in.
pub fn fuzz_digest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(value) = parse_strict(text) else {
        return;
    };
    let canonical = canonical_json(&value).expect("a strictly parsed value canonicalises");
    match parse_strict(&canonical) {
        Ok(reparsed) => assert_eq!(
            canonical_json(&reparsed).as_ref(),
            Ok(&canonical),
            "canonical text is not a fixed point for input {text:?}"
        ),
        // Known and documented (tests/digest.rs): a double at or beyond 2^53
        // with an integral value is written by JCS as an integer literal,
        // which the strict parser refuses. Any other refusal is a bug.
        Err(DefinitionError::IntegerOutOfRange { .. }) => {}
        Err(e) => panic!("canonical text {canonical:?} of {text:?} does not re-parse: {e}"),
    }
    let digest = digest_value(&value).expect("a canonicalisable value has a digest");
    let mut reversed = String::new();
    write_keys_reversed(&value, &mut reversed);
    let shuffled = parse_strict(&reversed).expect("re-serialised text parses strictly");
    assert_eq!(
        digest_value(&shuffled).as_ref(),
        Ok(&digest),
        "digest depends on key order: {text:?} vs {reversed:?}"
    );
}

/// Writes JSON text with every object's keys in the reverse of the value's
/// own order: a textual re-ordering, so it holds whatever map type serde_json
/// was built with.
fn write_keys_reversed(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_keys_reversed(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().rev().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_keys_reversed(v, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The committed seed corpus of a cargo-fuzz target: `fuzz/corpus/<target>/`.
pub fn corpus_dir(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// For the seed tests of every fuzzing library: the committed seed
/// `fuzz/corpus/<target>/<name>` as it is on disk, (re)written from `bytes`
/// first when `DELEGATION_WRITE_SEEDS` is set, so the readable sources in
/// the tests stay the one definition of the seeds. Panics, naming the file
/// and the variable, when the seed is missing.
pub fn committed_seed(target: &str, name: &str, bytes: &[u8]) -> Vec<u8> {
    let dir = corpus_dir(target);
    let path = dir.join(name);
    if std::env::var_os("DELEGATION_WRITE_SEEDS").is_some() {
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&path, bytes))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (DELEGATION_WRITE_SEEDS=1 writes it)",
            path.display()
        )
    })
}

/// Deterministic pseudo-random bytes (xorshift): varied inputs for tests
/// and benchmarks, reproducible without a dependency.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed model_sequence seeds and the sequences they encode.
    /// With `DELEGATION_WRITE_SEEDS=1` the files are (re)written from here.
    fn model_seeds() -> Vec<(&'static str, Vec<Op>)> {
        vec![
            (
                "start_delegate_turn",
                vec![
                    Op::Start {
                        sandbox: 1,
                        policy: 2,
                        tools: 7,
                    },
                    Op::Delegate {
                        parent: 0,
                        sandbox: None,
                        tools: None,
                        role: 0,
                    },
                    Op::Turn {
                        instance: 1,
                        marker: 2,
                    },
                    Op::ToolCall {
                        instance: 0,
                        tool: 1,
                        arguments: 1,
                    },
                ],
            ),
            (
                "ceiling_exceeded",
                vec![
                    Op::Start {
                        sandbox: 1,
                        policy: 2,
                        tools: 1,
                    },
                    Op::Delegate {
                        parent: 0,
                        sandbox: Some(3),
                        tools: None,
                        role: 0,
                    },
                ],
            ),
            (
                "approval_round_trip",
                vec![
                    Op::Start {
                        sandbox: 1,
                        policy: 2,
                        tools: 3,
                    },
                    Op::ToolCall {
                        instance: 0,
                        tool: 1,
                        arguments: 1,
                    },
                    Op::Fault { point: 6, times: 0 },
                    Op::Answer {
                        approval: 0,
                        decision: 0,
                    },
                    Op::Restart,
                    Op::Answer {
                        approval: 0,
                        decision: 2,
                    },
                    Op::ToolCall {
                        instance: 0,
                        tool: 1,
                        arguments: 1,
                    },
                ],
            ),
            (
                "receipt_expiry_and_replay",
                vec![
                    Op::Start {
                        sandbox: 0,
                        policy: 0,
                        tools: 1,
                    },
                    Op::Prepare { parent: 0 },
                    Op::Consume {
                        receipt: 0,
                        tamper: false,
                        other_parent: false,
                    },
                    Op::Consume {
                        receipt: 0,
                        tamper: false,
                        other_parent: false,
                    },
                    Op::Prepare { parent: 0 },
                    Op::Clock { advance: 61_000 },
                    Op::Consume {
                        receipt: 1,
                        tamper: true,
                        other_parent: true,
                    },
                ],
            ),
            (
                "tool_drift_and_authorizer",
                vec![
                    Op::Start {
                        sandbox: 1,
                        policy: 0,
                        tools: 7,
                    },
                    Op::Authorizer { mode: 0 },
                    Op::Delegate {
                        parent: 0,
                        sandbox: Some(0),
                        tools: Some(4),
                        role: 1,
                    },
                    Op::ChangeTool {
                        tool: 2,
                        announce: false,
                    },
                    Op::Turn {
                        instance: 1,
                        marker: 2,
                    },
                    Op::RemoveTool {
                        tool: 0,
                        announce: true,
                    },
                    Op::Authorizer { mode: 1 },
                    Op::Turn {
                        instance: 0,
                        marker: 1,
                    },
                ],
            ),
            (
                "lifecycle_events_waits",
                vec![
                    Op::Start {
                        sandbox: 2,
                        policy: 1,
                        tools: 1,
                    },
                    Op::Turn {
                        instance: 0,
                        marker: 1,
                    },
                    Op::Event {
                        event: 0,
                        instance: 1,
                    },
                    Op::Event {
                        event: 0,
                        instance: 1,
                    },
                    Op::Wait { instance: 1 },
                    Op::Clock { advance: 1_500 },
                    Op::Wait { instance: 1 },
                    Op::End {
                        instance: 1,
                        how: 1,
                    },
                    Op::Resume { instance: 1 },
                    Op::Fork { instance: 0 },
                    Op::Turn {
                        instance: 2,
                        marker: 3,
                    },
                    Op::Auto { enabled: true },
                ],
            ),
        ]
    }

    /// The families added for reach: capabilities at their expiry, risk
    /// scores, exact-call grants on near-miss arguments, authorizer modes,
    /// strict mode and role defaults.
    fn reach_seed() -> Vec<Op> {
        vec![
            Op::Strict,
            Op::Start {
                sandbox: 1,
                policy: 1,
                tools: 7,
            },
            Op::Score {
                instance: 0,
                risk: 1,
            },
            Op::Issue {
                agent: 0,
                task: 0,
                tools: 1,
                lifetime: 2,
            },
            Op::CapabilityCall {
                capability: 0,
                binding: 0,
                tool: 0,
                call_id: 1,
            },
            Op::CapabilityCall {
                capability: 0,
                binding: 0,
                tool: 0,
                call_id: 1,
            },
            Op::CapabilityCall {
                capability: 0,
                binding: 3,
                tool: 0,
                call_id: 0,
            },
            Op::ClockTo {
                deadline: 0,
                offset: 1,
            },
            Op::CapabilityCall {
                capability: 0,
                binding: 0,
                tool: 0,
                call_id: 0,
            },
            Op::ToolCall {
                instance: 0,
                tool: 2,
                arguments: 1,
            },
            Op::Answer {
                approval: 0,
                decision: 2,
            },
            Op::ToolCall {
                instance: 0,
                tool: 2,
                arguments: 2,
            },
            Op::ToolCall {
                instance: 0,
                tool: 2,
                arguments: 5,
            },
            Op::Revoke { what: 1, index: 0 },
            Op::Authorizer { mode: 0 },
            Op::Delegate {
                parent: 0,
                sandbox: None,
                tools: None,
                role: 1,
            },
            Op::Authorizer { mode: 2 },
            Op::Delegate {
                parent: 0,
                sandbox: None,
                tools: None,
                role: 3,
            },
            Op::Authorizer { mode: 3 },
            Op::Delegate {
                parent: 0,
                sandbox: Some(0),
                tools: None,
                role: 2,
            },
        ]
    }

    #[test]
    fn the_reach_seed_meets_its_boundaries_and_keeps_every_invariant() {
        let bytes = committed_seed(
            "model_sequence",
            "reach_families",
            &encode_ops(&reach_seed()),
        );
        assert_eq!(decode_ops(&bytes), reach_seed());
        fuzz_model_sequence(&bytes);
        let mut d = Driver::new();
        let mut reasons = Vec::new();
        for op in reach_seed() {
            let from = d.world.history.len();
            d.step(&op);
            for e in &d.world.history[from..] {
                if let StepKind::Action { result: Ok(r), .. } = &e.kind {
                    reasons.extend(r.reason);
                }
            }
        }
        assert!(d.world.state.config.strict_mode && d.world.state.config.authorizer_required);
        // The retry with the same call id, the near-miss task, and the call at the expiry.
        assert!(reasons.contains(&DenyReason::EventReplayed), "{reasons:?}");
        assert!(
            reasons.contains(&DenyReason::CapabilityDenied),
            "{reasons:?}"
        );
        assert!(
            reasons.contains(&DenyReason::AuthorizerReplay),
            "{reasons:?}"
        );
    }

    #[test]
    fn encoding_is_the_inverse_of_the_derived_decoder() {
        let mut variants = std::collections::HashSet::new();
        for seed in 0..200 {
            let ops = decode_ops(&noise(seed, 160));
            assert!(!ops.is_empty());
            for op in &ops {
                variants.insert(std::mem::discriminant(op));
            }
            let bytes = encode_ops(&ops);
            assert_eq!(decode_ops(&bytes), ops, "seed {seed}");
        }
        assert_eq!(variants.len() as u64, OP_VARIANTS, "every variant decoded");
    }

    #[test]
    fn decoding_stops_at_the_end_of_the_input_and_at_the_cap() {
        assert_eq!(decode_ops(&[]), vec![]);
        // One byte short of a whole op still yields that op, zero-padded.
        assert_eq!(
            decode_ops(&[0, 0, 0, 0, 5]),
            vec![Op::Start {
                sandbox: 5,
                policy: 0,
                tools: 0
            }]
        );
        let many = encode_ops(&vec![Op::Restart; MAX_OPS * 2]);
        assert_eq!(decode_ops(&many).len(), MAX_OPS);
    }

    /// Found by the CI smoke run: an announced tool change, then a restart
    /// before any action listed the tools, read as a silent refresh (SD3)
    /// because the target never observed between operations as the runner does.
    #[test]
    fn an_announced_change_before_a_restart_is_taken_in() {
        let bytes = std::fs::read(
            corpus_dir("model_sequence").join("regression-announced-change-then-restart"),
        )
        .unwrap();
        let ops = decode_ops(&bytes);
        assert!(ops.contains(&Op::Restart), "{ops:?}");
        assert!(
            ops.iter()
                .any(|op| matches!(op, Op::ChangeTool { announce: true, .. })),
            "{ops:?}"
        );
        fuzz_model_sequence(&bytes);
    }

    #[test]
    fn committed_model_seeds_decode_to_their_sequences_and_keep_every_invariant() {
        for (name, ops) in model_seeds() {
            let bytes = committed_seed("model_sequence", name, &encode_ops(&ops));
            assert_eq!(decode_ops(&bytes), ops, "{name}");
            fuzz_model_sequence(&bytes);
        }
    }

    /// Found by the fuzz smoke: `Strict` after full-access instances were
    /// started used to switch strict mode on mid-sequence.
    #[test]
    fn strict_mode_anywhere_in_a_sequence_holds_from_its_start() {
        let bytes = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fuzz/corpus/model_sequence/regression-strict-mode-after-instances"
        ))
        .unwrap();
        let ops = decode_ops(&bytes);
        let strict_at = ops.iter().position(|op| matches!(op, Op::Strict));
        let first_start = ops.iter().position(|op| matches!(op, Op::Start { .. }));
        assert!(strict_at > first_start, "{ops:?}");
        fuzz_model_sequence(&bytes);
    }

    /// The sequence fuzzing found: an announced tool-list change whose
    /// invalidation the store refused, then a restart, then a call of a
    /// sealed tool. The driver leaves that restart out, so the checkers hold
    /// the call to SD3 against a host that still knows of the change.
    #[test]
    fn no_restart_drops_an_uncommitted_tool_list_change() {
        let mut d = Driver::new();
        for op in [
            Op::Start {
                sandbox: 0,
                policy: 0,
                tools: 0,
            },
            Op::Fault { point: 2, times: 0 },
            Op::ChangeTool {
                tool: 1,
                announce: true,
            },
            Op::Restart,
            Op::ToolCall {
                instance: 0,
                tool: 0,
                arguments: 0,
            },
        ] {
            d.step(&op);
        }
        assert!(
            !d.world
                .history
                .iter()
                .any(|e| matches!(e.kind, StepKind::Restart)),
            "the restart was left out"
        );
        assert!(d.violations().is_empty(), "{:?}", d.violations());
    }

    #[test]
    fn seeds_reach_the_states_they_are_named_after() {
        let run = |ops: &[Op]| {
            let mut d = Driver::new();
            for op in ops {
                d.apply(op);
            }
            d
        };
        let seeds: std::collections::BTreeMap<_, _> = model_seeds().into_iter().collect();
        let d = run(&seeds["ceiling_exceeded"]);
        let StepKind::Action { result: Ok(r), .. } = &d.world.history.last().unwrap().kind else {
            panic!("the delegation answered");
        };
        assert_eq!(r.reason, Some(DenyReason::CeilingExceeded));
        let d = run(&seeds["start_delegate_turn"]);
        assert!(
            d.instances.len() >= 2,
            "a child was admitted: {:?}",
            d.instances
        );
        let d = run(&seeds["receipt_expiry_and_replay"]);
        assert_eq!(d.receipts.len(), 2, "both receipts were issued");
    }

    #[test]
    fn a_broken_world_makes_the_sequence_target_panic() {
        // The assertion in fuzz_model_sequence must be reachable: doctor a
        // history the way a host that hides a refused child would.
        let mut d = Driver::new();
        for op in &model_seeds()[1].1 {
            d.apply(op);
        }
        d.world
            .history
            .last_mut()
            .unwrap()
            .evidence
            .model_requests
            .insert("inst-99".into(), 1);
        assert!(
            d.violations().iter().any(|v| v.id == InvariantId::ZC2),
            "{:#?}",
            d.violations()
        );
    }

    /// The committed digest seeds: tool definitions, key-order and number edge cases.
    const DIGEST_SEEDS: &[(&str, &str)] = &[
        (
            "tool_definition.json",
            r#"{"name":"probe.read","description":"read","inputSchema":{"type":"object"},"annotations":{"x-delegation-class":"read"}}"#,
        ),
        (
            "key_order.json",
            r#"{"b":1,"a":{"z":[1,{"y":2,"x":3}],"\u00e9":0,"\ud83d\ude00":"e"}}"#,
        ),
        (
            "numbers.json",
            r#"[0,-0,1e21,4.50,1e-7,9007199254740991,-9007199254740991,0.1,2.5e17]"#,
        ),
        (
            "strings.json",
            r#"["\u0000\u001f\"\\/","\u2028\u2029","a\tb"]"#,
        ),
        ("duplicate_key.json", r#"{"a":1,"a":2}"#),
        ("unsafe_integer.json", r#"{"n":9007199254740993}"#),
    ];

    #[test]
    fn committed_digest_seeds_exist_and_hold() {
        for (name, text) in DIGEST_SEEDS {
            let bytes = committed_seed("digest", name, text.as_bytes());
            assert_eq!(bytes, text.as_bytes(), "{name}");
            fuzz_digest(&bytes);
        }
        // Refused inputs are skipped, not asserted on.
        fuzz_digest(b"\xff\xfe");
        fuzz_digest(b"{");
    }

    #[test]
    fn reversing_keys_changes_the_text_but_not_the_digest() {
        let value = parse_strict(DIGEST_SEEDS[1].1).unwrap();
        let mut reversed = String::new();
        write_keys_reversed(&value, &mut reversed);
        assert_ne!(reversed, serde_json::to_string(&value).unwrap());
        let back = parse_strict(&reversed).unwrap();
        assert_eq!(back, value);
        assert_eq!(digest_value(&back), digest_value(&value));
    }

    #[test]
    fn a_large_integral_double_is_the_only_tolerated_reparse_failure() {
        // 2.5e17 canonicalises to an integer literal beyond 2^53 (documented);
        // fuzz_digest must accept it rather than report it.
        fuzz_digest(b"[2.5e17]");
        assert!(matches!(
            parse_strict(&canonical_json(&parse_strict("2.5e17").unwrap()).unwrap()),
            Err(DefinitionError::IntegerOutOfRange { .. })
        ));
    }
}
