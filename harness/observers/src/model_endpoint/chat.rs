//! OpenAI Chat Completions (`POST /v1/chat/completions`), as opencode speaks it through `@ai-sdk/openai-compatible` and Qwen Code through `openai` (its own tool names: qwen.rs).

use delegation_model::{LifecycleCall, LifecycleOp};
use serde_json::{Value, json};
use wiremock::{Request, ResponseTemplate};

use super::{
    ModelReply, NO_LIFECYCLE_TOOL_TEXT, ParsedTurn, RenderContext, asks_for_title, content_text,
    digest_tools, json_body, qwen, sse_body, sse_response,
};

fn role_of(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("")
}

pub(super) fn parse(request: &Request) -> Result<ParsedTurn, String> {
    let body = json_body(request)?;
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Err("chat completion body has no `messages` array".to_string());
    };
    let text_of = |message: &Value| message.get("content").and_then(content_text);

    let input = messages
        .iter()
        .rev()
        .find(|m| matches!(role_of(m), "user" | "tool"))
        .and_then(text_of);
    let trailing_results: Vec<String> = messages
        .iter()
        .rev()
        .take_while(|m| role_of(m) == "tool")
        .filter_map(text_of)
        .collect();
    let tool_result = (!trailing_results.is_empty()).then(|| {
        trailing_results
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    });
    let system_text: String = messages
        .iter()
        .filter(|m| matches!(role_of(m), "system" | "developer"))
        .filter_map(text_of)
        .collect::<Vec<_>>()
        .join("\n");
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
        // Title generation comes without tools; an agent turn always offers some.
        auxiliary: tools.is_empty() || asks_for_title(&system_text),
        tools: digest_tools(&tools, |tool| tool.get("function").unwrap_or(tool)),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("harness-model")
            .to_string(),
        include_usage: body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// The assistant's output as Chat Completions expresses it: text, or one tool call.
enum Output {
    Text(String),
    Call { name: String, arguments: String },
}

fn output(reply: &ModelReply, context: &RenderContext) -> Output {
    match reply {
        ModelReply::Message { text } => Output::Text(text.clone()),
        ModelReply::ToolCall { tool, arguments } => Output::Call {
            name: context
                .from_qwen
                .then(|| {
                    qwen::offered_mcp_name(
                        tool,
                        &context.config.mcp_server_names,
                        context.offered_tools,
                    )
                })
                .flatten()
                .unwrap_or_else(|| context.called_tool_name(tool)),
            arguments: arguments.to_string(),
        },
        ModelReply::Spawn(spawn) if context.from_qwen => Output::Call {
            name: qwen::DELEGATION_TOOL.to_string(),
            arguments: qwen::spawn_arguments(spawn),
        },
        ModelReply::Spawn(spawn) => Output::Call {
            name: context.config.chat_delegation_tool.clone(),
            arguments: json!({
                "description": format!("delegate to {}", spawn.role),
                "prompt": spawn.task,
                "subagent_type": spawn.role,
            })
            .to_string(),
        },
        // Qwen Code continues a subagent only by `send_message` to a
        // background one; the foreground subagents the endpoint starts have
        // no tool to continue them by.
        ModelReply::Lifecycle(_) if context.from_qwen => {
            Output::Text(NO_LIFECYCLE_TOOL_TEXT.to_string())
        }
        // opencode resumes a child by calling its delegation tool with the
        // child's session id: that runs the child's turn with the prompt.
        ModelReply::Lifecycle(LifecycleCall {
            op: LifecycleOp::SendInput | LifecycleOp::Resume,
            target,
            message: Some(message),
        }) => Output::Call {
            name: context.config.chat_delegation_tool.clone(),
            arguments: json!({
                "description": "continue the task",
                "prompt": message,
                "subagent_type": context.config.chat_resume_subagent.clone(),
                "task_id": target,
            })
            .to_string(),
        },
        ModelReply::Lifecycle(_) => Output::Text(NO_LIFECYCLE_TOOL_TEXT.to_string()),
        ModelReply::Fail { .. } => unreachable!("failures are answered before rendering"),
    }
}

fn usage() -> Value {
    json!({ "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0 })
}

pub(super) fn render(reply: &ModelReply, context: &RenderContext) -> ResponseTemplate {
    let id = format!("chatcmpl-harness-{}", context.seq);
    let call_id = qwen::call_id(context.seq);
    let output = output(reply, context);
    let finish_reason = match output {
        Output::Text(_) => "stop",
        Output::Call { .. } => "tool_calls",
    };

    if !context.stream {
        let message = match &output {
            Output::Text(text) => json!({ "role": "assistant", "content": text }),
            Output::Call { name, arguments } => json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{ "id": call_id, "type": "function",
                                 "function": { "name": name, "arguments": arguments } }],
            }),
        };
        return ResponseTemplate::new(200).set_body_json(json!({
            "id": id, "object": "chat.completion", "created": 0, "model": context.model,
            "choices": [{ "index": 0, "message": message, "finish_reason": finish_reason }],
            "usage": usage(),
        }));
    }

    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": context.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        })
        .to_string()
    };
    let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), None)];
    match &output {
        Output::Text(text) => events.push(chunk(json!({ "content": text }), None)),
        Output::Call { name, arguments } => events.push(chunk(
            json!({ "tool_calls": [{ "index": 0, "id": call_id, "type": "function",
                                     "function": { "name": name, "arguments": arguments } }] }),
            None,
        )),
    }
    events.push(chunk(json!({}), Some(finish_reason)));
    if context.include_usage {
        events.push(
            json!({
                "id": id, "object": "chat.completion.chunk", "created": 0, "model": context.model,
                "choices": [], "usage": usage(),
            })
            .to_string(),
        );
    }
    events.push("[DONE]".to_string());
    sse_response(sse_body(events.into_iter().map(|data| (None, data))))
}
