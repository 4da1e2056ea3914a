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
    ToolCall {
        instance: u8,
        tool: u8,
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
    Authorizer {
        allow: bool,
    },
    /// Delivers event `evt-{event % 4}`: few distinct ids, so replays happen.
    Event {
        event: u8,
        instance: u8,
    },
    Wait {
        instance: u8,
    },
}

/// Number of [`Op`] variants; the derived decoder picks a variant from a u32 tag scaled by it.
const OP_VARIANTS: u64 = 19;

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
        role: ["worker", "reviewer"][role as usize % 2].into(),
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

fn pick<T: Clone>(items: &[T], i: u8) -> Option<T> {
    (!items.is_empty()).then(|| items[i as usize % items.len()].clone())
}

/// The world plus what it has handed out so far, to resolve indexes.
pub struct Driver {
    pub world: World,
    instances: Vec<String>,
    receipts: Vec<(Value, SpawnRequest, String)>,
    authorizer_on: bool,
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
        Driver::with_configuration(Configuration {
            receipt_ttl_ms: 60_000,
            ..Configuration::default()
        })
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
            authorizer_on,
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
        self.note(result.as_ref());
    }

    fn instance(&self, i: u8) -> String {
        // An id that was never handed out: the host must refuse it, not panic.
        pick(&self.instances, i).unwrap_or_else(|| "inst-missing".into())
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
            Op::ToolCall { instance, tool } => self.act(Action::ToolCall {
                instance: self.instance(*instance),
                tool: TOOLS[*tool as usize % 3].into(),
                arguments: json!({"n": tool % 2}),
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
            Op::Authorizer { allow } => {
                if !self.authorizer_on {
                    self.authorizer_on = true;
                    self.act(Action::Configure(Configuration {
                        authorizer_required: true,
                        ..self.world.state.config.clone()
                    }));
                }
                let now = self.world.state.now;
                self.world.change(match (*allow, self.bound_allows) {
                    (true, true) => SimChange::AuthorizerAllows,
                    // A fresh receipt id per answer: replaying one is a different test.
                    (true, false) => SimChange::Authorizer(AuthorizerAnswer::Body(
                        json!({"version": "1", "decision": "allow", "decided_at": now,
                               "receipt": {"id": format!("authz-{now}-{}", self.world.history.len()),
                                           "binding": "unknown", "expires_at": now + 1000}})
                        .to_string(),
                    )),
                    (false, _) => SimChange::Authorizer(AuthorizerAnswer::Body(
                        json!({"version": "1", "decision": "deny"}).to_string(),
                    )),
                })
            }
            Op::Event { event, instance } => self.act(Action::DeliverEvent {
                event: format!("evt-{}", event % 4),
                instance: self.instance(*instance),
                kind: "completed".into(),
            }),
            Op::Wait { instance } => {
                let deadline = self.world.state.now + 1000;
                self.act(Action::Wait {
                    instance: self.instance(*instance),
                    deadline,
                })
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
            Op::ToolCall { instance, tool } => (3, vec![*instance, *tool]),
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
            Op::Authorizer { allow } => (16, vec![*allow as u8]),
            Op::Event { event, instance } => (17, vec![*event, *instance]),
            Op::Wait { instance } => (18, vec![*instance]),
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
    for op in &ops {
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
                    Op::Authorizer { allow: true },
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
                    Op::Authorizer { allow: false },
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
