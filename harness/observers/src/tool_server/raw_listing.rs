//! Puts the exact tool definitions back into `tools/list` answers on their way out.
//!
//! rmcp's typed `Tool` (and its `ToolAnnotations`) drops every field it does
//! not model: an extra top-level field, or `annotations.x-delegation-class`,
//! which the eligibility rule reads; and any JSON value forgets key order and
//! number forms. The digest contract (MODEL.md section 4) is over the
//! definition as sent, canonicalised by the host, so the handler ships each
//! definition's text beside the typed list in `_meta[RAW_TOOLS_KEY]` (one
//! JSON string per tool) and this layer, between rmcp and the socket, splices
//! those texts in verbatim as `result.tools` and removes the key. Both lists
//! come from one snapshot taken by the handler, so a concurrent change can
//! never mix two versions in one answer.

use axum::body::{Body, Bytes};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::response::Response;
use futures_util::StreamExt as _;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The `_meta` key that carries the raw definitions from handler to this layer.
pub(super) const RAW_TOOLS_KEY: &str = "dev.delegation-harness/raw-tools";

/// Rewrites every JSON-RPC result carrying [`RAW_TOOLS_KEY`] in a response
/// body, streamed (SSE) or whole (JSON); anything else passes untouched.
pub(super) async fn restore_raw_tools(response: Response) -> Response {
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let (mut parts, body) = response.into_parts();
    if content_type.starts_with("text/event-stream") {
        parts.headers.remove(CONTENT_LENGTH);
        Response::from_parts(parts, rewrite_sse_body(body))
    } else if content_type.starts_with("application/json") {
        // rmcp built this body itself and already bounded its size.
        let bytes = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!("tool server: could not read a JSON response body: {e}");
                return Response::from_parts(parts, Body::empty());
            }
        };
        let rewritten = std::str::from_utf8(&bytes)
            .ok()
            .and_then(rewrite_message)
            .map(Bytes::from)
            .unwrap_or(bytes);
        parts.headers.remove(CONTENT_LENGTH);
        Response::from_parts(parts, Body::from(rewritten))
    } else {
        Response::from_parts(parts, body)
    }
}

fn rewrite_sse_body(body: Body) -> Body {
    let stream = body.into_data_stream();
    let rewritten =
        futures_util::stream::unfold(Some((stream, SseRewriter::default())), |state| async move {
            let (mut stream, mut rewriter) = state?;
            loop {
                match stream.next().await {
                    Some(Ok(chunk)) => {
                        let ready = rewriter.push(&chunk);
                        // Hold nothing back: a notification must reach the client as soon as
                        // its event is complete, so only partial events stay buffered.
                        if !ready.is_empty() {
                            return Some((Ok(Bytes::from(ready)), Some((stream, rewriter))));
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), None)),
                    None => {
                        let rest = rewriter.finish();
                        return (!rest.is_empty()).then(|| (Ok(Bytes::from(rest)), None));
                    }
                }
            }
        });
    Body::from_stream(rewritten)
}

/// Reassembles SSE events across chunk boundaries and rewrites whole events.
#[derive(Default)]
pub(super) struct SseRewriter {
    buffer: Vec<u8>,
}

impl SseRewriter {
    /// Accepts a chunk; returns the bytes of every event it completed, rewritten.
    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.buffer.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(end) = event_end(&self.buffer) {
            let event: Vec<u8> = self.buffer.drain(..end).collect();
            out.extend(rewrite_event(&event));
        }
        out
    }

    /// The unterminated tail, passed on as it is: a partial event is not ours to complete.
    pub(super) fn finish(self) -> Vec<u8> {
        self.buffer
    }
}

/// Index just past the blank line that ends the first complete event.
fn event_end(buffer: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    for (i, &b) in buffer.iter().enumerate() {
        if b == b'\n' {
            let line = &buffer[line_start..i];
            if line.is_empty() || line == b"\r" {
                return Some(i + 1);
            }
            line_start = i + 1;
        }
    }
    None
}

fn rewrite_event(event: &[u8]) -> Vec<u8> {
    let Ok(text) = std::str::from_utf8(event) else {
        return event.to_vec();
    };
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let data: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    if data.is_empty() {
        return event.to_vec();
    }
    let Some(new_data) = rewrite_message(&data.join("\n")) else {
        return event.to_vec();
    };
    let mut out = String::with_capacity(new_data.len() + 64);
    let mut data_written = false;
    // `lines` ends with the two empty strings of the terminating blank line.
    for line in lines.iter().take(lines.len().saturating_sub(2)) {
        if line.starts_with("data:") {
            if !data_written {
                // A definition's text holds no line break outside a string
                // (layout is removed, and JSON escapes one inside), but an
                // event with one would still be one event.
                for data_line in new_data.split('\n') {
                    out.push_str("data: ");
                    out.push_str(data_line);
                    out.push('\n');
                }
                data_written = true;
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push('\n');
    out.into_bytes()
}

/// A JSON-RPC message whose `result.tools` is written verbatim.
#[derive(Serialize)]
struct Spliced {
    #[serde(flatten)]
    message: Map<String, Value>,
    result: SplicedResult,
}

#[derive(Serialize)]
struct SplicedResult {
    #[serde(flatten)]
    rest: Map<String, Value>,
    tools: Vec<Box<RawValue>>,
}

/// Splices the definitions' texts into one JSON-RPC message, if it carries them.
pub(super) fn rewrite_message(text: &str) -> Option<String> {
    // Most events carry no listing; serde_json writes the key as it is, so
    // looking for its text first saves parsing them.
    if !text.contains(RAW_TOOLS_KEY) {
        return None;
    }
    let Value::Object(mut message) = serde_json::from_str(text).ok()? else {
        return None;
    };
    let Value::Object(mut result) = message.remove("result")? else {
        return None;
    };
    let meta = result.get_mut("_meta")?.as_object_mut()?;
    let raw = meta.remove(RAW_TOOLS_KEY)?;
    if meta.is_empty() {
        result.remove("_meta");
    }
    let tools = raw
        .as_array()?
        .iter()
        .map(|t| RawValue::from_string(t.as_str()?.to_string()).ok())
        .collect::<Option<Vec<_>>>()?;
    result.remove("tools");
    serde_json::to_string(&Spliced {
        message,
        result: SplicedResult {
            rest: result,
            tools,
        },
    })
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A listing carrying these definitions as the handler ships them: as texts.
    fn listing(raw: Value) -> String {
        let texts: Vec<String> = raw
            .as_array()
            .unwrap()
            .iter()
            .map(Value::to_string)
            .collect();
        listing_of_texts(&texts)
    }

    fn listing_of_texts(texts: &[String]) -> String {
        json!({
            "jsonrpc": "2.0",
            "id": 3,
            "result": {"tools": [], "_meta": {RAW_TOOLS_KEY: texts}}
        })
        .to_string()
    }

    #[test]
    fn a_listing_gets_the_raw_definitions_and_loses_the_carrier_key() {
        let raw = json!([{"name": "t", "inputSchema": {}, "x-extra": 1}]);
        let out: Value = serde_json::from_str(&rewrite_message(&listing(raw.clone())).unwrap())
            .expect("rewritten message is JSON");
        assert_eq!(out["result"]["tools"], raw);
        assert!(out["result"].get("_meta").is_none());
        assert_eq!(out["id"], 3);
    }

    #[test]
    fn each_definition_is_spliced_in_byte_for_byte() {
        let written = r#"{"name":"t","x":1e1,"y":10.0,"z":"café","w":"é"}"#;
        let out = rewrite_message(&listing_of_texts(&[written.to_string()])).unwrap();
        assert!(
            out.contains(&format!(r#""tools":[{written}]"#)),
            "the text is not in the answer as written: {out}"
        );
        // Control: the same meaning written canonically is spliced as that, not as the first.
        let canonical = r#"{"name":"t","w":"é","x":10,"y":10,"z":"café"}"#;
        let out = rewrite_message(&listing_of_texts(&[canonical.to_string()])).unwrap();
        assert!(out.contains(canonical) && !out.contains(written), "{out}");
    }

    #[test]
    fn a_carrier_that_is_not_json_text_leaves_the_message_alone() {
        let broken = listing_of_texts(&["{not json".to_string()]);
        assert_eq!(rewrite_message(&broken), None);
    }

    #[test]
    fn other_meta_keys_survive() {
        let message = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "tools": [], "_meta": {RAW_TOOLS_KEY: ["{\"name\":\"t\"}"], "other": true}}});
        let out: Value = serde_json::from_str(&rewrite_message(&message.to_string()).unwrap())
            .expect("rewritten message is JSON");
        assert_eq!(out["result"]["_meta"], json!({"other": true}));
    }

    #[test]
    fn messages_without_the_key_are_left_alone() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}).to_string();
        assert_eq!(rewrite_message(&call), None);
        assert_eq!(rewrite_message("not json"), None);
    }

    #[test]
    fn events_split_across_chunks_are_rewritten_once_complete() {
        let raw = json!([{"name": "t", "x": "y"}]);
        let stream = format!(
            ": keep-alive\n\ndata:\nid: 0\nretry: 3000\n\ndata: {}\nid: 1\n\n",
            listing(raw.clone())
        );
        let bytes = stream.as_bytes();
        let mut rewriter = SseRewriter::default();
        let mut out = Vec::new();
        for chunk in bytes.chunks(7) {
            out.extend(rewriter.push(chunk));
        }
        assert!(rewriter.finish().is_empty(), "every event was terminated");
        let text = String::from_utf8(out).expect("UTF-8");
        let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
        assert_eq!(events[0], ": keep-alive");
        assert_eq!(events[1], "data:\nid: 0\nretry: 3000");
        let data = events[2]
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .expect("data line");
        let message: Value = serde_json::from_str(data).expect("JSON");
        assert_eq!(message["result"]["tools"], raw);
        assert!(events[2].ends_with("id: 1"));
    }

    #[test]
    fn a_partial_event_is_held_until_its_blank_line() {
        let mut rewriter = SseRewriter::default();
        assert!(rewriter.push(b"data: {\"a\":1}\n").is_empty());
        assert_eq!(rewriter.push(b"\n"), b"data: {\"a\":1}\n\n".to_vec());
        assert!(rewriter.push(b"data: partial").is_empty());
        assert_eq!(rewriter.finish(), b"data: partial".to_vec());
    }
}
