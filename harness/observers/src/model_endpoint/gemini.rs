//! Gemini `generateContent` and `streamGenerateContent` (`POST /v1beta/models/<model>:<method>`), as Gemini CLI speaks it: SSE for `?alt=sse`, one JSON response otherwise.

use serde_json::{Value, json};
use wiremock::{Request, ResponseTemplate};

use super::{
    AUXILIARY_REPLY_TEXT, ModelReply, NO_LIFECYCLE_TOOL_TEXT, ParsedTurn, RecordedModelRequest,
    RenderContext, WireFormat, asks_for_title, digest_tools, json_body, sse_body, sse_response,
};

/// The route: `/v1beta/models/<model>:generateContent` or `:streamGenerateContent`
/// (`/v1/...` when a client sets that API version).
const ROUTE: &str = r"^/v1(beta)?/models/[^/:]+:(streamGenerateContent|generateContent)$";

/// Matches a request on [`ROUTE`]. The pattern is compiled once per process:
/// wiremock's `path_regex` compiles it for every endpoint started, which cost
/// more than half a million instructions a scenario.
pub(super) struct Route;

impl wiremock::Match for Route {
    fn matches(&self, request: &Request) -> bool {
        static COMPILED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
            regex::Regex::new(ROUTE).expect("ROUTE is a valid pattern")
        });
        COMPILED.is_match(request.url.path())
    }
}
/// Gemini CLI's delegation tool, offered to the main agent only.
pub const DELEGATION_TOOL: &str = "invoke_agent";
/// The tool a Gemini CLI subagent ends its task with; only subagents are offered it.
pub const COMPLETE_TOOL: &str = "complete_task";
/// Text parts Gemini CLI adds to the first user message for the model's
/// context (date, workspace listing), never the user's input.
const SESSION_CONTEXT: &str = "<session_context>";
/// Gemini CLI's prefix for MCP tools (`mcp_<server>_<tool>`).
const MCP_PREFIX: &str = "mcp_";
/// The Gemini API's limit on a function name; Gemini CLI shortens MCP names to one less.
const MCP_NAME_LIMIT: usize = 63;

/// The id of the function call a scripted `spawn` answered as request `seq`:
/// the id Gemini CLI keeps for the subagent's call (`invoke_agent__<id>` in its
/// session store, beside the subagent's `agentId`), and the instance the
/// subagent's requests are counted for.
pub fn spawn_call_id(seq: usize) -> String {
    format!("harness_spawn_{seq}")
}

/// Gemini CLI's name for the MCP tool `tool` of the server it was configured
/// to call `server` (`generateValidName` in `packages/core/src/tools/mcp-tool.ts`):
/// `mcp_<server>_<tool>` with every UTF-16 code unit outside
/// `[a-zA-Z0-9_\-.:]` replaced by `_`, shortened to 30 + `...` + 30
/// characters when longer than 63.
pub fn gemini_mcp_tool_name(server: &str, tool: &str) -> String {
    let joined = format!("{server}_{tool}");
    let prefixed = if joined.starts_with(MCP_PREFIX) {
        joined
    } else {
        format!("{MCP_PREFIX}{joined}")
    };
    let mut name = String::with_capacity(prefixed.len());
    for c in prefixed.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':') {
            name.push(c);
        } else {
            name.extend(std::iter::repeat_n('_', c.len_utf16()));
        }
    }
    if name.len() > MCP_NAME_LIMIT {
        // ASCII only by now: bytes are characters.
        name = format!("{}...{}", &name[..30], &name[name.len() - 30..]);
    }
    name
}

fn role_of(content: &Value) -> &str {
    content.get("role").and_then(Value::as_str).unwrap_or("")
}

fn parts(content: &Value) -> &[Value] {
    content
        .get("parts")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn join(texts: Vec<String>) -> Option<String> {
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// What a `functionResponse` says: its `output` (or `error`) text, else the response as JSON.
fn response_text(response: &Value) -> String {
    let payload = response.get("response").unwrap_or(&Value::Null);
    ["output", "error"]
        .iter()
        .find_map(|key| payload.get(*key).and_then(Value::as_str))
        .map_or_else(|| payload.to_string(), str::to_string)
}

/// The user's text of one content: its text parts without Gemini CLI's session context.
fn user_text(content: &Value) -> Option<String> {
    join(
        parts(content)
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .filter(|text| !text.trim_start().starts_with(SESSION_CONTEXT))
            .map(str::to_string)
            .collect(),
    )
}

/// What a Gemini request says beyond a [`ParsedTurn`].
#[derive(Debug, Default)]
pub(super) struct GeminiTurn {
    /// `generationConfig.responseJsonSchema` (or `responseSchema`): what an auxiliary JSON request's answer must follow.
    pub(super) response_schema: Option<Value>,
    /// A subagent's request: the task its conversation opens with, by which
    /// it is attributed (never by a header, which its parent's process sets).
    pub(super) subagent_task: Option<String>,
    /// A subagent's `complete_task` `result` parameter as declared: an object
    /// `{response}` for the built-in generalist, a string for custom agents.
    pub(super) complete_result: Option<Value>,
}

pub(super) fn parse(request: &Request) -> Result<(ParsedTurn, GeminiTurn), String> {
    let path = request.url.path();
    let (model, method) = path
        .rsplit_once('/')
        .and_then(|(_, last)| last.split_once(':'))
        .ok_or_else(|| format!("{path} names no `<model>:<method>`"))?;
    let body = json_body(request)?;
    let Some(contents) = body.get("contents").and_then(Value::as_array) else {
        return Err("generateContent body has no `contents` array".to_string());
    };
    let last_user = contents.iter().rev().find(|c| role_of(c) == "user");
    let tool_result = last_user.and_then(|content| {
        join(
            parts(content)
                .iter()
                .filter_map(|part| part.get("functionResponse"))
                .map(response_text)
                .collect(),
        )
    });
    let input = tool_result
        .clone()
        .or_else(|| last_user.and_then(user_text));
    let system_text = body
        .pointer("/systemInstruction/parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let declarations: Vec<Value> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|tool| tool.get("functionDeclarations").and_then(Value::as_array))
        .flatten()
        .cloned()
        .collect();
    let declared = |name: &str| {
        declarations
            .iter()
            .find(|d| d.get("name").and_then(Value::as_str) == Some(name))
    };
    let offers = |name: &str| declared(name).is_some();
    let response_schema = ["responseJsonSchema", "responseSchema"]
        .iter()
        .find_map(|key| body.pointer(&format!("/generationConfig/{key}")))
        .cloned();
    // A subagent is told apart by the tools Gemini CLI gives it: `complete_task`,
    // never `invoke_agent`. Its conversation opens with the task it was given.
    let subagent_task = (offers(COMPLETE_TOOL) && !offers(DELEGATION_TOOL)).then(|| {
        contents
            .iter()
            .find(|c| role_of(c) == "user")
            .and_then(user_text)
            .unwrap_or_default()
    });
    let turn = ParsedTurn {
        instance: None,
        role: None,
        input,
        tool_result,
        // The complexity router, the next-speaker check and similar calls ask
        // for JSON by a response schema and offer no tools.
        auxiliary: declarations.is_empty()
            || response_schema.is_some()
            || asks_for_title(&system_text),
        tools: digest_tools(&declarations, |declaration| declaration),
        stream: method == "streamGenerateContent",
        model: model.to_string(),
        include_usage: false,
    };
    Ok((
        turn,
        GeminiTurn {
            response_schema,
            complete_result: subagent_task
                .is_some()
                .then(|| declared(COMPLETE_TOOL))
                .flatten()
                .and_then(|d| d.pointer("/parametersJsonSchema/properties/result"))
                .cloned(),
            subagent_task,
        },
    ))
}

/// The instance a subagent's request is counted for: the `invoke_agent` call
/// this endpoint answered (a scripted spawn) whose prompt the subagent's
/// conversation opens with. With no such call, or several with that prompt,
/// none: the request is never counted for a guess.
pub(super) fn spawned_instance(task: &str, records: &[RecordedModelRequest]) -> Option<String> {
    let mut calls = records.iter().filter(|record| {
        record.format == WireFormat::Gemini
            && matches!(&record.reply, Some(ModelReply::Spawn(spawn)) if spawn.task == task)
    });
    match (calls.next(), calls.next()) {
        (Some(only), None) => Some(spawn_call_id(only.seq)),
        _ => None,
    }
}

/// The name a scripted tool call goes out under: the one offered Gemini CLI
/// name of it on one of the configured MCP servers, else the scripted name
/// (offered or not, so the host's refusal of an unknown tool shows). The
/// MCP name comes first: a harness tool may share its name with a Gemini
/// CLI built-in (`read_file`, `write_file`), and the scenario means its own.
fn offered_name(tool: &str, context: &RenderContext) -> String {
    let names: std::collections::BTreeSet<String> = context
        .config
        .mcp_server_names
        .iter()
        .map(|server| gemini_mcp_tool_name(server, tool))
        .filter(|name| context.offered_tools.contains_key(name))
        .collect();
    let mut names = names.into_iter();
    match (names.next(), names.next()) {
        (Some(only), None) => only,
        _ => tool.to_string(),
    }
}

/// A minimal value of a response schema (OpenAPI-style types, any case): what
/// an auxiliary JSON request is answered with, so that Gemini CLI accepts it
/// at once instead of retrying with backoff.
fn schema_instance(schema: &Value) -> Value {
    if let Some(first) = ["anyOf", "oneOf"]
        .iter()
        .find_map(|key| schema.get(*key).and_then(Value::as_array)?.first())
    {
        return schema_instance(first);
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    match kind.as_str() {
        "object" => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = match schema.get("required").and_then(Value::as_array) {
                Some(required) => required.iter().filter_map(Value::as_str).collect(),
                None => properties
                    .map(|p| p.keys().map(String::as_str).collect())
                    .unwrap_or_default(),
            };
            let object = required
                .into_iter()
                .map(|name| {
                    let property = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                    (name.to_string(), schema_instance(property))
                })
                .collect();
            Value::Object(object)
        }
        "string" => json!(AUXILIARY_REPLY_TEXT),
        "integer" | "number" => schema.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(false),
        "array" => json!([]),
        _ => Value::Null,
    }
}

/// The answer's one part: text, or a function call.
fn part(reply: &ModelReply, context: &RenderContext) -> Value {
    let call = |id: String, name: String, args: Value| json!({ "functionCall": { "id": id, "name": name, "args": args } });
    if let Some(schema) = &context.gemini.response_schema {
        return json!({ "text": schema_instance(schema).to_string() });
    }
    match reply {
        // A subagent ends only by calling `complete_task`: text alone would be
        // answered with a reminder, one more request than the script says.
        ModelReply::Message { text } if context.gemini.subagent_task.is_some() => {
            let result = match &context.gemini.complete_result {
                Some(declared) if declared.pointer("/properties/response").is_some() => {
                    json!({ "response": text })
                }
                _ => json!(text),
            };
            call(
                format!("harness_call_{}", context.seq),
                COMPLETE_TOOL.to_string(),
                json!({ "result": result }),
            )
        }
        ModelReply::Message { text } => json!({ "text": text }),
        ModelReply::ToolCall { tool, arguments } => call(
            format!("harness_call_{}", context.seq),
            offered_name(tool, context),
            arguments.clone(),
        ),
        ModelReply::Spawn(spawn) => call(
            spawn_call_id(context.seq),
            DELEGATION_TOOL.to_string(),
            json!({ "agent_name": spawn.role, "prompt": spawn.task }),
        ),
        // Gemini CLI has no tool for giving a subagent more input, closing or
        // waiting for one: a subagent runs within its parent's call.
        ModelReply::Lifecycle(_) => json!({ "text": NO_LIFECYCLE_TOOL_TEXT }),
        ModelReply::Fail { .. } => unreachable!("failures are answered before rendering"),
    }
}

pub(super) fn render(
    reply: &ModelReply,
    context: &RenderContext,
    request: &Request,
) -> ResponseTemplate {
    let response = json!({
        "candidates": [{
            "content": { "role": "model", "parts": [part(reply, context)] },
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": { "promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0 },
        "modelVersion": context.model,
        "responseId": format!("harness-{}", context.seq),
    });
    if !context.stream {
        return ResponseTemplate::new(200).set_body_json(response);
    }
    let sse = request
        .url
        .query_pairs()
        .any(|(key, value)| key == "alt" && value == "sse");
    if sse {
        sse_response(sse_body([(None, response.to_string())]))
    } else {
        // Without `alt=sse` the API streams one JSON array of responses.
        ResponseTemplate::new(200).set_body_json(json!([response]))
    }
}
