//! Qwen Code over Chat Completions: its delegation tool `agent`, its names for MCP tools, and which subagent a request is for, told from what Qwen Code itself sends.
//!
//! Qwen Code (`@qwen-code/qwen-code`) speaks Chat Completions like opencode,
//! but its delegation tool is `agent {description, prompt, subagent_type,
//! run_in_background}`, its MCP tools are `mcp__<server>__<tool>`, and a
//! subagent's requests go out from the parent's process with the parent's
//! headers. What tells a subagent's request apart is its body: its first user
//! message is the prompt of the `agent` call that started it. Qwen Code names
//! that subagent `<subagent_type>-<tool call id>` (its `agentId`, kept in its
//! store as `agent-<agentId>.meta.json`), and the tool call id is the one this
//! endpoint gave the call; so the endpoint knows the subagent's id from its
//! own answer and Qwen Code's request, with nothing added by an adapter.

use std::collections::BTreeMap;

use delegation_model::SpawnRequest;
use serde_json::{Value, json};
use wiremock::Request;

use super::{RecordedModelRequest, WireFormat, content_text, header, json_body};

/// Qwen Code's delegation tool.
pub const DELEGATION_TOOL: &str = "agent";
/// How Qwen Code's `user-agent` starts (`QwenCode/0.24.4 (linux; x64)`).
const USER_AGENT_PREFIX: &str = "QwenCode/";

/// Whether the request says it comes from Qwen Code (its own `user-agent`).
pub(super) fn is_qwen(request: &Request) -> bool {
    header(request, "user-agent").is_some_and(|agent| agent.starts_with(USER_AGENT_PREFIX))
}

/// The id of the tool call in the Chat Completions answer to request `seq`.
pub(super) fn call_id(seq: usize) -> String {
    format!("call_harness_{seq}")
}

/// The `agentId` Qwen Code gives the subagent the endpoint's `agent` call in
/// its answer to request `seq` starts: `<subagent_type>-<tool call id>`.
pub fn subagent_id(role: &str, seq: usize) -> String {
    format!("{role}-{}", call_id(seq))
}

/// A `spawn` reply as Qwen Code's `agent` call, in the foreground
/// (`run_in_background: false`) so the parent's turn waits for its child.
/// Qwen Code's default would be the foreground too, but the argument says so
/// rather than leaning on a default.
pub(super) fn spawn_arguments(spawn: &SpawnRequest) -> String {
    json!({
        "description": format!("delegate to {}", spawn.role),
        "prompt": spawn.task,
        "subagent_type": spawn.role,
        "run_in_background": false,
    })
    .to_string()
}

/// The longest tool name Qwen Code sends a provider.
const MAX_TOOL_NAME_LENGTH: usize = 63;

/// Qwen Code's `stableToolNameHash`: 32-bit FNV-1a over the UTF-16 code
/// units, in base 36, padded to 7 digits.
fn stable_hash(name: &str) -> String {
    let mut hash: u32 = 2_166_136_261;
    for unit in name.encode_utf16() {
        hash = (hash ^ u32::from(unit)).wrapping_mul(16_777_619);
    }
    let mut digits = Vec::new();
    let mut rest = hash;
    loop {
        digits.push(char::from_digit(rest % 36, 36).expect("a base-36 digit"));
        rest /= 36;
        if rest == 0 {
            break;
        }
    }
    let text: String = digits.into_iter().rev().collect();
    format!("{text:0>7}")
}

/// Qwen Code's name for tool `tool` of the MCP server it was told to call
/// `server` (its `normalizeToolNameForProvider` of `mcp__<server>__<tool>`):
/// as is when it is a letter followed by `[A-Za-z0-9_-]`, 63 characters at
/// most; otherwise each UTF-16 code unit outside that set becomes `_` and a
/// hash of the raw name is appended (`mcp__harness__notes_read_1k3gxzc`),
/// cut to 63 characters.
pub fn mcp_tool_name(server: &str, tool: &str) -> String {
    let raw = format!("mcp__{server}__{tool}");
    let safe = raw
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if raw.len() <= MAX_TOOL_NAME_LENGTH && safe {
        return raw;
    }
    let mut sanitised = String::with_capacity(raw.len());
    for c in raw.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            sanitised.push(c);
        } else {
            sanitised.extend(std::iter::repeat_n('_', c.len_utf16()));
        }
    }
    let suffix = format!("_{}", stable_hash(&raw));
    // Only ASCII is left, so bytes are characters.
    sanitised.truncate(MAX_TOOL_NAME_LENGTH - suffix.len());
    sanitised + &suffix
}

/// The one offered `mcp__<server>__<tool>` name for the scripted tool, over
/// the configured server names; `None` when none or several such names are.
/// It wins over the scripted name itself: a script names the harness's MCP
/// tools, Qwen Code offers that name only for a tool the harness's server
/// serves, and Qwen Code's own built-ins (`read_file`, `write_file`, `edit`,
/// `glob`, ...) share names with tools the catalogue serves, which a call
/// under the bare name would reach instead.
pub(super) fn offered_mcp_name(
    scripted: &str,
    servers: &[String],
    offered: &BTreeMap<String, String>,
) -> Option<String> {
    let mut names: Vec<String> = servers
        .iter()
        .map(|server| mcp_tool_name(server, scripted))
        .filter(|name| offered.contains_key(name))
        .collect();
    names.dedup();
    match names.as_slice() {
        [only] => Some(only.clone()),
        _ => None,
    }
}

/// The text parts of a request's first user message.
fn first_user_texts(body: &Value) -> Vec<String> {
    let Some(first) = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|messages| {
            messages
                .iter()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        })
    else {
        return Vec::new();
    };
    match first.get("content") {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .map(str::to_string)
            .collect(),
        Some(content) => content_text(content).into_iter().collect(),
        None => Vec::new(),
    }
}

/// The subagent a Qwen Code request is made for, when it is a subagent's:
/// its first user message has, as one whole text part, the task of a spawn
/// this endpoint answered as Qwen Code's `agent` call (the latest such answer
/// when two spawns had the same task). A main session's request, whose
/// first user message is its own prompt, is none.
pub(super) fn subagent_of(request: &Request, records: &[RecordedModelRequest]) -> Option<String> {
    let body = json_body(request).ok()?;
    let texts = first_user_texts(&body);
    if texts.is_empty() {
        return None;
    }
    records.iter().rev().find_map(|record| match &record.reply {
        Some(super::ModelReply::Spawn(spawn))
            if record.format == WireFormat::ChatCompletions
                && record.tools.contains_key(DELEGATION_TOOL)
                && texts.iter().any(|text| *text == spawn.task) =>
        {
            Some(subagent_id(&spawn.role, record.seq))
        }
        _ => None,
    })
}
