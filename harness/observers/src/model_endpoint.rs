//! The fake model endpoint: answers every model turn from a script chosen by what the request contains, and counts every POST by the instance it was made for.
//!
//! One HTTP server on 127.0.0.1 speaks five wire formats (neutral, Chat
//! Completions, Responses, Anthropic Messages, Gemini). Replies are picked
//! by content (the rules below), never by arrival order, because a parent's
//! follow-up and a child's first request arrive together.
//!
//! # Scripting
//!
//! A script is a list of [`ModelRule`]s. For each request the first rule
//! whose every present condition holds answers it; when none does, the
//! endpoint answers the plain message `ok`. In a scenario file:
//!
//! ```json
//! [
//!   { "when": { "input_contains": "GO" },
//!     "reply": { "spawn": { "role": "worker", "task": "CHILD_TASK do the thing" } } },
//!   { "when": { "input_contains": "CHILD_TASK" }, "attribute_to": "child",
//!     "reply": { "message": { "text": "child done" } }, "delay_ms": 200 },
//!   { "when": { "tool_result_contains": "child done" },
//!     "reply": { "tool_call": { "tool": "fs.write", "arguments": { "path": "x" } } } },
//!   { "when": { "instance": "root" }, "reply": { "fail": { "status": 503 } } }
//! ]
//! ```
//!
//! Replies: `{"message": {"text": T}}`, `{"tool_call": {"tool": N, "arguments": {..}}}`,
//! `{"spawn": SpawnRequest}`, `{"lifecycle": {"op", "target", "message"?}}`
//! and `{"fail": {"status": 400..=599}}`.
//!
//! A `lifecycle` reply is the parent's model calling one of the host's own
//! tools for its children: `op` is `send_input` (with `message`), `resume`
//! (reopens an idle child; with `message` it also runs a turn on it),
//! `close` or `wait`; `target` is a scenario alias, replaced by the runner
//! with the host's instance id once it is bound.
//!
//! # The neutral format (for host adapter authors)
//!
//! `POST {model_endpoint}/neutral/turn`, header `x-delegation-instance: ID`,
//! `content-type: application/json`, body (unknown fields and duplicate keys
//! are refused with 400):
//!
//! ```json
//! { "instance": "ID",              // must equal the header
//!   "role": "worker",              // the instance's role
//!   "input": "text of this turn",  // the user input, or the follow-up text
//!   "tools": [ { "name": "fs.write", "description": "..", "inputSchema": {..} } ],
//!   "tool_result": "text"          // optional: the result of the tool the model asked for last
//! }
//! ```
//!
//! `tools` holds the raw MCP tool definitions exactly as the model is shown
//! them; the endpoint records each one's digest (SHA-256 over RFC 8785 JSON)
//! so the harness can tell what the model saw (SD2). The answer is 200 with
//! `{"reply": R}` where `R` is one of the replies above except `fail`, which
//! is instead the HTTP status it names, with `{"error": {"message": ..}}`.
//! A malformed request is answered 400 with the same error shape saying what
//! was wrong; it is still recorded and counted for the header's instance.
//!
//! # OpenAI Chat Completions (opencode) and Responses (codex)
//!
//! `POST {model_endpoint}/v1/chat/completions` and `POST {model_endpoint}/v1/responses`,
//! streamed as SSE when the body says `"stream": true`, plain JSON otherwise.
//! The text matched by `input_contains` is the last user or tool input item;
//! `tool_result_contains` looks at the tool results that end the
//! conversation. A `spawn` reply becomes a call to the host's own delegation
//! tool: opencode's `task {description, prompt, subagent_type}` for Chat
//! Completions (name configurable in [`ModelEndpointConfig`]), codex's
//! `spawn_agent {message, agent_type}` in namespace `multi_agent_v1` for
//! Responses. Only role and task cross into those tools; the requested
//! authority cannot be expressed there.
//!
//! A `tool_call` reply names an MCP tool as the harness's MCP server serves
//! it (`notes.read`). opencode offers MCP tools to the model under its own
//! name, `<server>_<tool>` sanitised ([`opencode_mcp_tool_name`]:
//! `harness_notes_read`), and knows a call only by that name. So a Chat
//! Completions call goes out under the scripted name when the request offers
//! it, else under the one offered name that is opencode's name for it on one
//! of [`ModelEndpointConfig::mcp_server_names`]; with none or several such
//! names it stays as scripted. The record keeps the scripted reply and the
//! tools as offered (their names and digests), and attribution is untouched.
//! Responses (codex) calls keep the scripted name: the codex adapter's relay
//! rewrites it to codex's own.
//!
//! A `lifecycle` reply becomes codex's own tool in namespace `multi_agent_v1`:
//! `send_input {target, message}`, `resume_agent {id}`, `close_agent {target}`,
//! `wait_agent {targets: [id], timeout_ms}`. Those ids are codex agent ids
//! (thread ids), and the endpoint only knows the protocol's instance id: an
//! adapter's relay must rewrite them to its host's ids before the host reads
//! the answer, as the codex adapter's relay already rewrites scripted MCP tool
//! names. A `resume` with a message is `resume_agent` only (codex has no
//! resume with input; script the `send_input` as the next reply). For Chat
//! Completions (opencode) `send_input`, and `resume` with a message, become
//! the delegation tool with `task_id` (`task {description, prompt,
//! subagent_type, task_id}`: opencode continues that child session with the
//! prompt); `close`, `wait` and a bare `resume` have no opencode tool and are
//! answered with the plain message [`NO_LIFECYCLE_TOOL_TEXT`]. The capabilities
//! `model-lifecycle-tools` and `model-close-tools` say which a host has, so a
//! scenario that needs a tool its host lacks is `unsupported`, never a pass
//! on a message nobody acted on.
//!
//! # Anthropic Messages (Claude Code)
//!
//! `POST {model_endpoint}/v1/messages` (Claude Code adds `?beta=true`), SSE
//! when the body says `"stream": true`, one JSON message otherwise. The text
//! matched by `input_contains` is the last `user` message: its `tool_result`
//! blocks when it has any (also what `tool_result_contains` reads), else its
//! text blocks without Claude Code's `<system-reminder>` blocks; `role:
//! "system"` entries among the messages are system text, not input. A
//! `spawn` reply is a call of Claude Code's delegation tool (`Agent`, or
//! `Task` when only that is offered) with `{description, prompt,
//! subagent_type: role, run_in_background: false}`, in the foreground so the
//! parent's turn waits for its child. A `tool_call` reply goes out under the
//! scripted name when the request offers it, else under the one offered
//! `mcp__<server>__<tool>` whose tool part is the scripted name (as is, or
//! with every character outside `[a-zA-Z0-9_-]` replaced by `_`); otherwise
//! as scripted. `send_input` (and `resume` with a message) is `SendMessage
//! {to, message, summary}` when the request offers it; any other lifecycle
//! reply is the plain message [`NO_LIFECYCLE_TOOL_TEXT`]. Tools are digested
//! per offered definition in Anthropic's shape (`{name, description,
//! input_schema}`). Attribution is by what the host sends: the adapter's
//! `x-delegation-instance` header when present, else Claude Code's own
//! `x-claude-code-agent-id` (a subagent), else `x-claude-code-session-id`
//! (the main thread), so an adapter whose instance ids are Claude Code's
//! session and agent ids needs no relay.
//!
//! # GitHub Copilot CLI (Chat Completions)
//!
//! A Chat Completions request carrying Copilot's `x-initiator` header is
//! Copilot's (module `copilot`): it is counted for the session its system
//! prompt names (`Session folder: .../session-state/<id>`), or, when it has
//! `x-interaction-type: conversation-subagent`, for the `task` call of this
//! endpoint that gave the subagent its prompt (its first user message),
//! `call_harness_<seq>`, the id Copilot records as the subagent's
//! `toolCallId`. A `spawn` reply is `task {name, description, prompt,
//! agent_type: role, mode: "sync"}`; a scripted MCP call goes out as
//! `<server>-<tool>` ([`copilot_mcp_tool_name`]) when only that is offered;
//! a lifecycle reply is [`NO_LIFECYCLE_TOOL_TEXT`]. The record keeps the
//! scripted reply. Other Chat Completions clients are answered as above.
//!
//! # Gemini (Gemini CLI)
//!
//! `POST {model_endpoint}/v1beta/models/<model>:streamGenerateContent?alt=sse`
//! (SSE) and `POST .../<model>:generateContent` (one JSON response). The text
//! matched by `input_contains` is the last `user` content: its
//! `functionResponse` parts when it has any (also what `tool_result_contains`
//! reads: each response's `output`, else `error`, else the response as JSON),
//! else its text parts without Gemini CLI's `<session_context>` part. Tools are
//! the `functionDeclarations` of every `tools` entry, digested as declared
//! (`{name, description, parametersJsonSchema}`). A `spawn` reply is a call of
//! `invoke_agent {agent_name: role, prompt: task}` whose function-call id is
//! `harness_spawn_<seq>` ([`gemini::spawn_call_id`]); a `message` reply to a
//! subagent is its `complete_task` call (`{result: {response: text}}`, or
//! `{result: text}` when `result` is declared a string), the only way a
//! Gemini CLI subagent ends without a reminder request; a `tool_call` goes out
//! under the scripted name when offered, else under Gemini CLI's
//! `mcp_<server>_<tool>` name for it ([`gemini_mcp_tool_name`]) when exactly
//! one configured server's is offered; every `lifecycle` reply is the plain
//! message [`NO_LIFECYCLE_TOOL_TEXT`] (Gemini CLI has no tool to reach a
//! subagent from outside its call). Requests asking for JSON by a response
//! schema (the complexity router's `generateContent`, the next-speaker check)
//! or offering no tools are auxiliary; they are answered with a minimal value
//! of their schema, so Gemini CLI does not retry them.
//!
//! Attribution by what Gemini CLI sends: a subagent's request is told apart
//! by its tools (it is offered `complete_task` and not `invoke_agent`) and is
//! counted for the `invoke_agent` call this endpoint answered whose prompt
//! the subagent's conversation opens with (the call id above, which Gemini CLI
//! keeps in its session store beside the subagent's `agentId`); with no such
//! call, or several with that prompt, it is unattributed, never counted for
//! the instance a header names. Any other request is counted for its
//! `x-delegation-instance` header (an adapter sets it for the process's main
//! session with `GEMINI_CLI_CUSTOM_HEADERS`).
//!
//! # Qwen Code over Chat Completions
//!
//! A Chat Completions request whose `user-agent` is Qwen Code's is read as
//! Qwen Code sends it (`qwen.rs`): a `spawn` is its `agent` call in the
//! foreground, an MCP call goes out under its `mcp__<server>__<tool>` name
//! (with its hash suffix when the name is not provider-safe), and a
//! subagent's request, which carries its parent's headers, is attributed by
//! its first user message: the task of the `agent` call the endpoint
//! answered, to `<role>-call_harness_<seq>`, Qwen Code's own `agentId`.
//!
//! These hosts do not say which instance a request is for. Attribution is,
//! in order: the `x-delegation-instance` header when a host adapter adds it,
//! else the `attribute_to` label of the rule that matched (a child's first
//! request is recognised by its task marker), else `unattributed`. The
//! `role` condition reads an `x-delegation-role` header and fails without it.
//!
//! Auxiliary requests (title generation: no tools in the body, or a system
//! prompt asking for a title) get a short title, are never matched against
//! the rules and are counted apart: they never make a "zero model requests"
//! check pass or fail (MODEL.md section 4, Counting).

mod anthropic;
mod chat;
mod copilot;
pub mod gemini;
mod host_names;
mod neutral;
mod qwen;
mod responses;

pub use anthropic::{AGENT_ID_HEADER, SESSION_ID_HEADER};
pub use copilot::{INITIATOR_HEADER, INTERACTION_TYPE_HEADER, copilot_mcp_tool_name};
pub use gemini::gemini_mcp_tool_name;
pub use host_names::{harness_tools_shown, opencode_mcp_tool_name};
pub use qwen::{mcp_tool_name as qwen_mcp_tool_name, subagent_id as qwen_subagent_id};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use delegation_model::{Evidence, LifecycleCall, SpawnRequest, ToolDefinition};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wiremock::matchers::{any, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::ObserverError;

/// The header carrying the instance a request is made for, and the neutral
/// route: named once in the model, which the reference host follows.
pub use delegation_model::side_channels::{INSTANCE_HEADER, NEUTRAL_TURN_PATH};
/// The header carrying the instance's role, for the `role` condition on Chat/Responses requests.
pub const ROLE_HEADER: &str = "x-delegation-role";
/// The instance a request is counted for when nothing attributes it.
pub const UNATTRIBUTED: &str = "unattributed";
/// What the endpoint answers when no rule matches.
pub const DEFAULT_REPLY_TEXT: &str = "ok";
/// What a dialect answers for a `lifecycle` reply its host has no tool for.
pub const NO_LIFECYCLE_TOOL_TEXT: &str =
    "(scripted lifecycle call has no tool in this wire format; nothing to do)";
/// What auxiliary (title) requests are answered with.
pub const AUXILIARY_REPLY_TEXT: &str = "Harness session";

/// One scripted answer: when the request looks like `when`, answer `reply`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelRule {
    pub when: ModelMatch,
    pub reply: ModelReply,
    /// Hold the answer this long (default 0), to make replies overlap or to race a close.
    #[serde(default)]
    pub delay_ms: u64,
    /// The instance a matched request is counted for when the request does not
    /// name one itself (real hosts send no instance header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute_to: Option<String>,
}

/// Conditions on a request; every present one must hold. No condition at all matches every request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelMatch {
    /// The instance the request names (header or neutral body), compared byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The instance's role (neutral body, or `x-delegation-role`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A substring of the turn's input (the last user or tool input item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_contains: Option<String>,
    /// A substring of the tool result the request carries; fails when it carries none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result_contains: Option<String>,
}

/// What the model answers.
// A scenario holds a handful of rules; boxing the spawn request would only
// make every rule literal in tests and the runner noisier.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelReply {
    /// A plain message: the turn ends.
    Message { text: String },
    /// A call to one tool the instance was shown.
    ToolCall {
        tool: String,
        /// Default: `{}`.
        #[serde(default = "empty_object")]
        arguments: Value,
    },
    /// A delegation request.
    Spawn(SpawnRequest),
    /// A lifecycle tool call on an existing child. In a scenario `target`
    /// names the child by alias; the runner puts the host's id there.
    Lifecycle(LifecycleCall),
    /// The endpoint fails with this HTTP status (400..=599).
    Fail { status: u16 },
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl ModelReply {
    fn message(text: &str) -> ModelReply {
        ModelReply::Message {
            text: text.to_string(),
        }
    }
}

/// Settings that depend on the host under test rather than on the scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelEndpointConfig {
    /// The Chat Completions tool a `spawn` reply calls. Default `task` (opencode).
    pub chat_delegation_tool: String,
    /// The `subagent_type` of a Chat Completions `lifecycle` call (opencode
    /// requires one even when `task_id` names the child). Default `general`,
    /// opencode's built-in subagent.
    pub chat_resume_subagent: String,
    /// The names the host was given for the harness's MCP servers
    /// (`initialize`'s `mcp_servers`), from which a Chat Completions tool call
    /// finds the host's own name for a scripted MCP tool
    /// ([`opencode_mcp_tool_name`]). Default: [`HARNESS_MCP_SERVER_NAME`].
    pub mcp_server_names: Vec<String>,
}

/// The name under which the harness's MCP server is announced to hosts in
/// `initialize` (the runner re-exports it as `MCP_SERVER_NAME`), so that a
/// default endpoint knows the host's names for its tools.
pub const HARNESS_MCP_SERVER_NAME: &str = "harness";

impl Default for ModelEndpointConfig {
    fn default() -> Self {
        ModelEndpointConfig {
            chat_delegation_tool: "task".to_string(),
            chat_resume_subagent: "general".to_string(),
            mcp_server_names: vec![HARNESS_MCP_SERVER_NAME.to_string()],
        }
    }
}

/// The wire format a request arrived in (by its path).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WireFormat {
    Neutral,
    ChatCompletions,
    Responses,
    AnthropicMessages,
    /// Gemini `generateContent` / `streamGenerateContent`.
    Gemini,
    /// Any other path: answered 404, still recorded.
    Unknown,
}

/// How a request's instance was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Attribution {
    /// The `x-delegation-instance` header (or the neutral body's `instance`).
    Request,
    /// The `attribute_to` label of the matching rule.
    Rule,
    Unattributed,
}

/// One request as the endpoint saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecordedModelRequest {
    /// Arrival position, from 0.
    pub seq: usize,
    pub method: String,
    pub path: String,
    pub format: WireFormat,
    pub instance: String,
    pub attribution: Attribution,
    /// Title generation and the like: never counted as a model request.
    pub auxiliary: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The text `input_contains` was matched against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<String>,
    /// Index of the rule that answered; absent for the default reply, failures and auxiliary requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<usize>,
    /// Tools the model was shown: name to digest of the definition in this
    /// request's own wire shape (compare digests within one format only).
    #[serde(default)]
    pub tools: BTreeMap<String, String>,
    /// The HTTP status answered.
    pub status: u16,
    /// The reply sent (a `fail` reply too); absent for refused and failing-mode requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<ModelReply>,
    /// Why the request was refused, when it was malformed or addressed nowhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RecordedModelRequest {
    /// A POST on behalf of an instance that is not auxiliary: what "model requests" counts.
    pub fn is_model_request(&self) -> bool {
        self.method == "POST" && !self.auxiliary
    }
}

/// The model endpoint's part of one step's [`Evidence`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelEvidence {
    pub model_requests: BTreeMap<String, u64>,
    pub auxiliary_requests: u64,
    /// Tool name to the distinct digests shown under that name.
    pub model_visible_tools: BTreeMap<String, Vec<String>>,
}

impl ModelEvidence {
    /// Adds these counts to a step's evidence (which the runner assembles from every observer).
    pub fn add_to(&self, evidence: &mut Evidence) {
        for (instance, count) in &self.model_requests {
            *evidence.model_requests.entry(instance.clone()).or_default() += count;
        }
        evidence.auxiliary_requests += self.auxiliary_requests;
        for (name, digests) in &self.model_visible_tools {
            let seen = evidence
                .model_visible_tools
                .entry(name.clone())
                .or_default();
            for digest in digests {
                if !seen.contains(digest) {
                    seen.push(digest.clone());
                }
            }
            seen.sort();
        }
    }
}

/// What a format parser extracted from a request body.
#[derive(Debug, Default)]
struct ParsedTurn {
    /// The instance the request names itself (header, or neutral body).
    instance: Option<String>,
    role: Option<String>,
    input: Option<String>,
    tool_result: Option<String>,
    tools: BTreeMap<String, String>,
    auxiliary: bool,
    stream: bool,
    /// Echoed back, as real endpoints do.
    model: String,
    /// Chat Completions `stream_options.include_usage`.
    include_usage: bool,
}

impl ModelMatch {
    fn holds(&self, turn: &ParsedTurn) -> bool {
        fn contains(haystack: &Option<String>, needle: &Option<String>) -> bool {
            match needle {
                None => true,
                Some(needle) => haystack.as_deref().is_some_and(|h| h.contains(needle)),
            }
        }
        fn equals(actual: &Option<String>, wanted: &Option<String>) -> bool {
            wanted.is_none() || actual == wanted
        }
        equals(&turn.instance, &self.instance)
            && equals(&turn.role, &self.role)
            && contains(&turn.input, &self.input_contains)
            && contains(&turn.tool_result, &self.tool_result_contains)
    }
}

/// Context a renderer needs besides the reply itself.
struct RenderContext<'a> {
    seq: usize,
    model: &'a str,
    stream: bool,
    include_usage: bool,
    config: &'a ModelEndpointConfig,
    /// The tools the request offered the model, by name.
    offered_tools: &'a BTreeMap<String, String>,
    /// What a Gemini request said beyond the parsed turn (nothing for other formats).
    gemini: &'a gemini::GeminiTurn,
    /// The request came from Qwen Code (its `user-agent`): a Chat Completions
    /// spawn is its `agent` call, its MCP tools are `mcp__<server>__<tool>`.
    from_qwen: bool,
}

impl RenderContext<'_> {
    /// The name a Chat Completions call of the scripted tool `scripted` goes
    /// out under. A script names MCP tools as the harness's MCP server serves
    /// them; opencode offers them to the model as `<server>_<tool>` and knows
    /// a call only by that name. So when the request does not offer
    /// `scripted` itself but offers exactly one of its opencode names (one per
    /// configured server), the call uses that name. Otherwise (the scripted
    /// name is offered, nothing matches, or several servers' names do) it
    /// stays as scripted: an unknown call is then the host's to refuse, and
    /// an ambiguous one is never resolved by guessing.
    fn called_tool_name(&self, scripted: &str) -> String {
        if self.offered_tools.contains_key(scripted) {
            return scripted.to_string();
        }
        let offered: std::collections::BTreeSet<String> = self
            .config
            .mcp_server_names
            .iter()
            .map(|server| opencode_mcp_tool_name(server, scripted))
            .filter(|name| self.offered_tools.contains_key(name))
            .collect();
        let mut offered = offered.into_iter();
        match (offered.next(), offered.next()) {
            (Some(only), None) => only,
            _ => scripted.to_string(),
        }
    }
}

struct Script {
    rules: Vec<ModelRule>,
    failing: Option<u16>,
    config: ModelEndpointConfig,
    records: Vec<RecordedModelRequest>,
    /// The `task` calls answered to GitHub Copilot CLI, for attributing its subagents' requests.
    copilot: copilot::Delegations,
}

fn lock(script: &Mutex<Script>) -> MutexGuard<'_, Script> {
    // A panic while answering one request must not stop the endpoint from answering the next.
    script.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Handle on a running model endpoint. Clones share one server, which stops when the last clone is dropped.
#[derive(Clone)]
pub struct ModelEndpoint {
    server: Arc<MockServer>,
    script: Arc<Mutex<Script>>,
    faults: crate::Faults,
}

impl std::fmt::Debug for ModelEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelEndpoint")
            .field("url", &self.url())
            .finish_non_exhaustive()
    }
}

impl ModelEndpoint {
    /// Starts an endpoint on 127.0.0.1 (ephemeral port) with the default configuration.
    pub async fn start(rules: Vec<ModelRule>) -> Result<ModelEndpoint, ObserverError> {
        ModelEndpoint::start_with(rules, ModelEndpointConfig::default()).await
    }

    pub async fn start_with(
        rules: Vec<ModelRule>,
        config: ModelEndpointConfig,
    ) -> Result<ModelEndpoint, ObserverError> {
        validate_rules(&rules)?;
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(|source| ObserverError::Bind {
                observer: "model endpoint",
                source,
            })?;
        // Recording is ours (with attribution); wiremock's own copy of every body would only cost memory.
        let server = MockServer::builder()
            .listener(listener)
            .disable_request_recording()
            .start()
            .await;
        let script = Arc::new(Mutex::new(Script {
            rules,
            failing: None,
            config,
            records: Vec::new(),
            copilot: copilot::Delegations::default(),
        }));
        let routes = [
            (NEUTRAL_TURN_PATH, WireFormat::Neutral),
            ("/v1/chat/completions", WireFormat::ChatCompletions),
            ("/v1/responses", WireFormat::Responses),
            ("/v1/messages", WireFormat::AnthropicMessages),
        ];
        let faults = crate::Faults::default();
        let guarded = |format| crate::faults::Guarded {
            inner: Responder {
                script: script.clone(),
                format,
            },
            faults: faults.clone(),
            observer: "model endpoint",
        };
        for (route, format) in routes {
            Mock::given(method("POST"))
                .and(path(route))
                .respond_with(guarded(format))
                .with_priority(1)
                .mount(&server)
                .await;
        }
        Mock::given(method("POST"))
            .and(gemini::Route)
            .respond_with(Responder {
                script: script.clone(),
                format: WireFormat::Gemini,
            })
            .with_priority(1)
            .mount(&server)
            .await;
        Mock::given(any())
            .respond_with(guarded(WireFormat::Unknown))
            .with_priority(u8::MAX)
            .mount(&server)
            .await;
        Ok(ModelEndpoint {
            server: Arc::new(server),
            script,
            faults,
        })
    }

    /// This endpoint's own failures (see [`crate::faults`]).
    pub fn faults(&self) -> crate::Faults {
        self.faults.clone()
    }

    /// The names the host was told to give the harness's MCP server(s) ([`ModelEndpointConfig::mcp_server_names`]).
    pub fn mcp_server_names(&self) -> Vec<String> {
        lock(&self.script).config.mcp_server_names.clone()
    }

    /// Base URL, e.g. `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.server.uri()
    }

    /// Replaces the script; requests already answered keep their records.
    pub fn set_rules(&self, rules: Vec<ModelRule>) -> Result<(), ObserverError> {
        validate_rules(&rules)?;
        lock(&self.script).rules = rules;
        Ok(())
    }

    /// While `Some(status)`, every request (auxiliary ones too) fails with that status.
    pub fn set_failing(&self, status: Option<u16>) -> Result<(), ObserverError> {
        if let Some(status) = status
            && !is_error_status(status)
        {
            return Err(ObserverError::InvalidFailingStatus { status });
        }
        lock(&self.script).failing = status;
        Ok(())
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedModelRequest> {
        lock(&self.script).records.clone()
    }

    /// Requests that arrived after `mark` (from [`ModelEndpoint::mark`]).
    pub fn requests_since(&self, mark: usize) -> Vec<RecordedModelRequest> {
        lock(&self.script)
            .records
            .get(mark..)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }

    /// Model requests (POSTs, auxiliary ones excluded) counted for `instance` so far.
    pub fn count_for(&self, instance: &str) -> u64 {
        lock(&self.script)
            .records
            .iter()
            .filter(|r| r.is_model_request() && r.instance == instance)
            .count() as u64
    }

    /// Auxiliary requests so far.
    pub fn auxiliary_count(&self) -> u64 {
        lock(&self.script)
            .records
            .iter()
            .filter(|r| r.auxiliary)
            .count() as u64
    }

    /// A position in the record, to diff a step with [`ModelEndpoint::evidence_since`].
    pub fn mark(&self) -> usize {
        lock(&self.script).records.len()
    }

    /// What arrived after `mark`: model requests per instance, auxiliary count, tools shown.
    pub fn evidence_since(&self, mark: usize) -> ModelEvidence {
        let mut evidence = ModelEvidence::default();
        for record in self.requests_since(mark) {
            if record.auxiliary {
                evidence.auxiliary_requests += 1;
                continue;
            }
            if !record.is_model_request() {
                continue;
            }
            *evidence.model_requests.entry(record.instance).or_default() += 1;
            for (name, digest) in record.tools {
                let seen = evidence.model_visible_tools.entry(name).or_default();
                if !seen.contains(&digest) {
                    seen.push(digest);
                    seen.sort();
                }
            }
        }
        evidence
    }
}

fn is_error_status(status: u16) -> bool {
    (400..=599).contains(&status)
}

fn validate_rules(rules: &[ModelRule]) -> Result<(), ObserverError> {
    for (index, rule) in rules.iter().enumerate() {
        if let ModelReply::Fail { status } = rule.reply
            && !is_error_status(status)
        {
            return Err(ObserverError::InvalidFailureStatus { index, status });
        }
    }
    Ok(())
}

/// Answers one route; shares the script with every other route.
struct Responder {
    script: Arc<Mutex<Script>>,
    format: WireFormat,
}

fn header(request: &Request, name: &str) -> Option<String> {
    request
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn error_response(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "error": { "message": message, "type": "delegation_harness_error" }
    }))
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let header_instance = header(request, INSTANCE_HEADER);
        // GitHub Copilot CLI says whose a request is by its own headers and prompts.
        let copilot = (self.format == WireFormat::ChatCompletions && copilot::is_copilot(request))
            .then(|| copilot::sender(request));
        let mut gemini_turn = gemini::GeminiTurn::default();
        let parsed = match self.format {
            WireFormat::Neutral => neutral::parse(request, header_instance.as_deref()),
            WireFormat::ChatCompletions => chat::parse(request),
            WireFormat::Responses => responses::parse(request),
            WireFormat::AnthropicMessages => anthropic::parse(request),
            WireFormat::Gemini => gemini::parse(request).map(|(turn, gemini)| {
                gemini_turn = gemini;
                turn
            }),
            WireFormat::Unknown => Err(format!(
                "no model route at {} {}; this endpoint serves POST /neutral/turn, \
                 POST /v1/chat/completions, POST /v1/responses, POST /v1/messages and \
                 POST /v1beta/models/<model>:streamGenerateContent (or :generateContent)",
                request.method,
                request.url.path()
            )),
        };
        let mut script = lock(&self.script);
        let seq = script.records.len();
        let mut record = RecordedModelRequest {
            seq,
            method: request.method.to_string(),
            path: request.url.path().to_string(),
            format: self.format,
            instance: header_instance
                .clone()
                .unwrap_or_else(|| UNATTRIBUTED.to_string()),
            attribution: if header_instance.is_some() {
                Attribution::Request
            } else {
                Attribution::Unattributed
            },
            auxiliary: false,
            role: header(request, ROLE_HEADER),
            input: None,
            tool_result: None,
            rule: None,
            tools: BTreeMap::new(),
            status: 200,
            reply: None,
            error: None,
        };

        let mut turn = match parsed {
            Ok(turn) => turn,
            Err(message) => {
                let status = script.failing.unwrap_or(match self.format {
                    WireFormat::Unknown => 404,
                    _ => 400,
                });
                record.status = status;
                record.error = Some(message.clone());
                script.records.push(record);
                return error_response(status, &message);
            }
        };
        let from_qwen = self.format == WireFormat::ChatCompletions && qwen::is_qwen(request);
        // A Qwen Code subagent's request carries its parent's headers; its
        // body says which subagent it is (see qwen.rs).
        if from_qwen && let Some(subagent) = qwen::subagent_of(request, &script.records) {
            turn.instance = Some(subagent);
        }
        if let Some(task) = &gemini_turn.subagent_task {
            // A Gemini CLI subagent shares its parent's process and headers.
            turn.instance = gemini::spawned_instance(task, &script.records);
            record.instance = UNATTRIBUTED.to_string();
            record.attribution = Attribution::Unattributed;
        } else if turn.instance.is_none() {
            turn.instance = header_instance;
        }
        if turn.instance.is_none()
            && let Some(sender) = &copilot
        {
            turn.instance = script.copilot.instance_of(sender);
        }
        if turn.role.is_none() {
            turn.role = record.role.clone();
        }
        record.role = turn.role.clone();
        record.input = turn.input.clone();
        record.tool_result = turn.tool_result.clone();
        record.tools = std::mem::take(&mut turn.tools);
        record.auxiliary = turn.auxiliary;
        if let Some(instance) = &turn.instance {
            record.instance = instance.clone();
            record.attribution = Attribution::Request;
        }

        if let Some(status) = script.failing {
            record.status = status;
            script.records.push(record);
            return error_response(
                status,
                "the model endpoint is scripted to fail every request",
            );
        }

        let (reply, delay_ms) = if turn.auxiliary {
            (ModelReply::message(AUXILIARY_REPLY_TEXT), 0)
        } else {
            match script.rules.iter().position(|rule| rule.when.holds(&turn)) {
                Some(index) => {
                    let rule = &script.rules[index];
                    record.rule = Some(index);
                    if turn.instance.is_none()
                        && let Some(label) = &rule.attribute_to
                    {
                        record.instance = label.clone();
                        record.attribution = Attribution::Rule;
                    }
                    (rule.reply.clone(), rule.delay_ms)
                }
                None => (ModelReply::message(DEFAULT_REPLY_TEXT), 0),
            }
        };

        let template = if let ModelReply::Fail { status } = reply {
            record.status = status;
            let source = record
                .rule
                .map_or_else(|| "no rule".to_string(), |index| format!("rule {index}"));
            record.reply = Some(reply);
            error_response(status, &format!("scripted failure ({source})"))
        } else {
            // The record keeps the scripted reply; Copilot is sent its own tools' terms.
            let sent = match &copilot {
                Some(sender) => {
                    let servers = script.config.mcp_server_names.clone();
                    copilot::copilot_reply(
                        &reply,
                        seq,
                        &record.tools,
                        &servers,
                        sender,
                        &mut script.copilot,
                    )
                }
                None => reply.clone(),
            };
            let context = RenderContext {
                seq,
                model: &turn.model,
                stream: turn.stream,
                include_usage: turn.include_usage,
                config: &script.config,
                offered_tools: &record.tools,
                gemini: &gemini_turn,
                from_qwen,
            };
            let template = match self.format {
                WireFormat::Neutral => neutral::render(&reply),
                WireFormat::ChatCompletions => chat::render(&sent, &context),
                WireFormat::Responses => responses::render(&reply, &context),
                WireFormat::AnthropicMessages => anthropic::render(&reply, &context, &record.tools),
                WireFormat::Gemini => gemini::render(&reply, &context, request),
                WireFormat::Unknown => unreachable!("unknown routes never parse"),
            };
            record.reply = Some(reply);
            template
        };
        script.records.push(record);
        if delay_ms > 0 {
            template.set_delay(Duration::from_millis(delay_ms))
        } else {
            template
        }
    }
}

/// Name and digest of each tool definition, keyed by `name`; `pick` selects
/// the definition object inside a format's wrapper.
fn digest_tools(tools: &[Value], pick: impl Fn(&Value) -> &Value) -> BTreeMap<String, String> {
    tools
        .iter()
        .enumerate()
        .map(|(index, tool)| {
            let definition = pick(tool);
            match ToolDefinition::from_value(definition.clone()) {
                Ok(parsed) => (parsed.name, parsed.digest),
                Err(error) => {
                    let name = definition
                        .get("name")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("#{index}"), str::to_string);
                    (name, format!("undigestable: {error}"))
                }
            }
        })
        .collect()
}

/// Text of a message `content`: a string, or the `text` of each part joined by newlines.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// Whether system text asks for a title (opencode's title agent, and similar).
fn asks_for_title(system_text: &str) -> bool {
    let lower = system_text.to_lowercase();
    [
        "title generator",
        "generate a title",
        "generate a short title",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase))
}

/// Builds an SSE body from `(event name, data)` pairs.
fn sse_body<'a>(events: impl IntoIterator<Item = (Option<&'a str>, String)>) -> String {
    let mut body = String::new();
    for (event, data) in events {
        if let Some(event) = event {
            body.push_str("event: ");
            body.push_str(event);
            body.push('\n');
        }
        body.push_str("data: ");
        body.push_str(&data);
        body.push_str("\n\n");
    }
    body
}

fn sse_response(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("cache-control", "no-cache")
        .set_body_raw(body, "text/event-stream")
}

/// The JSON body of a request, or a message saying why it is not one.
fn json_body(request: &Request) -> Result<Value, String> {
    let text = std::str::from_utf8(&request.body)
        .map_err(|e| format!("request body is not UTF-8 ({e}); send JSON"))?;
    delegation_model::digest::parse_strict(text)
        .map_err(|e| format!("request body is not acceptable JSON: {e}"))
}
