//! A simulated world around the state machine: the model's own host, with simulated observers.
//!
//! It plays the reference host's sequence (admission, authorizer, commit,
//! the child's first turn; turn, reply, tool call or spawn) against an
//! in-memory journal, a scripted model, a mutable tool list and a scripted
//! authorizer, and records the history the invariant checkers read, with the
//! evidence an honest observer would have seen. It is the oracle for property
//! tests and differential fuzzing: same inputs, same history.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::digest::ToolDefinition;
use crate::sequence::{self, AuthorizerCall, Core, Effect, Effects, ModelReply, ModelTurn, Stop};
use crate::side_channels::{
    AuthorizationDecision, AuthorizationReceipt, AuthorizationReply, RECEIPT_TTL_MS,
};
use crate::state::{AuthorizerAnswer, Denial, HostState, LiveTools, MemoryJournal};
use crate::wire::*;

/// What the simulated model answers to an input containing a marker.
#[derive(Clone, Debug, PartialEq)]
pub enum SimReply {
    Message(String),
    ToolCall {
        tool: String,
        arguments: Value,
    },
    Spawn(SpawnRequest),
    /// A lifecycle tool call on a child, by the child's model id.
    Lifecycle(LifecycleCall),
    Fail,
}

/// A change the harness makes to the world between actions.
#[derive(Clone, Debug, PartialEq)]
pub enum SimChange {
    /// Change a tool's definition behind the same name; optionally announce it.
    ChangeTool {
        name: String,
        definition: Value,
        announce: bool,
    },
    RemoveTool {
        name: String,
        announce: bool,
    },
    /// Script the authorizer's next answers.
    Authorizer(AuthorizerAnswer),
    /// The authorizer allows every request with a fresh receipt bound to
    /// it, as the harness's scripted authorizer does in its `allow` mode: an
    /// answer that depends on the request, which a fixed body cannot be.
    AuthorizerAllows,
    /// The authorizer answers every request as the harness's scripted
    /// authorizer does in this mode, bound to the request it answers: the
    /// allows (plain, narrowed, widening), a replayed receipt id, an expired
    /// or mismatched receipt, an unsupported version. Other modes answer
    /// the same whatever is asked: script them with [`SimChange::Authorizer`].
    AuthorizerAnswers(AuthorizerBehaviour),
    /// Announce `notifications/tools/list_changed` alone, apart from a change.
    AnnounceListChanged,
}

pub struct World {
    pub state: HostState,
    pub journal: MemoryJournal,
    /// The simulated tool server's definitions, digested once when they
    /// change, and shared: every action lends them to the sequence, and a
    /// sequence of operations starts from the same few.
    pub tools: Arc<LiveTools>,
    pub replies: Vec<(String, SimReply)>,
    pub authorizer: AuthorizerAnswer,
    /// Set by [`SimChange::AuthorizerAllows`] and [`SimChange::AuthorizerAnswers`]:
    /// `authorizer` is then unused.
    authorizer_answers: Option<AuthorizerBehaviour>,
    /// Receipts the allowing authorizer issued, for fresh ids.
    authorizer_issued: u64,
    /// The id of its last allow's receipt, which a replay repeats.
    authorizer_last_receipt: Option<String>,
    pub history: Vec<HistoryEntry>,
    list_changed_pending: bool,
    evidence: Evidence,
    crashed: bool,
    /// The latest snapshot of the state, shared by the entries recorded
    /// while nothing changed it (an observation right after a step).
    latest_observed: Option<Arc<Observed>>,
}

impl World {
    pub fn new(tools: Vec<Value>, replies: Vec<(String, SimReply)>) -> World {
        World {
            state: HostState::new("world-seal-key".into()),
            journal: MemoryJournal::default(),
            tools: Arc::new(
                tools
                    .into_iter()
                    .filter_map(|t| ToolDefinition::from_value(t).ok())
                    .map(|d| (d.name.clone(), d))
                    .collect(),
            ),
            replies,
            authorizer: AuthorizerAnswer::Unavailable("no authorizer scripted".into()),
            authorizer_answers: None,
            authorizer_issued: 0,
            authorizer_last_receipt: None,
            // An entry holds its action and answer inline: growing from
            // empty moved every entry several times, a twentieth of a fuzzed
            // sequence's instructions (a sequence of the committed seeds
            // records about 23 entries).
            history: Vec::with_capacity(32),
            list_changed_pending: false,
            evidence: Evidence::default(),
            crashed: false,
            latest_observed: None,
        }
    }

    /// A fresh snapshot of the state, kept for the entries that follow
    /// while nothing changes it.
    fn snapshot(&mut self) -> Arc<Observed> {
        let observed = Arc::new(self.state.observe());
        self.latest_observed = Some(observed.clone());
        observed
    }

    /// Applies one change to the simulated observers and records it.
    pub fn change(&mut self, change: SimChange) {
        let description = format!("{change:?}");
        let mut recorded = Vec::new();
        match change {
            SimChange::ChangeTool {
                name,
                definition,
                announce,
            } => {
                let description_only = self.tools.get(&name).is_some_and(|old| {
                    let mut a = old.raw.clone();
                    let mut b = definition.clone();
                    a["description"] = Value::Null;
                    b["description"] = Value::Null;
                    a == b
                });
                // Digested once, for the record and the listing alike: each
                // digest is a canonical JSON write and two hashes.
                let redefined = ToolDefinition::from_value(definition);
                recorded.push(Some(WorldChange::ToolRedefined {
                    tool: name.clone(),
                    digest: redefined
                        .as_ref()
                        .map(|d| d.digest.clone())
                        .unwrap_or_default(),
                    previous_digest: self.tools.get(&name).map(|old| old.digest.clone()),
                    description_only,
                }));
                match redefined {
                    Ok(d) => {
                        Arc::make_mut(&mut self.tools).insert(name, d);
                    }
                    // An undigestable definition is one the host cannot list: as good as removed.
                    Err(_) => {
                        Arc::make_mut(&mut self.tools).remove(&name);
                    }
                }
                self.list_changed_pending |= announce;
            }
            SimChange::RemoveTool { name, announce } => {
                recorded.push(Some(WorldChange::ToolRemoved { tool: name.clone() }));
                Arc::make_mut(&mut self.tools).remove(&name);
                self.list_changed_pending |= announce;
            }
            SimChange::Authorizer(answer) => {
                self.authorizer = answer;
                self.authorizer_answers = None;
            }
            SimChange::AuthorizerAllows => {
                self.authorizer_answers = Some(AuthorizerBehaviour::Allow)
            }
            SimChange::AuthorizerAnswers(behaviour) => self.authorizer_answers = Some(behaviour),
            SimChange::AnnounceListChanged => self.list_changed_pending = true,
        }
        if self.list_changed_pending {
            recorded.push(Some(WorldChange::ToolListChanged));
        }
        if recorded.is_empty() {
            recorded.push(None);
        }
        let observed = self.snapshot();
        for change in recorded {
            self.history.push(HistoryEntry {
                step: self.history.len(),
                kind: StepKind::World {
                    description: description.clone(),
                    change,
                },
                evidence: Evidence::default(),
                observed: Some(observed.clone()),
            });
        }
    }

    /// Whether the scripted authorizer's last allow admitted a child: its
    /// replay mode repeats that allow's receipt id (a fresh one when there is
    /// none), and only a receipt that admitted a child is spent. One the host
    /// refused when it first came (a widening constraint, a wrong version) was
    /// never used, so presenting it again is no replay.
    pub fn authorizer_last_receipt_used(&self) -> bool {
        self.authorizer_last_receipt
            .as_ref()
            .is_some_and(|r| self.state.used_authorizations.contains(r))
    }

    /// Whether an announced tool-list change is held in memory only: its
    /// invalidation's write failed, so a restart now would drop it.
    pub fn list_changed_uncommitted(&self) -> bool {
        self.list_changed_pending
    }

    /// A restart: the state is rebuilt from what the journal committed.
    pub fn restart(&mut self) {
        let rows = self.journal.rows();
        self.state = HostState::restore(&rows).expect("the model's own journal restores");
        self.crashed = false;
        // A notification never committed dies with the process that received
        // it; the restarted host opens a new session and lists afresh.
        self.list_changed_pending = false;
        let observed = self.snapshot();
        self.history.push(HistoryEntry {
            step: self.history.len(),
            kind: StepKind::Restart,
            evidence: Evidence::default(),
            observed: Some(observed),
        });
    }

    /// Applies one action as the reference host would, and records the entry.
    pub fn apply(&mut self, action: &Action) -> &HistoryEntry {
        self.evidence = Evidence::default();
        // An observation changes nothing unless it takes in an announcement.
        let changes_state = !matches!(action, Action::Observe) || self.list_changed_pending;
        // A crashed host answers nothing until it is restarted.
        let result = if self.crashed {
            Err("host crashed".to_string())
        } else {
            let r = self.perform(action);
            if self.crashed {
                Err("host crashed".to_string())
            } else {
                Ok(r)
            }
        };
        let evidence = std::mem::take(&mut self.evidence);
        let observed = match &self.latest_observed {
            Some(unchanged) if !changes_state => {
                // `state` is public: a debug build (the tests) makes sure
                // nobody changed it behind the world's back.
                debug_assert_eq!(**unchanged, self.state.observe(), "stale snapshot");
                unchanged.clone()
            }
            _ => self.snapshot(),
        };
        self.history.push(HistoryEntry {
            step: self.history.len(),
            kind: StepKind::Action {
                action: action.clone(),
                result,
            },
            evidence,
            observed: Some(observed),
        });
        self.history.last().expect("just pushed")
    }

    fn perform(&mut self, action: &Action) -> ActionResult {
        // Shared rather than cloned: no action changes the tool server's
        // list, and a clone of every definition, JSON values and all, per
        // action was among the largest allocation costs of the fuzz target.
        let mut observers = SimObservers {
            live: self.tools.clone(),
            replies: &self.replies,
            authorizer: &self.authorizer,
            authorizer_answers: self.authorizer_answers.as_ref(),
            authorizer_issued: &mut self.authorizer_issued,
            authorizer_last_receipt: &mut self.authorizer_last_receipt,
            list_changed_pending: &mut self.list_changed_pending,
            evidence: &mut self.evidence,
        };
        let mut core = Core {
            state: &mut self.state,
            journal: &mut self.journal,
        };
        let performed = sequence::run_ready(sequence::perform(&mut core, &mut observers, action));
        drop(observers);
        match performed {
            Ok(result) => result,
            Err(Stop::Crashed) => {
                self.crashed = true;
                ActionResult::ok()
            }
            Err(Stop::Failed(detail)) => {
                unreachable!("the simulated observers never fail: {detail}")
            }
        }
    }
}

/// The world's answers to what the sequence needs: the scripted model, the
/// simulated tool server and authorizer, and the evidence an honest observer records.
struct SimObservers<'w> {
    live: Arc<LiveTools>,
    replies: &'w [(String, SimReply)],
    authorizer: &'w AuthorizerAnswer,
    authorizer_answers: Option<&'w AuthorizerBehaviour>,
    authorizer_issued: &'w mut u64,
    authorizer_last_receipt: &'w mut Option<String>,
    list_changed_pending: &'w mut bool,
    evidence: &'w mut Evidence,
}

impl Effects for SimObservers<'_> {
    /// A `list_changed` whose invalidation cannot be committed stays pending,
    /// as the reference host keeps it.
    fn take_list_changed(&mut self, core: &mut Core<'_>) -> Result<(), Denial> {
        if *self.list_changed_pending {
            core.state.tool_list_changed(core.journal)?;
            *self.list_changed_pending = false;
        }
        Ok(())
    }

    fn live_tools(&mut self) -> Effect<'_, Result<Arc<LiveTools>, String>> {
        Box::pin(std::future::ready(Ok(self.live.clone())))
    }

    fn model_turn<'a>(&'a mut self, turn: ModelTurn<'a>) -> Effect<'a, ModelReply> {
        *self
            .evidence
            .model_requests
            .entry(turn.instance.to_string())
            .or_default() += 1;
        self.evidence.model_visible_tools.insert(
            turn.instance.to_string(),
            turn.tools.iter().map(|d| d.digest.clone()).collect(),
        );
        let reply = self
            .replies
            .iter()
            .find(|(marker, _)| turn.input.contains(marker.as_str()))
            .map(|(_, r)| r.clone())
            .unwrap_or(SimReply::Message("ok".into()));
        Box::pin(std::future::ready(match reply {
            SimReply::Message(text) => ModelReply::Message(text),
            SimReply::ToolCall { tool, arguments } => ModelReply::ToolCall { tool, arguments },
            SimReply::Spawn(request) => ModelReply::Spawn(request),
            SimReply::Lifecycle(call) => ModelReply::Lifecycle(call),
            SimReply::Fail => ModelReply::Failed("model endpoint failed".into()),
        }))
    }

    fn call_handler<'a>(
        &'a mut self,
        tool: &'a str,
        arguments: &'a Value,
    ) -> Effect<'a, Result<String, String>> {
        self.evidence.handler_calls.push(HandlerCall {
            tool: tool.to_string(),
            arguments: arguments.clone(),
        });
        Box::pin(std::future::ready(Ok(format!("{tool} ran"))))
    }

    fn authorize<'a>(&'a mut self, call: AuthorizerCall<'a>) -> Effect<'a, AuthorizerAnswer> {
        self.evidence.authorizer_calls += 1;
        let answer = match self.authorizer_answers {
            Some(behaviour) => authorizer_reply(
                behaviour,
                call.commitment,
                call.spawn,
                call.now,
                (self.authorizer_issued, self.authorizer_last_receipt),
            )
            .unwrap_or_else(|| self.authorizer.clone()),
            None => self.authorizer.clone(),
        };
        Box::pin(std::future::ready(answer))
    }
}

/// A small tool definition for tests and fuzzing: `name`, with the given class annotation.
pub fn sample_tool(name: &str, class: &str) -> Value {
    json!({
        "name": name,
        "description": format!("{name} for tests"),
        "inputSchema": {"type": "object"},
        "annotations": {"x-delegation-class": class},
    })
}

/// What the harness's scripted authorizer answers in `behaviour` to a
/// request with this digest (`observers::authorizer`, `reply_for`), with its
/// count of receipts issued and its last allow's receipt id; `None` for the
/// modes whose answer does not depend on the request.
fn authorizer_reply(
    behaviour: &AuthorizerBehaviour,
    binding: &str,
    request: &SpawnRequest,
    now: Millis,
    (issued, last_receipt): (&mut u64, &mut Option<String>),
) -> Option<AuthorizerAnswer> {
    *issued += 1;
    let fresh = format!("authz-sim-{issued}");
    let mut receipt = AuthorizationReceipt {
        id: fresh.clone(),
        binding: binding.to_string(),
        expires_at: now + RECEIPT_TTL_MS,
    };
    let mut reply = AuthorizationReply::allow(receipt.clone(), now);
    match behaviour {
        AuthorizerBehaviour::Allow => {}
        AuthorizerBehaviour::AllowNarrowed { constraint } => {
            reply.constraints = Some(constraint.clone())
        }
        AuthorizerBehaviour::AllowWidening => {
            reply.constraints = Some(crate::authority::widening_constraint(&request.authority))
        }
        AuthorizerBehaviour::ReplayedReceipt => receipt.id = last_receipt.clone().unwrap_or(fresh),
        AuthorizerBehaviour::ExpiredReceipt => receipt.expires_at = now,
        AuthorizerBehaviour::MismatchedReceipt => {
            receipt.binding = crate::digest::sha256_hex(format!("not:{binding}").as_bytes())
        }
        AuthorizerBehaviour::UnsupportedVersion => reply.version = "99".to_string(),
        AuthorizerBehaviour::Deny => reply = AuthorizationReply::deny(None, now),
        AuthorizerBehaviour::Timeout
        | AuthorizerBehaviour::Unavailable
        | AuthorizerBehaviour::Malformed
        | AuthorizerBehaviour::LateAllow => return None,
    }
    if reply.decision == AuthorizationDecision::Allow {
        *last_receipt = Some(receipt.id.clone());
        reply.receipt = Some(receipt);
    }
    let body = serde_json::to_string(&reply).expect("an authorizer reply serialises");
    Some(AuthorizerAnswer::Body(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parent, its child from a scripted spawn, and replies that call a
    /// lifecycle tool on the child by the id the spawn gave it.
    fn parent_and_child() -> (World, String) {
        let spawn = SimReply::Spawn(SpawnRequest {
            role: "worker".into(),
            task: "CHILD_TASK".into(),
            authority: Default::default(),
            model: None,
            target: None,
            worktree: false,
        });
        let mut world = World::new(vec![], vec![("SPAWN".to_string(), spawn)]);
        let start: StartRequest = serde_json::from_value(
            json!({"role": "lead", "sandbox": "read-only", "approval_policy": "never", "cwd": "/w"}),
        )
        .unwrap();
        world.apply(&Action::Start(start));
        let root = world.state.instances.keys().next().unwrap().clone();
        let spawned = world.apply(&Action::Turn {
            instance: root.clone(),
            input: "SPAWN".into(),
        });
        let StepKind::Action { result: Ok(r), .. } = &spawned.kind else {
            panic!("{spawned:?}")
        };
        let Some(TurnReport::Spawn { spawn }) = &r.turn else {
            panic!("no spawn: {r:?}")
        };
        let child = spawn.instance.clone().expect("a child");
        assert_eq!(spawned.evidence.model_requests.get(&child), Some(&1));
        let call = |op, message: Option<&str>| {
            SimReply::Lifecycle(LifecycleCall {
                op,
                target: child.clone(),
                message: message.map(str::to_string),
            })
        };
        world.replies.extend([
            (
                "POKE".to_string(),
                call(LifecycleOp::SendInput, Some("MORE")),
            ),
            ("REOPEN".to_string(), call(LifecycleOp::Resume, None)),
            ("SHUT".to_string(), call(LifecycleOp::Close, None)),
        ]);
        (world, child)
    }

    /// A parent turn on `input`: what its lifecycle call came to, and the child's model requests.
    fn turn(world: &mut World, child: &str, input: &str) -> (ActionResult, u64) {
        let root = world
            .state
            .instances
            .values()
            .find(|i| i.parent.is_none())
            .map(|i| i.id.clone())
            .unwrap();
        let entry = world.apply(&Action::Turn {
            instance: root,
            input: input.into(),
        });
        let StepKind::Action { result: Ok(r), .. } = &entry.kind else {
            panic!("{entry:?}")
        };
        let requests = entry
            .evidence
            .model_requests
            .get(child)
            .copied()
            .unwrap_or(0);
        let Some(TurnReport::Lifecycle { lifecycle, .. }) = &r.turn else {
            panic!("not a lifecycle turn: {r:?}")
        };
        ((**lifecycle).clone(), requests)
    }

    #[test]
    fn a_lifecycle_call_runs_a_live_child_and_is_refused_on_a_closed_one() {
        let (mut world, child) = parent_and_child();
        let (sent, requests) = turn(&mut world, &child, "POKE");
        assert!(sent.is_ok(), "{sent:?}");
        assert_eq!(requests, 1, "send_input runs the child's turn");

        let (closed, requests) = turn(&mut world, &child, "SHUT");
        assert!(closed.is_ok(), "{closed:?}");
        assert_eq!(requests, 0);
        assert_eq!(world.state.instances[&child].state, LifecycleState::Closed);

        for input in ["REOPEN", "POKE"] {
            let (refused, requests) = turn(&mut world, &child, input);
            assert_eq!(
                refused.reason,
                Some(crate::DenyReason::InstanceTerminal),
                "{input}: {refused:?}"
            );
            assert_eq!(
                requests, 0,
                "{input}: no model request for the closed child"
            );
        }
        assert_eq!(world.state.instances[&child].state, LifecycleState::Closed);
        assert!(crate::invariants::check_all(&world.history).is_empty());
    }

    /// Answering a request nobody issued is denied as unknown and reports no
    /// tool call (there is none); answering a real one reports the call.
    #[test]
    fn an_answer_to_an_unknown_request_reports_no_tool_call() {
        let mut world = World::new(vec![sample_tool("fs.write", "file-write")], Vec::new());
        let entry = world.apply(&Action::Answer {
            request: "a-nobody-issued".into(),
            decision: Decision::Allow,
        });
        let StepKind::Action { result: Ok(r), .. } = &entry.kind else {
            panic!("answered: {entry:?}")
        };
        assert_eq!(r.reason, Some(crate::DenyReason::InstanceUnknown), "{r:?}");
        assert_eq!(r.tool_call, None, "{r:?}");

        let denied = crate::state::PlanEnd::Denied(crate::state::Denial {
            reason: crate::DenyReason::PolicyDenied,
            detail: String::new(),
        })
        .reply("fs.write");
        assert_eq!(
            denied.tool_call.map(|t| (t.tool, t.outcome)),
            Some(("fs.write".to_string(), ToolCallOutcome::Denied))
        );
    }
}
