//! The side channels a host speaks besides the protocol, typed once: the external authorizer's request and reply, the model endpoint's neutral route and instance header.
//!
//! The model (and the reference host built on it) sends these requests and
//! reads these replies; the harness's observers (`delegation-observers`)
//! read the requests and send the replies. Both sides use the types and
//! names here, so the two cannot drift apart. The authorizer's wire format
//! for host authors is documented in `delegation_observers::authorizer`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::authority::AuthorityRequest;
use crate::wire::{Millis, SpawnRequest};

/// The route a host posts neutral-format model turns to, under the model endpoint's base URL.
pub const NEUTRAL_TURN_PATH: &str = "/neutral/turn";
/// The header carrying the instance a model request is made for.
pub const INSTANCE_HEADER: &str = "x-delegation-instance";

/// The body of a neutral-format model turn (`POST` [`NEUTRAL_TURN_PATH`]),
/// sent with [`INSTANCE_HEADER`] naming the same instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeutralTurnRequest {
    /// The instance the turn is for.
    pub instance: String,
    pub role: String,
    pub input: String,
    /// The MCP tool definitions the instance's model may see, as listed.
    #[serde(default)]
    pub tools: Vec<serde_json::Value>,
    /// The result of the tool call the previous reply asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<String>,
}

/// The route a host posts authorization requests to, under the authorizer's base URL.
pub const AUTHORIZE_PATH: &str = "/authorize";
/// The only authorizer protocol version.
pub const AUTHORIZER_VERSION: &str = "1";
/// How long after the request's `now` the authorizer may decide: its
/// `deadline`. An allow decided at or after it is late (EA).
pub const AUTHORIZER_DEADLINE_MS: Millis = 5_000;
/// How long the harness's authorizer's allow stays valid after `now`.
pub const RECEIPT_TTL_MS: Millis = 60_000;

/// The body a host sends the authorizer: "may this child be created?".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationRequest {
    pub version: String,
    /// The instance id of the delegating parent.
    pub parent: String,
    pub request: SpawnRequest,
    /// The commitment of the canonical spawn request, which an allow's receipt binds.
    pub request_digest: String,
    /// The harness clock, ms.
    pub now: Millis,
    /// Absolute, on the harness clock: the host stops waiting here.
    pub deadline: Millis,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthorizationDecision {
    Allow,
    Deny,
}

/// The authorization receipt inside an allow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuthorizationReceipt {
    pub id: String,
    /// Must equal the request's `request_digest`.
    pub binding: String,
    /// Valid while `now < expires_at`.
    pub expires_at: Millis,
}

/// The body the authorizer answers with (when it answers JSON at all).
///
/// A host ignores fields it does not know. `receipt` and `decided_at` are
/// required of an allow only: a deny is a deny without them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuthorizationReply {
    pub version: String,
    pub decision: AuthorizationDecision,
    /// Why, with a deny.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// May only narrow the request (EA3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<AuthorityRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<AuthorizationReceipt>,
    /// When the authorizer decided, on the harness clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<Millis>,
}

impl AuthorizationRequest {
    /// The request a host sends for `request`, delegated by `parent`, at `now`.
    pub fn new(parent: &str, request: &SpawnRequest, request_digest: &str, now: Millis) -> Self {
        AuthorizationRequest {
            version: AUTHORIZER_VERSION.to_string(),
            parent: parent.to_string(),
            request: request.clone(),
            request_digest: request_digest.to_string(),
            now,
            deadline: now + AUTHORIZER_DEADLINE_MS,
        }
    }
}

impl AuthorizationReply {
    /// An allow decided at `now`, with a receipt bound to `binding`.
    pub fn allow(receipt: AuthorizationReceipt, now: Millis) -> Self {
        AuthorizationReply {
            version: AUTHORIZER_VERSION.to_string(),
            decision: AuthorizationDecision::Allow,
            reason: None,
            constraints: None,
            receipt: Some(receipt),
            decided_at: Some(now),
        }
    }

    /// A deny decided at `now`.
    pub fn deny(reason: Option<String>, now: Millis) -> Self {
        AuthorizationReply {
            version: AUTHORIZER_VERSION.to_string(),
            decision: AuthorizationDecision::Deny,
            reason,
            constraints: None,
            receipt: None,
            decided_at: Some(now),
        }
    }
}
