//! The neutral wire format (`POST /neutral/turn`): the harness's own, spoken by the reference host and by host adapters.

use delegation_model::side_channels::NeutralTurnRequest;
use serde_json::json;
use wiremock::{Request, ResponseTemplate};

use super::{ModelReply, ParsedTurn, digest_tools, json_body};

pub(super) fn parse(
    request: &Request,
    header_instance: Option<&str>,
) -> Result<ParsedTurn, String> {
    let body = json_body(request)?;
    let turn: NeutralTurnRequest = serde_json::from_value(body).map_err(|e| {
        format!(
            "neutral turn body does not match {{instance, role, input, tools?, tool_result?}}: {e}"
        )
    })?;
    match header_instance {
        None => {
            return Err(format!(
                "neutral turn for instance `{}` lacks the `x-delegation-instance` header; \
                 send it with the same id as the body's `instance`",
                turn.instance
            ));
        }
        Some(header) if header != turn.instance => {
            return Err(format!(
                "`x-delegation-instance` header `{header}` differs from the body's instance `{}`; \
                 both must name the instance the turn is for",
                turn.instance
            ));
        }
        Some(_) => {}
    }
    for (index, tool) in turn.tools.iter().enumerate() {
        delegation_model::ToolDefinition::from_value(tool.clone())
            .map_err(|e| format!("tools[{index}] is not a digestable MCP tool definition: {e}"))?;
    }
    Ok(ParsedTurn {
        instance: Some(turn.instance),
        role: Some(turn.role),
        input: Some(turn.input),
        tool_result: turn.tool_result,
        tools: digest_tools(&turn.tools, |tool| tool),
        auxiliary: false,
        stream: false,
        model: "harness-neutral".to_string(),
        include_usage: false,
    })
}

pub(super) fn render(reply: &ModelReply) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({ "reply": reply }))
}
