//! Fuzzing entry point for the host-facing codec: the bounded line decoder and message decoding.
//!
//! Kept in the library (rustls style) so the fuzz target is one line and the
//! logic builds and is tested on stable. The decoder is checked against a
//! plain reference (split on `\n`, refuse what is longer than the limit), so
//! a fuzzer finds wrong lines and not only crashes.

use crate::codec::{LineDecoder, LineTooLong, decode_message, decode_request};

/// Largest limit the fuzzer picks: room for a typical response line, yet
/// small enough that over-long lines, lines of exactly the limit and lines split across many reads are all common.
pub const MAX_FUZZ_LIMIT: usize = 128;

/// What a correct decoder yields for `payload` under `limit`: every
/// newline-terminated line, or one refusal per line longer than the limit; an
/// unterminated tail is refused as soon as it is too long, else it is what
/// `finish` returns.
fn reference(payload: &[u8], limit: usize) -> (Vec<Result<Vec<u8>, LineTooLong>>, Option<Vec<u8>>) {
    let mut lines = Vec::new();
    let mut segments = payload.split(|b| *b == b'\n').peekable();
    let mut line = 1u64;
    let mut tail = None;
    while let Some(segment) = segments.next() {
        let terminated = segments.peek().is_some();
        if segment.len() > limit {
            lines.push(Err(LineTooLong { line, limit }));
        } else if terminated {
            lines.push(Ok(segment.to_vec()));
        } else if !segment.is_empty() {
            tail = Some(segment.to_vec());
        }
        line += 1;
    }
    (lines, tail)
}

/// Fuzz target body. Byte 0 picks the line limit (1..=128), byte 1 seeds the
/// chunk sizes (0..=2*limit+1, empty reads included); the rest is the stream.
pub fn fuzz_decoder(data: &[u8]) {
    let [limit_byte, seed, payload @ ..] = data else {
        return;
    };
    let limit = 1 + *limit_byte as usize % MAX_FUZZ_LIMIT;
    let mut state = u32::from(*seed) | 0x100;
    let mut next_chunk = move || {
        // A small LCG: any sequence of sizes will do, as long as the input decides it.
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        (state >> 16) as usize % (2 * limit + 2)
    };

    let mut decoder = LineDecoder::new(limit);
    let mut got = Vec::new();
    let mut rest = payload;
    while !rest.is_empty() {
        let (chunk, after) = rest.split_at(next_chunk().min(rest.len()));
        rest = after;
        for result in decoder.push(chunk) {
            if let Ok(line) = &result {
                assert!(
                    line.len() <= limit,
                    "a {}-byte line passed a {limit}-byte limit",
                    line.len()
                );
                assert!(!line.contains(&b'\n'), "a line kept its newline");
                let _ = decode_message(line);
                let _ = decode_request(line);
            }
            got.push(result);
        }
        assert!(
            decoder.buffered() <= limit,
            "{} bytes buffered over a {limit}-byte limit",
            decoder.buffered()
        );
    }
    assert!(
        decoder.high_water_mark() <= limit,
        "the buffer's capacity reached {} over a {limit}-byte limit",
        decoder.high_water_mark()
    );
    let tail = decoder.finish();
    if let Some(line) = &tail {
        let _ = decode_message(line);
    }
    let (expected, expected_tail) = reference(payload, limit);
    assert_eq!(
        got, expected,
        "lines differ from a plain split at limit {limit}"
    );
    assert_eq!(tail, expected_tail, "unterminated last line");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed seeds for `fuzz/corpus/protocol_decoder/`: limit byte, chunk seed, stream.
    const SEEDS: &[(&str, &[u8])] = &[
        (
            "response_and_log",
            b"\x7f\x07{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"method\":\"log\",\"params\":{\"level\":\"warn\",\"message\":\"hi\"}}\n",
        ),
        (
            "overlong_then_recover",
            b"\x07\x01aaaaaaaaaaaaaaaaaaaa\n{}\nxyz",
        ),
        ("exact_limit_and_blank", b"\x03\x02abcd\n\n\n  \nabc"),
        (
            "error_response_null_id",
            b"\x7f\x00{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}\n",
        ),
        (
            "host_request_and_batch",
            b"\x7f\x33{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}\n[1,2]\n\xff\xfe\n",
        ),
    ];

    #[test]
    fn committed_seeds_exist_and_pass() {
        for (name, bytes) in SEEDS {
            let on_disk =
                delegation_model::fuzzing::committed_seed("protocol_decoder", name, bytes);
            assert_eq!(&on_disk, bytes, "{name}");
            fuzz_decoder(&on_disk);
        }
        fuzz_decoder(b"");
        fuzz_decoder(b"\x00");
    }

    #[test]
    fn the_reference_refuses_long_lines_and_keeps_the_tail() {
        let (lines, tail) = reference(b"ab\nabcdef\n\nabc", 3);
        assert_eq!(
            lines,
            vec![
                Ok(b"ab".to_vec()),
                Err(LineTooLong { line: 2, limit: 3 }),
                Ok(vec![])
            ]
        );
        assert_eq!(tail, Some(b"abc".to_vec()));
        let (lines, tail) = reference(b"abcd", 3);
        assert_eq!(lines, vec![Err(LineTooLong { line: 1, limit: 3 })]);
        assert_eq!(tail, None);
    }

    #[test]
    fn every_chunking_of_a_stream_agrees_with_the_reference() {
        // All 256 chunk seeds over one stream that has each kind of line.
        let stream = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1}\n0123456789\n\n12345678\nend";
        for seed in 0..=255u8 {
            let mut data = vec![8, seed];
            data.extend_from_slice(stream);
            fuzz_decoder(&data);
        }
    }
}
