//! The same smoke sequence against the in-process reference host and against `delegation-reference-host` as a subprocess: identical observations.
//!
//! Start a root; delegate allowed and denied; close, then follow up; an
//! automatic approval with the store write fault armed; restart and observe.
//! Each step records the host's reply and what the harness's own observers
//! saw; both arms must agree step by step, and the facts that make the
//! sequence meaningful are asserted on the in-process arm.

use std::path::Path;
use std::time::Duration;

use delegation_host::process::ProcessOptions;
use delegation_host::{HostLauncher, ProcessLauncher, ReferenceLauncher};
use delegation_model::*;
use delegation_observers::{
    ModelEndpoint, ModelMatch, ModelReply, ModelRule, ToolServer, ToolSpec,
};
use delegation_protocol::{Environment, InitializeParams, McpServer, PROTOCOL_VERSION};
use serde_json::{Value, json};

fn root() -> Action {
    Action::Start(StartRequest {
        role: "root".into(),
        model: default_model(),
        sandbox: Sandbox::WorkspaceWrite {
            writable_roots: [NormalPath::parse("/w/repo").unwrap()].into(),
            network: false,
        }
        .into(),
        approval_policy: ApprovalPolicy::OnRequest,
        tools: vec!["probe.write_note".into()],
        cwd: "/w/repo".into(),
        provider: default_provider(),
        delegation_depth: 2,
    })
}

fn child(sandbox: Option<Sandbox>) -> SpawnRequest {
    SpawnRequest {
        role: "worker".into(),
        task: "CHILD_TASK".into(),
        authority: AuthorityRequest {
            sandbox: sandbox.map(Into::into),
            ..AuthorityRequest::default()
        },
        model: None,
        target: None,
        worktree: false,
    }
}

/// One step's record: the host's reply and the observers' counts.
#[derive(Debug, PartialEq)]
struct Seen {
    reply: Value,
    model_requests: u64,
    handler_calls: usize,
}

async fn run_sequence(launcher: &dyn HostLauncher, store: &Path) -> Vec<Seen> {
    let model = ModelEndpoint::start(vec![ModelRule {
        when: ModelMatch {
            input_contains: Some("CHILD_TASK".into()),
            ..ModelMatch::default()
        },
        reply: ModelReply::Message {
            text: "child done".into(),
        },
        delay_ms: 0,
        attribute_to: None,
    }])
    .await
    .unwrap();
    let tools = ToolServer::start(vec![ToolSpec {
        definition: json!({
            "name": "probe.write_note",
            "description": "Writes a note",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        })
        .into(),
        result: "noted".into(),
    }])
    .await
    .unwrap();
    let params = InitializeParams {
        protocol_version: PROTOCOL_VERSION.into(),
        environment: Environment {
            model_endpoint: model.url(),
            mcp_servers: vec![McpServer {
                name: "probe".into(),
                url: tools.url(),
            }],
            authorizer: None,
            store_dir: store.display().to_string(),
            clock: "harness".into(),
        },
    };
    let configuration = Action::Configure(Configuration {
        auto_approve: true,
        ..Configuration::default()
    });
    let wide = Sandbox::FullAccess;
    let steps = vec![
        configuration.clone(),
        root(),
        Action::Delegate {
            parent: "inst-1".into(),
            request: child(None),
        },
        Action::Delegate {
            parent: "inst-1".into(),
            request: child(Some(wide)),
        },
        Action::Close {
            instance: "inst-2".into(),
        },
        Action::Turn {
            instance: "inst-2".into(),
            input: "are you there?".into(),
        },
        Action::ArmFault {
            point: FaultPoint::StoreWriteDecision,
            times: Some(1),
        },
        Action::ToolCall {
            instance: "inst-1".into(),
            tool: "probe.write_note".into(),
            arguments: json!({"text": "x"}),
        },
    ];
    let mut host = launcher.launch(store).await.unwrap();
    host.initialize(params.clone()).await.unwrap();
    let mut seen = Vec::new();
    for step in &steps {
        let (m, t) = (model.mark(), tools.mark());
        let reply = host.call(step).await.unwrap();
        seen.push(Seen {
            reply: serde_json::to_value(&reply).unwrap(),
            model_requests: model.evidence_since(m).model_requests.values().sum(),
            handler_calls: tools.handler_calls_since(t).len(),
        });
    }
    host.shutdown().await.unwrap();
    let mut host = launcher.launch(store).await.unwrap();
    host.initialize(params).await.unwrap();
    host.call(&configuration).await.unwrap();
    let observed = host.call(&Action::Observe).await.unwrap();
    seen.push(Seen {
        reply: serde_json::to_value(&observed).unwrap(),
        model_requests: 0,
        handler_calls: 0,
    });
    host.shutdown().await.unwrap();
    tools.shutdown().await;
    seen
}

fn reply(seen: &Seen) -> ActionResult {
    serde_json::from_value(seen.reply.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_and_subprocess_reference_hosts_observe_the_same() {
    let guard = Duration::from_secs(60);
    let dir_a = tempfile::tempdir().unwrap();
    let in_process = tokio::time::timeout(
        guard,
        run_sequence(&ReferenceLauncher::default(), dir_a.path()),
    )
    .await
    .expect("in-process run finished");

    // The sequence means what it says: these facts hold on the reference host.
    assert_eq!(
        reply(&in_process[2]).instance.as_deref(),
        Some("inst-2"),
        "allowed child created"
    );
    assert_eq!(
        in_process[2].model_requests, 1,
        "the allowed child made its first model request"
    );
    assert_eq!(
        reply(&in_process[3]).reason,
        Some(DenyReason::CeilingExceeded)
    );
    assert_eq!(
        in_process[3].model_requests, 0,
        "no model request for a refused child"
    );
    assert!(reply(&in_process[4]).is_ok(), "close");
    assert_eq!(
        reply(&in_process[5]).reason,
        Some(DenyReason::InstanceTerminal)
    );
    assert_eq!(
        in_process[5].model_requests, 0,
        "no model request after close"
    );
    assert_eq!(
        reply(&in_process[7]).reason,
        Some(DenyReason::StoreWriteFailed)
    );
    assert_eq!(
        in_process[7].handler_calls, 0,
        "no handler call without a committed decision"
    );
    let observed = reply(&in_process[8]).observed.unwrap();
    assert_eq!(
        observed.instances.len(),
        2,
        "root and the allowed child survive the restart"
    );
    assert_eq!(
        observed.instance("inst-2").unwrap().state,
        LifecycleState::Closed
    );
    assert_eq!(observed.approvals.len(), 1);
    assert_eq!(
        observed.approvals[0].state,
        ApprovalState::Pending,
        "the failed decision left the request pending"
    );

    let dir_b = tempfile::tempdir().unwrap();
    let binary = env!("CARGO_BIN_EXE_delegation-reference-host");
    let launcher = ProcessLauncher::new(binary, ProcessOptions::default()).unwrap();
    let subprocess = tokio::time::timeout(guard, run_sequence(&launcher, dir_b.path()))
        .await
        .expect("subprocess run finished");
    assert_eq!(in_process.len(), subprocess.len());
    for (step, (a, b)) in in_process.iter().zip(&subprocess).enumerate() {
        assert_eq!(
            a, b,
            "step {step} differs between in-process and subprocess"
        );
    }
}
