//! The stdio reference host tells a method it does not know (-32601) from a known method's bad params (-32602), whatever its stdin and stdout are.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// Sends each request on its own line and returns the replies in order.
fn replies(requests: &[Value]) -> Vec<Value> {
    let store = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_delegation-reference-host"))
        .env("DELEGATION_STORE_DIR", store.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the reference host binary starts");
    let mut stdin = child.stdin.take().unwrap();
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
    }
    drop(stdin);
    let lines: Vec<Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|line| serde_json::from_str(&line.unwrap()).unwrap())
        .collect();
    child.wait().unwrap();
    lines
}

#[test]
fn an_unknown_method_is_not_found_and_bad_params_of_a_known_one_are_invalid() {
    let out = replies(&[
        json!({"jsonrpc": "2.0", "id": 1, "method": "instance/teleport", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "instance/turn", "params": {"bogus": 1}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "state/observe"}),
    ]);
    assert_eq!(out.len(), 3, "{out:?}");

    let unknown = &out[0]["error"];
    assert_eq!(unknown["code"], -32601, "{out:?}");
    let message = unknown["message"].as_str().unwrap();
    assert!(
        message.contains("method `instance/teleport` not found")
            && message.contains("`instance/delegate`"),
        "names the method and the ones that exist: {message}"
    );

    // The control: a method that exists, with params it cannot take.
    let invalid = &out[1]["error"];
    assert_eq!(invalid["code"], -32602, "{out:?}");
    assert!(
        invalid["message"]
            .as_str()
            .unwrap()
            .starts_with("params of `instance/turn`"),
        "{out:?}"
    );

    // And a known method without params reaches the host, which wants `initialize` first.
    let before_initialize = &out[2]["error"];
    assert_ne!(before_initialize["code"], -32601, "{out:?}");
    assert!(
        before_initialize["message"]
            .as_str()
            .unwrap()
            .contains("`initialize` must come first"),
        "{out:?}"
    );
}

/// Requests from a file rather than a pipe, and stdout sharing one pipe
/// with stderr: the host reads and writes them the blocking way (its fast
/// path is for pipes of their own), and answers the same.
#[test]
fn requests_from_a_file_are_answered_on_a_stdout_shared_with_stderr() {
    let store = tempfile::tempdir().unwrap();
    let requests = store.path().join("requests.jsonl");
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "instance/teleport", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "instance/turn", "params": {"bogus": 1}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}),
    ]
    .map(|request| format!("{request}\n"))
    .concat();
    std::fs::write(&requests, lines).unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_delegation-reference-host"))
        .env("DELEGATION_STORE_DIR", store.path())
        .stdin(std::fs::File::open(&requests).unwrap())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .expect("the reference host binary starts");
    let replies: Vec<Value> = BufReader::new(reader)
        .lines()
        .map(|line| line.unwrap())
        .filter_map(|line| serde_json::from_str(&line).ok())
        .collect();
    assert!(child.wait().unwrap().success());
    let codes: Vec<&Value> = replies.iter().map(|r| &r["error"]["code"]).collect();
    assert_eq!(codes[..2], [&json!(-32601), &json!(-32602)], "{replies:?}");
    assert_eq!(replies[2], json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
}
