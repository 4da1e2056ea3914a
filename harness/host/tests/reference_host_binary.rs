//! The stdio reference host tells a method it does not know (-32601) from a known method's bad params (-32602).

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
