//! A bounded tail of what a host process logged: its stderr and its `log`
//! notifications; and, for the secret search of TC4, what it logged since
//! the last step, with every canary-shaped token found in it however much
//! was logged around it.

use std::collections::{BTreeSet, VecDeque};

/// How every secret the harness plants starts (`CANARY-<scenario>-<n>`).
pub const CANARY_PREFIX: &[u8] = b"CANARY-";

/// The longest token kept after [`CANARY_PREFIX`]: longer than any canary
/// the harness plants, so a canary is never cut.
const TOKEN_MAX: usize = 256;

/// How many distinct canary-shaped tokens one step keeps; a host printing
/// more is flooding, and the first ones are enough to judge it.
const TOKENS_MAX: usize = 64;

fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/')
}

/// Keeps the last `capacity` bytes written, so a host flooding stderr costs
/// a fixed amount of memory and the report still shows how it ended.
#[derive(Debug)]
pub(crate) struct Tail {
    bytes: VecDeque<u8>,
    capacity: usize,
    total: u64,
    /// Since the last [`Tail::take_step`]: the last `capacity` bytes logged.
    step: VecDeque<u8>,
    /// Since the last [`Tail::take_step`]: canary-shaped tokens, from anywhere.
    tokens: BTreeSet<String>,
    /// The end of what was scanned for tokens, so that a token split
    /// between two writes is still found whole.
    carry: Vec<u8>,
}

impl Tail {
    pub(crate) fn new(capacity: usize) -> Tail {
        Tail {
            bytes: VecDeque::with_capacity(capacity.min(64 * 1024)),
            capacity,
            total: 0,
            step: VecDeque::new(),
            tokens: BTreeSet::new(),
            carry: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let keep = &chunk[chunk.len().saturating_sub(self.capacity)..];
        for ring in [&mut self.bytes, &mut self.step] {
            let overflow = (ring.len() + keep.len()).saturating_sub(self.capacity);
            ring.drain(..overflow);
            ring.extend(keep);
        }
        self.scan(chunk, false);
    }

    /// Records the canary-shaped tokens in `carry` + `chunk`. A token that
    /// runs to the end is left for the next chunk unless `last`.
    fn scan(&mut self, chunk: &[u8], last: bool) {
        let mut window = std::mem::take(&mut self.carry);
        window.extend_from_slice(chunk);
        for start in memchr::memmem::find_iter(&window, CANARY_PREFIX) {
            let rest = &window[start + CANARY_PREFIX.len()..];
            let len = rest.iter().take_while(|&&b| token_byte(b)).count();
            let complete = len < rest.len() || len >= TOKEN_MAX || last;
            if complete && len > 0 && self.tokens.len() < TOKENS_MAX {
                let end = start + CANARY_PREFIX.len() + len.min(TOKEN_MAX);
                self.tokens
                    .insert(String::from_utf8_lossy(&window[start..end]).into_owned());
            }
        }
        let keep = CANARY_PREFIX.len() + TOKEN_MAX;
        self.carry = window[window.len().saturating_sub(keep)..].to_vec();
    }

    /// What was logged since the last call: the kept text, then every
    /// canary-shaped token seen in all of it, one per line.
    pub(crate) fn take_step(&mut self) -> String {
        self.scan(&[], true);
        self.carry.clear();
        let (a, b) = self.step.as_slices();
        let mut text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        self.step.clear();
        let tokens = std::mem::take(&mut self.tokens);
        if !tokens.is_empty() {
            text.push_str("\n[canary-shaped tokens logged in this step]\n");
            for token in tokens {
                text.push_str(&token);
                text.push('\n');
            }
        }
        text
    }

    /// Every byte ever pushed, kept or not.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The kept bytes as text, starting at a line boundary when the start was cut.
    pub(crate) fn text(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        let mut all = Vec::with_capacity(a.len() + b.len());
        all.extend_from_slice(a);
        all.extend_from_slice(b);
        let start = if self.total > self.bytes.len() as u64 {
            all.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1)
        } else {
            0
        };
        String::from_utf8_lossy(&all[start..]).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_last_bytes_from_a_line_start() {
        let mut tail = Tail::new(10);
        tail.push(b"first\nsecond\n");
        tail.push(b"third\n");
        assert_eq!(tail.total(), 19);
        // The last 10 bytes are "nd\nthird\n"; the cut line is dropped.
        assert_eq!(tail.text(), "third\n");
        tail.push(&[b'x'; 100]);
        assert_eq!(tail.text().len(), 10);
    }

    #[test]
    fn a_canary_is_found_in_a_flood_and_across_writes() {
        let mut tail = Tail::new(100);
        tail.push(b"start CANARY-tc-007-");
        tail.push(b"0 end\n");
        tail.push(&[b'x'; 10_000]);
        tail.push(b"CANARY-second");
        tail.push(b" ");
        tail.push(&[b'y'; 10_000]);
        let step = tail.take_step();
        // Neither survived in the kept text; both were seen.
        assert!(step.contains("\nCANARY-tc-007-0\n"), "{step}");
        assert!(step.contains("\nCANARY-second\n"), "{step}");
        assert!(!step.contains("CANARY-tc-007-\n"), "a cut token: {step}");
        assert!(step.len() < 300, "bounded: {}", step.len());
        // Taken: the next step starts empty.
        assert_eq!(tail.take_step(), "");
        // A token at the very end is taken whole.
        tail.push(b"CANARY-at-end");
        assert!(tail.take_step().contains("\nCANARY-at-end\n"));
    }

    #[test]
    fn a_log_without_canaries_lists_no_tokens() {
        let mut tail = Tail::new(100);
        tail.push(b"CANARY without a dash, canary-lowercase\n");
        assert_eq!(
            tail.take_step(),
            "CANARY without a dash, canary-lowercase\n"
        );
    }

    #[test]
    fn short_logs_are_kept_whole() {
        let mut tail = Tail::new(100);
        tail.push(b"partial line");
        assert_eq!(tail.text(), "partial line");
    }
}
