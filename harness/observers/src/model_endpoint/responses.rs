//! The OpenAI Responses API (`POST /v1/responses`), as codex speaks it.

use delegation_model::{LifecycleCall, LifecycleOp};
use serde_json::{Value, json};
use wiremock::{Request, ResponseTemplate};

use super::{
    ModelReply, ParsedTurn, RenderContext, asks_for_title, content_text, digest_tools, json_body,
    sse_body, sse_response,
};

/// Codex's delegation tool and the namespace its multi-agent tools live in.
pub(super) const SPAWN_TOOL: &str = "spawn_agent";
pub(super) const SPAWN_NAMESPACE: &str = "multi_agent_v1";
/// The `timeout_ms` of a scripted `wait_agent`: a wait in a scripted turn is a poll.
const WAIT_TIMEOUT_MS: u64 = 1_000;

fn is_user_message(item: &Value) -> bool {
    let typ = item.get("type").and_then(Value::as_str);
    matches!(typ, None | Some("message"))
        && item.get("role").and_then(Value::as_str) == Some("user")
}

fn is_tool_output(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("function_call_output")
}

fn item_text(item: &Value) -> Option<String> {
    if is_tool_output(item) {
        item.get("output").and_then(content_text)
    } else {
        item.get("content").and_then(content_text)
    }
}

pub(super) fn parse(request: &Request) -> Result<ParsedTurn, String> {
    let body = json_body(request)?;
    let (input, tool_result, mut system_text) = match body.get("input") {
        Some(Value::String(text)) => (Some(text.clone()), None, String::new()),
        Some(Value::Array(items)) => {
            let input = items
                .iter()
                .rev()
                .find(|item| is_user_message(item) || is_tool_output(item))
                .and_then(item_text);
            let trailing: Vec<String> = items
                .iter()
                .rev()
                .take_while(|item| is_tool_output(item))
                .filter_map(item_text)
                .collect();
            let tool_result = (!trailing.is_empty())
                .then(|| trailing.into_iter().rev().collect::<Vec<_>>().join("\n"));
            let system_text = items
                .iter()
                .filter(|item| {
                    matches!(
                        item.get("role").and_then(Value::as_str),
                        Some("system" | "developer")
                    )
                })
                .filter_map(item_text)
                .collect::<Vec<_>>()
                .join("\n");
            (input, tool_result, system_text)
        }
        _ => {
            return Err(
                "responses body has no `input` (a string or an array of input items)".to_string(),
            );
        }
    };
    if let Some(instructions) = body.get("instructions").and_then(Value::as_str) {
        system_text.push('\n');
        system_text.push_str(instructions);
    }
    let tools = body
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok(ParsedTurn {
        instance: None,
        role: None,
        input,
        tool_result,
        auxiliary: tools.is_empty() || asks_for_title(&system_text),
        tools: digest_tools(&flattened_namespaces(tools), |tool| tool),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("harness-model")
            .to_string(),
        include_usage: false,
    })
}

/// The tools of a request with each `namespace` entry replaced by the tools
/// it holds, each named `<namespace>__<name>`: codex offers an MCP server's
/// tools as one entry `mcp__<server>` holding them, and the model calls
/// them by that pair, so each is a tool the model was shown of its own.
fn flattened_namespaces(tools: Vec<Value>) -> Vec<Value> {
    let mut flat = Vec::with_capacity(tools.len());
    for tool in tools {
        let namespace = (tool.get("type").and_then(Value::as_str) == Some("namespace"))
            .then(|| tool.get("name").and_then(Value::as_str))
            .flatten();
        match (namespace, tool.get("tools").and_then(Value::as_array)) {
            (Some(namespace), Some(inner)) => {
                for member in inner {
                    let mut member = member.clone();
                    if let Some(name) = member.get("name").and_then(Value::as_str) {
                        let joined = format!("{namespace}__{name}");
                        member["name"] = Value::String(joined);
                    }
                    flat.push(member);
                }
            }
            _ => flat.push(tool),
        }
    }
    flat
}

fn output_item(reply: &ModelReply, seq: usize) -> Value {
    let call_id = format!("call_harness_{seq}");
    match reply {
        ModelReply::Message { text } => json!({
            "type": "message", "id": format!("msg_harness_{seq}"), "role": "assistant",
            "status": "completed",
            "content": [{ "type": "output_text", "text": text, "annotations": [] }],
        }),
        ModelReply::ToolCall { tool, arguments } => json!({
            "type": "function_call", "id": format!("fc_harness_{seq}"), "call_id": call_id,
            "name": tool, "arguments": arguments.to_string(), "status": "completed",
        }),
        ModelReply::Spawn(spawn) => json!({
            "type": "function_call", "id": format!("fc_harness_{seq}"), "call_id": call_id,
            "namespace": SPAWN_NAMESPACE, "name": SPAWN_TOOL,
            "arguments": json!({ "message": spawn.task, "agent_type": spawn.role }).to_string(),
            "status": "completed",
        }),
        ModelReply::Lifecycle(call) => {
            let (name, arguments) = lifecycle_call(call);
            json!({
                "type": "function_call", "id": format!("fc_harness_{seq}"), "call_id": call_id,
                "namespace": SPAWN_NAMESPACE, "name": name, "arguments": arguments.to_string(),
                "status": "completed",
            })
        }
        ModelReply::Fail { .. } => unreachable!("failures are answered before rendering"),
    }
}

/// Codex's multi-agent v1 tool for a lifecycle op, with its argument names.
/// The ids are the protocol's instance ids: the adapter's relay turns them
/// into codex agent ids.
fn lifecycle_call(call: &LifecycleCall) -> (&'static str, Value) {
    let target = &call.target;
    match call.op {
        LifecycleOp::SendInput => (
            "send_input",
            json!({ "target": target, "message": call.message.clone().unwrap_or_default() }),
        ),
        LifecycleOp::Resume => ("resume_agent", json!({ "id": target })),
        LifecycleOp::Close => ("close_agent", json!({ "target": target })),
        // A poll: codex clamps the timeout to its own minimum.
        LifecycleOp::Wait => (
            "wait_agent",
            json!({ "targets": [target], "timeout_ms": WAIT_TIMEOUT_MS }),
        ),
    }
}

pub(super) fn render(reply: &ModelReply, context: &RenderContext) -> ResponseTemplate {
    let id = format!("resp_harness_{}", context.seq);
    let item = output_item(reply, context.seq);
    let usage = json!({
        "input_tokens": 0, "input_tokens_details": { "cached_tokens": 0 },
        "output_tokens": 0, "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": 0,
    });
    let completed = json!({
        "id": id, "object": "response", "created_at": 0, "status": "completed",
        "model": context.model, "output": [item], "usage": usage,
    });
    if !context.stream {
        return ResponseTemplate::new(200).set_body_json(completed);
    }
    let created = json!({
        "id": id, "object": "response", "created_at": 0, "status": "in_progress",
        "model": context.model, "output": [],
    });
    let events = [
        (
            "response.created",
            json!({ "type": "response.created", "sequence_number": 0, "response": created }),
        ),
        (
            "response.output_item.done",
            json!({ "type": "response.output_item.done", "sequence_number": 1,
                    "output_index": 0, "item": item }),
        ),
        (
            "response.completed",
            json!({ "type": "response.completed", "sequence_number": 2, "response": completed }),
        ),
    ];
    sse_response(sse_body(
        events
            .into_iter()
            .map(|(name, data)| (Some(name), data.to_string())),
    ))
}
