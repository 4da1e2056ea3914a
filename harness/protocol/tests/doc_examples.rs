//! Every example transcript in PROTOCOL.md parses into the Rust types, and every method has one.

use std::collections::{BTreeMap, BTreeSet};

use delegation_model::{Action, ActionResult};
use delegation_protocol::{
    HostMessage, INITIALIZE, InitializeParams, InitializeResult, decode_message, decode_request,
};

const DOC: &str = include_str!("../PROTOCOL.md");

/// The lines of every ```jsonl block, with their line number in the doc.
fn example_lines() -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut inside = false;
    for (n, line) in DOC.lines().enumerate() {
        match line.trim() {
            "```jsonl" => inside = true,
            "```" if inside => inside = false,
            text if inside && !text.is_empty() => lines.push((n + 1, text.to_string())),
            _ => {}
        }
    }
    assert!(!inside, "PROTOCOL.md: a ```jsonl block is not closed");
    lines
}

#[test]
fn every_example_parses_into_the_protocol_types() {
    let mut methods_by_id: BTreeMap<u64, String> = BTreeMap::new();
    let mut methods = BTreeSet::new();
    let lines = example_lines();
    assert!(lines.len() > 40, "only {} example lines found", lines.len());
    for (n, line) in lines {
        let at = format!("PROTOCOL.md:{n}");
        if let Some(request) = line.strip_prefix("-> ") {
            let request = decode_request(request.as_bytes())
                .unwrap_or_else(|e| panic!("{at}: request does not decode: {e}"));
            if request.method == INITIALIZE {
                serde_json::from_value::<InitializeParams>(request.params.clone())
                    .unwrap_or_else(|e| panic!("{at}: bad InitializeParams: {e}"));
            } else {
                let action = request.to_action().unwrap_or_else(|e| {
                    panic!("{at}: not a valid `{}` action: {e}", request.method)
                });
                assert_eq!(action.method(), request.method, "{at}");
            }
            methods.insert(request.method.clone());
            methods_by_id.insert(request.id, request.method);
        } else if let Some(message) = line.strip_prefix("<- ") {
            match decode_message(message.as_bytes())
                .unwrap_or_else(|e| panic!("{at}: host message does not decode: {e}"))
            {
                HostMessage::Response(response) => {
                    let id = response
                        .id
                        .unwrap_or_else(|| panic!("{at}: example with null id"));
                    let method = methods_by_id.get(&id).unwrap_or_else(|| {
                        panic!("{at}: answers id {id}, which no example request has")
                    });
                    if response.outcome.is_ok() {
                        if method == INITIALIZE {
                            response
                                .result_as::<InitializeResult>()
                                .expect("a success")
                                .unwrap_or_else(|e| panic!("{at}: bad InitializeResult: {e}"));
                        } else {
                            let result: ActionResult = response
                                .result_as()
                                .expect("a success")
                                .unwrap_or_else(|e| panic!("{at}: bad ActionResult: {e}"));
                            assert_eq!(
                                result.reason.is_some(),
                                !result.is_ok(),
                                "{at}: `reason` must be present exactly when denied"
                            );
                        }
                    }
                }
                HostMessage::Log(_) => {}
                HostMessage::Notification(n) => {
                    panic!("{at}: undocumented notification `{}`", n.method)
                }
            }
        } else {
            panic!("{at}: example lines start with `-> ` (request) or `<- ` (host message)");
        }
    }
    let all: BTreeSet<String> = all_methods().into_iter().collect();
    let missing: Vec<_> = all.difference(&methods).collect();
    assert!(
        missing.is_empty(),
        "PROTOCOL.md has no example for {missing:?}"
    );
}

/// Every method name, read from the schema so a new `Action` variant is caught.
fn all_methods() -> Vec<String> {
    let schema = serde_json::to_value(schemars::schema_for!(Action)).unwrap();
    let mut methods = vec![INITIALIZE.to_string()];
    for variant in schema["oneOf"].as_array().expect("Action is a oneOf") {
        let method = &variant["properties"]["method"];
        let name = method["const"]
            .as_str()
            .or_else(|| method["enum"][0].as_str())
            .unwrap_or_else(|| panic!("no method name in {variant}"));
        methods.push(name.to_string());
    }
    assert!(methods.len() > 20, "found only {methods:?}");
    methods
}
