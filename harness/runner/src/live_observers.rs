//! The live [`ObserverSet`]: the harness's own model endpoint, MCP tool server and
//! authorizer from `delegation_observers`, fresh for every scenario.

use std::collections::BTreeSet;

use async_trait::async_trait;
use delegation_model::{AuthorizerBehaviour, Evidence, WorldChange};
use delegation_observers::model_endpoint::{WireFormat, harness_tools_shown};
use delegation_observers::tool_server::ToolServer;
use delegation_observers::{Authorizer, AuthorizerMode, ModelEndpoint};
use delegation_protocol::McpServer;
use serde_json::Value;

use crate::observer_set::{
    Endpoints, ObserverMark, ObserverSet, ObserverSetError, ObserverSetFactory, ShownTools,
    WorldStep,
};
use crate::scenario::{ModelEndpointStep, Setup, ToolServerStep};

/// The name the harness's MCP server has in the host's environment: the
/// one the model endpoint expects when it names MCP tools as a host does.
pub use delegation_observers::model_endpoint::HARNESS_MCP_SERVER_NAME as MCP_SERVER_NAME;

/// How long a `notify_list_changed` step waits for the host to re-list the
/// tools, the sign that it took the notification in before the next step.
pub const LIST_CHANGED_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// How many of the latest observer records a failure's evidence carries.
const RECENT: usize = 5;

/// Starts the real observers for each scenario.
#[derive(Clone, Copy, Debug, Default)]
pub struct LiveObservers;

/// Which observer [`BrokenLiveObservers`] breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observer {
    ModelEndpoint,
    ToolServer,
    Authorizer,
}

/// The real observers with one of them broken on purpose from the start,
/// as a bug in the harness would break it: for the tests that show such a
/// failure is reported as the harness's, never as the host's.
#[derive(Clone, Copy, Debug)]
pub struct BrokenLiveObservers(pub Observer);

struct LiveSet {
    model: ModelEndpoint,
    tools: Option<ToolServer>,
    authorizer: Option<Authorizer>,
}

/// The observers' authorizer mode for the model's vocabulary of authorizer behaviour.
pub fn authorizer_mode(behaviour: &AuthorizerBehaviour) -> AuthorizerMode {
    match behaviour {
        AuthorizerBehaviour::Allow => AuthorizerMode::Allow { constraints: None },
        AuthorizerBehaviour::AllowNarrowed { constraint } => AuthorizerMode::Allow {
            constraints: Some(constraint.clone()),
        },
        AuthorizerBehaviour::Deny => AuthorizerMode::Deny {
            reason: "denied by the scenario's script".into(),
        },
        AuthorizerBehaviour::Timeout => AuthorizerMode::Timeout,
        AuthorizerBehaviour::Unavailable => AuthorizerMode::Unavailable,
        AuthorizerBehaviour::Malformed => AuthorizerMode::Malformed,
        AuthorizerBehaviour::UnsupportedVersion => AuthorizerMode::UnsupportedVersion,
        AuthorizerBehaviour::AllowWidening => AuthorizerMode::Widening,
        AuthorizerBehaviour::ReplayedReceipt => AuthorizerMode::Replay,
        AuthorizerBehaviour::ExpiredReceipt => AuthorizerMode::Expired,
        AuthorizerBehaviour::MismatchedReceipt => AuthorizerMode::Mismatched,
        AuthorizerBehaviour::LateAllow => AuthorizerMode::LateAllow,
    }
}

fn err(observer: &'static str, e: impl std::fmt::Display) -> ObserverSetError {
    ObserverSetError {
        observer,
        message: e.to_string(),
    }
}

#[async_trait]
impl ObserverSetFactory for LiveObservers {
    async fn start(&self, setup: &Setup) -> Result<Box<dyn ObserverSet>, ObserverSetError> {
        let model = ModelEndpoint::start(setup.model.clone())
            .await
            .map_err(|e| err("model-endpoint", e))?;
        // Always serve tools, even none: a scenario may add one later, and the
        // host must have the server in its environment from `initialize` on.
        let tools = ToolServer::start(setup.tools.clone())
            .await
            .map_err(|e| err("tool-server", e))?;
        let authorizer = match &setup.authorizer {
            Some(behaviour) => Some(
                Authorizer::start(authorizer_mode(behaviour))
                    .await
                    .map_err(|e| err("authorizer", e))?,
            ),
            None => None,
        };
        Ok(Box::new(LiveSet {
            model,
            tools: Some(tools),
            authorizer,
        }))
    }
}

#[async_trait]
impl ObserverSetFactory for BrokenLiveObservers {
    async fn start(&self, setup: &Setup) -> Result<Box<dyn ObserverSet>, ObserverSetError> {
        let observers = LiveObservers.start(setup).await?;
        let [model, tools, authorizer] = <[_; 3]>::try_from(observers.faults())
            .map_err(|_| err("model-endpoint", "expected three observers' faults"))?;
        match self.0 {
            Observer::ModelEndpoint => model.break_on_purpose(),
            Observer::ToolServer => tools.break_on_purpose(),
            Observer::Authorizer => authorizer.break_on_purpose(),
        }
        Ok(observers)
    }
}

impl LiveSet {
    /// The model endpoint's, the tool server's and the authorizer's faults,
    /// in that order (an authorizer the scenario does not use has an empty
    /// record of its own).
    fn all_faults(&self) -> Vec<delegation_observers::Faults> {
        vec![
            self.model.faults(),
            self.tools
                .as_ref()
                .map(ToolServer::faults)
                .unwrap_or_default(),
            self.authorizer
                .as_ref()
                .map(Authorizer::faults)
                .unwrap_or_default(),
        ]
    }

    fn tools(&self) -> Result<&ToolServer, ObserverSetError> {
        self.tools
            .as_ref()
            .ok_or_else(|| err("tool-server", "already shut down"))
    }
}

#[async_trait]
impl ObserverSet for LiveSet {
    fn endpoints(&self) -> Endpoints {
        Endpoints {
            model_endpoint: self.model.url(),
            mcp_servers: self
                .tools
                .iter()
                .map(|t| McpServer {
                    name: MCP_SERVER_NAME.into(),
                    url: t.url(),
                })
                .collect(),
            authorizer: self.authorizer.as_ref().map(|a| a.url()),
        }
    }

    fn mark(&self) -> ObserverMark {
        ObserverMark {
            model: self.model.mark(),
            tools: self.tools.as_ref().map_or(0, |t| t.mark()),
            authorizer: self.authorizer.as_ref().map_or(0, |a| a.mark()),
        }
    }

    fn evidence_since(&self, mark: &ObserverMark) -> Evidence {
        let mut evidence = Evidence::default();
        self.model.evidence_since(mark.model).add_to(&mut evidence);
        evidence.handler_calls = self
            .tools
            .as_ref()
            .map(|t| t.handler_calls_since(mark.tools))
            .unwrap_or_default();
        evidence.authorizer_calls = self
            .authorizer
            .as_ref()
            .map_or(0, |a| a.count_since(mark.authorizer));
        evidence
    }

    async fn apply(
        &mut self,
        step: &WorldStep,
    ) -> Result<(String, Option<WorldChange>), ObserverSetError> {
        match step {
            WorldStep::ToolServer(change) => {
                let tools = self.tools()?;
                match change {
                    ToolServerStep::Change { name, definition } => {
                        let before = tools
                            .definitions()
                            .into_iter()
                            .find(|d| d.get("name").and_then(Value::as_str) == Some(name));
                        let digest = delegation_model::digest::digest_value(definition)
                            .map_err(|e| err("tool-server", e))?;
                        let previous_digest = before
                            .as_ref()
                            .and_then(|b| delegation_model::digest::digest_value(b).ok());
                        tools
                            .change_definition(name, definition.clone())
                            .map_err(|e| err("tool-server", e))?;
                        let description_only = before.is_some_and(|b| {
                            let strip = |v: &Value| {
                                let mut v = v.clone();
                                v.as_object_mut().map(|o| o.remove("description"));
                                v
                            };
                            strip(&b) == strip(definition) && b != *definition.value()
                        });
                        Ok((
                            format!(
                                "tool `{name}` redefined{}",
                                if description_only {
                                    " (description only)"
                                } else {
                                    ""
                                }
                            ),
                            Some(WorldChange::ToolRedefined {
                                tool: name.clone(),
                                digest,
                                previous_digest,
                                description_only,
                            }),
                        ))
                    }
                    ToolServerStep::Remove(name) => {
                        tools.remove(name).map_err(|e| err("tool-server", e))?;
                        Ok((
                            format!("tool `{name}` removed"),
                            Some(WorldChange::ToolRemoved { tool: name.clone() }),
                        ))
                    }
                    ToolServerStep::Add(spec) => {
                        let name = spec
                            .definition
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("?")
                            .to_string();
                        tools.add(spec.clone()).map_err(|e| err("tool-server", e))?;
                        Ok((format!("tool `{name}` added"), None))
                    }
                    ToolServerStep::NotifyListChanged(_) => {
                        let (sessions, settled) = tools
                            .notify_list_changed_and_settle(LIST_CHANGED_SETTLE)
                            .await;
                        Ok((
                            format!(
                                "tools/list_changed sent to {sessions} session(s){}",
                                if settled {
                                    ""
                                } else {
                                    " (not re-listed in time)"
                                }
                            ),
                            Some(WorldChange::ToolListChanged),
                        ))
                    }
                }
            }
            WorldStep::Authorizer(step) => {
                let authorizer = self.authorizer.as_ref().ok_or_else(|| {
                    err(
                        "authorizer",
                        "this scenario scripts the authorizer but its setup starts none: add `setup.authorizer`",
                    )
                })?;
                authorizer.set_mode(authorizer_mode(&step.mode));
                Ok((
                    format!(
                        "authorizer now answers {}",
                        serde_json::to_string(&step.mode).unwrap_or_default()
                    ),
                    Some(WorldChange::AuthorizerScripted {
                        behaviour: step.mode.clone(),
                    }),
                ))
            }
            WorldStep::ModelEndpoint(ModelEndpointStep::Rules(rules)) => {
                self.model
                    .set_rules(rules.clone())
                    .map_err(|e| err("model-endpoint", e))?;
                Ok((
                    format!("model endpoint re-scripted ({} rules)", rules.len()),
                    None,
                ))
            }
            WorldStep::ModelEndpoint(ModelEndpointStep::Failing(status)) => {
                self.model
                    .set_failing(*status)
                    .map_err(|e| err("model-endpoint", e))?;
                Ok((
                    match status {
                        Some(s) => format!("model endpoint now fails with HTTP {s}"),
                        None => "model endpoint healed".into(),
                    },
                    None,
                ))
            }
        }
    }

    fn model_tools_since(&self, mark: &ObserverMark) -> Option<Vec<ShownTools>> {
        let served: BTreeSet<String> = self
            .tool_definitions()
            .iter()
            .filter_map(|d| d.get("name")?.as_str().map(str::to_string))
            .collect();
        let servers = self.model.mcp_server_names();
        Some(
            self.model
                .requests_since(mark.model)
                .into_iter()
                .filter(|r| r.is_model_request())
                .map(|r| ShownTools {
                    instance: r.instance,
                    tools: harness_tools_shown(r.format, &r.tools, &served, &servers),
                    verbatim: r.format == WireFormat::Neutral,
                })
                .collect(),
        )
    }

    fn tool_definitions(&self) -> Vec<Value> {
        self.tools
            .as_ref()
            .map(|t| t.definitions())
            .unwrap_or_default()
    }

    fn faults(&self) -> Vec<delegation_observers::Faults> {
        self.all_faults()
    }

    fn recent_since(&self, mark: &ObserverMark) -> Vec<Value> {
        let mut recent: Vec<Value> = self
            .model
            .requests_since(mark.model)
            .into_iter()
            .rev()
            .take(RECENT)
            .map(|r| serde_json::json!({ "model_request": r }))
            .collect();
        if let Some(a) = &self.authorizer {
            recent.extend(
                a.calls_since(mark.authorizer)
                    .into_iter()
                    .rev()
                    .take(RECENT)
                    .map(|c| serde_json::json!({ "authorizer_call": c })),
            );
        }
        recent
    }

    async fn shutdown(&mut self) {
        if let Some(tools) = self.tools.take() {
            tools.shutdown().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use delegation_observers::in_process::lookup;
    use delegation_observers::tool_server::ToolSpec;
    use serde_json::json;

    fn mcp_url(set: &dyn ObserverSet) -> String {
        set.endpoints().mcp_servers[0].url.clone()
    }

    #[tokio::test]
    async fn each_scenario_has_its_own_tool_server_in_memory_too_gone_after_shutdown() {
        let mut first = LiveObservers.start(&Setup::default()).await.unwrap();
        let mut second = LiveObservers.start(&Setup::default()).await.unwrap();
        let (a, b) = (mcp_url(first.as_ref()), mcp_url(second.as_ref()));
        assert_ne!(a, b, "each scenario's server listens on a port of its own");
        assert!(lookup(&a).is_some() && lookup(&b).is_some());

        let spec = ToolSpec {
            definition: json!({
                "name": "only_in_the_first",
                "description": "d",
                "inputSchema": {"type": "object"}
            })
            .into(),
            result: String::new(),
        };
        first
            .apply(&WorldStep::ToolServer(ToolServerStep::Add(spec)))
            .await
            .unwrap();
        assert_eq!(first.tool_definitions().len(), 1);
        assert_eq!(
            second.tool_definitions().len(),
            0,
            "a definition added in one scenario must not reach another"
        );

        first.shutdown().await;
        assert!(
            lookup(&a).is_none(),
            "a finished scenario's server is not reachable in memory"
        );
        assert!(
            lookup(&b).is_some(),
            "and another scenario's still is, untouched"
        );
        second.shutdown().await;
        assert!(lookup(&b).is_none());
    }
}
