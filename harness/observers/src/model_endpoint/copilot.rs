//! GitHub Copilot CLI on Chat Completions: which instance a request is for, read from what Copilot itself sends, and Copilot's own tools for a scripted spawn or MCP call.
//!
//! Copilot (`COPILOT_PROVIDER_BASE_URL` pointed here) sends no instance
//! header. What it does send, on every request:
//!
//! - `x-initiator` (`user` or `agent`): present on all of Copilot's requests,
//!   so it tells a Copilot request from another Chat Completions client's;
//! - `x-interaction-type: conversation-subagent` on every request a subagent
//!   makes (the main thread sends `conversation-user` on a prompt's first
//!   request and nothing on its follow-ups);
//! - the session folder in the system prompt (`Session folder:
//!   .../session-state/<session id>`), the same for a session's subagents;
//! - as a subagent's first user message, the `prompt` its parent's `task`
//!   call gave it (after Copilot's `<current_datetime>` preamble), on each of
//!   its requests.
//!
//! So a main-thread request is counted for the session id (which an adapter
//! can choose with `--session-id`), and a subagent's for the `task` call that
//! started it: when this endpoint answered a request of session S with a
//! `task` call `call_harness_N` whose prompt is P, a subagent request of
//! session S whose first user message is P is counted for `call_harness_N`.
//! A custom agent's requests (`~/.copilot/agents/*.agent.md`) carry its own
//! system prompt, without the session folder: for those the prompt alone
//! decides, across every session this endpoint answered.
//! Copilot records that call id as the subagent's `toolCallId` in its own
//! events (`subagent.started`), which is how an adapter names the instance
//! without telling the endpoint anything. Two `task` calls with the same
//! prompt in one session are told apart by nothing Copilot sends: the later
//! call is credited.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use wiremock::Request;

use super::{ModelReply, NO_LIFECYCLE_TOOL_TEXT, content_text, header, json_body};

/// Present on every request Copilot makes (`user` or `agent`).
pub const INITIATOR_HEADER: &str = "x-initiator";
/// `conversation-subagent` on a subagent's requests.
pub const INTERACTION_TYPE_HEADER: &str = "x-interaction-type";
const SUBAGENT_INTERACTION: &str = "conversation-subagent";
/// Copilot's delegation tool.
pub const TASK_TOOL: &str = "task";
/// What precedes the session id in Copilot's system prompt.
const SESSION_FOLDER_MARK: &str = "session-state/";
/// Copilot's preamble on every user message.
const DATETIME_CLOSE: &str = "</current_datetime>";

/// Whether a Chat Completions request comes from GitHub Copilot CLI.
pub(super) fn is_copilot(request: &Request) -> bool {
    header(request, INITIATOR_HEADER).is_some()
}

/// What one Copilot request says about whose it is.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Sender {
    /// The session id from the system prompt's session folder.
    pub session: Option<String>,
    /// Sent with `x-interaction-type: conversation-subagent`.
    pub subagent: bool,
    /// The first user message without Copilot's datetime preamble.
    pub first_user_text: Option<String>,
}

/// The text of a user message without Copilot's `<current_datetime>` preamble.
fn without_preamble(text: &str) -> &str {
    match text.find(DATETIME_CLOSE) {
        Some(at) if text.trim_start().starts_with("<current_datetime>") => {
            text[at + DATETIME_CLOSE.len()..].trim()
        }
        _ => text.trim(),
    }
}

/// The session id in a system prompt: the UUID after `session-state/`.
fn session_in(system: &str) -> Option<String> {
    let start = system.find(SESSION_FOLDER_MARK)? + SESSION_FOLDER_MARK.len();
    let id: String = system[start..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit() || *c == '-')
        .collect();
    (id.len() == 36).then_some(id)
}

pub(super) fn sender(request: &Request) -> Sender {
    let Ok(body) = json_body(request) else {
        return Sender::default();
    };
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let role = |m: &Value| {
        m.get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let system: String = messages
        .iter()
        .filter(|m| role(m) == "system")
        .filter_map(|m| m.get("content").and_then(content_text))
        .collect::<Vec<_>>()
        .join("\n");
    Sender {
        session: session_in(&system),
        subagent: header(request, INTERACTION_TYPE_HEADER).as_deref() == Some(SUBAGENT_INTERACTION),
        first_user_text: messages
            .iter()
            .find(|m| role(m) == "user")
            .and_then(|m| m.get("content").and_then(content_text))
            .map(|text| without_preamble(&text).to_string()),
    }
}

/// One `task` call this endpoint answered.
#[derive(Debug)]
struct Delegation {
    session: String,
    prompt: String,
    call: String,
}

/// The `task` calls this endpoint answered, in order.
#[derive(Debug, Default)]
pub(super) struct Delegations {
    calls: Vec<Delegation>,
}

impl Delegations {
    /// The instance a request is counted for: the `task` call that started a
    /// subagent, the session for the main thread; `None` when Copilot's
    /// request does not say (no session folder, or a subagent whose prompt
    /// came from no call of this endpoint).
    pub(super) fn instance_of(&self, sender: &Sender) -> Option<String> {
        if !sender.subagent {
            return sender.session.clone();
        }
        let prompt = sender.first_user_text.as_deref()?;
        self.calls
            .iter()
            .rev()
            .filter(|d| sender.session.as_ref().is_none_or(|s| *s == d.session))
            .find(|d| d.prompt.trim() == prompt)
            .map(|d| d.call.clone())
    }

    fn record(&mut self, session: &str, prompt: &str, call: &str) {
        self.calls.push(Delegation {
            session: session.to_string(),
            prompt: prompt.to_string(),
            call: call.to_string(),
        });
    }
}

/// Copilot's name for MCP tool `tool` of server `server`: `<server>-<tool>`,
/// every character outside `[a-zA-Z0-9_-]` replaced by `-` (seen with 1.0.102:
/// `notes.read` on server `harness` is offered as `harness-notes-read`).
pub fn copilot_mcp_tool_name(server: &str, tool: &str) -> String {
    let sanitise = |part: &str| -> String {
        part.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    format!("{}-{}", sanitise(server), sanitise(tool))
}

/// The call id this endpoint gives the tool call answering request `seq`.
pub(super) fn call_id(seq: usize) -> String {
    format!("call_harness_{seq}")
}

/// The reply in Copilot's terms, for `chat::render`: a spawn is a foreground
/// (`mode: sync`) `task` call; a scripted MCP call goes out under Copilot's
/// name when only that is offered; a lifecycle call has no Copilot tool here.
/// Records the spawn's prompt under its call id for attribution.
pub(super) fn copilot_reply(
    reply: &ModelReply,
    seq: usize,
    offered: &BTreeMap<String, String>,
    mcp_server_names: &[String],
    sender: &Sender,
    delegations: &mut Delegations,
) -> ModelReply {
    match reply {
        ModelReply::Spawn(spawn) => {
            if let Some(session) = &sender.session {
                delegations.record(session, &spawn.task, &call_id(seq));
            }
            ModelReply::ToolCall {
                tool: TASK_TOOL.to_string(),
                arguments: json!({
                    "name": spawn.role,
                    "description": format!("delegate to {}", spawn.role),
                    "prompt": spawn.task,
                    "agent_type": spawn.role,
                    "mode": "sync",
                }),
            }
        }
        ModelReply::ToolCall { tool, arguments } if !offered.contains_key(tool) => {
            let mut names = mcp_server_names
                .iter()
                .map(|server| copilot_mcp_tool_name(server, tool))
                .filter(|name| offered.contains_key(name));
            let tool = match (names.next(), names.next()) {
                (Some(only), None) => only,
                _ => tool.clone(),
            };
            ModelReply::ToolCall {
                tool,
                arguments: arguments.clone(),
            }
        }
        ModelReply::Lifecycle(_) => ModelReply::Message {
            text: NO_LIFECYCLE_TOOL_TEXT.to_string(),
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_id_is_read_from_the_session_folder_and_nothing_else() {
        let id = "74454d3b-a0c9-4232-88a2-6ff63f451c27";
        assert_eq!(
            session_in(&format!(
                "x\nSession folder: /h/.copilot/session-state/{id}\n\nContents"
            )),
            Some(id.to_string())
        );
        assert_eq!(session_in("Session folder: /h/session-state/abc\n"), None);
        assert_eq!(session_in("no folder"), None);
    }

    #[test]
    fn the_datetime_preamble_is_not_part_of_the_prompt() {
        assert_eq!(
            without_preamble("<current_datetime>2026</current_datetime>\n\nchild task"),
            "child task"
        );
        assert_eq!(without_preamble("plain"), "plain");
    }

    #[test]
    fn a_subagent_is_the_latest_call_that_delegated_its_prompt_in_its_session() {
        let mut delegations = Delegations::default();
        delegations.record("s1", "child task", "call_harness_1");
        delegations.record("s2", "child task", "call_harness_2");
        let sender = |session: &str, subagent: bool, text: &str| Sender {
            session: Some(session.to_string()),
            subagent,
            first_user_text: Some(text.to_string()),
        };
        assert_eq!(
            delegations.instance_of(&sender("s1", true, "child task")),
            Some("call_harness_1".to_string())
        );
        assert_eq!(
            delegations.instance_of(&sender("s2", true, "child task")),
            Some("call_harness_2".to_string())
        );
        // The main thread is its session, whatever its input.
        assert_eq!(
            delegations.instance_of(&sender("s1", false, "child task")),
            Some("s1".to_string())
        );
        // A subagent whose prompt no call of this endpoint gave is not guessed.
        assert_eq!(delegations.instance_of(&sender("s1", true, "other")), None);
        // A custom agent sends no session folder: the latest call with its prompt.
        let custom = Sender {
            session: None,
            subagent: true,
            first_user_text: Some("child task".to_string()),
        };
        assert_eq!(
            delegations.instance_of(&custom),
            Some("call_harness_2".to_string())
        );
        // Nor is a main-thread request without a session folder.
        assert_eq!(
            delegations.instance_of(&Sender {
                subagent: false,
                ..custom
            }),
            None
        );
        delegations.record("s1", "child task", "call_harness_3");
        assert_eq!(
            delegations.instance_of(&sender("s1", true, "child task")),
            Some("call_harness_3".to_string())
        );
    }

    #[test]
    fn copilot_names_an_mcp_tool_server_dash_tool() {
        assert_eq!(
            copilot_mcp_tool_name("harness", "notes.read"),
            "harness-notes-read"
        );
        assert_eq!(copilot_mcp_tool_name("a b", "x_y"), "a-b-x_y");
    }
}
