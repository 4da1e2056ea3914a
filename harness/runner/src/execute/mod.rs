//! Runs one scenario against one host: fresh store and observers, the
//! handshake, the steps, the evidence, the expectations and the invariant
//! checkers after every step.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use delegation_host::{Host, HostError, HostLauncher};
use delegation_model::{
    Action, ActionResult, ApprovalState, Evidence, HistoryEntry, InvariantId, Millis, Observed,
    Receipt, StepKind, TurnReport, WorldChange,
};
use delegation_protocol::{Environment, InitializeParams, InitializeResult, PROTOCOL_VERSION};
use serde_json::{Value, json};

use crate::checks::{self, Checking, Violation};
use crate::events::{EventSink, RunEvent, StepSummary};
use crate::expect_check::{StepSeen, check_expect};
use crate::observer_set::{ObserverMark, ObserverSet, ObserverSetFactory, WorldStep};
use crate::provenance::{self, InferredCheck};
use crate::scenario::{
    AliasKind, Expect, LATEST_PENDING, ModelEndpointStep, Scenario, StepAction, Tamper, TamperOp,
    UNKNOWN_ALIAS,
};
use crate::verdict::{Failure, FailureKind};

mod bindings;
mod concurrent;
mod store_dir;

use store_dir::StoreDir;
pub use store_dir::remove_leftover_stores;

/// Knobs for executing scenarios.
#[derive(Clone, Debug)]
pub struct ExecOptions {
    /// Wall-time budget for one step (host call plus observation). A host that
    /// takes longer is an `error` verdict, not a hang of the whole run.
    pub step_deadline: Duration,
    /// Whether each step is written into the execution's transcript, which
    /// reports and snapshots read. Fuzzing reads only the verdict and leaves
    /// it out: it was a tenth of a fuzz case's CPU.
    pub transcript: bool,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            step_deadline: Duration::from_secs(30),
            transcript: true,
        }
    }
}

/// How one scenario ended, before controls and the expectations file are applied.
#[derive(Clone, Debug)]
pub enum RawOutcome {
    /// Every step ran; `failures` may be empty (pass) or not (fail).
    Completed,
    /// The scenario stopped early because a failure made later steps meaningless.
    Stopped,
    Unsupported(Vec<String>),
    Error {
        message: String,
        stderr_tail: String,
    },
    /// The harness failed (its observers, its store directory, its own
    /// resources): nothing is concluded about the host.
    HarnessError(String),
}

/// Everything one execution produced.
#[derive(Clone, Debug)]
pub struct Execution {
    pub outcome: RawOutcome,
    pub failures: Vec<Failure>,
    pub steps_run: usize,
    pub duration: Duration,
    /// One entry per step: action, reply, evidence counts and observed state,
    /// with the alias table needed to normalise it.
    pub transcript: Transcript,
    /// Checks that held only on values the adapter declared inferred
    /// (expectations and invariants); failures carry their own.
    pub held_on_inference: Vec<InferredCheck>,
    /// The host could not be started or did not answer `initialize`: the
    /// runner stops trying a host that does this several times in a row.
    pub start_failed: bool,
}

/// The raw transcript; [`crate::snapshot::normalise`] turns it into the snapshot form.
#[derive(Clone, Debug, Default)]
pub struct Transcript {
    pub steps: Vec<Value>,
    /// Host id to alias, in binding order.
    pub aliases: Vec<(String, String)>,
    /// Secrets that must never appear in any output (capability secrets, canaries).
    pub secrets: Vec<String>,
}

/// What a scenario's alias is bound to: a host id, and for receipts and
/// capabilities what the host handed out with it.
#[derive(Clone, Debug)]
pub struct Bound {
    pub id: String,
    pub receipt: Option<Receipt>,
    pub secret: Option<String>,
}

enum HostFault {
    Unsupported(String),
    Broken(String),
    /// The harness's own failure during the step: never the host's.
    Harness(String),
}

impl From<HostError> for HostFault {
    fn from(e: HostError) -> Self {
        match e {
            HostError::Unsupported { method } => HostFault::Unsupported(method),
            e @ HostError::HarnessResources(_) => HostFault::Harness(e.to_string()),
            other => HostFault::Broken(other.to_string()),
        }
    }
}

/// Why a host could not be brought up: the host's failure or the harness's.
struct StartFailure {
    message: String,
    stderr_tail: String,
    by_harness: bool,
}

impl StartFailure {
    fn host(message: String, stderr_tail: String) -> StartFailure {
        StartFailure {
            message,
            stderr_tail,
            by_harness: false,
        }
    }

    fn outcome(self) -> RawOutcome {
        if self.by_harness {
            RawOutcome::HarnessError(self.message)
        } else {
            RawOutcome::Error {
                message: self.message,
                stderr_tail: self.stderr_tail,
            }
        }
    }
}

/// How much longer than the step deadline the runner waits for a host call
/// before giving up itself: the subprocess host times out first and says
/// precisely why (a silent stdout, say); this bounds every other host.
const OUTER_DEADLINE_MARGIN: Duration = Duration::from_millis(500);

struct ScenarioRun<'a> {
    scenario: &'a Scenario,
    launcher: &'a dyn HostLauncher,
    options: &'a ExecOptions,
    store: &'a Path,
    world: Box<dyn ObserverSet>,
    host: Box<dyn Host>,
    capabilities: Vec<String>,
    aliases: BTreeMap<String, Bound>,
    clock: Option<Millis>,
    observed: Arc<Observed>,
    history: Vec<HistoryEntry>,
    /// History entries recorded for the setup (configure, clock, the
    /// authorizer's initial mode), not for a step of the scenario.
    setup_entries: usize,
    /// History entries beyond one per step: the further actions of concurrent steps.
    extra_entries: usize,
    failures: Vec<Failure>,
    /// Expectations that held only on values the adapter declared inferred.
    held_on_inference: Vec<InferredCheck>,
    /// The model's checkers for the scenario's ids (`delegation_model::invariants`,
    /// where each invariant is defined), fed each new history entry once.
    checking: Checking,
    seen_violations: BTreeSet<(InvariantId, usize, String)>,
    transcript: Transcript,
    canaries: Vec<String>,
    /// The model endpoint's rules as the scenario wrote them (aliases, not ids).
    rules: Vec<delegation_observers::ModelRule>,
    /// What `@unknown` resolves to in this run: drawn once, so every step
    /// naming it sends the same never-issued id and transcripts stay stable.
    unknown_id: String,
    /// What a host stopped for a restart logged last, for the restart's step.
    stopped_host_log: String,
}

/// Runs `scenario` once against a host from `launcher`, emitting `StepFinished` events.
pub async fn execute(
    scenario: &Scenario,
    launcher: &dyn HostLauncher,
    worlds: &dyn ObserverSetFactory,
    options: &ExecOptions,
    events: &EventSink,
) -> Execution {
    let started = Instant::now();
    let finish = |outcome, failures, steps_run, transcript| Execution {
        outcome,
        failures,
        steps_run,
        duration: started.elapsed(),
        transcript,
        held_on_inference: Vec::new(),
        start_failed: false,
    };

    let store = match tempfile::Builder::new()
        .prefix("delegation-store-")
        .tempdir_in(store_dir::store_parent())
    {
        Ok(dir) => StoreDir::new(dir),
        Err(e) => {
            return finish(
                RawOutcome::HarnessError(format!("cannot create a store directory: {e}")),
                vec![],
                0,
                Transcript::default(),
            );
        }
    };
    let mut world = match worlds.start(&scenario.setup).await {
        Ok(w) => w,
        Err(e) => {
            return finish(
                RawOutcome::HarnessError(format!("cannot start the observers: {e}")),
                vec![],
                0,
                Transcript::default(),
            );
        }
    };
    let (host, init) = match start_host(launcher, store.path(), world.as_ref(), options).await {
        Ok(pair) => pair,
        Err(failure) => {
            world.shutdown().await;
            return Execution {
                start_failed: !failure.by_harness,
                ..finish(failure.outcome(), vec![], 0, Transcript::default())
            };
        }
    };

    use delegation_protocol::capability::{Unmet, unmet};
    let missing: Vec<String> = unmet(&scenario.needs, &scenario.unless, &init.capabilities)
        .into_iter()
        .map(|reason| match reason {
            Unmet::Lacks(need) => need,
            // Read after "host lacks:" in every report.
            Unmet::Declares(property) => {
                format!("what this scenario asks of it: it declares `{property}`")
            }
        })
        .collect();
    let mut run = ScenarioRun {
        scenario,
        launcher,
        options,
        store: store.path(),
        world,
        host,
        capabilities: init.capabilities,
        aliases: BTreeMap::new(),
        clock: scenario.setup.clock,
        observed: Arc::default(),
        history: Vec::new(),
        setup_entries: 0,
        extra_entries: 0,
        failures: Vec::new(),
        held_on_inference: Vec::new(),
        checking: Checking::new(&scenario.checks),
        seen_violations: BTreeSet::new(),
        transcript: Transcript::default(),
        canaries: Vec::new(),
        rules: scenario.setup.model.clone(),
        // Derived from the scenario id, not random: a host may quote it in free
        // text (`detail`), which snapshots keep verbatim, so it must be stable.
        stopped_host_log: String::new(),
        unknown_id: format!(
            "never-issued-{}",
            &delegation_model::digest::sha256_hex(
                format!("delegation-harness @unknown {}", scenario.id).as_bytes()
            )[..24]
        ),
    };
    run.transcript
        .aliases
        .push((run.unknown_id.clone(), UNKNOWN_ALIAS.to_string()));
    if !missing.is_empty() {
        run.close().await;
        return finish(RawOutcome::Unsupported(missing), vec![], 0, run.transcript);
    }

    if let Some(mode) = &scenario.setup.authorizer {
        // The checkers must know how the authorizer answers from the start (EA2 to EA4).
        run.setup_entry(
            0,
            StepKind::World {
                description: format!(
                    "setup: the authorizer answers {}",
                    serde_json::to_string(mode).unwrap_or_default()
                ),
                change: Some(WorldChange::AuthorizerScripted {
                    behaviour: mode.clone(),
                }),
            },
            None,
        );
    }
    let outcome = match run.configure(0).await {
        Err(fault) => run.fault_outcome(fault, "configuring the host"),
        Ok(()) => run.steps(events).await,
    };
    let steps_run = run.history.len() - run.setup_entries - run.extra_entries;
    run.close().await;
    let held_on_inference = run.invariants_held_on_inference();
    let ScenarioRun {
        failures,
        transcript,
        ..
    } = run;
    Execution {
        held_on_inference,
        ..finish(outcome, failures, steps_run, transcript)
    }
}

/// Launches a host on `store`, completes the handshake and refuses another major protocol version.
async fn start_host(
    launcher: &dyn HostLauncher,
    store: &Path,
    world: &dyn ObserverSet,
    options: &ExecOptions,
) -> Result<(Box<dyn Host>, InitializeResult), StartFailure> {
    let outer = options.step_deadline + OUTER_DEADLINE_MARGIN;
    let mut host = match tokio::time::timeout(outer, launcher.launch(store)).await {
        Ok(Ok(host)) => host,
        Ok(Err(e @ HostError::HarnessResources(_))) => {
            return Err(StartFailure {
                message: format!("launch failed: {e}"),
                stderr_tail: String::new(),
                by_harness: true,
            });
        }
        Ok(Err(e)) => {
            return Err(StartFailure::host(
                format!("launch failed: {e}"),
                String::new(),
            ));
        }
        Err(_) => {
            return Err(StartFailure::host(
                format!(
                    "launch did not finish within {} ms",
                    options.step_deadline.as_millis()
                ),
                String::new(),
            ));
        }
    };
    let endpoints = world.endpoints();
    let params = InitializeParams {
        protocol_version: PROTOCOL_VERSION.to_string(),
        environment: Environment {
            model_endpoint: endpoints.model_endpoint,
            mcp_servers: endpoints.mcp_servers,
            authorizer: endpoints.authorizer,
            store_dir: store.display().to_string(),
            clock: "harness".into(),
        },
    };
    let init = match tokio::time::timeout(outer, host.initialize(params)).await {
        Ok(Ok(init)) => init,
        Ok(Err(e @ HostError::HarnessResources(_))) => {
            return Err(StartFailure {
                message: format!("initialize failed: {e}"),
                stderr_tail: host.stderr_tail(),
                by_harness: true,
            });
        }
        Ok(Err(e)) => {
            return Err(StartFailure::host(
                format!("initialize failed: {e}"),
                host.stderr_tail(),
            ));
        }
        Err(_) => {
            return Err(StartFailure::host(
                format!(
                    "no answer to `initialize` within {} ms",
                    options.step_deadline.as_millis()
                ),
                host.stderr_tail(),
            ));
        }
    };
    if major(&init.protocol_version) != major(PROTOCOL_VERSION) {
        let tail = host.stderr_tail();
        let _ = host.shutdown().await;
        return Err(StartFailure::host(
            format!(
                "host speaks protocol {} but this harness speaks {PROTOCOL_VERSION}: major versions must be equal",
                init.protocol_version
            ),
            tail,
        ));
    }
    Ok((host, init))
}

fn major(version: &str) -> &str {
    version.split('.').next().unwrap_or(version)
}

impl ScenarioRun<'_> {
    async fn call(&mut self, action: &Action) -> Result<ActionResult, HostFault> {
        let outer = self.options.step_deadline + OUTER_DEADLINE_MARGIN;
        match tokio::time::timeout(outer, self.host.call(action)).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(HostFault::Broken(format!(
                "no answer to `{}` within {} ms",
                action.method(),
                self.options.step_deadline.as_millis()
            ))),
        }
    }

    /// `host/configure` from the setup, then the clock: after `initialize` and
    /// after every restart. Both go into the history under `step`, so the
    /// invariant checkers know the configuration (strict mode, a required
    /// authorizer, automatic approval) and the clock the host was given.
    async fn configure(&mut self, step: usize) -> Result<(), HostFault> {
        let configure = Action::Configure(self.scenario.setup.configuration.clone());
        let result = self.call(&configure).await?;
        if !result.is_ok() {
            return Err(HostFault::Broken(format!(
                "the host refused `host/configure` from the scenario's setup: {}",
                serde_json::to_string(&result).unwrap_or_default()
            )));
        }
        self.setup_entry(
            step,
            StepKind::Action {
                action: configure,
                result: Ok(result),
            },
            None,
        );
        if let Some(now) = self.clock {
            let set = Action::SetClock { now };
            let result = self.call(&set).await?;
            self.setup_entry(
                step,
                StepKind::Action {
                    action: set,
                    result: Ok(result),
                },
                None,
            );
        }
        self.observed = Arc::new(self.observe().await?);
        if let Some(last) = self.history.last_mut() {
            last.observed = Some(self.observed.clone());
        }
        Ok(())
    }

    fn setup_entry(&mut self, step: usize, kind: StepKind, observed: Option<Arc<Observed>>) {
        self.history.push(HistoryEntry {
            step,
            kind,
            evidence: Default::default(),
            observed,
        });
        self.setup_entries += 1;
    }

    async fn observe(&mut self) -> Result<Observed, HostFault> {
        let result = self.call(&Action::Observe).await?;
        result
            .observed
            .ok_or_else(|| HostFault::Broken("`state/observe` answered without `observed`".into()))
    }

    fn fault_outcome(&self, fault: HostFault, during: &str) -> RawOutcome {
        match fault {
            HostFault::Unsupported(method) => {
                RawOutcome::Unsupported(vec![format!("method `{method}` ({during})")])
            }
            HostFault::Broken(message) => RawOutcome::Error {
                message: format!("{during}: {message}"),
                stderr_tail: self.host.stderr_tail(),
            },
            HostFault::Harness(message) => RawOutcome::HarnessError(format!("{during}: {message}")),
        }
    }

    async fn close(&mut self) {
        let _ = self.host.shutdown().await;
        self.world.shutdown().await;
    }

    async fn steps(&mut self, events: &EventSink) -> RawOutcome {
        for (index, step) in self.scenario.steps.iter().enumerate() {
            let failures_before = self.failures.len();
            let result = self.step(index).await;
            let _ = events.send(RunEvent::StepFinished(StepSummary {
                scenario: self.scenario.id.clone(),
                step: index,
                action: step.action.key().to_string(),
                failures: self.failures.len() - failures_before,
            }));
            match result {
                Ok(true) => {}
                Ok(false) => return RawOutcome::Stopped,
                Err(fault) => {
                    return self
                        .fault_outcome(fault, &format!("step {index} ({})", step.action.key()));
                }
            }
        }
        RawOutcome::Completed
    }

    /// Runs one step. `Ok(false)`: a failure that makes later steps meaningless.
    async fn step(&mut self, index: usize) -> Result<bool, HostFault> {
        let step = &self.scenario.steps[index];
        let before = self.observed.clone();
        let mark = self.world.mark();

        let (kind, result) = match &step.action {
            StepAction::Concurrently(c) => {
                return self.concurrent_step(index, c, before, mark).await;
            }
            StepAction::Restart(_) => {
                let _ = self.host.shutdown().await;
                let last_words = self.host.take_log();
                self.stopped_host_log.push_str(&last_words);
                let (host, init) =
                    start_host(self.launcher, self.store, self.world.as_ref(), self.options)
                        .await
                        .map_err(|failure| {
                            let message =
                                format!("restart: {}\n{}", failure.message, failure.stderr_tail);
                            if failure.by_harness {
                                HostFault::Harness(message)
                            } else {
                                HostFault::Broken(message)
                            }
                        })?;
                self.host = host;
                self.capabilities = init.capabilities;
                (StepKind::Restart, None)
            }
            StepAction::ToolServer(s) => self.world_step(WorldStep::ToolServer(s.clone())).await?,
            StepAction::Authorizer(s) => self.world_step(WorldStep::Authorizer(s.clone())).await?,
            StepAction::ModelEndpoint(s) => {
                let step = match s {
                    ModelEndpointStep::Rules(rules) => {
                        self.rules = rules.clone();
                        ModelEndpointStep::Rules(self.resolved_rules())
                    }
                    other => other.clone(),
                };
                self.world_step(WorldStep::ModelEndpoint(step)).await?
            }
            StepAction::Clock(c) => {
                let now = match c {
                    crate::scenario::ClockStep::Set(t) => *t,
                    crate::scenario::ClockStep::Advance(d) => self.clock.unwrap_or(0) + d,
                };
                self.clock = Some(now);
                let action = Action::SetClock { now };
                let result = self.call(&action).await?;
                (
                    StepKind::Action {
                        action,
                        result: Ok(result.clone()),
                    },
                    Some(result),
                )
            }
            other => {
                let action = match self.build_action(other, &before) {
                    Ok(action) => action,
                    Err(message) => {
                        self.failures.push(Failure {
                            kind: FailureKind::Expectation,
                            invariants: self.scenario.checks.clone(),
                            step: index,
                            at: format!("steps[{index}].{}", other.key()),
                            expected: json!("an action the runner can build"),
                            observed: json!(message),
                            message: format!("cannot run this step: {message}"),
                            evidence: json!({}),
                            inferred: Vec::new(),
                        });
                        return Ok(false);
                    }
                };
                let expects_exit = step.expect.as_ref().is_some_and(|e| e.host_exits);
                let result = match self.call(&action).await {
                    Err(HostFault::Broken(message)) if expects_exit => {
                        return self.host_exited(index, action, message, &mark).await;
                    }
                    other => other?,
                };
                if expects_exit {
                    // It answered normally: recorded below, and a failure; the
                    // next step is a restart, which a live host survives too.
                    self.failures.push(Failure {
                        kind: FailureKind::Expectation,
                        invariants: self.scenario.checks.clone(),
                        step: index,
                        at: format!("steps[{index}].expect.host_exits"),
                        expected: json!("the host exits or answers with an error (it was expected to die here)"),
                        observed: serde_json::to_value(&result).unwrap_or(Value::Null),
                        message: format!(
                            "expected the host to exit during `{}`, but it answered normally",
                            action.method()
                        ),
                        evidence: json!({ "host_reply": result, "stderr_tail": self.host.stderr_tail() }),
                        inferred: Vec::new(),
                    });
                }
                let bound_before = self.aliases.len();
                self.bind(other, &result);
                if self.aliases.len() != bound_before && self.rules_name_aliases() {
                    // A rule written for `root` can only match once `root` has a host id.
                    let rules = ModelEndpointStep::Rules(self.resolved_rules());
                    self.world
                        .apply(&WorldStep::ModelEndpoint(rules))
                        .await
                        .map_err(|e| {
                            HostFault::Harness(format!("the harness's own observer failed: {e}"))
                        })?;
                }
                (
                    StepKind::Action {
                        action,
                        result: Ok(result.clone()),
                    },
                    Some(result),
                )
            }
        };

        let mut evidence = self.world.evidence_since(&mark);
        let observed = Arc::new(match (&step.action, &result) {
            (StepAction::Observe(_), Some(r)) if r.observed.is_some() => {
                r.observed.clone().unwrap_or_default()
            }
            _ => self.observe().await?,
        });
        self.observed = observed.clone();
        evidence.host_log = self.take_host_log();
        let restarted = matches!(kind, StepKind::Restart);
        let entry = HistoryEntry {
            step: index,
            kind,
            evidence,
            observed: Some(observed),
        };
        self.record_transcript(index, &entry);
        self.history.push(entry);
        if restarted {
            // Configured after the restart entry, so checkers comparing the
            // state before and after a restart read what the store restored.
            self.configure(index).await?;
        }

        if let Some(expect) = &step.expect {
            self.check_expect(index, expect, result.as_ref(), &before, &mark);
        }
        self.check_invariants(index, &mark);
        Ok(true)
    }

    /// A step that killed the host as its `expect.host_exits` said: recorded
    /// with the error as its result and no observed state (the host is dead),
    /// its observer-side expectations checked, and the scenario goes on.
    async fn host_exited(
        &mut self,
        index: usize,
        action: Action,
        message: String,
        mark: &ObserverMark,
    ) -> Result<bool, HostFault> {
        let mut evidence = self.world.evidence_since(mark);
        evidence.host_log = self.take_host_log();
        let entry = HistoryEntry {
            step: index,
            kind: StepKind::Action {
                action,
                result: Err(message),
            },
            evidence,
            observed: None,
        };
        self.record_transcript(index, &entry);
        self.history.push(entry);
        if let Some(expect) = &self.scenario.steps[index].expect {
            let before = self.observed.clone();
            self.check_expect(index, expect, None, &before, mark);
        }
        self.check_invariants(index, mark);
        Ok(true)
    }

    /// What the host logged since the last step (and a host stopped for a
    /// restart before it), searched for secrets by TC4.
    fn take_host_log(&mut self) -> String {
        let mut log = std::mem::take(&mut self.stopped_host_log);
        log.push_str(&self.host.take_log());
        log
    }

    async fn world_step(
        &mut self,
        step: WorldStep,
    ) -> Result<(StepKind, Option<ActionResult>), HostFault> {
        let (description, change) =
            self.world.apply(&step).await.map_err(|e| {
                HostFault::Harness(format!("the harness's own observer failed: {e}"))
            })?;
        Ok((
            StepKind::World {
                description,
                change,
            },
            None,
        ))
    }

    fn record_transcript(&mut self, index: usize, entry: &HistoryEntry) {
        if !self.options.transcript {
            return;
        }
        let step = &self.scenario.steps[index];
        let mut value = json!({
            "step": index,
            "do": step.action.key(),
        });
        match &entry.kind {
            StepKind::Action { action, result } => {
                value["request"] = serde_json::to_value(action).unwrap_or(Value::Null);
                value["reply"] = match result {
                    Ok(r) => serde_json::to_value(r).unwrap_or(Value::Null),
                    Err(e) => json!({ "protocol_error": e }),
                };
                // The reply to `state/observe` is the observed state below; do not print it twice.
                if matches!(action, Action::Observe) {
                    value["reply"].as_object_mut().map(|o| o.remove("observed"));
                }
            }
            StepKind::Restart => {}
            StepKind::World { description, .. } => value["world"] = json!(description),
        }
        value["evidence"] = json!({
            "model_requests": entry.evidence.model_requests,
            "auxiliary_requests": entry.evidence.auxiliary_requests,
            "handler_calls": entry.evidence.handler_calls.len(),
            "authorizer_calls": entry.evidence.authorizer_calls,
        });
        value["observed"] = serde_json::to_value(&entry.observed).unwrap_or(Value::Null);
        self.transcript.steps.push(value);
    }

    fn failure(
        &self,
        index: usize,
        field: &str,
        expected: Value,
        observed: Value,
        result: Option<&ActionResult>,
        mark: &ObserverMark,
    ) -> Failure {
        let evidence = self
            .history
            .last()
            .map(|e| e.evidence.clone())
            .unwrap_or_default();
        Failure {
            kind: FailureKind::Expectation,
            invariants: self.scenario.checks.clone(),
            step: index,
            at: format!("steps[{index}].expect.{field}"),
            message: format!("expected {expected}, observed {observed}"),
            expected,
            observed,
            evidence: self.evidence_value(&evidence, result, mark),
            inferred: Vec::new(),
        }
    }

    fn evidence_value(
        &self,
        evidence: &Evidence,
        result: Option<&ActionResult>,
        mark: &ObserverMark,
    ) -> Value {
        // The host's log is in `stderr_tail` below; once is enough.
        let evidence = Evidence {
            host_log: String::new(),
            ..evidence.clone()
        };
        json!({
            "observers": evidence,
            "recent_requests": self.world.recent_since(mark),
            "host_reply": result,
            "stderr_tail": self.host.stderr_tail(),
        })
    }

    fn check_expect(
        &mut self,
        index: usize,
        expect: &Expect,
        result: Option<&ActionResult>,
        before: &Observed,
        mark: &ObserverMark,
    ) {
        let evidence = self
            .history
            .last()
            .map(|e| e.evidence.clone())
            .unwrap_or_default();
        let model_saw = if expect.model_saw.is_empty() {
            Vec::new()
        } else {
            self.model_saw_mismatches(&expect.model_saw, mark)
        };
        let checked = check_expect(
            expect,
            &StepSeen {
                index,
                result,
                before,
                after: &self.observed,
                evidence: &evidence,
                aliases: &self.aliases,
                model_saw: &model_saw,
            },
        );
        self.held_on_inference.extend(checked.held_on_inference);
        for m in checked.mismatches {
            let mut failure = self.failure(index, &m.field, m.expected, m.observed, result, mark);
            failure.inferred = m.inferred;
            self.failures.push(failure);
        }
    }

    /// For each alias whose shown tools differ from the expected names, or
    /// whose shown definitions differ from what the tool server serves:
    /// (alias, expected, observed). A shown digest is mapped back to a name
    /// only through the tool server's current definitions, so a definition
    /// the host altered (or kept from before a change) shows up as
    /// `{"altered": name}` and never matches.
    fn model_saw_mismatches(
        &self,
        model_saw: &BTreeMap<String, Vec<String>>,
        mark: &ObserverMark,
    ) -> Vec<(String, Value, Value)> {
        let Some(requests) = self.world.model_tools_since(mark) else {
            return model_saw
                .iter()
                .map(|(alias, names)| {
                    (
                        alias.clone(),
                        json!(names),
                        json!("unknown: this world does not record the tools shown to the model"),
                    )
                })
                .collect();
        };
        let served: BTreeMap<String, String> = self
            .world
            .tool_definitions()
            .into_iter()
            .filter_map(|d| {
                let name = d.get("name")?.as_str()?.to_string();
                let digest = delegation_model::digest::digest_value(&d).ok()?;
                Some((name, digest))
            })
            .collect();
        let mut out = Vec::new();
        for (alias, names) in model_saw {
            let id = self.aliases.get(alias).map(|b| b.id.as_str());
            let mut shown: BTreeSet<String> = BTreeSet::new();
            let mut altered: BTreeSet<String> = BTreeSet::new();
            for request in requests.iter().filter(|r| Some(r.instance.as_str()) == id) {
                for (name, digest) in &request.tools {
                    shown.insert(name.clone());
                    if request.verbatim && served.get(name) != Some(digest) {
                        altered.insert(name.clone());
                    }
                }
            }
            let expected: BTreeSet<String> = names.iter().cloned().collect();
            if shown != expected || !altered.is_empty() {
                let observed: Vec<Value> = shown
                    .iter()
                    .map(|n| {
                        if altered.contains(n) {
                            json!({ "altered": n })
                        } else {
                            json!(n)
                        }
                    })
                    .collect();
                out.push((alias.clone(), json!(expected), json!(observed)));
            }
        }
        out
    }

    /// The expectations that held only on inferred values, and the scenario's
    /// invariants whose checkers could have held on nothing else: those that
    /// read no observer evidence and some value the adapter declared inferred.
    /// A violated invariant is reported as a failure instead.
    fn invariants_held_on_inference(&self) -> Vec<InferredCheck> {
        let inferred = provenance::inferred_in_history(&self.history);
        let violated: BTreeSet<InvariantId> = self
            .failures
            .iter()
            .filter(|f| f.kind == FailureKind::Invariant)
            .flat_map(|f| f.invariants.iter().copied())
            .collect();
        let mut out = self.held_on_inference.clone();
        for id in self
            .scenario
            .checks
            .iter()
            .filter(|id| !violated.contains(id))
        {
            let values = provenance::invariant_inferred(*id, &inferred);
            if !values.is_empty() {
                out.push(InferredCheck {
                    at: id.to_string(),
                    values,
                });
            }
        }
        out
    }

    /// Runs the checkers for the scenario's ids over the entries recorded
    /// since the last check, and keeps only violations not reported before
    /// (a checker may find the same fault twice in one step).
    fn check_invariants(&mut self, index: usize, mark: &ObserverMark) {
        let mut violations = self.checking.take_new(&self.history);
        if let Some(entry) = self.history.last() {
            for path in checks::canary_hits(entry, &self.canaries) {
                violations.push(Violation {
                    id: InvariantId::TC4,
                    step: index,
                    message: format!(
                        "a capability secret planted by the harness appears at `{path}`"
                    ),
                    evidence: json!({ "at": path }),
                });
            }
        }
        for v in violations {
            if !self
                .seen_violations
                .insert((v.id, v.step, v.message.clone()))
            {
                continue;
            }
            // The step's own entry: the last one recorded under its index.
            let at_step = self.history.iter().rev().find(|e| e.step == v.step);
            let step_evidence = at_step.map(|e| e.evidence.clone()).unwrap_or_default();
            let reply = at_step.and_then(|e| match &e.kind {
                StepKind::Action { result: Ok(r), .. } => Some(r.clone()),
                _ => None,
            });
            let mut evidence = self.evidence_value(&step_evidence, reply.as_ref(), mark);
            evidence["checker"] = v.evidence;
            let inferred = provenance::invariant_inferred(
                v.id,
                &provenance::inferred_in_history(&self.history),
            );
            self.failures.push(Failure {
                kind: FailureKind::Invariant,
                invariants: vec![v.id],
                step: v.step,
                at: v.id.to_string(),
                expected: json!(v.id.meaning()),
                observed: json!(v.message),
                message: v.message,
                evidence,
                inferred,
            });
        }
    }
}
