//! The bounded line codec: bytes in, complete lines out, never more than a limit held; and line to message.
//!
//! Pure and synchronous so fuzz targets and the adapter side can use it
//! without tokio. A host that writes a 50 MB line costs the harness at most
//! `limit` bytes: the rest of that line is skipped as it streams past.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::envelope::{
    ErrorObject, HostMessage, JsonRpcVersion, LOG, LogParams, Notification, Request, Response,
};

/// Longest line accepted by default: 1 MiB. A full `state/observe` of a
/// large scenario is a few tens of KiB, so this leaves room without letting a
/// broken host exhaust memory.
pub const DEFAULT_LINE_LIMIT: usize = 1 << 20;

/// A line grew past the limit. Reported as soon as the limit is crossed, so
/// the caller need not wait for the rest; the decoder then drops everything up
/// to the next newline.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "line {line} is longer than the {limit}-byte limit; the rest of it is discarded up to the next newline (one JSON message per line, at most {limit} bytes)"
)]
pub struct LineTooLong {
    /// 1-based line number in the stream.
    pub line: u64,
    pub limit: usize,
}

/// Splits a byte stream into lines with bounded memory.
///
/// Lines exclude their `\n`. Neither the buffer's length nor its capacity
/// ever exceeds `limit` (see [`LineDecoder::high_water_mark`]).
#[derive(Debug)]
pub struct LineDecoder {
    limit: usize,
    buf: Vec<u8>,
    /// Inside an over-long line: drop bytes until the next newline.
    discarding: bool,
    line: u64,
    high_water: usize,
    discarded: u64,
}

impl Default for LineDecoder {
    fn default() -> Self {
        LineDecoder::new(DEFAULT_LINE_LIMIT)
    }
}

impl LineDecoder {
    /// A decoder refusing lines longer than `limit` bytes (newline excluded).
    pub fn new(limit: usize) -> LineDecoder {
        LineDecoder {
            limit,
            buf: Vec::new(),
            discarding: false,
            line: 1,
            high_water: 0,
            discarded: 0,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Feeds bytes; returns every line completed by them, in order, and one
    /// error per line that crossed the limit.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<Result<Vec<u8>, LineTooLong>> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let newline = memchr::memchr(b'\n', bytes);
            let segment = &bytes[..newline.unwrap_or(bytes.len())];
            if self.discarding {
                self.discarded += segment.len() as u64;
            } else if self.buf.len() + segment.len() > self.limit {
                self.discarded += (self.buf.len() + segment.len()) as u64;
                self.buf.clear();
                self.discarding = true;
                out.push(Err(LineTooLong {
                    line: self.line,
                    limit: self.limit,
                }));
            } else if newline.is_some() && self.buf.is_empty() {
                // The common case: a whole line inside one read, copied once.
                out.push(Ok(segment.to_vec()));
            } else {
                self.append(segment);
                if newline.is_some() {
                    out.push(Ok(self.buf.clone()));
                    self.buf.clear();
                }
            }
            match newline {
                Some(at) => {
                    self.discarding = false;
                    self.line += 1;
                    bytes = &bytes[at + 1..];
                }
                None => bytes = &[],
            }
        }
        out
    }

    /// Called at end of stream: an unterminated last line is still a line
    /// (a host may omit the final newline before exiting).
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let rest =
            (!self.discarding && !self.buf.is_empty()).then(|| std::mem::take(&mut self.buf));
        self.discarding = false;
        rest
    }

    /// Bytes of an incomplete line held right now.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The most memory the line buffer ever held: the larger of its length
    /// and its allocated capacity. Never above [`LineDecoder::limit`].
    pub fn high_water_mark(&self) -> usize {
        self.high_water
    }

    /// Bytes dropped because they belonged to over-long lines.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    fn append(&mut self, segment: &[u8]) {
        let needed = self.buf.len() + segment.len();
        if needed > self.buf.capacity() {
            // Grow geometrically as `Vec` would, but never past the limit, so
            // the bound holds for the allocation and not only the length.
            let target = needed.max(self.buf.capacity() * 2).min(self.limit);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(segment);
        self.high_water = self.high_water.max(self.buf.capacity());
    }
}

/// Why a line is not a valid host message.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DecodeError {
    #[error("blank line (expected one JSON-RPC message per line)")]
    Blank,
    #[error("line is not JSON ({error}); it starts with `{excerpt}`")]
    NotJson { error: String, excerpt: String },
    #[error(
        "line is JSON {found}, expected a JSON-RPC object (batches are not part of protocol v1)"
    )]
    NotAnObject { found: &'static str },
    #[error("message has no `jsonrpc` member; expected \"jsonrpc\": \"2.0\"")]
    MissingVersion,
    #[error("`jsonrpc` is {found}; expected \"2.0\"")]
    WrongVersion { found: String },
    #[error(
        "response has no `id`; expected the integer id of the request it answers (a notification needs a `method`)"
    )]
    MissingId,
    #[error("`id` is {found}; expected a non-negative integer chosen by the harness")]
    BadId { found: String },
    #[error("response has both `result` and `error`; expected exactly one")]
    ResultAndError,
    #[error(
        "message has none of `result`, `error` or `method`; expected a response or a notification"
    )]
    Shapeless,
    #[error("success response has `id`: null; only an error response may have a null id")]
    NullIdOnSuccess,
    #[error(
        "`error` member is malformed ({detail}); expected {{\"code\": integer, \"message\": string, \"data\"?: any}}"
    )]
    BadError { detail: String },
    #[error("`method` is {found}; expected a string")]
    BadMethod { found: String },
    #[error(
        "host sent a request (`{method}`, id {id}); hosts may only answer and notify in protocol v1"
    )]
    HostRequest { method: String, id: String },
    #[error(
        "`log` notification has bad params ({detail}); expected {{\"level\": \"error\"|\"warn\"|\"info\"|\"debug\"|\"trace\", \"message\": string}}"
    )]
    BadLog { detail: String },
    #[error(
        "message is ambiguous or malformed ({error}); expected each JSON-RPC member at most once"
    )]
    Ambiguous { error: String },
    #[error(
        "request is malformed ({detail}); expected {{\"jsonrpc\": \"2.0\", \"id\": integer, \"method\": string, \"params\"?: object}}"
    )]
    BadRequest { detail: String },
}

const EXCERPT: usize = 80;

/// A member that may be absent (`None`) or present with any value, `null`
/// included: JSON-RPC gives `"id": null` a meaning apart from no `id`.
#[derive(Default)]
struct Member<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for Member<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(|raw| Member(Some(raw)))
    }
}

/// The members of a message, each left as raw text: one pass over the line
/// validates it and finds them, and only what is needed is parsed further.
/// Unknown members are ignored; a duplicated one is refused as ambiguous.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Member<'a>,
    #[serde(default, borrow)]
    id: Member<'a>,
    #[serde(default, borrow)]
    method: Member<'a>,
    #[serde(default, borrow)]
    params: Member<'a>,
    #[serde(default, borrow)]
    result: Member<'a>,
    #[serde(default, borrow)]
    error: Member<'a>,
}

/// Parses one line (without its newline) as a message from a host.
pub fn decode_message(line: &[u8]) -> Result<HostMessage, DecodeError> {
    let envelope = parse_envelope(line)?;
    check_version(envelope.jsonrpc.0)?;
    if let Some(method) = envelope.method.0 {
        let method: String =
            serde_json::from_str(method.get()).map_err(|_| DecodeError::BadMethod {
                found: excerpt(method.get()),
            })?;
        if let Some(id) = envelope.id.0 {
            return Err(DecodeError::HostRequest {
                method,
                id: excerpt(id.get()),
            });
        }
        if method == LOG {
            let params = envelope.params.0.map_or("null", RawValue::get);
            let log: LogParams = serde_json::from_str(params).map_err(|e| DecodeError::BadLog {
                detail: e.to_string(),
            })?;
            return Ok(HostMessage::Log(log));
        }
        let params = match envelope.params.0 {
            Some(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
            None => Value::Null,
        };
        return Ok(HostMessage::Notification(Notification { method, params }));
    }
    let (result, error) = (envelope.result.0, envelope.error.0);
    let id = match envelope.id.0 {
        None => {
            return Err(if result.is_some() || error.is_some() {
                DecodeError::MissingId
            } else {
                DecodeError::Shapeless
            });
        }
        Some(raw) if raw.get() == "null" => None,
        Some(raw) => {
            Some(
                serde_json::from_str::<u64>(raw.get()).map_err(|_| DecodeError::BadId {
                    found: excerpt(raw.get()),
                })?,
            )
        }
    };
    let outcome = match (result, error) {
        (Some(_), Some(_)) => return Err(DecodeError::ResultAndError),
        (None, None) => return Err(DecodeError::Shapeless),
        (Some(result), None) => {
            if id.is_none() {
                return Err(DecodeError::NullIdOnSuccess);
            }
            Ok(result.to_owned())
        }
        (None, Some(error)) => Err(serde_json::from_str::<ErrorObject>(error.get()).map_err(
            |e| DecodeError::BadError {
                detail: e.to_string(),
            },
        )?),
    };
    Ok(HostMessage::Response(Response { id, outcome }))
}

/// Parses one line as a request from the harness: the adapter side, for hosts written in Rust.
pub fn decode_request(line: &[u8]) -> Result<Request, DecodeError> {
    // One pass for a good request; the envelope pass runs only to explain a bad one.
    serde_json::from_slice(line).map_err(|error| {
        match parse_envelope(line).and_then(|envelope| check_version(envelope.jsonrpc.0)) {
            Err(specific) => specific,
            Ok(()) => DecodeError::BadRequest {
                detail: error.to_string(),
            },
        }
    })
}

fn parse_envelope(line: &[u8]) -> Result<Envelope<'_>, DecodeError> {
    let Some(first) = line.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Err(DecodeError::Blank);
    };
    // Checked first: serde would also read a JSON array as the envelope's
    // members by position.
    if *first != b'{' {
        return Err(match serde_json::from_slice::<Value>(line) {
            Ok(other) => DecodeError::NotAnObject {
                found: kind(&other),
            },
            Err(error) => not_json(line, error),
        });
    }
    serde_json::from_slice::<Envelope>(line).map_err(|error| {
        if error.classify() == serde_json::error::Category::Data {
            DecodeError::Ambiguous {
                error: error.to_string(),
            }
        } else {
            not_json(line, error)
        }
    })
}

fn not_json(line: &[u8], error: serde_json::Error) -> DecodeError {
    DecodeError::NotJson {
        error: error.to_string(),
        excerpt: String::from_utf8_lossy(&line[..line.len().min(EXCERPT)]).into_owned(),
    }
}

fn check_version(version: Option<&RawValue>) -> Result<(), DecodeError> {
    match version {
        None => Err(DecodeError::MissingVersion),
        Some(v) if serde_json::from_str::<JsonRpcVersion>(v.get()).is_ok() => Ok(()),
        Some(v) => Err(DecodeError::WrongVersion {
            found: excerpt(v.get()),
        }),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A short rendering of an offending value for an error message.
fn excerpt(text: &str) -> String {
    if text.len() <= EXCERPT {
        text.to_string()
    } else {
        let mut end = EXCERPT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &text[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::LogLevel;
    use proptest::prelude::*;

    fn lines(results: Vec<Result<Vec<u8>, LineTooLong>>) -> Vec<Result<String, u64>> {
        results
            .into_iter()
            .map(|r| r.map(|l| String::from_utf8(l).unwrap()).map_err(|e| e.line))
            .collect()
    }

    #[test]
    fn splits_lines_across_arbitrary_chunks() {
        let mut d = LineDecoder::new(16);
        assert_eq!(lines(d.push(b"ab")), vec![]);
        assert_eq!(
            lines(d.push(b"c\nde\n\nf")),
            vec![Ok("abc".into()), Ok("de".into()), Ok("".into())]
        );
        assert_eq!(d.buffered(), 1);
        assert_eq!(d.finish(), Some(b"f".to_vec()));
        assert_eq!(d.finish(), None);
    }

    #[test]
    fn refuses_an_overlong_line_once_and_resumes_after_it() {
        let mut d = LineDecoder::new(4);
        assert_eq!(lines(d.push(b"ok\n1234")), vec![Ok("ok".into())]);
        // Crossing the limit is reported at once, before the newline arrives.
        assert_eq!(lines(d.push(b"5")), vec![Err(2)]);
        assert_eq!(lines(d.push(&[b'x'; 1000])), vec![]);
        assert_eq!(lines(d.push(b"xx\nnext\n")), vec![Ok("next".into())]);
        assert_eq!(d.discarded(), 5 + 1000 + 2);
        assert!(d.high_water_mark() <= 4);
        // A line of exactly the limit is fine.
        assert_eq!(lines(d.push(b"1234\n")), vec![Ok("1234".into())]);
    }

    #[test]
    fn a_fifty_megabyte_line_never_holds_more_than_the_limit() {
        let limit = 64 * 1024;
        let mut d = LineDecoder::new(limit);
        let chunk = vec![b'a'; 64 * 1024];
        let mut errors = 0;
        for _ in 0..(50 * 1024 * 1024 / chunk.len()) {
            errors += d.push(&chunk).iter().filter(|r| r.is_err()).count();
            assert!(d.buffered() <= limit);
        }
        assert_eq!(lines(d.push(b"\n{}\n")), vec![Ok("{}".into())]);
        assert_eq!(errors, 1);
        assert!(d.high_water_mark() <= limit, "held {}", d.high_water_mark());
    }

    #[test]
    fn decodes_responses_logs_and_notifications() {
        let ok = decode_message(br#"{"jsonrpc":"2.0","id":7,"result":{"outcome":"ok"}}"#);
        assert_eq!(
            ok.unwrap(),
            HostMessage::Response(Response::success(7, &serde_json::json!({"outcome": "ok"})))
        );
        let err =
            decode_message(br#"{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"no"}}"#);
        assert_eq!(
            err.unwrap(),
            HostMessage::Response(Response::failure(Some(8), -32601, "no"))
        );
        let log = decode_message(
            br#"{"jsonrpc":"2.0","method":"log","params":{"level":"warn","message":"hi"}}"#,
        );
        assert_eq!(
            log.unwrap(),
            HostMessage::Log(LogParams {
                level: LogLevel::Warn,
                message: "hi".into()
            })
        );
        let other = decode_message(br#"{"jsonrpc":"2.0","method":"progress"}"#).unwrap();
        assert!(matches!(other, HostMessage::Notification(n) if n.method == "progress"));
        let parse_error =
            decode_message(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#)
                .unwrap();
        assert!(matches!(
            parse_error,
            HostMessage::Response(Response { id: None, .. })
        ));
    }

    #[test]
    fn names_what_is_wrong_with_a_bad_message() {
        let cases: &[(&[u8], &str)] = &[
            (b"   ", "blank line"),
            (b"hello", "not JSON"),
            (b"[1]", "JSON an array"),
            (br#"{"id":1,"result":1}"#, "no `jsonrpc`"),
            (
                br#"{"jsonrpc":"1.0","id":1,"result":1}"#,
                r#"`jsonrpc` is "1.0""#,
            ),
            (br#"{"jsonrpc":"2.0","result":1}"#, "no `id`"),
            (br#"{"jsonrpc":"2.0","id":-1,"result":1}"#, "`id` is -1"),
            (
                br#"{"jsonrpc":"2.0","id":"a","result":1}"#,
                r#"`id` is "a""#,
            ),
            (br#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#, "both"),
            (br#"{"jsonrpc":"2.0","id":1}"#, "none of"),
            (br#"{"jsonrpc":"2.0","id":null,"result":1}"#, "null id"),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}"#,
                "`error` member",
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"x"}"#,
                "sent a request",
            ),
            (
                br#"{"jsonrpc":"2.0","method":"log","params":{"level":"loud","message":""}}"#,
                "`log`",
            ),
        ];
        for (line, expected) in cases {
            let message = decode_message(line).unwrap_err().to_string();
            assert!(
                message.contains(expected),
                "{:?}: `{message}` does not mention `{expected}`",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn adapter_side_decoder_explains_bad_requests() {
        let cases: &[(&[u8], &str)] = &[
            (b"nonsense", "not JSON"),
            (br#"{"id":1,"method":"state/observe"}"#, "no `jsonrpc`"),
            (
                br#"{"jsonrpc":"2","id":1,"method":"state/observe"}"#,
                r#"`jsonrpc` is "2""#,
            ),
            (
                br#"{"jsonrpc":"2.0","method":"state/observe"}"#,
                "missing field `id`",
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"x","extra":1}"#,
                "unknown field `extra`",
            ),
        ];
        for (line, expected) in cases {
            let message = decode_request(line).unwrap_err().to_string();
            assert!(message.contains(expected), "{message} lacks `{expected}`");
        }
    }

    #[test]
    fn action_requests_round_trip_through_the_adapter_side_decoder() {
        let action = delegation_model::Action::Close {
            instance: "i-1".into(),
        };
        let line = crate::envelope::encode_action(41, &action);
        assert_eq!(line.last(), Some(&b'\n'));
        let request = decode_request(&line[..line.len() - 1]).unwrap();
        assert_eq!(request.id, 41);
        assert_eq!(request.method, "instance/close");
        assert_eq!(request.to_action().unwrap(), action);
        let observe = crate::envelope::encode_action(1, &delegation_model::Action::Observe);
        let request = decode_request(&observe).unwrap();
        assert_eq!(
            request.to_action().unwrap(),
            delegation_model::Action::Observe
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_stay_bounded(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..20),
            limit in 1usize..64,
        ) {
            let mut d = LineDecoder::new(limit);
            let mut total_out = 0usize;
            for chunk in &chunks {
                // Refusals are checked by the unit tests; here, what gets through.
                for line in d.push(chunk).into_iter().flatten() {
                    prop_assert!(line.len() <= limit);
                    prop_assert!(!line.contains(&b'\n'));
                    total_out += line.len();
                    let _ = decode_message(&line);
                    let _ = decode_request(&line);
                }
                prop_assert!(d.buffered() <= limit);
            }
            prop_assert!(d.high_water_mark() <= limit);
            let input: usize = chunks.iter().map(Vec::len).sum();
            prop_assert!(total_out + d.buffered() + d.discarded() as usize <= input);
        }

        #[test]
        fn chunking_does_not_change_the_lines(
            text in "[a-z{}\n]{0,300}",
            cut in proptest::collection::vec(0usize..300, 0..8),
        ) {
            let bytes = text.as_bytes();
            let mut whole = LineDecoder::new(usize::MAX);
            let expected = whole.push(bytes);
            let mut cuts: Vec<usize> = cut.into_iter().filter(|c| *c <= bytes.len()).collect();
            cuts.sort();
            let mut pieces = LineDecoder::new(usize::MAX);
            let mut got = Vec::new();
            let mut start = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                got.extend(pieces.push(&bytes[start..c]));
                start = c;
            }
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn arbitrary_json_objects_decode_or_fail_cleanly(value in arb_json()) {
            let line = serde_json::to_vec(&value).unwrap();
            let _ = decode_message(&line);
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z0-9.]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            let keys = prop_oneof![
                Just("jsonrpc".to_string()),
                Just("id".to_string()),
                Just("method".to_string()),
                Just("params".to_string()),
                Just("result".to_string()),
                Just("error".to_string()),
                Just("code".to_string()),
                Just("message".to_string()),
                Just("level".to_string()),
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(keys, inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
