//! A bounded tail of what a host process logged: its stderr and its `log` notifications.

use std::collections::VecDeque;

/// Keeps the last `capacity` bytes written, so a host flooding stderr costs
/// a fixed amount of memory and the report still shows how it ended.
#[derive(Debug)]
pub(crate) struct Tail {
    bytes: VecDeque<u8>,
    capacity: usize,
    total: u64,
}

impl Tail {
    pub(crate) fn new(capacity: usize) -> Tail {
        Tail {
            bytes: VecDeque::with_capacity(capacity.min(64 * 1024)),
            capacity,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let keep = &chunk[chunk.len().saturating_sub(self.capacity)..];
        let overflow = (self.bytes.len() + keep.len()).saturating_sub(self.capacity);
        self.bytes.drain(..overflow);
        self.bytes.extend(keep);
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
    fn short_logs_are_kept_whole() {
        let mut tail = Tail::new(100);
        tail.push(b"partial line");
        assert_eq!(tail.text(), "partial line");
    }
}
