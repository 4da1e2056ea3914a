//! Fails when the committed JSON Schema no longer matches the Rust types, and says how to refresh it.

use std::path::PathBuf;

use delegation_protocol::schema::{SCHEMA_PATH, protocol_schema_text};

#[test]
fn committed_schema_is_up_to_date() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_PATH);
    let generated = protocol_schema_text();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: the protocol types changed. Regenerate it with\n  \
         UPDATE_SCHEMA=1 cargo test -p delegation-protocol --test schema\n\
         and commit the result.",
        path.display()
    );
}

#[test]
fn schema_describes_every_method_and_the_envelope() {
    let schema: serde_json::Value = serde_json::from_str(&protocol_schema_text()).unwrap();
    let text = schema.to_string();
    for method in [
        "initialize",
        "log",
        "host/configure",
        "instance/start",
        "instance/delegate",
        "receipt/consume",
        "state/observe",
        "fault/arm",
    ] {
        assert!(
            text.contains(&format!("\"{method}\"")),
            "schema lacks method `{method}`"
        );
    }
    let defs = schema["$defs"].as_object().expect("schema has $defs");
    for def in [
        "Action",
        "ActionResult",
        "Observed",
        "ErrorObject",
        "InitializeParams",
        "InitializeResult",
        "LogParams",
    ] {
        assert!(
            defs.contains_key(def),
            "schema lacks $defs/{def}; has {:?}",
            defs.keys().collect::<Vec<_>>()
        );
    }
    assert_eq!(
        schema["x-protocol-version"],
        delegation_protocol::PROTOCOL_VERSION
    );
}
