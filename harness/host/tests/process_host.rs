//! The subprocess host against adapters that behave and adapters that do not: every failure is a verdict, never a hang.

use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use delegation_host::process::{ProcessOptions, ResultTranslator};
use delegation_host::{Host, HostError, HostLauncher, ProcessHost, ProcessLauncher};
use delegation_model::{Action, Outcome};
use delegation_protocol::{Environment, InitializeParams, LogLevel, PROTOCOL_VERSION};

/// Every test finishes well within this or is a failure: the hang guard.
const HANG_GUARD: Duration = Duration::from_secs(60);

async fn guarded<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(HANG_GUARD, test)
        .await
        .expect("hang guard: the test did not finish within 60 s")
}

fn adapter_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/adapters")
        .join(name)
}

fn python(script: &str, args: &[&str], options: ProcessOptions) -> ProcessLauncher {
    let mut words = vec![
        "python3".to_string(),
        adapter_path(script).display().to_string(),
    ];
    words.extend(args.iter().map(|a| a.to_string()));
    ProcessLauncher::new(&shell_words::join(words), options).expect("command line splits")
}

fn misbehaving(mode: &str, options: ProcessOptions) -> ProcessLauncher {
    python("misbehaving_adapter.py", &[mode], options)
}

fn params(store: &Path) -> InitializeParams {
    InitializeParams {
        protocol_version: PROTOCOL_VERSION.into(),
        environment: Environment {
            model_endpoint: "http://127.0.0.1:9".into(),
            mcp_servers: Vec::new(),
            authorizer: None,
            store_dir: store.display().to_string(),
            clock: "harness".into(),
        },
    }
}

async fn started(launcher: &ProcessLauncher, store: &Path) -> ProcessHost {
    let mut host = launcher
        .launch_process(store)
        .await
        .expect("adapter starts");
    host.initialize(params(store))
        .await
        .expect("initialize succeeds");
    host
}

fn quick() -> ProcessOptions {
    ProcessOptions {
        request_timeout: Duration::from_secs(5),
        stdin_close_grace: Duration::from_millis(500),
        term_grace: Duration::from_millis(500),
        ..ProcessOptions::default()
    }
}

#[tokio::test]
async fn well_behaved_adapter_answers_and_maps_errors() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let launcher = python("echo_adapter.py", &[], quick());
        let mut host = launcher.launch_process(store.path()).await.unwrap();
        let init = host.initialize(params(store.path())).await.unwrap();
        assert_eq!(init.host.name, "echo-py");
        // The adapter echoes the store dir it was given in `initialize`...
        assert_eq!(init.host.version, store.path().display().to_string());

        let observed = host.call(&Action::Observe).await.unwrap();
        assert_eq!(observed.outcome, Outcome::Ok);
        assert!(observed.observed.is_some());
        // ...and the one in its environment.
        assert_eq!(
            observed.detail.as_deref(),
            Some(&*store.path().display().to_string())
        );

        let turn = Action::Turn {
            instance: "i".into(),
            input: "x".into(),
        };
        assert_eq!(
            host.call(&turn).await,
            Err(HostError::Unsupported {
                method: "instance/turn".into()
            })
        );
        let arm = Action::ArmFault {
            point: delegation_model::FaultPoint::ModelCall,
            times: None,
        };
        assert!(matches!(
            host.call(&arm).await,
            Err(HostError::Unsupported { .. })
        ));
        let close = Action::Close {
            instance: "i".into(),
        };
        assert_eq!(
            host.call(&close).await,
            Err(HostError::Rpc {
                method: "instance/close".into(),
                code: -32602,
                message: "unknown instance id format".into()
            })
        );
        let cancel = Action::Cancel {
            instance: "i".into(),
        };
        match host.call(&cancel).await {
            Err(HostError::Protocol { detail, .. }) => {
                assert!(detail.contains("does not match ActionResult"), "{detail}")
            }
            other => panic!("a malformed result must be a protocol error, got {other:?}"),
        }
        // None of those errors desynchronised the stream.
        assert!(host.broken().is_none());
        assert!(host.call(&Action::Observe).await.unwrap().is_ok());

        let logs: Vec<_> = host.logs().cloned().collect();
        assert_eq!(logs.len(), 7, "one log per request: {logs:?}");
        assert_eq!(logs[0].level, LogLevel::Info);
        assert_eq!(logs[0].message, "got initialize #1");
        assert!(host.stderr_tail().contains("[Info] got state/observe #7"));

        host.shutdown().await.unwrap();
        assert_eq!(host.exit_status().map(|s| s.code()), Some(Some(0)));
        // After shutdown, calls fail at once instead of writing to a dead pipe.
        assert!(matches!(
            host.call(&Action::Observe).await,
            Err(HostError::Exited { .. })
        ));
    })
    .await
}

#[tokio::test]
async fn compiled_echo_adapter_round_trips_through_the_host_trait() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let launcher = ProcessLauncher::new(
            &shell_words::quote(env!("CARGO_BIN_EXE_delegation-echo-adapter")),
            quick(),
        )
        .unwrap();
        assert!(launcher.describe().ends_with("delegation-echo-adapter"));
        let mut host: Box<dyn Host> = launcher.launch(store.path()).await.unwrap();
        let init = host.initialize(params(store.path())).await.unwrap();
        assert_eq!(init.protocol_version, PROTOCOL_VERSION);
        for _ in 0..200 {
            let result = host.call(&Action::Observe).await.unwrap();
            assert_eq!(result.observed, Some(Default::default()));
        }
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn silent_adapter_times_out_and_stays_broken() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let options = ProcessOptions {
            // Long enough for python to start on a loaded machine.
            request_timeout: Duration::from_millis(1500),
            ..quick()
        };
        let mut host = started(&misbehaving("silent", options), store.path()).await;
        let begun = Instant::now();
        let verdict = host.call(&Action::Observe).await.unwrap_err();
        assert_eq!(
            verdict,
            HostError::Timeout {
                method: "state/observe".into(),
                after_ms: 1500
            }
        );
        assert!(
            begun.elapsed() < Duration::from_secs(4),
            "{:?}",
            begun.elapsed()
        );
        // A late answer could arrive now and be taken for the next one's:
        // later calls fail fast with the same verdict.
        let again = Instant::now();
        assert_eq!(host.call(&Action::Observe).await.unwrap_err(), verdict);
        assert!(again.elapsed() < Duration::from_millis(100));
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn exit_mid_request_reports_status_and_stderr_and_a_fresh_launch_works() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let launcher = misbehaving("exit_mid", quick());
        let mut host = started(&launcher, store.path()).await;
        match host.call(&Action::Observe).await.unwrap_err() {
            HostError::Exited {
                method,
                status,
                stderr_tail,
            } => {
                assert_eq!(method, "state/observe");
                assert!(
                    status.contains('3'),
                    "status `{status}` should carry exit code 3"
                );
                assert!(stderr_tail.contains("store is corrupt"), "{stderr_tail}");
            }
            other => panic!("expected Exited, got {other:?}"),
        }
        assert!(matches!(
            host.call(&Action::Observe).await,
            Err(HostError::Exited { .. })
        ));
        host.shutdown().await.unwrap();

        // A restart on the same store is a new process with a clean slate.
        let mut again = started(&launcher, store.path()).await;
        assert!(again.broken().is_none());
        again.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn a_line_that_is_not_json_is_a_protocol_violation() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let mut host = started(&misbehaving("not_json", quick()), store.path()).await;
        match host.call(&Action::Observe).await.unwrap_err() {
            HostError::Protocol { method, detail } => {
                assert_eq!(method, "state/observe");
                assert!(detail.contains("not JSON"), "{detail}");
                assert!(
                    detail.contains("Traceback"),
                    "the excerpt shows the line: {detail}"
                );
            }
            other => panic!("expected Protocol, got {other:?}"),
        }
        assert!(host.broken().is_some());
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn an_answer_with_the_wrong_id_names_both_ids() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let mut host = started(&misbehaving("wrong_id", quick()), store.path()).await;
        match host.call(&Action::Observe).await.unwrap_err() {
            HostError::Protocol { detail, .. } => {
                // `initialize` was id 1, so this request is id 2.
                assert!(detail.contains("id 102"), "{detail}");
                assert!(detail.contains("expected 2"), "{detail}");
            }
            other => panic!("expected Protocol, got {other:?}"),
        }
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn a_fifty_megabyte_line_is_refused_in_bounded_memory() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let options = ProcessOptions {
            line_limit: 256 * 1024,
            ..quick()
        };
        let mut host = started(&misbehaving("huge_line", options), store.path()).await;
        let begun = Instant::now();
        match host.call(&Action::Observe).await.unwrap_err() {
            HostError::Protocol { detail, .. } => {
                assert!(detail.contains("262144-byte limit"), "{detail}")
            }
            other => panic!("expected Protocol, got {other:?}"),
        }
        // Refused when the limit is crossed, not after reading 50 MB.
        assert!(begun.elapsed() < Duration::from_secs(4));
        assert!(
            host.decoder_high_water_mark() <= 256 * 1024,
            "decoder held {} bytes",
            host.decoder_high_water_mark()
        );
        assert!(host.discarded_bytes() > 0);
        // The adapter is blocked writing the rest; shutdown still ends it.
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn stderr_flooding_neither_blocks_the_adapter_nor_grows_memory() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let mut host = started(&misbehaving("stderr_flood", quick()), store.path()).await;
        for _ in 0..5 {
            assert!(host.call(&Action::Observe).await.unwrap().is_ok());
        }
        // Shutdown waits for stderr to reach end of file, so every byte is counted.
        host.shutdown().await.unwrap();
        // 5 requests of 100 lines of 60 kB each: 30 MB on stderr.
        assert!(
            host.stderr_bytes_seen() >= 30_000_000,
            "{}",
            host.stderr_bytes_seen()
        );
        let tail = host.stderr_tail();
        assert!(tail.len() <= 64 * 1024, "tail is {} bytes", tail.len());
        assert!(
            tail.ends_with("flood done before #6\n"),
            "{}",
            &tail[tail.len() - 200..]
        );
    })
    .await
}

#[tokio::test]
async fn a_final_answer_without_newline_still_counts_then_the_exit_is_reported() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let mut host = started(&misbehaving("no_newline_exit", quick()), store.path()).await;
        assert!(host.call(&Action::Observe).await.unwrap().is_ok());
        match host.call(&Action::Observe).await.unwrap_err() {
            HostError::Exited { status, .. } => assert!(status.contains('0'), "{status}"),
            other => panic!("expected Exited, got {other:?}"),
        }
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn shutdown_escalates_from_stdin_close_to_sigterm_to_sigkill() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let mut stays = started(&misbehaving("ignore_stdin_close", quick()), store.path()).await;
        let begun = Instant::now();
        stays.shutdown().await.unwrap();
        assert!(begun.elapsed() >= Duration::from_millis(500));
        assert_eq!(
            stays.exit_status().and_then(|s| s.signal()),
            Some(libc::SIGTERM)
        );

        let mut stubborn = started(&misbehaving("ignore_term", quick()), store.path()).await;
        stubborn.shutdown().await.unwrap();
        assert_eq!(
            stubborn.exit_status().and_then(|s| s.signal()),
            Some(libc::SIGKILL)
        );
    })
    .await
}

#[tokio::test]
async fn shutdown_kills_the_adapters_children_too() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let mut host = misbehaving("grandchild", quick())
            .launch_process(store.path())
            .await
            .unwrap();
        let init = host.initialize(params(store.path())).await.unwrap();
        let pid: i32 = init
            .host
            .version
            .parse()
            .expect("the adapter reports its child's pid as its version");
        assert!(is_running(pid));
        host.shutdown().await.unwrap();
        let begun = Instant::now();
        while is_running(pid) && begun.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!is_running(pid), "grandchild {pid} outlived shutdown");
    })
    .await
}

/// Alive and not a zombie (a container's pid 1 may never reap orphans).
fn is_running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
        .unwrap_or(false)
}

#[tokio::test]
async fn launch_errors_say_what_is_wrong() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        for (command, expected) in [
            ("", "empty"),
            ("   ", "empty"),
            ("python3 'unbalanced", "cannot split"),
        ] {
            match ProcessLauncher::new(command, quick()) {
                Err(HostError::Launch(message)) => {
                    assert!(message.contains(expected), "`{command}`: {message}")
                }
                other => panic!("`{command}` should not launch: {other:?}"),
            }
        }
        let missing = ProcessLauncher::new("/nonexistent/adapter --flag", quick()).unwrap();
        match missing.launch_process(store.path()).await {
            Err(HostError::Launch(message)) => {
                assert!(message.contains("/nonexistent/adapter"), "{message}")
            }
            Err(other) => panic!("expected Launch, got {other:?}"),
            Ok(_) => panic!("a missing program must not launch"),
        }

        let mut host = python("echo_adapter.py", &[], quick())
            .launch_process(store.path())
            .await
            .unwrap();
        let elsewhere = params(Path::new("/somewhere/else"));
        match host.initialize(elsewhere).await {
            Err(HostError::Launch(message)) => {
                assert!(message.contains("/somewhere/else"), "{message}")
            }
            other => panic!("a mismatched store_dir must be refused, got {other:?}"),
        }
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn a_host_reason_name_is_translated_before_decoding_or_refused_clearly() {
    guarded(async {
        let fail = Action::Fail {
            instance: "i".into(),
        };
        // Without a translation the host's own name does not decode.
        let store = tempfile::tempdir().unwrap();
        let mut plain = started(&python("echo_adapter.py", &[], quick()), store.path()).await;
        match plain.call(&fail).await {
            Err(HostError::Protocol { detail, .. }) => {
                assert!(detail.contains("already_finished"), "{detail}")
            }
            other => panic!("expected a protocol error naming the reason, got {other:?}"),
        }
        plain.shutdown().await.unwrap();

        // With one (what an expectations file's `deny_reasons` provides) it maps.
        let translate = ResultTranslator(Arc::new(|raw: &mut serde_json::Value| {
            match raw.get("reason").and_then(|r| r.as_str()) {
                Some("already_finished") => {
                    raw["reason"] = "instance_terminal".into();
                    Ok(())
                }
                Some(other) => Err(format!("unmapped reason `{other}`")),
                None => Ok(()),
            }
        }));
        let options = ProcessOptions {
            translate_result: Some(translate),
            ..quick()
        };
        let store = tempfile::tempdir().unwrap();
        let mut mapped = started(&python("echo_adapter.py", &[], options), store.path()).await;
        let result = mapped.call(&fail).await.expect("the mapped reason decodes");
        assert_eq!(
            result.reason,
            Some(delegation_model::DenyReason::InstanceTerminal)
        );
        assert_eq!(result.outcome, Outcome::Denied);
        mapped.shutdown().await.unwrap();

        // A result that decodes as it comes is not translated: a translator
        // that refuses everything refuses only the one that does not.
        let refuse_all = ResultTranslator(Arc::new(|_: &mut serde_json::Value| {
            Err("translated".to_string())
        }));
        let options = ProcessOptions {
            translate_result: Some(refuse_all),
            ..quick()
        };
        let store = tempfile::tempdir().unwrap();
        let mut refusing = started(&python("echo_adapter.py", &[], options), store.path()).await;
        let observed = refusing.call(&Action::Observe).await;
        assert_eq!(observed.expect("decodes untranslated").outcome, Outcome::Ok);
        match refusing.call(&fail).await {
            Err(HostError::Protocol { detail, .. }) => assert_eq!(detail, "translated"),
            other => panic!("expected the translator's refusal, got {other:?}"),
        }
        refusing.shutdown().await.unwrap();
    })
    .await;
}

fn batch(mode: &str, size: usize, options: ProcessOptions) -> ProcessLauncher {
    python(
        "misbehaving_adapter.py",
        &[mode, &size.to_string()],
        options,
    )
}

fn details(answers: &[Result<delegation_model::ActionResult, HostError>]) -> Vec<String> {
    answers
        .iter()
        .map(|a| match a {
            Ok(r) => r.detail.clone().unwrap_or_default(),
            Err(e) => format!("error: {e}"),
        })
        .collect()
}

#[tokio::test]
async fn requests_in_flight_at_once_are_matched_by_id_whatever_the_order_of_answers() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let mut host = started(&batch("batch_reversed", 3, quick()), store.path()).await;
        // The adapter answers only once it holds all three: proof that they
        // were in flight together. It answers the last first.
        let answers = host
            .call_concurrently(&[Action::Observe, Action::Observe, Action::Observe])
            .await;
        // `initialize` was id 1.
        assert_eq!(
            details(&answers),
            ["answer to 2", "answer to 3", "answer to 4"]
        );
        // The stream is still in step: the next batch gets its own answers.
        let answers = host
            .call_concurrently(&[Action::Observe, Action::Observe, Action::Observe])
            .await;
        assert_eq!(
            details(&answers),
            ["answer to 5", "answer to 6", "answer to 7"]
        );
        assert!(host.broken().is_none());
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn a_second_answer_to_one_id_is_a_violation_naming_the_id() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let mut host = started(&batch("batch_duplicate", 2, quick()), store.path()).await;
        let answers = host
            .call_concurrently(&[Action::Observe, Action::Observe])
            .await;
        // The first answer was fine; the duplicate breaks the one still waiting.
        assert_eq!(
            answers[0].as_ref().unwrap().detail.as_deref(),
            Some("answer to 2")
        );
        match &answers[1] {
            Err(HostError::Protocol { detail, .. }) => {
                assert!(detail.contains("second answer to id 2"), "{detail}");
            }
            other => panic!("expected Protocol, got {other:?}"),
        }
        assert!(matches!(host.broken(), Some(HostError::Protocol { .. })));
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn an_answer_to_an_id_not_in_flight_is_a_violation_naming_the_ids() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let mut host = started(&batch("batch_unknown_id", 2, quick()), store.path()).await;
        let answers = host
            .call_concurrently(&[Action::Observe, Action::Observe])
            .await;
        for answer in &answers {
            match answer {
                Err(HostError::Protocol { detail, .. }) => {
                    assert!(detail.contains("id 103"), "{detail}");
                    assert!(detail.contains("ids 2, 3"), "{detail}");
                }
                other => panic!("expected Protocol, got {other:?}"),
            }
        }
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn each_request_in_flight_keeps_its_own_deadline() {
    guarded(async {
        let store = tempfile::tempdir().unwrap();
        let options = ProcessOptions {
            request_timeout: Duration::from_millis(3000),
            ..quick()
        };
        let mut host = started(&batch("batch_one_silent", 3, options), store.path()).await;
        let answers = host
            .call_concurrently(&[Action::Observe, Action::Observe, Action::Observe])
            .await;
        assert!(
            matches!(&answers[0], Err(HostError::Timeout { .. })),
            "{:?}",
            answers[0]
        );
        assert_eq!(details(&answers[1..]), ["answer to 3", "answer to 4"]);
        // A request that timed out may still be answered late: the stream is no longer trusted.
        assert!(matches!(host.broken(), Some(HostError::Timeout { .. })));
        host.shutdown().await.unwrap();
    })
    .await
}

#[tokio::test]
async fn a_host_without_the_capability_is_never_sent_requests_at_once() {
    guarded(async {
        // The default of the trait: every action unsupported, nothing sent.
        struct Sequential;
        #[delegation_host_api::async_trait]
        impl Host for Sequential {
            async fn initialize(
                &mut self,
                _: InitializeParams,
            ) -> Result<delegation_protocol::InitializeResult, HostError> {
                unreachable!()
            }
            async fn call(
                &mut self,
                _: &Action,
            ) -> Result<delegation_model::ActionResult, HostError> {
                panic!("a concurrent batch must not fall back to one-at-a-time calls")
            }
            async fn shutdown(&mut self) -> Result<(), HostError> {
                Ok(())
            }
        }
        let answers = Sequential
            .call_concurrently(&[Action::Observe, Action::Observe])
            .await;
        assert_eq!(answers.len(), 2);
        for a in answers {
            assert!(matches!(a, Err(HostError::Unsupported { .. })), "{a:?}");
        }
    })
    .await
}
