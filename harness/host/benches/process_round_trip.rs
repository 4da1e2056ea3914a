//! What the protocol costs per step: a no-op request through `ProcessHost` against a bare pipe round trip to `cat`.
//!
//! Both arms pay the same two pipe crossings and two process wake-ups; the
//! difference is framing, JSON encoding and decoding, id matching and the
//! deadline. Run with `cargo bench -p delegation-host --bench process_round_trip`.

use std::process::Stdio;

use criterion::{Criterion, criterion_group, criterion_main};
use delegation_host::process::ProcessOptions;
use delegation_host::{Host, ProcessLauncher};
use delegation_model::{Action, ActionResult};
use delegation_protocol::{
    Environment, HostMessage, InitializeParams, PROTOCOL_VERSION, decode_message, encode_action,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

fn round_trip(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let store = tempfile::tempdir().expect("a temporary store dir");
    let mut group = c.benchmark_group("round_trip");

    let launcher = ProcessLauncher::new(
        &shell_words::quote(env!("CARGO_BIN_EXE_delegation-echo-adapter")),
        ProcessOptions::default(),
    )
    .expect("the echo adapter's path splits");
    let mut host = runtime.block_on(async {
        let mut host = launcher
            .launch_process(store.path())
            .await
            .expect("echo adapter starts");
        host.initialize(InitializeParams {
            protocol_version: PROTOCOL_VERSION.into(),
            environment: Environment {
                model_endpoint: "http://127.0.0.1:9".into(),
                mcp_servers: Vec::new(),
                authorizer: None,
                store_dir: store.path().display().to_string(),
                clock: "harness".into(),
            },
        })
        .await
        .expect("echo adapter initializes");
        host
    });
    group.bench_function("process_host_state_observe", |b| {
        b.iter(|| {
            let result = runtime
                .block_on(host.call(&Action::Observe))
                .expect("observe answers");
            assert!(result.is_ok());
        })
    });
    runtime
        .block_on(host.shutdown())
        .expect("echo adapter stops");

    // The same request bytes, echoed back unchanged by `cat`.
    let line = encode_action(1, &Action::Observe);
    let _in_runtime = runtime.enter();
    let mut cat = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cat starts");
    let mut stdin = cat.stdin.take().expect("piped stdin");
    let mut stdout = BufReader::new(cat.stdout.take().expect("piped stdout"));
    let mut echoed = Vec::with_capacity(line.len());
    group.bench_function("raw_pipe_cat", |b| {
        b.iter(|| {
            runtime.block_on(async {
                stdin.write_all(&line).await.expect("cat reads");
                stdin.flush().await.expect("cat reads");
                echoed.clear();
                stdout
                    .read_until(b'\n', &mut echoed)
                    .await
                    .expect("cat writes");
            });
            assert_eq!(echoed.len(), line.len());
        })
    });

    // The harness-side CPU share of a round trip, without any pipe: encode the
    // request, decode a typical answer, and type it.
    let answer = br#"{"jsonrpc":"2.0","id":1,"result":{"outcome":"ok","observed":{"now":0,"auto_approve":false,"instances":[],"approvals":[],"receipts":[],"grants":[],"capabilities":[],"records":[]}}}"#;
    group.bench_function("codec_only", |b| {
        b.iter(|| {
            let line = encode_action(1, &Action::Observe);
            let message = decode_message(answer).expect("the answer decodes");
            let HostMessage::Response(response) = message else {
                panic!("a response")
            };
            let result: ActionResult = response.result_as().expect("a result").expect("typed");
            (line, result)
        })
    });
    group.finish();
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
