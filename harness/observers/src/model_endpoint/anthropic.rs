//! Anthropic Messages (`POST /v1/messages`), as Claude Code speaks it: SSE when the body says `"stream": true`, one JSON message otherwise.

use std::collections::BTreeMap;

use delegation_model::{LifecycleCall, LifecycleOp};
use serde_json::{Value, json};
use wiremock::{Request, ResponseTemplate};

use super::{
    INSTANCE_HEADER, ModelReply, NO_LIFECYCLE_TOOL_TEXT, ParsedTurn, RenderContext, asks_for_title,
    content_text, digest_tools, header, json_body, sse_body, sse_response,
};

/// Claude Code's header naming the subagent a request is made for (absent on
/// the main thread's requests).
pub const AGENT_ID_HEADER: &str = "x-claude-code-agent-id";
/// Claude Code's header naming the session (the main thread's conversation)
/// every request of one `claude` process belongs to.
pub const SESSION_ID_HEADER: &str = "x-claude-code-session-id";
/// Claude Code's delegation tool: `Agent` in the model's tool list; older
/// versions (and its stream-json tool names) call it `Task`.
const DELEGATION_TOOLS: [&str; 2] = ["Agent", "Task"];
/// The tool Claude Code offers for giving a running or finished subagent more input.
const SEND_MESSAGE_TOOL: &str = "SendMessage";
/// Claude Code prefixes every MCP tool with `mcp__<server>__`.
const MCP_PREFIX: &str = "mcp__";
/// Text blocks Claude Code adds to a user message for the model's context,
/// never the user's input: left out of the text `input_contains` reads.
const SYSTEM_REMINDER: &str = "<system-reminder>";

fn role_of(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("")
}

fn blocks(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::String(text)) => vec![json!({ "type": "text", "text": text })],
        Some(Value::Array(parts)) => parts.clone(),
        _ => Vec::new(),
    }
}

fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

fn join(texts: Vec<String>) -> Option<String> {
    (!texts.is_empty()).then(|| texts.join("\n"))
}

pub(super) fn parse(request: &Request) -> Result<ParsedTurn, String> {
    let body = json_body(request)?;
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Err("messages body has no `messages` array".to_string());
    };
    // Claude Code interleaves `role: "system"` entries among the messages;
    // the turn's input is the last user message, whatever follows it.
    let last_user = messages.iter().rev().find(|m| role_of(m) == "user");
    let last_blocks = last_user.map(blocks).unwrap_or_default();
    let tool_result = join(
        last_blocks
            .iter()
            .filter(|b| block_type(b) == "tool_result")
            .filter_map(|b| b.get("content").and_then(content_text))
            .collect(),
    );
    let input = tool_result.clone().or_else(|| {
        join(
            last_blocks
                .iter()
                .filter(|b| block_type(b) == "text")
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .filter(|text| !text.trim_start().starts_with(SYSTEM_REMINDER))
                .map(str::to_string)
                .collect(),
        )
    });
    let mut system_text: Vec<String> = body
        .get("system")
        .and_then(content_text)
        .into_iter()
        .collect();
    system_text.extend(
        messages
            .iter()
            .filter(|m| role_of(m) == "system")
            .filter_map(|m| m.get("content").and_then(content_text)),
    );
    let tools = body
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // Attribution by what the host itself sends: an adapter's relay header
    // first, then the subagent's id, then the session (the main thread).
    let instance = [INSTANCE_HEADER, AGENT_ID_HEADER, SESSION_ID_HEADER]
        .into_iter()
        .find_map(|name| header(request, name));
    Ok(ParsedTurn {
        instance,
        role: None,
        input,
        tool_result,
        auxiliary: tools.is_empty() || asks_for_title(&system_text.join("\n")),
        tools: digest_tools(&tools, |tool| tool),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("harness-model")
            .to_string(),
        include_usage: false,
    })
}

/// Claude Code's name for an MCP tool: every character outside `[a-zA-Z0-9_-]` becomes `_`.
pub(super) fn sanitised(tool: &str) -> String {
    tool.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The name a scripted tool call goes out under: the scripted name when the
/// request offers it, else the one offered `mcp__<server>__<tool>` whose tool
/// part is the scripted name (as is, or sanitised); with none or several such
/// names, the scripted name, so the host's refusal of an unknown tool shows.
fn offered_name(tool: &str, offered: &BTreeMap<String, String>) -> String {
    if offered.contains_key(tool) {
        return tool.to_string();
    }
    let wanted = [tool.to_string(), sanitised(tool)];
    let candidates: Vec<&String> = offered
        .keys()
        .filter(|name| {
            name.strip_prefix(MCP_PREFIX)
                .and_then(|rest| rest.split_once("__"))
                .is_some_and(|(_, part)| wanted.iter().any(|w| w == part))
        })
        .collect();
    match candidates.as_slice() {
        [only] => (*only).clone(),
        _ => tool.to_string(),
    }
}

/// The delegation tool the request offers (`Agent`, else `Task`); `Agent`
/// when it offers neither, so that the host refuses a tool it withheld.
fn delegation_tool(offered: &BTreeMap<String, String>) -> &'static str {
    DELEGATION_TOOLS
        .into_iter()
        .find(|name| offered.contains_key(*name))
        .unwrap_or(DELEGATION_TOOLS[0])
}

/// One content block of the answer: text, or a `tool_use`.
fn content_block(reply: &ModelReply, seq: usize, offered: &BTreeMap<String, String>) -> Value {
    let tool_use = |name: &str, input: Value| json!({ "type": "tool_use", "id": format!("toolu_harness_{seq}"), "name": name, "input": input });
    match reply {
        ModelReply::Message { text } => json!({ "type": "text", "text": text }),
        ModelReply::ToolCall { tool, arguments } => {
            tool_use(&offered_name(tool, offered), arguments.clone())
        }
        // In the foreground: the parent's turn waits for the child, as a
        // scripted spawn means; Claude Code's default is the background.
        ModelReply::Spawn(spawn) => tool_use(
            delegation_tool(offered),
            json!({
                "description": format!("delegate to {}", spawn.role),
                "prompt": spawn.task,
                "subagent_type": spawn.role,
                "run_in_background": false,
            }),
        ),
        ModelReply::Lifecycle(LifecycleCall {
            op: LifecycleOp::SendInput | LifecycleOp::Resume,
            target,
            message: Some(message),
        }) if offered.contains_key(SEND_MESSAGE_TOOL) => tool_use(
            SEND_MESSAGE_TOOL,
            json!({ "to": target, "message": message, "summary": "continue the task" }),
        ),
        ModelReply::Lifecycle(_) => json!({ "type": "text", "text": NO_LIFECYCLE_TOOL_TEXT }),
        ModelReply::Fail { .. } => unreachable!("failures are answered before rendering"),
    }
}

pub(super) fn render(
    reply: &ModelReply,
    context: &RenderContext,
    offered: &BTreeMap<String, String>,
) -> ResponseTemplate {
    let id = format!("msg_harness_{}", context.seq);
    let block = content_block(reply, context.seq, offered);
    let stop_reason = if block_type(&block) == "tool_use" {
        "tool_use"
    } else {
        "end_turn"
    };
    let message = |content: Value, stop_reason: Value, output_tokens: u64| {
        json!({
            "id": id, "type": "message", "role": "assistant", "model": context.model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": null,
            "usage": { "input_tokens": 0, "output_tokens": output_tokens },
        })
    };
    if !context.stream {
        return ResponseTemplate::new(200).set_body_json(message(
            json!([block]),
            json!(stop_reason),
            0,
        ));
    }
    // The block opens empty and its content arrives as one delta, as the API streams it.
    let (start, delta) = match block_type(&block) {
        "tool_use" => (
            json!({ "type": "tool_use", "id": block["id"], "name": block["name"], "input": {} }),
            json!({ "type": "input_json_delta", "partial_json": block["input"].to_string() }),
        ),
        _ => (
            json!({ "type": "text", "text": "" }),
            json!({ "type": "text_delta", "text": block["text"] }),
        ),
    };
    let events = [
        (
            "message_start",
            json!({ "message": message(json!([]), Value::Null, 0) }),
        ),
        (
            "content_block_start",
            json!({ "index": 0, "content_block": start }),
        ),
        ("content_block_delta", json!({ "index": 0, "delta": delta })),
        ("content_block_stop", json!({ "index": 0 })),
        (
            "message_delta",
            json!({ "delta": { "stop_reason": stop_reason, "stop_sequence": null },
                    "usage": { "output_tokens": 0 } }),
        ),
        ("message_stop", json!({})),
    ];
    sse_response(sse_body(events.into_iter().map(|(name, mut data)| {
        data["type"] = json!(name);
        (Some(name), data.to_string())
    })))
}
