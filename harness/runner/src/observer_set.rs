//! The harness's own eyes, as the runner sees them: a per-scenario set of
//! observers (model endpoint, MCP tool server, authorizer) behind one trait.
//!
//! The runner never talks to an observer directly: it takes a [`ObserverMark`]
//! before a step and asks for the [`Evidence`] since. That keeps the runner
//! testable with scripted observers and lets the observers evolve on their own.

use std::collections::BTreeMap;

use async_trait::async_trait;
use delegation_model::{Evidence, WorldChange};
use delegation_protocol::McpServer;
use serde_json::Value;

use crate::scenario::{AuthorizerStep, ModelEndpointStep, Setup, ToolServerStep};

/// Where a scenario's observers listen; becomes the host's `initialize` environment.
#[derive(Clone, Debug, PartialEq)]
pub struct Endpoints {
    pub model_endpoint: String,
    pub mcp_servers: Vec<McpServer>,
    pub authorizer: Option<String>,
}

/// A position in every observer's log; evidence is always "since a mark".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObserverMark {
    pub model: usize,
    pub tools: usize,
    pub authorizer: usize,
}

/// A change a scenario step makes outside the host.
#[derive(Clone, Debug, PartialEq)]
pub enum WorldStep {
    ToolServer(ToolServerStep),
    Authorizer(AuthorizerStep),
    ModelEndpoint(ModelEndpointStep),
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("observer `{observer}`: {message}")]
pub struct ObserverSetError {
    /// `model-endpoint`, `tool-server` or `authorizer`.
    pub observer: &'static str,
    pub message: String,
}

/// The tools the model was shown in one model request, as the model endpoint recorded them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownTools {
    /// The instance the request was attributed to (a host id).
    pub instance: String,
    /// The harness's tools the request showed, by the harness's names, to
    /// the digest of each definition as the request carried it. A host's
    /// own tools are not among them, and a host's own name for a harness
    /// tool is read back as the harness's
    /// ([`delegation_observers::model_endpoint::harness_tools_shown`]).
    pub tools: BTreeMap<String, String>,
    /// Whether the request's wire format carries MCP definitions verbatim,
    /// so its digests are comparable with the tool server's. Chat
    /// Completions and Responses wrap and rename fields; there only names compare.
    pub verbatim: bool,
}

/// The observers of one scenario run. Fresh per scenario: evidence never leaks between scenarios.
#[async_trait]
pub trait ObserverSet: Send + Sync {
    fn endpoints(&self) -> Endpoints;
    fn mark(&self) -> ObserverMark;
    fn evidence_since(&self, mark: &ObserverMark) -> Evidence;
    /// Applies an observer-side change; returns a description for people
    /// and, where an invariant checker needs it, the structured change.
    async fn apply(
        &mut self,
        step: &WorldStep,
    ) -> Result<(String, Option<WorldChange>), ObserverSetError>;
    /// The last requests the observers saw since `mark`, as evidence for a failed check.
    fn recent_since(&self, mark: &ObserverMark) -> Vec<Value>;
    /// Per model request since `mark`, the tools the model was shown (`expect.model_saw`).
    /// `None` (the default): this set does not record it, and a `model_saw`
    /// expectation fails rather than pass on nothing.
    fn model_tools_since(&self, _mark: &ObserverMark) -> Option<Vec<ShownTools>> {
        None
    }
    /// The definitions the tool server serves now, each with its `name`.
    fn tool_definitions(&self) -> Vec<Value> {
        Vec::new()
    }
    /// Where the observers record their own failures; read after the
    /// scenario, so that a failure of the harness is never judged as the
    /// host's. A set without real observers has none.
    fn faults(&self) -> Vec<delegation_observers::Faults> {
        Vec::new()
    }
    async fn shutdown(&mut self);
}

/// Starts a fresh [`ObserverSet`] for each scenario from its `setup`.
#[async_trait]
pub trait ObserverSetFactory: Send + Sync {
    async fn start(&self, setup: &Setup) -> Result<Box<dyn ObserverSet>, ObserverSetError>;
}
