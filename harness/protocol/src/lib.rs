//! Host protocol v1: the wire contract between the harness and any host adapter.
//!
//! JSON-RPC 2.0, one message per line on the adapter's stdin and stdout. The
//! actions and their results are the model's [`delegation_model::Action`] and
//! [`delegation_model::ActionResult`]; this crate adds the envelope, the
//! handshake, the error codes and the bounded line codec.

pub mod handshake;

pub use handshake::{
    Environment, HostInfo, InitializeParams, InitializeResult, McpServer, PROTOCOL_VERSION,
    capability,
};
