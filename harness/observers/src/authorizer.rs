//! The external authorizer the harness scripts (EA1..EA5): it answers a host's "may this child be created?" and records every call.
//!
//! # Wire format (for host authors)
//!
//! The host calls `POST {authorizer}/authorize` with `content-type: application/json`:
//!
//! ```json
//! { "version": "1",
//!   "parent": "instance id of the delegating parent",
//!   "request": { "role": "worker", "task": "...", "authority": { ... } },
//!   "request_digest": "sha256:... (the commitment of the canonical spawn request)",
//!   "now": 1000,          // harness clock, ms
//!   "deadline": 6000      // harness clock, ms: an answer decided at or after it is late
//! }
//! ```
//!
//! and gets 200 with:
//!
//! ```json
//! { "version": "1",
//!   "decision": "allow",               // or "deny"
//!   "reason": "text",                  // with deny only
//!   "constraints": { ... },            // optional AuthorityRequest: may only narrow (EA3)
//!   "receipt": { "id": "authz-1", "binding": "<request_digest>", "expires_at": 61000 },
//!   "decided_at": 1000 }
//! ```
//!
//! A host accepts an allow only when: the version is `"1"`; the receipt id
//! was never seen before; `receipt.binding` equals the `request_digest` it
//! sent; `now < receipt.expires_at`; `decided_at < deadline`; and
//! `constraints` is absent or no wider than the request on any axis.
//! Anything else (deny, timeout, HTTP error, a non-JSON body, another
//! version) means no child (EA2, EA4). A request the authorizer cannot
//! read is answered 400 with `{"error": ..}`.
//!
//! Time is the harness's: the authorizer decides "at" the host's `now`.
//!
//! The request and reply are typed once, in `delegation_model::side_channels`,
//! which the model's host sends and reads; this module re-exports them.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use delegation_model::AuthorityRequest;
pub use delegation_model::side_channels::{
    AUTHORIZE_PATH, AUTHORIZER_VERSION, AuthorizationDecision, AuthorizationReceipt,
    AuthorizationReply, AuthorizationRequest, RECEIPT_TTL_MS,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::ObserverError;

/// How long a `timeout` reply is held: far past any sane client deadline. The
/// server thread is dropped with the handle, so the wait never blocks shutdown.
pub const TIMEOUT_HOLD: Duration = Duration::from_secs(3600);

/// What the authorizer answers, set per scenario step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AuthorizerMode {
    /// Allow, optionally with narrowing constraints.
    Allow {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        constraints: Option<AuthorityRequest>,
    },
    Deny {
        reason: String,
    },
    /// Never answers in time.
    Timeout,
    /// HTTP 503.
    Unavailable,
    /// 200 with a body that is not JSON.
    Malformed,
    /// A well-formed allow with version `"99"`.
    UnsupportedVersion,
    /// An allow reusing the receipt id of the previous allow (the first
    /// replay, with no allow before it, is a fresh allow that later replays repeat).
    Replay,
    /// An allow decided one millisecond after the request's `deadline`.
    LateAllow,
    /// An allow whose receipt expires at `now`.
    Expired,
    /// An allow whose receipt is bound to another request digest.
    Mismatched,
    /// An allow whose constraints are wider than any child may hold
    /// (`delegation_model::authority::widening_constraint`).
    Widening,
}

/// One call as the authorizer saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecordedAuthorization {
    /// Arrival position, from 0.
    pub seq: usize,
    /// The mode in force when the call arrived.
    pub mode: AuthorizerMode,
    /// The request, when it was readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<AuthorizationRequest>,
    /// Why the request could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub status: u16,
    /// The JSON reply, when one was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<AuthorizationReply>,
}

struct State {
    mode: AuthorizerMode,
    calls: Vec<RecordedAuthorization>,
    /// Receipt ids are `authz-N`; counted across modes so ids never repeat except by replay.
    issued: u64,
    last_allow_receipt: Option<String>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Handle on a running authorizer. Clones share one server, which stops when the last clone is dropped.
#[derive(Clone)]
pub struct Authorizer {
    server: Arc<MockServer>,
    state: Arc<Mutex<State>>,
    faults: crate::Faults,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("url", &self.url())
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    pub async fn start(mode: AuthorizerMode) -> Result<Authorizer, ObserverError> {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(|source| ObserverError::Bind {
                observer: "authorizer",
                source,
            })?;
        let server = MockServer::builder()
            .listener(listener)
            .disable_request_recording()
            .start()
            .await;
        let state = Arc::new(Mutex::new(State {
            mode,
            calls: Vec::new(),
            issued: 0,
            last_allow_receipt: None,
        }));
        let faults = crate::Faults::default();
        Mock::given(method("POST"))
            .and(path(AUTHORIZE_PATH))
            .respond_with(crate::faults::Guarded {
                inner: AuthorizeResponder {
                    state: state.clone(),
                },
                faults: faults.clone(),
                observer: "authorizer",
            })
            .mount(&server)
            .await;
        Ok(Authorizer {
            server: Arc::new(server),
            state,
            faults,
        })
    }

    /// This authorizer's own failures (see [`crate::faults`]).
    pub fn faults(&self) -> crate::Faults {
        self.faults.clone()
    }

    /// Base URL; hosts call `{url}/authorize`.
    pub fn url(&self) -> String {
        self.server.uri()
    }

    pub fn set_mode(&self, mode: AuthorizerMode) {
        lock(&self.state).mode = mode;
    }

    pub fn calls(&self) -> Vec<RecordedAuthorization> {
        lock(&self.state).calls.clone()
    }

    pub fn call_count(&self) -> u64 {
        lock(&self.state).calls.len() as u64
    }

    /// A position in the record, to diff a step with [`Authorizer::calls_since`].
    pub fn mark(&self) -> usize {
        lock(&self.state).calls.len()
    }

    pub fn calls_since(&self, mark: usize) -> Vec<RecordedAuthorization> {
        lock(&self.state)
            .calls
            .get(mark..)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }

    pub fn count_since(&self, mark: usize) -> u64 {
        (self.call_count()).saturating_sub(mark as u64)
    }
}

struct AuthorizeResponder {
    state: Arc<Mutex<State>>,
}

fn parse_request(request: &Request) -> Result<AuthorizationRequest, String> {
    let text = std::str::from_utf8(&request.body)
        .map_err(|e| format!("authorization request body is not UTF-8 ({e}); send JSON"))?;
    let parsed: AuthorizationRequest = serde_json::from_str(text).map_err(|e| {
        format!(
            "authorization request does not match \
             {{version, parent, request, request_digest, now, deadline}}: {e}"
        )
    })?;
    if parsed.version != AUTHORIZER_VERSION {
        return Err(format!(
            "authorization request version `{}` is not supported; send \"{AUTHORIZER_VERSION}\"",
            parsed.version
        ));
    }
    Ok(parsed)
}

impl State {
    fn next_receipt_id(&mut self) -> String {
        self.issued += 1;
        format!("authz-{}", self.issued)
    }

    fn allow(
        &mut self,
        request: &AuthorizationRequest,
        constraints: Option<AuthorityRequest>,
    ) -> AuthorizationReply {
        let id = self.next_receipt_id();
        self.last_allow_receipt = Some(id.clone());
        AuthorizationReply {
            constraints,
            ..AuthorizationReply::allow(
                AuthorizationReceipt {
                    id,
                    binding: request.request_digest.clone(),
                    expires_at: request.now + RECEIPT_TTL_MS,
                },
                request.now,
            )
        }
    }

    /// The JSON reply for modes that answer one.
    fn reply_for(&mut self, request: &AuthorizationRequest) -> AuthorizationReply {
        match self.mode.clone() {
            AuthorizerMode::Allow { constraints } => self.allow(request, constraints),
            AuthorizerMode::Deny { reason } => AuthorizationReply::deny(Some(reason), request.now),
            AuthorizerMode::UnsupportedVersion => AuthorizationReply {
                version: "99".to_string(),
                ..self.allow(request, None)
            },
            AuthorizerMode::Replay => match self.last_allow_receipt.clone() {
                Some(previous) => {
                    let mut reply = self.allow(request, None);
                    if let Some(receipt) = reply.receipt.as_mut() {
                        receipt.id = previous.clone();
                    }
                    // Every later replay repeats the same spent id: the fresh
                    // one `allow` drew was never sent.
                    self.last_allow_receipt = Some(previous);
                    reply
                }
                None => self.allow(request, None),
            },
            AuthorizerMode::LateAllow => AuthorizationReply {
                decided_at: Some(request.deadline + 1),
                ..self.allow(request, None)
            },
            AuthorizerMode::Expired => {
                let mut reply = self.allow(request, None);
                if let Some(receipt) = reply.receipt.as_mut() {
                    receipt.expires_at = request.now;
                }
                reply
            }
            AuthorizerMode::Mismatched => {
                let mut reply = self.allow(request, None);
                if let Some(receipt) = reply.receipt.as_mut() {
                    receipt.binding = mismatched_binding(&request.request_digest);
                }
                reply
            }
            AuthorizerMode::Widening => {
                let constraints =
                    delegation_model::authority::widening_constraint(&request.request.authority);
                self.allow(request, Some(constraints))
            }
            AuthorizerMode::Timeout | AuthorizerMode::Unavailable | AuthorizerMode::Malformed => {
                unreachable!("modes without a JSON reply are answered before reply_for")
            }
        }
    }
}

/// A well-formed digest of something else, so only the comparison can catch it.
fn mismatched_binding(request_digest: &str) -> String {
    delegation_model::digest::sha256_hex(format!("not:{request_digest}").as_bytes())
}

impl Respond for AuthorizeResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut state = lock(&self.state);
        let seq = state.calls.len();
        let mode = state.mode.clone();
        let mut record = RecordedAuthorization {
            seq,
            mode: mode.clone(),
            request: None,
            error: None,
            status: 200,
            reply: None,
        };
        let parsed = parse_request(request);
        let template = match (&mode, parsed) {
            // The failure modes ignore the request: an unreachable or broken
            // authorizer fails whatever it is asked.
            (AuthorizerMode::Timeout, parsed) => {
                record.request = parsed.ok();
                record.status = 504;
                ResponseTemplate::new(504).set_delay(TIMEOUT_HOLD)
            }
            (AuthorizerMode::Unavailable, parsed) => {
                record.request = parsed.ok();
                record.status = 503;
                ResponseTemplate::new(503).set_body_json(json!({
                    "error": "the authorizer is scripted to be unavailable"
                }))
            }
            (AuthorizerMode::Malformed, parsed) => {
                record.request = parsed.ok();
                ResponseTemplate::new(200).set_body_raw(
                    "<<this is not JSON: scripted malformed reply",
                    "application/json",
                )
            }
            (_, Err(message)) => {
                record.error = Some(message.clone());
                record.status = 400;
                ResponseTemplate::new(400).set_body_json(json!({ "error": message }))
            }
            (_, Ok(parsed)) => {
                let reply = state.reply_for(&parsed);
                record.request = Some(parsed);
                let body: Value = serde_json::to_value(&reply)
                    .unwrap_or_else(|e| json!({ "error": format!("could not encode reply: {e}") }));
                record.reply = Some(reply);
                ResponseTemplate::new(200).set_body_json(body)
            }
        };
        state.calls.push(record);
        template
    }
}
