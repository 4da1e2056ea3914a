//! The names under which the hosts this endpoint speaks to offer the harness's MCP tools to their models, and the way back from a name a model request showed to the harness tool it stands for.

use std::collections::{BTreeMap, BTreeSet};

use super::WireFormat;
use super::anthropic;
use super::copilot::copilot_mcp_tool_name;
use super::gemini::gemini_mcp_tool_name;
use super::qwen;

/// opencode's name for the MCP tool `tool` of the server it was configured
/// to call `server`: `<server>_<tool>`, each part with every character
/// outside `[a-zA-Z0-9_-]` replaced by `_` (opencode's `MCP.tools()`,
/// `packages/opencode/src/mcp/index.ts`). opencode replaces per UTF-16 code
/// unit (a JavaScript regular expression without the `u` flag), so a
/// character outside the Basic Multilingual Plane becomes two underscores.
pub fn opencode_mcp_tool_name(server: &str, tool: &str) -> String {
    fn sanitise(part: &str, into: &mut String) {
        for c in part.chars() {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                into.push(c);
            } else {
                into.extend(std::iter::repeat_n('_', c.len_utf16()));
            }
        }
    }
    let mut name = String::with_capacity(server.len() + tool.len() + 1);
    sanitise(server, &mut name);
    name.push('_');
    sanitise(tool, &mut name);
    name
}

/// Every name under which a host this endpoint knows offers the MCP tool
/// `tool` of the server it was told to call `server`: the name itself,
/// opencode's, GitHub Copilot CLI's, Gemini CLI's, Qwen Code's, and
/// `mcp__<server>__<tool>` sanitised, which is Claude Code's and codex's
/// (codex offers the tool as `<tool>` sanitised inside a namespace entry
/// `mcp__<server>`, which the Responses parser records under that joined name).
pub fn host_names_of_mcp_tool(server: &str, tool: &str) -> BTreeSet<String> {
    BTreeSet::from([
        tool.to_string(),
        opencode_mcp_tool_name(server, tool),
        copilot_mcp_tool_name(server, tool),
        gemini_mcp_tool_name(server, tool),
        qwen::mcp_tool_name(server, tool),
        format!("mcp__{server}__{}", anthropic::sanitised(tool)),
    ])
}

/// Whether `shown` is a name some known host gives a tool of the server it calls `server`.
fn under_server(shown: &str, server: &str) -> bool {
    [
        opencode_mcp_tool_name(server, ""),
        copilot_mcp_tool_name(server, ""),
        gemini_mcp_tool_name(server, ""),
        format!("mcp__{server}__"),
    ]
    .iter()
    .any(|prefix| shown.starts_with(prefix.as_str()))
}

/// The harness's tools among those one model request showed, by the
/// harness's names, each with the digest as the request showed it.
///
/// A request in the neutral format carries only what the host was given,
/// each definition as the tool server served it: all of it is kept as shown.
/// A host's own wire format also shows the host's own tools (codex's
/// `exec_command`, opencode's `bash`) and names the harness's tools its own
/// way. There a shown name counts as the harness tool in `served` that it
/// names on one of `servers`; a name under a harness server that names no
/// served tool is kept as shown, so that a stale or renamed tool never
/// passes for another; anything else is the host's own and left out.
pub fn harness_tools_shown(
    format: WireFormat,
    shown: &BTreeMap<String, String>,
    served: &BTreeSet<String>,
    servers: &[String],
) -> BTreeMap<String, String> {
    if format == WireFormat::Neutral {
        return shown.clone();
    }
    let mut by_host_name: BTreeMap<String, &str> = BTreeMap::new();
    for tool in served {
        for server in servers {
            for name in host_names_of_mcp_tool(server, tool) {
                by_host_name.entry(name).or_insert(tool.as_str());
            }
        }
    }
    shown
        .iter()
        .filter_map(|(name, digest)| match by_host_name.get(name) {
            Some(tool) => Some((tool.to_string(), digest.clone())),
            None if servers.iter().any(|server| under_server(name, server)) => {
                Some((name.clone(), digest.clone()))
            }
            None => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(names: &[&str]) -> BTreeMap<String, String> {
        names
            .iter()
            .map(|n| (n.to_string(), format!("digest-of-{n}")))
            .collect()
    }

    fn served(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn servers() -> Vec<String> {
        vec!["harness".to_string()]
    }

    #[test]
    fn each_hosts_name_for_a_harness_tool_maps_back_to_it_and_the_hosts_own_tools_are_left_out() {
        let tools = served(&["menu.read", "notes.write"]);
        for (format, host_name, own) in [
            (WireFormat::ChatCompletions, "harness_menu_read", "bash"),
            (WireFormat::ChatCompletions, "harness-menu-read", "task"),
            (
                WireFormat::Responses,
                "mcp__harness__menu_read",
                "exec_command",
            ),
            (
                WireFormat::AnthropicMessages,
                "mcp__harness__menu_read",
                "Agent",
            ),
            (WireFormat::Gemini, "mcp_harness_menu.read", "read_file"),
        ] {
            let kept = harness_tools_shown(format, &shown(&[host_name, own]), &tools, &servers());
            assert_eq!(
                kept.keys().collect::<Vec<_>>(),
                vec!["menu.read"],
                "{format:?} showing {host_name} beside {own}"
            );
            assert_eq!(kept["menu.read"], format!("digest-of-{host_name}"));
        }
    }

    #[test]
    fn a_name_under_the_harness_server_that_names_no_served_tool_is_kept_as_shown() {
        let kept = harness_tools_shown(
            WireFormat::ChatCompletions,
            &shown(&["harness_menu_read", "harness_menu_old", "bash"]),
            &served(&["menu.read"]),
            &servers(),
        );
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            vec!["harness_menu_old", "menu.read"]
        );
    }

    #[test]
    fn a_neutral_request_keeps_every_tool_it_showed() {
        let all = shown(&["menu.read", "bash", "harness_x"]);
        assert_eq!(
            harness_tools_shown(
                WireFormat::Neutral,
                &all,
                &served(&["menu.read"]),
                &servers()
            ),
            all
        );
    }
}
