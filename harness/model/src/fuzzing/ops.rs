//! The fuzzer's operations: the [`Op`] alphabet, the values its indexes pick from, and the byte encoding the corpora are written in.

use arbitrary::{Arbitrary, Unstructured};
use serde_json::Value;

use super::written::*;
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
    /// A turn of `instance` whose model answers with one of its own
    /// lifecycle tools (codex's `send_input`, `resume_agent`, `close_agent`,
    /// `wait_agent`) on another instance: `call % 5` is send input, resume,
    /// resume with input, close, wait. The reply names its target, which the
    /// translation writes as the target's alias.
    ModelLifecycle {
        instance: u8,
        target: u8,
        call: u8,
    },
    /// The automatic approval path in one operation: automatic approval on
    /// (if it is not), then `prelude % 5`: an elevated or a stale risk score
    /// for the instance, a decision-write fault or the crash after the
    /// decision's commit armed once, or nothing; then a tool call; with no
    /// prelude, automatic approval off again after the call (its committed
    /// decisions must stay decided). Each is a step of its own; apart, the
    /// four operations rarely meet in this order.
    AutoCall {
        instance: u8,
        tool: u8,
        arguments: u8,
        prelude: u8,
    },
    /// An exact-call grant and its near misses in one operation: a tool
    /// call with the `first` of [`arguments`], an exact-call allow of the
    /// approval request it raised (if it raised one), then the same tool
    /// with the `second`: equal under RFC 8785, or one code point, one
    /// path segment apart.
    GrantCall {
        instance: u8,
        tool: u8,
        first: u8,
        second: u8,
    },
    /// A receipt's life in one operation: `parent` prepares a receipt, then
    /// by `then % 7` (see [`ReceiptThen`]) it is consumed twice; one of the
    /// tools it seals (`tool`) is redefined before it is consumed; the clock
    /// is set one millisecond before, at or after its expiry before it is
    /// consumed; it is consumed once; or it is presented with an id
    /// nobody issued. Apart, a preparation, a consumption
    /// and a redefinition or a deadline rarely meet on the same receipt.
    ReceiptUse {
        parent: u8,
        then: u8,
        tool: u8,
    },
    /// A task capability's life in one operation: issued to `agent` for
    /// `task` with `tools` (probe.read always among them), valid a minute,
    /// called once as bound with call id `c0`, then by `then % 6` (see
    /// [`CapabilityThen`]): the same call retried, revoked and called again,
    /// called at its expiry instant, called for a task one code point off,
    /// called by another agent, or called while its revoke is sent at once.
    CapabilityUse {
        agent: u8,
        task: u8,
        tools: u8,
        then: u8,
    },
    /// A tool the parent sealed redefined silently (by `tool`, among its
    /// sealed tools other than the read probe), then a delegation from
    /// `parent` whose request names every tool the parent sealed, mostly
    /// with the role whose default keeps only the read probe (see
    /// [`drift_role`]): the drift check must look at what the request
    /// names, not at what the child's role default leaves it.
    DriftDelegate {
        parent: u8,
        tool: u8,
        role: u8,
    },
    /// The tool server serves a tool `instance` sealed (by `tool`) as the
    /// same definition written another way ([`written_form`] by `form`:
    /// key order, escapes, `10.0` or `1e1`), without announcing it; then
    /// `instance` calls it. Under RFC 8785 nothing changed: the call is no
    /// drift, and a seal taken after it is the canonical digest.
    RewriteTool {
        instance: u8,
        tool: u8,
        form: u8,
    },
    /// A delegation from `parent` whose request is written with byte-level
    /// boundary values, sent as written: a writable root of
    /// [`WRITTEN_ROOTS`] (`root % 8` beyond them: the parent's sandbox, and
    /// for 7 a target other than a local child, which no host here
    /// supports) and `probe.read` named as one of [`WRITTEN_NAMES`]
    /// (`name % 8` beyond them: the parent's tools).
    WrittenDelegate {
        parent: u8,
        root: u8,
        name: u8,
    },
    /// Two to four actions sent to the host at once, judged by
    /// linearizability ([`crate::linearizability`]) as a scenario's
    /// `concurrently` step is. By `what % 2`: `instance` prepares a receipt
    /// that is then consumed `2 + count % 3` times at once (RC1), or
    /// `1 + count % 3` follow-up turns of a live instance (picked by
    /// `instance`) race its close or cancel (TR4). Only where the rules
    /// decide every order: no fault armed and no external authorizer
    /// (which the rules leave out), else nothing is sent.
    Race {
        what: u8,
        instance: u8,
        count: u8,
    },
    /// A direct tool call by `instance` naming one of [`WRITTEN_NAMES`]
    /// (`name % 7`), sent byte for byte: a fullwidth letter, a zero-width
    /// space, a soft hyphen or a fullwidth full stop that a normalising
    /// lookup joins with the sealed `probe.read`, a Cyrillic look-alike and
    /// a longer name nothing joins, or the exact name (the control).
    LookAlikeCall {
        instance: u8,
        name: u8,
    },
    /// A clarification question in one operation: `instance` asks a person
    /// (`instance/ask`), then by `answer % 3` the person answers once,
    /// answers twice (the second is a replay), or not at all. No approval
    /// policy decides a question (PG4): under `never` it still reaches a person.
    Question {
        instance: u8,
        answer: u8,
    },
    /// An exact-call grant outliving a drift, in one operation: `instance`
    /// calls `tool` with the `arguments`-th of [`arguments`], the request
    /// it raises is allowed exactly, the tool is redefined silently, and
    /// the same call is made again: the grant covers the call but not the
    /// new definition (SD2 before PG).
    GrantDrift {
        instance: u8,
        tool: u8,
        arguments: u8,
    },
}

/// What a `ReceiptUse` operation does with the receipt it prepared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiptThen {
    /// Consumed, then consumed again: single use (RC1).
    ConsumeTwice,
    /// One of the tools it seals redefined, then consumed (SD1).
    RedefineSealed,
    /// The clock set `offset` ms after its expiry minus one (so one
    /// millisecond before, at, after), then consumed (RC2).
    AtExpiry { offset: u8 },
    /// Consumed once, plainly: the external authorizer's path (EA1).
    Consume,
    /// Consumed with its id replaced by one never issued
    /// ([`NEVER_ISSUED_RECEIPT`], a scenario's `@unknown`): RC4's missing receipt.
    ConsumeNeverIssued,
}

/// The id a `ReceiptUse` presents for a receipt nobody issued.
pub const NEVER_ISSUED_RECEIPT: &str = "rcpt-never-issued";

impl ReceiptThen {
    pub fn of(then: u8) -> ReceiptThen {
        match then % 7 {
            0 => ReceiptThen::ConsumeTwice,
            1 => ReceiptThen::RedefineSealed,
            n @ 2..=4 => ReceiptThen::AtExpiry { offset: n - 2 },
            5 => ReceiptThen::Consume,
            _ => ReceiptThen::ConsumeNeverIssued,
        }
    }
}

/// What a `CapabilityUse` operation does after the first, bound call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapabilityThen {
    /// The same call again, same call id: the kept outcome (TC5).
    Retry,
    /// Revoked, then called with no call id (TC2).
    RevokeAndCall,
    /// The clock set to its expiry instant, then called (TC3).
    CallAtExpiry,
    /// Called for a task one code point off or normalising alike (TC1).
    OtherTask,
    /// Called by another agent (TC1).
    OtherAgent,
    /// Called again while its revoke is sent at the same moment (TC2): a
    /// race, sent only where the race rules decide it (see [`Op::Race`]).
    RaceRevoke,
}

impl CapabilityThen {
    pub fn of(then: u8) -> CapabilityThen {
        [
            CapabilityThen::Retry,
            CapabilityThen::RevokeAndCall,
            CapabilityThen::CallAtExpiry,
            CapabilityThen::OtherTask,
            CapabilityThen::OtherAgent,
            CapabilityThen::RaceRevoke,
        ][then as usize % 6]
    }
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
            Op::ModelLifecycle { .. } => "model_lifecycle",
            Op::AutoCall { .. } => "auto_call",
            Op::GrantCall { .. } => "grant_call",
            Op::ReceiptUse { .. } => "receipt_use",
            Op::CapabilityUse { .. } => "capability_use",
            Op::DriftDelegate { .. } => "drift_delegate",
            Op::RewriteTool { .. } => "rewrite_tool",
            Op::WrittenDelegate { .. } => "written_delegate",
            Op::Race { .. } => "race",
            Op::LookAlikeCall { .. } => "look_alike_call",
            Op::Question { .. } => "question",
            Op::GrantDrift { .. } => "grant_drift",
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
        "model_lifecycle",
        "auto_call",
        "grant_call",
        "receipt_use",
        "capability_use",
        "drift_delegate",
        "rewrite_tool",
        "written_delegate",
        "race",
        "look_alike_call",
        "question",
        "grant_drift",
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

/// The role of a `DriftDelegate`: three times in four the one whose
/// default keeps only the read probe (so a drifted tool the request names
/// is one the role default drops), else one of [`ROLES`].
pub fn drift_role(role: u8) -> u8 {
    if role % 4 == 3 { role / 4 } else { 2 }
}

/// The role defaults every fuzzed host is configured with (CE3).
pub fn role_defaults() -> std::collections::BTreeMap<String, AuthorityRequest> {
    let read_only = AuthorityRequest {
        sandbox: Some(Sandbox::ReadOnly.into()),
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
pub(super) const OP_VARIANTS: u64 = 37;

/// Longest sequence one fuzz input is decoded into. Checking every invariant
/// over the whole history after every step costs quadratic time; 48 steps
/// covers delegation chains, restarts and approval round trips while keeping
/// an input in the tens of microseconds.
pub const MAX_OPS: usize = 48;

pub(super) const TOOLS: [&str; 3] = ["probe.read", "probe.write", "probe.spawn"];

/// A probe tool's definition: with a non-ASCII description, a `.` in its
/// name and an integral number in its schema, so that each of
/// [`written_form`]'s forms writes it as other bytes than its canonical text.
pub fn probe_tool(name: &str, class: &str) -> Value {
    serde_json::json!({
        "name": name,
        "description": format!("{name} for tests, caf\u{e9}"),
        "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "maximum": 10}}},
        "annotations": {"x-delegation-class": class},
    })
}

/// The request of a `WrittenDelegate`: the role without a default, a
/// written root (or the parent's sandbox) and `probe.read` named as one of
/// [`WRITTEN_NAMES`] (or the parent's tools); `root % 8 == 7` asks for a
/// remote target.
pub(super) fn written_request(root: u8, name: u8) -> SpawnRequest {
    let mut request = spawn_request(None, None, 0);
    if root % 8 == 7 {
        request.target = Some("ssh://build-host".into());
    }
    request.authority.sandbox =
        WRITTEN_ROOTS
            .get(root as usize % 8)
            .map(|root| RequestedSandbox::WorkspaceWrite {
                writable_roots: vec![root.to_string()],
                network: false,
            });
    request.authority.tools = WRITTEN_NAMES
        .get(name as usize % 8)
        .map(|name| vec![name.to_string()]);
    request
}

pub(super) fn sandbox(i: u8) -> Sandbox {
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

pub(super) fn policy(i: u8) -> ApprovalPolicy {
    [
        ApprovalPolicy::Never,
        ApprovalPolicy::Untrusted,
        ApprovalPolicy::OnRequest,
    ][i as usize % 3]
        .clone()
}

pub(super) fn tool_subset(mask: u8) -> Vec<String> {
    TOOLS
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, t)| t.to_string())
        .collect()
}

pub(super) fn spawn_request(
    sandbox_choice: Option<u8>,
    tools: Option<u8>,
    role: u8,
) -> SpawnRequest {
    SpawnRequest {
        role: ROLES[role as usize % ROLES.len()].into(),
        task: "CHILD_TASK".into(),
        authority: AuthorityRequest {
            sandbox: sandbox_choice.map(|c| sandbox(c).into()),
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

/// The lifecycle call of a `ModelLifecycle` operation's `call`, on `target`.
pub fn lifecycle_call(call: u8, target: String) -> LifecycleCall {
    // A plain input: a marker here would run a spawn or a call inside the
    // target's turn, which the translation cannot bind.
    let input = || Some("hello".to_string());
    let (op, message) = match call % 5 {
        0 => (LifecycleOp::SendInput, input()),
        1 => (LifecycleOp::Resume, None),
        2 => (LifecycleOp::Resume, input()),
        3 => (LifecycleOp::Close, None),
        _ => (LifecycleOp::Wait, None),
    };
    LifecycleCall {
        op,
        target,
        message,
    }
}

/// The marker of the `n`th scripted lifecycle reply: no marker contains
/// another (`LIFECYCLE-1-` is not in `LIFECYCLE-11-`) or the driver's
/// `SPAWN`, `CALL`, `BREAK`.
pub fn lifecycle_marker(n: usize) -> String {
    format!("LIFECYCLE-{n}-")
}

/// The text of every generated clarification question.
pub const QUESTION: &str = "Which branch should this cover?";

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
                sandbox: Some(Sandbox::ReadOnly.into()),
                ..AuthorityRequest::default()
            },
        },
    }
}

/// The task of [`TASKS`] that differs from `task` by one code point or
/// only in normalisation.
pub(super) fn other_task(task: &str) -> String {
    let i = TASKS.iter().position(|t| *t == task).unwrap_or(0);
    TASKS[[3, 0, 3, 2][i]].to_string()
}

pub(super) fn pick<T: Clone>(items: &[T], i: u8) -> Option<T> {
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

/// The configuration a fuzzed host runs `ops` with: an external authorizer
/// when any operation scripts one, strict mode when any switches it on.
pub fn configuration_for(ops: &[Op]) -> Configuration {
    let authorizer = ops.iter().any(|o| matches!(o, Op::Authorizer { .. }));
    fuzz_configuration(authorizer, ops.contains(&Op::Strict))
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
            Op::ModelLifecycle {
                instance,
                target,
                call,
            } => (25, vec![*instance, *target, *call]),
            Op::AutoCall {
                instance,
                tool,
                arguments,
                prelude,
            } => (26, vec![*instance, *tool, *arguments, *prelude]),
            Op::GrantCall {
                instance,
                tool,
                first,
                second,
            } => (27, vec![*instance, *tool, *first, *second]),
            Op::ReceiptUse { parent, then, tool } => (28, vec![*parent, *then, *tool]),
            Op::CapabilityUse {
                agent,
                task,
                tools,
                then,
            } => (29, vec![*agent, *task, *tools, *then]),
            Op::DriftDelegate { parent, tool, role } => (30, vec![*parent, *tool, *role]),
            Op::RewriteTool {
                instance,
                tool,
                form,
            } => (31, vec![*instance, *tool, *form]),
            Op::WrittenDelegate { parent, root, name } => (32, vec![*parent, *root, *name]),
            Op::Race {
                what,
                instance,
                count,
            } => (33, vec![*what, *instance, *count]),
            Op::LookAlikeCall { instance, name } => (34, vec![*instance, *name]),
            Op::Question { instance, answer } => (35, vec![*instance, *answer]),
            Op::GrantDrift {
                instance,
                tool,
                arguments,
            } => (36, vec![*instance, *tool, *arguments]),
        };
        // The derive picks variant `(tag * OP_VARIANTS) >> 32` from a
        // little-endian u32 tag; the smallest tag mapping to `index` is exact.
        let tag = ((index << 32).div_ceil(OP_VARIANTS)) as u32;
        out.extend(tag.to_le_bytes());
        out.extend(fields);
    }
    out
}
