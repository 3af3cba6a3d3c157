//! 32-bit sequence numbers (RFC 1982 serial arithmetic) and their unwrapping into stream offsets.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "`rel` is below 2^32 and `near` a stream offset (see reassembler.rs): the sum stays far from i64's ends"
)]

pub const MOD: i64 = 1 << 32;
pub const HALF: i64 = 1 << 31;

/// Whether `a` is at or after `b` in sequence space (never a plain `>`: sequence numbers wrap).
pub fn at_or_after(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) < (1 << 31)
}

/// The stream offset of raw sequence number `seq`, for a direction whose offset 0 is at `base`:
/// of all offsets congruent to `seq - base` modulo 2^32, the one nearest to `near`.
pub fn unwrap(seq: u32, base: u32, near: i64) -> i64 {
    let rel = i64::from(seq.wrapping_sub(base));
    rel + (near - rel + HALF).div_euclid(MOD) * MOD
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_forward_and_back() {
        assert!(at_or_after(5, u32::MAX - 5));
        assert!(!at_or_after(u32::MAX - 5, 5));
        assert_eq!(unwrap(10, u32::MAX - 9, 0), 20);
        assert_eq!(unwrap(10, 10, MOD * 3 + 7), MOD * 3);
        // a retransmission of bytes before the base is a negative offset, not 4 GiB ahead
        assert_eq!(unwrap(5, 10, 0), -5);
        assert_eq!(unwrap(5, 10, MOD - 100), MOD - 5);
    }
}
