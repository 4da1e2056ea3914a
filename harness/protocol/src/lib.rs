//! Host protocol v1: the wire contract between the harness and any host adapter.
//!
//! JSON-RPC 2.0, one message per line on the adapter's stdin and stdout. The
//! actions and their results are the model's [`delegation_model::Action`] and
//! [`delegation_model::ActionResult`]; this crate adds the envelope, the
//! handshake, the error and exit codes, the bounded line codec and the JSON
//! Schema. It has no async runtime so that fuzz targets can link it cheaply.
//! The adapter authors' guide is `PROTOCOL.md` beside this crate.

pub mod codec;
pub mod codes;
pub mod envelope;
pub mod fuzzing;
pub mod handshake;
pub mod schema;

pub use codec::{
    DEFAULT_LINE_LIMIT, DecodeError, LineDecoder, LineTooLong, decode_message, decode_request,
};
pub use codes::{error_code, exit_code};
pub use envelope::{
    ErrorObject, HostMessage, INITIALIZE, JsonRpcVersion, LOG, LogLevel, LogParams, Notification,
    Request, Response, encode_action, encode_line, encode_log, encode_request,
};
pub use handshake::{
    Environment, HostInfo, InitializeParams, InitializeResult, McpServer, PROTOCOL_VERSION,
    STORE_DIR_ENV, capability,
};
