//! The one budget a compressed frame (or a Gate batch body) may spend, in every decoder.
//!
//! A decompression bomb costs memory twice: the inflated bytes, and the records decoded from them.
//! 16 KiB of zlib inflate to 16 MiB of zeros, which Log Courier frames as four million empty
//! events; a record costs 1–2 KiB between the decoder, the NDJSON text and Python, so the records
//! were 200 times the inflated bytes. A frame therefore gets one `Budget` of
//! `Limits::max_inflated` bytes: decompression may produce at most what is left of it (the
//! buffer is sized from that, never from a declared size), and every record decoded from the
//! output costs `RECORD_COST` more. Past the cap the decoder reports the stream's frame and the
//! cap (`<protocol>.inflate-limit`) and skips the rest of the frame, so what one frame costs is
//! O(cap) whatever it declares. Real peers stay far below: Log Courier spools 1024 events per
//! payload, the Hercules Gate takes 8 MiB bodies, Beats send 2048 events per window.

/// What one record decoded from a frame is charged, besides the bytes it was decoded from.
pub const RECORD_COST: usize = 1024;
/// What one value inside a record is charged (a CQL cell: a JSON value in a row's array).
pub const VALUE_COST: usize = 128;

/// Bytes one frame may still spend; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    cap: usize,
    spent: usize,
}

impl Budget {
    pub fn new(cap: usize) -> Self {
        Budget { cap, spent: 0 }
    }

    /// The cap it started with (`Limits::max_inflated`), for findings.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// What is left: the most the next decompression may produce.
    pub fn left(&self) -> usize {
        self.cap.saturating_sub(self.spent)
    }

    /// Spend `n` bytes if they fit (true); else spend nothing (false: the frame is over the cap).
    pub fn take(&mut self, n: usize) -> bool {
        if n > self.left() {
            return false;
        }
        self.spent = self.spent.saturating_add(n);
        true
    }

    /// Spend `n` bytes, or all that is left when they do not fit (an inflater that stopped at the
    /// cap produced that much).
    pub fn spend(&mut self, n: usize) {
        self.spent = self.spent.saturating_add(n).min(self.cap);
    }

    /// One more record decoded from the frame: false when the budget cannot pay for it.
    pub fn record(&mut self) -> bool {
        self.take(RECORD_COST)
    }

    /// How many more records it pays for (the most a decoder needs to keep ranges for).
    pub fn records_left(&self) -> usize {
        self.left() / RECORD_COST
    }

    /// How many more values inside a record it pays for.
    pub fn values_left(&self) -> usize {
        self.left() / VALUE_COST
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_records_draw_on_one_cap() {
        let mut b = Budget::new(3 * RECORD_COST + 10);
        assert!(b.take(10) && !b.take(usize::MAX));
        assert_eq!(b.records_left(), 3);
        assert!(b.record() && b.record() && b.record() && !b.record());
        assert_eq!((b.left(), b.cap()), (0, 3 * RECORD_COST + 10));
        let mut b = Budget::new(100);
        b.spend(usize::MAX);
        assert_eq!(b.left(), 0);
    }
}
