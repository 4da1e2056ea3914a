//! A small scripted host and world for runner tests: right or wrong on
//! purpose, so the runner's verdicts and reports can be checked without the
//! reference host.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use delegation_host::{Host, HostError, HostLauncher};
use delegation_model::{
    Action, ActionResult, DenyReason, Evidence, LifecycleState, Observed, ObservedInstance,
    ReportedValue, Sandbox, TurnReport, WorldChange,
};
use delegation_protocol::{HostInfo, InitializeParams, InitializeResult, McpServer};
use delegation_runner::observer_set::{
    Endpoints, ObserverMark, ObserverSet, ObserverSetError, ObserverSetFactory, WorldStep,
};
use delegation_runner::scenario::Setup;
use serde_json::{Value, json};

/// How the fake host misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Refuses a child asking for more network than its parent has.
    Correct,
    /// Admits every delegation and starts the child (a model request for it).
    AdmitsEverything,
    /// Dies on `instance/delegate`.
    CrashesOnDelegate,
    /// Takes 30 s to answer `instance/delegate`.
    Slow,
    /// Refuses every delegation: trivially "safe", and useless as evidence.
    NeverSpawns,
    /// Refuses `instance/delegate` with its own reason name (`quota_exceeded`),
    /// which a subprocess host layer cannot decode as a harness reason.
    ForeignReason,
    /// Correct, but its adapter declares the deny reason inferred.
    InfersReason,
    /// Refuses with the wrong reason (`policy_denied`), declared inferred.
    InfersWrongReason,
    /// Correct, but every observed ceiling is declared inferred.
    InfersCeilings,
    /// Admits every delegation, and declares the answer's outcome inferred:
    /// the child's model request is still counted by the harness.
    AdmitsEverythingInferringOutcome,
}

impl Behaviour {
    /// Refuses what a correct host refuses (whatever its adapter declares).
    fn refuses_like_a_correct_host(self) -> bool {
        matches!(
            self,
            Behaviour::Correct
                | Behaviour::InfersReason
                | Behaviour::InfersWrongReason
                | Behaviour::InfersCeilings
        )
    }
}

/// Model requests by endpoint URL, then by instance: the fake host "posts"
/// here and the fake world counts, like the real endpoint would.
fn model_log() -> &'static Mutex<HashMap<String, Vec<String>>> {
    static LOG: OnceLock<Mutex<HashMap<String, Vec<String>>>> = OnceLock::new();
    LOG.get_or_init(Default::default)
}

pub struct FakeLauncher {
    pub behaviour: Behaviour,
    pub capabilities: Vec<String>,
    pub protocol_version: String,
    /// The "store": instances by store directory, so a restart sees them again.
    stores: Arc<Mutex<HashMap<PathBuf, Vec<ObservedInstance>>>>,
}

impl FakeLauncher {
    pub fn new(behaviour: Behaviour) -> FakeLauncher {
        FakeLauncher {
            behaviour,
            capabilities: vec!["restart".into(), "nested-delegation".into()],
            protocol_version: delegation_protocol::PROTOCOL_VERSION.into(),
            stores: Default::default(),
        }
    }
}

#[async_trait]
impl HostLauncher for FakeLauncher {
    async fn launch(&self, store_dir: &Path) -> Result<Box<dyn Host>, HostError> {
        Ok(Box::new(FakeHost {
            behaviour: self.behaviour,
            capabilities: self.capabilities.clone(),
            protocol_version: self.protocol_version.clone(),
            store: store_dir.to_path_buf(),
            stores: self.stores.clone(),
            endpoint: String::new(),
        }))
    }
    fn describe(&self) -> String {
        format!("fake host ({:?})", self.behaviour)
    }
}

struct FakeHost {
    behaviour: Behaviour,
    capabilities: Vec<String>,
    protocol_version: String,
    store: PathBuf,
    stores: Arc<Mutex<HashMap<PathBuf, Vec<ObservedInstance>>>>,
    endpoint: String,
}

fn network(sandbox: &Sandbox) -> bool {
    matches!(
        sandbox,
        Sandbox::WorkspaceWrite { network: true, .. } | Sandbox::FullAccess
    )
}

impl FakeHost {
    fn instances(&self) -> Vec<ObservedInstance> {
        self.stores
            .lock()
            .unwrap()
            .get(&self.store)
            .cloned()
            .unwrap_or_default()
    }
    fn add(&self, instance: ObservedInstance) {
        self.stores
            .lock()
            .unwrap()
            .entry(self.store.clone())
            .or_default()
            .push(instance);
    }
    fn post(&self, instance: &str) {
        model_log()
            .lock()
            .unwrap()
            .entry(self.endpoint.clone())
            .or_default()
            .push(instance.to_string());
    }
}

#[async_trait]
impl Host for FakeHost {
    async fn initialize(
        &mut self,
        params: InitializeParams,
    ) -> Result<InitializeResult, HostError> {
        self.endpoint = params.environment.model_endpoint;
        Ok(InitializeResult {
            host: HostInfo {
                name: "fake".into(),
                version: "0".into(),
            },
            protocol_version: self.protocol_version.clone(),
            capabilities: self.capabilities.clone(),
        })
    }

    async fn call(&mut self, action: &Action) -> Result<ActionResult, HostError> {
        match action {
            Action::Configure(_) | Action::SetClock { .. } => Ok(ActionResult::ok()),
            Action::Observe => {
                let mut instances = self.instances();
                if self.behaviour == Behaviour::InfersCeilings {
                    for i in &mut instances {
                        i.inferred = vec![ReportedValue::Ceiling];
                    }
                }
                Ok(ActionResult {
                    observed: Some(Observed {
                        instances,
                        ..Observed::default()
                    }),
                    ..ActionResult::ok()
                })
            }
            Action::Start(request) => {
                let id = format!("inst-{}", self.instances().len() + 1);
                let ceiling = serde_json::from_value(json!({
                    "sandbox": request.sandbox,
                    "approval_policy": request.approval_policy,
                    "cwd": request.cwd,
                    "provider": request.provider,
                    "delegation_depth": request.delegation_depth,
                }))
                .expect("a valid authority");
                self.add(ObservedInstance {
                    id: id.clone(),
                    parent: None,
                    state: LifecycleState::Running,
                    role: request.role.clone(),
                    model: request.model.clone(),
                    requested: None,
                    ceiling,
                    risk: None,
                    inferred: Vec::new(),
                });
                Ok(ActionResult {
                    instance: Some(id),
                    ..ActionResult::ok()
                })
            }
            Action::Delegate { parent, request } => {
                match self.behaviour {
                    Behaviour::CrashesOnDelegate => {
                        return Err(HostError::Exited {
                            method: "instance/delegate".into(),
                            status: "signal 11".into(),
                            stderr_tail: "panic: delegate exploded".into(),
                        });
                    }
                    Behaviour::Slow => tokio::time::sleep(Duration::from_secs(30)).await,
                    Behaviour::ForeignReason => {
                        // The same error text the subprocess host layer produces.
                        let raw = json!({ "outcome": "denied", "reason": "quota_exceeded" });
                        let e = serde_json::from_value::<ActionResult>(raw).unwrap_err();
                        return Err(HostError::Protocol {
                            method: "instance/delegate".into(),
                            detail: format!("result does not match ActionResult: {e}"),
                        });
                    }
                    _ => {}
                }
                let parent_instance = self
                    .instances()
                    .into_iter()
                    .find(|i| &i.id == parent)
                    .ok_or_else(|| HostError::Protocol {
                        method: "instance/delegate".into(),
                        detail: "unknown parent".into(),
                    })?;
                let wants_network = request
                    .authority
                    .sandbox
                    .as_ref()
                    .and_then(|s| s.normalise().ok())
                    .is_some_and(|s| network(&s));
                if self.behaviour == Behaviour::NeverSpawns {
                    return Ok(ActionResult::denied(
                        DenyReason::CeilingExceeded,
                        "never spawns",
                    ));
                }
                if self.behaviour.refuses_like_a_correct_host()
                    && wants_network
                    && !network(&parent_instance.ceiling.sandbox)
                {
                    let mut denied = ActionResult::denied(
                        match self.behaviour {
                            Behaviour::InfersWrongReason => DenyReason::PolicyDenied,
                            _ => DenyReason::CeilingExceeded,
                        },
                        "network above ceiling",
                    );
                    if matches!(
                        self.behaviour,
                        Behaviour::InfersReason | Behaviour::InfersWrongReason
                    ) {
                        denied.inferred = vec![ReportedValue::Reason];
                    }
                    return Ok(denied);
                }
                let id = format!("inst-{}", self.instances().len() + 1);
                let mut ceiling = parent_instance.ceiling.clone();
                if let Some(sandbox) = &request.authority.sandbox {
                    ceiling.sandbox = sandbox.normalise().map_err(|e| HostError::Protocol {
                        method: "instance/delegate".into(),
                        detail: e.to_string(),
                    })?;
                }
                self.add(ObservedInstance {
                    id: id.clone(),
                    parent: Some(parent.clone()),
                    state: LifecycleState::Running,
                    role: request.role.clone(),
                    model: "m".into(),
                    requested: Some(request.authority.clone()),
                    ceiling: ceiling.clone(),
                    risk: None,
                    inferred: Vec::new(),
                });
                self.post(&id);
                Ok(ActionResult {
                    instance: Some(id),
                    effective: Some(ceiling),
                    inferred: match self.behaviour {
                        Behaviour::AdmitsEverythingInferringOutcome => {
                            vec![ReportedValue::Outcome]
                        }
                        _ => Vec::new(),
                    },
                    ..ActionResult::ok()
                })
            }
            Action::Turn { instance, .. } => {
                self.post(instance);
                Ok(ActionResult {
                    turn: Some(TurnReport::Message {
                        text: "done".into(),
                    }),
                    ..ActionResult::ok()
                })
            }
            other => Err(HostError::Unsupported {
                method: other.method().into(),
            }),
        }
    }

    async fn shutdown(&mut self) -> Result<(), HostError> {
        Ok(())
    }

    fn stderr_tail(&self) -> String {
        "fake host log line".into()
    }
}

/// A world whose only observer is the model-request log above.
pub struct FakeWorlds;

struct FakeWorld {
    url: String,
}

#[async_trait]
impl ObserverSetFactory for FakeWorlds {
    async fn start(&self, _setup: &Setup) -> Result<Box<dyn ObserverSet>, ObserverSetError> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(Box::new(FakeWorld {
            url: format!("http://fake-model/{n}"),
        }))
    }
}

impl FakeWorld {
    fn log(&self) -> Vec<String> {
        model_log()
            .lock()
            .unwrap()
            .get(&self.url)
            .cloned()
            .unwrap_or_default()
    }
}

#[async_trait]
impl ObserverSet for FakeWorld {
    fn endpoints(&self) -> Endpoints {
        Endpoints {
            model_endpoint: self.url.clone(),
            mcp_servers: vec![McpServer {
                name: "harness".into(),
                url: "http://fake-tools".into(),
            }],
            authorizer: None,
        }
    }
    fn mark(&self) -> ObserverMark {
        ObserverMark {
            model: self.log().len(),
            ..ObserverMark::default()
        }
    }
    fn evidence_since(&self, mark: &ObserverMark) -> Evidence {
        let mut model_requests = BTreeMap::new();
        for instance in self.log().into_iter().skip(mark.model) {
            *model_requests.entry(instance).or_insert(0) += 1;
        }
        Evidence {
            model_requests,
            ..Evidence::default()
        }
    }
    async fn apply(
        &mut self,
        step: &WorldStep,
    ) -> Result<(String, Option<WorldChange>), ObserverSetError> {
        Err(ObserverSetError {
            observer: "fake",
            message: format!("not scripted: {step:?}"),
        })
    }
    fn recent_since(&self, mark: &ObserverMark) -> Vec<Value> {
        self.log()
            .into_iter()
            .skip(mark.model)
            .map(|i| json!({ "model_request_for": i }))
            .collect()
    }
    async fn shutdown(&mut self) {}
}
