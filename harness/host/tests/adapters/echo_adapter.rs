//! A minimal protocol v1 adapter in Rust: the benchmark's far end, and the shortest correct adapter.
//!
//! Answers `initialize` and `state/observe` (with an empty state) and refuses
//! every other method with `method not found`, so the round trip measured is
//! the protocol's own cost, not a host's.

use std::io::{Read, Write};

use delegation_model::{ActionResult, Observed};
use delegation_protocol::{
    HostInfo, INITIALIZE, InitializeResult, LineDecoder, PROTOCOL_VERSION, Response,
    decode_request, encode_line, error_code,
};

fn main() {
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut decoder = LineDecoder::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        for line in decoder.push(&buf[..n]) {
            let response = match line
                .map_err(|e| e.to_string())
                .and_then(|l| decode_request(&l).map_err(|e| e.to_string()))
            {
                Err(e) => Response::failure(None, error_code::INVALID_REQUEST, e),
                Ok(request) => answer(request.id, &request.method),
            };
            if stdout
                .write_all(&encode_line(&response))
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return;
            }
        }
    }
}

fn answer(id: u64, method: &str) -> Response {
    match method {
        INITIALIZE => Response::success(
            id,
            &InitializeResult {
                host: HostInfo {
                    name: "echo-adapter".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                },
                protocol_version: PROTOCOL_VERSION.into(),
                capabilities: Vec::new(),
            },
        ),
        "state/observe" => Response::success(
            id,
            &ActionResult {
                observed: Some(Observed::default()),
                ..ActionResult::ok()
            },
        ),
        other => Response::failure(
            Some(id),
            error_code::METHOD_NOT_FOUND,
            format!("echo adapter implements only initialize and state/observe, not {other}"),
        ),
    }
}
