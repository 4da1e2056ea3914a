//! The `initialize` handshake: protocol version, where the observers are, and the host's capabilities.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The protocol version this harness speaks. A host answering another major version is refused.
pub const PROTOCOL_VERSION: &str = "1.0";

/// Environment variable carrying `environment.store_dir` to a subprocess
/// host, so an adapter can open its store before `initialize` arrives.
pub const STORE_DIR_ENV: &str = "DELEGATION_STORE_DIR";

/// `initialize` params: the environment the harness prepared for this host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitializeParams {
    pub protocol_version: String,
    pub environment: Environment,
}

/// Where the harness's observers listen, and where the host keeps its durable state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// Base URL of the model endpoint (for example `http://127.0.0.1:PORT`).
    /// Neutral-format turns go to `{model_endpoint}/neutral/turn`; Chat
    /// Completions to `{model_endpoint}/v1/chat/completions`; Responses to
    /// `{model_endpoint}/v1/responses`.
    pub model_endpoint: String,
    /// MCP servers (streamable HTTP) whose tools the host may seal and call.
    #[serde(default)]
    pub mcp_servers: Vec<McpServer>,
    /// The external authorizer, when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorizer: Option<String>,
    /// The directory the host must keep all durable state in. The same
    /// directory is handed to the host again after a restart.
    pub store_dir: String,
    /// Always `harness`: the host reads time only from `clock/set`.
    pub clock: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    pub name: String,
    pub url: String,
}

/// `initialize` result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InitializeResult {
    pub host: HostInfo,
    pub protocol_version: String,
    /// Flat list of feature names, see [`capability`].
    pub capabilities: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostInfo {
    pub name: String,
    pub version: String,
}

/// Capability names a host may declare. A scenario needing one the host
/// lacks is `unsupported`, except for the ways to more authority
/// ([`capability::AUTHORITY_WIDENING`]), which still run and must be refused.
pub mod capability {
    pub const RECEIPTS: &str = "receipts";
    pub const NESTED_DELEGATION: &str = "nested-delegation";
    pub const MCP: &str = "mcp";
    pub const EXTERNAL_AUTHORIZER: &str = "external-authorizer";
    pub const AUTO_APPROVAL: &str = "auto-approval";
    pub const EXACT_CALL_GRANTS: &str = "exact-call-grants";
    pub const TASK_CAPABILITIES: &str = "task-capabilities";
    pub const RESTART: &str = "restart";
    pub const WAIT: &str = "wait";
    pub const REVIEWER: &str = "reviewer";
    pub const FAULT_INJECTION: &str = "fault-injection";
    pub const CLOCK: &str = "clock";
    pub const DIRECT_TOOL_CALLS: &str = "direct-tool-calls";
    pub const FORK: &str = "fork";
    pub const EVENTS: &str = "events";
    pub const REMOTE_TARGETS: &str = "remote-targets";
    pub const WORKTREES: &str = "worktrees";
    pub const OTHER_PROVIDERS: &str = "other-providers";
    pub const FULL_ACCESS_CHILDREN: &str = "full-access-children";
    /// The host's model-facing delegation tool takes the requested authority
    /// (sandbox, approval policy, cwd, target, tools) from the model's call.
    /// Without it a spawn reaches the host as a role and a task only, so a
    /// scenario whose point is a refused authority request cannot ask.
    pub const SPAWN_AUTHORITY: &str = "spawn-authority";
    /// The host's model can give an existing child input by the child's id
    /// (the scripted `lifecycle` replies `send_input`, and `resume` with a
    /// `message`): codex's `send_input`, opencode's `task` with `task_id`.
    pub const MODEL_LIFECYCLE_TOOLS: &str = "model-lifecycle-tools";
    /// The host's model can also close a child, reopen it without input and
    /// poll it (`close`, `resume` without a message, `wait`): codex's
    /// `close_agent`, `resume_agent`, `wait_agent`.
    pub const MODEL_CLOSE_TOOLS: &str = "model-close-tools";
    /// A declared property, not a feature: by design a child closed by its
    /// model's own close tool may be reopened (agents are reusable, as in
    /// codex's multi-agent v2, which reuses them by task name). Scenarios
    /// asking whether a model can reopen what it closed are `unsupported` on
    /// a host declaring it (they are `unless` it); `instance/close` stays
    /// terminal on every host.
    pub const REUSABLE_AGENTS: &str = "reusable-agents";
    /// The host takes several requests in flight at once and answers each
    /// by its id, in any order, working on them concurrently: scenarios
    /// that race actions (two consumes of one receipt, a follow-up against
    /// a close) need it, and are `unsupported` without it.
    pub const CONCURRENT_REQUESTS: &str = "concurrent-requests";
    /// An instance can ask a person a clarification question
    /// (`instance/ask`) and the person can answer it (`question/answer`):
    /// PG4's positive side, that questions still pass under `never`, needs
    /// it. A host whose children can ask no one (or whose adapter cannot
    /// put a question to a child's run) lacks it.
    pub const CLARIFICATION_QUESTIONS: &str = "clarification-questions";

    /// Capabilities that are a way to more authority: scenarios needing them
    /// still run against a host without them, and check that it refuses.
    pub const AUTHORITY_WIDENING: &[&str] = &[
        REMOTE_TARGETS,
        WORKTREES,
        OTHER_PROVIDERS,
        FULL_ACCESS_CHILDREN,
    ];

    pub const ALL: &[&str] = &[
        RECEIPTS,
        NESTED_DELEGATION,
        MCP,
        EXTERNAL_AUTHORIZER,
        AUTO_APPROVAL,
        EXACT_CALL_GRANTS,
        TASK_CAPABILITIES,
        RESTART,
        WAIT,
        REVIEWER,
        FAULT_INJECTION,
        CLOCK,
        DIRECT_TOOL_CALLS,
        FORK,
        EVENTS,
        REMOTE_TARGETS,
        WORKTREES,
        OTHER_PROVIDERS,
        FULL_ACCESS_CHILDREN,
        SPAWN_AUTHORITY,
        MODEL_LIFECYCLE_TOOLS,
        MODEL_CLOSE_TOOLS,
        REUSABLE_AGENTS,
        CONCURRENT_REQUESTS,
        CLARIFICATION_QUESTIONS,
    ];

    /// Why a scenario cannot run on a host that declared `declared`: each
    /// capability of `needs` it lacks (the authority-widening ones never
    /// count: those scenarios run and check the refusal), and each property
    /// of `unless` it declares. Empty: the scenario runs. The runner and the
    /// adapter guide's counts both use this, so they cannot disagree.
    pub fn unmet(needs: &[String], unless: &[String], declared: &[String]) -> Vec<Unmet> {
        let lacking = needs
            .iter()
            .filter(|need| !declared.contains(need) && !AUTHORITY_WIDENING.contains(&need.as_str()))
            .map(|need| Unmet::Lacks(need.clone()));
        let declaring = unless
            .iter()
            .filter(|property| declared.contains(property))
            .map(|property| Unmet::Declares(property.clone()));
        lacking.chain(declaring).collect()
    }

    /// One reason a scenario is `unsupported` on a host.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Unmet {
        /// A capability the scenario needs and the host did not declare.
        Lacks(String),
        /// A property the host declares that the scenario cannot ask about.
        Declares(String),
    }
}

#[cfg(test)]
mod tests {
    use super::capability::{Unmet, unmet};

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_lacked_need_and_a_declared_property_are_unmet_but_a_widening_need_is_not() {
        let needs = names(&["mcp", "restart", "other-providers"]);
        let unless = names(&["reusable-agents"]);
        assert_eq!(
            unmet(&needs, &unless, &names(&["mcp", "reusable-agents"])),
            vec![
                Unmet::Lacks("restart".into()),
                Unmet::Declares("reusable-agents".into())
            ]
        );
        assert!(unmet(&needs, &unless, &names(&["mcp", "restart"])).is_empty());
    }
}
