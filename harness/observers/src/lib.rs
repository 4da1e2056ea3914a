//! The observers: what the harness sees with its own eyes (model endpoint, MCP tool server, authorizer, canary secrets).
//!
//! Each observer is a real HTTP server on 127.0.0.1 with an ephemeral port,
//! owned by the harness. Counts that decide a verdict ("zero model
//! requests", "zero handler calls", "the authorizer was asked first") are
//! taken here, never from the host's own report. A host in the harness's
//! own process may reach the tool server's service in memory instead
//! ([`in_process`]): the same handlers answer and count.

pub mod authorizer;
pub mod canary;
pub mod faults;
pub mod in_process;
pub mod model_endpoint;
pub mod tool_server;

pub use authorizer::{
    AuthorizationDecision, AuthorizationReceipt, AuthorizationReply, AuthorizationRequest,
    Authorizer, AuthorizerMode, RecordedAuthorization,
};
pub use canary::{Canary, CanaryHit, find_canaries, find_canaries_in_value};
pub use faults::Faults;
pub use model_endpoint::{
    ModelEndpoint, ModelEndpointConfig, ModelEvidence, ModelMatch, ModelReply, ModelRule,
    RecordedModelRequest, WireFormat,
};
pub use tool_server::{ToolServer, ToolServerError, ToolSpec};

/// Why an observer could not start or could not accept a script.
#[derive(Debug, thiserror::Error)]
pub enum ObserverError {
    #[error("could not bind the {observer} to 127.0.0.1 on an ephemeral port: {source}")]
    Bind {
        observer: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "model rule {index}: scripted failure status {status} is not an HTTP error status; use 400..=599"
    )]
    InvalidFailureStatus { index: usize, status: u16 },
    #[error("set_failing: status {status} is not an HTTP error status; use 400..=599")]
    InvalidFailingStatus { status: u16 },
}
