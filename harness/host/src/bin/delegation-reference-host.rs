//! `delegation-reference-host`: the reference host speaking host protocol v1 over stdio.
//!
//! One JSON-RPC 2.0 request per line on stdin, one response per line on
//! stdout, logs on stderr. It exits on `shutdown`, on end of input, and
//! (without answering) when the crash fault fires, as a real host would die.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use delegation_host::reference::AUTHORIZER_TIMEOUT;
use delegation_host::reference::Performer;
use delegation_host::{Host, HostError, ReferenceHost};
use delegation_model::Action;
use delegation_protocol::InitializeParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// Where replies go: stdout, as a pipe or as tokio's blocking stdout.
type Replies = Mutex<Box<dyn AsyncWrite + Send + Unpin>>;

/// Exit status when the crash fault fires.
const CRASH_EXIT: i32 = 70;

fn error_response(id: &Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn host_error_response(id: &Value, e: &HostError) -> Value {
    let code = match e {
        HostError::Unsupported { .. } => -32601,
        HostError::Rpc { code, .. } => *code,
        _ => -32603,
    };
    error_response(id, code, e.to_string())
}

/// Writes one reply line; `false` once stdout is gone.
async fn write_reply(stdout: &Replies, reply: &Value) -> bool {
    let mut stdout = stdout.lock().await;
    stdout
        .write_all(format!("{reply}\n").as_bytes())
        .await
        .is_ok()
        && stdout.flush().await.is_ok()
}

/// The answer to one action request, or the exit when the crash fault fired.
async fn perform(performer: &Performer, id: &Value, method: &str, params: Value) -> Value {
    let envelope = json!({"method": method, "params": params});
    match serde_json::from_value::<Action>(envelope) {
        Ok(action) => match performer.call(&action).await {
            Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
            Err(e) => {
                if performer.crashed() {
                    eprintln!("delegation-reference-host: {e}");
                    std::process::exit(CRASH_EXIT);
                }
                host_error_response(id, &e)
            }
        },
        Err(e) if !delegation_protocol_knows(method) => {
            error_response(id, -32601, format!("method `{method}` not found: {e}"))
        }
        Err(e) => error_response(id, -32602, format!("params of `{method}`: {e}")),
    }
}

/// Requests are read as they come and each action is a task of its own, so
/// that requests in flight at once (capability `concurrent-requests`) are
/// worked on concurrently and answered by id as they finish.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let store_dir = std::env::var_os("DELEGATION_STORE_DIR")
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut host = ReferenceHost::with_defect(&store_dir, defect_from_args())
        .with_authorizer_timeout(authorizer_timeout_from_env());
    let performer = host.performer();
    let mut lines = BufReader::new(stdin_reader()).lines();
    let stdout: Arc<Replies> = Arc::new(Mutex::new(stdout_writer()));
    let mut in_flight = tokio::task::JoinSet::new();
    while let Ok(Some(line)) = lines.next_line().await {
        // Answers already written need no keeping.
        while in_flight.try_join_next().is_some() {}
        if line.trim().is_empty() {
            continue;
        }
        let request: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                let reply =
                    error_response(&Value::Null, -32700, format!("request is not JSON: {e}"));
                write_reply(&stdout, &reply).await;
                continue;
            }
        };
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let method = request["method"].as_str().unwrap_or_default().to_string();
        let params = request.get("params").cloned().unwrap_or(Value::Null);
        let reply = match method.as_str() {
            "initialize" => match serde_json::from_value::<InitializeParams>(params) {
                Ok(p) => match host.initialize(p).await {
                    Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
                    Err(e) => host_error_response(&id, &e),
                },
                Err(e) => error_response(&id, -32602, format!("initialize params: {e}")),
            },
            "shutdown" => {
                while in_flight.join_next().await.is_some() {}
                let _ = host.shutdown().await;
                let reply = json!({"jsonrpc": "2.0", "id": id, "result": {}});
                write_reply(&stdout, &reply).await;
                return;
            }
            _ => {
                let performer = performer.clone();
                let stdout = Arc::clone(&stdout);
                in_flight.spawn(async move {
                    let reply = perform(&performer, &id, &method, params).await;
                    if !write_reply(&stdout, &reply).await {
                        std::process::exit(0);
                    }
                });
                continue;
            }
        };
        if !write_reply(&stdout, &reply).await {
            return;
        }
    }
    while in_flight.join_next().await.is_some() {}
    let _ = host.shutdown().await;
}

/// Stdin read through the runtime's poller when it is a pipe (as the
/// harness gives it), since tokio's own stdin hands every read to a
/// blocking thread and back; anything else (a file, a terminal) is read as
/// tokio reads stdin.
fn stdin_reader() -> Box<dyn AsyncRead + Send + Unpin> {
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    }
}

/// Stdout written through the runtime's poller when it is a pipe of its
/// own. A pipe shared with stderr stays blocking: making it non-blocking
/// would make `eprintln!` fail whenever that pipe is full.
fn stdout_writer() -> Box<dyn AsyncWrite + Send + Unpin> {
    let stdout = std::io::stdout();
    let shared_with_stderr = match (
        file_identity(stdout.as_fd()),
        file_identity(std::io::stderr().as_fd()),
    ) {
        (Some(out), Some(err)) => out == err,
        _ => true,
    };
    let pipe = if shared_with_stderr {
        None
    } else {
        stdout
            .as_fd()
            .try_clone_to_owned()
            .and_then(tokio::net::unix::pipe::Sender::from_owned_fd)
            .ok()
    };
    match pipe {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::stdout()),
    }
}

/// The device and inode behind a descriptor: two descriptors with the same
/// are the same pipe or file.
fn file_identity(fd: std::os::fd::BorrowedFd<'_>) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    let meta = file.metadata().ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The hidden `--defect NAME` flag: runs a deliberately broken host for
/// `selftest`-style checks of a catalogue through the subprocess path.
/// An unknown name or a stray argument exits 2 with the valid names.
fn defect_from_args() -> Option<delegation_host::mutants::Defect> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => None,
        [flag, name] if flag == "--defect" => match name.parse() {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("delegation-reference-host: --defect: {e}");
                std::process::exit(2);
            }
        },
        other => {
            eprintln!(
                "delegation-reference-host: unexpected arguments {other:?}; it takes none (speaks JSON-RPC on stdio)"
            );
            std::process::exit(2);
        }
    }
}

/// `DELEGATION_REFERENCE_AUTHORIZER_TIMEOUT_MS`: the wall-clock bound on an
/// authorizer call, for runs that want a scripted timeout waited out sooner
/// than the default 1.5 s. A value that is not a whole number of
/// milliseconds from 1 up exits 2 naming the variable.
fn authorizer_timeout_from_env() -> Duration {
    const VAR: &str = "DELEGATION_REFERENCE_AUTHORIZER_TIMEOUT_MS";
    let Some(raw) = std::env::var_os(VAR) else {
        return AUTHORIZER_TIMEOUT;
    };
    match raw.to_str().and_then(|s| s.trim().parse::<u64>().ok()) {
        Some(ms) if ms >= 1 => Duration::from_millis(ms),
        _ => {
            eprintln!(
                "delegation-reference-host: {VAR}={raw:?} is not a timeout; give whole milliseconds from 1 up (default {})",
                AUTHORIZER_TIMEOUT.as_millis()
            );
            std::process::exit(2);
        }
    }
}

/// Whether `method` names an action at all, to tell "unknown method" from "bad params".
fn delegation_protocol_knows(method: &str) -> bool {
    Action::method_names().contains(&method)
}
