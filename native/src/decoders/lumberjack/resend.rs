//! Recognise events resent on a later connection, by content.
//!
//! Beats resend a batch after a timeout or a reconnect; their seqs restart at 1, so only the
//! payload identifies a resend. Fingerprints live in the capture's `Shared` state, in two
//! generations: when the newer one is full it becomes the older one (the older is dropped), so
//! memory is bounded and the most recent GENERATION..2*GENERATION events are always remembered,
//! however long the capture (Beats resend within seconds of the first copy).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::decoders::fingerprint::fingerprint;

/// Payload fingerprints per generation: 7/8 of 2^19, the most a hash table of 2^19 slots holds
/// before it doubles (two generations: ~34 MB at most).
pub const GENERATION: usize = 458_752;

/// Where a payload was first sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FirstCopy {
    pub stream: u64,
    pub frame: Option<u64>,
    pub seq: u32,
}

/// Fingerprints are already hashes: the map needs no second one.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A `FirstCopy` in 24 bytes instead of 32 (no capture reaches frame u64::MAX: it stands for none).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Packed {
    stream: u64,
    frame: u64,
    seq: u32,
}

impl From<FirstCopy> for Packed {
    fn from(c: FirstCopy) -> Self {
        Packed {
            stream: c.stream,
            frame: c.frame.unwrap_or(u64::MAX),
            seq: c.seq,
        }
    }
}

impl From<Packed> for FirstCopy {
    fn from(p: Packed) -> Self {
        FirstCopy {
            stream: p.stream,
            frame: (p.frame != u64::MAX).then_some(p.frame),
            seq: p.seq,
        }
    }
}

type Generation = HashMap<u64, Packed, BuildHasherDefault<Identity>>;

/// Payload fingerprint → where it was first seen, shared by every connection of a capture.
#[derive(Debug)]
pub struct ResendRegistry {
    newer: Generation,
    older: Generation,
    generation: usize,
}

impl Default for ResendRegistry {
    fn default() -> Self {
        Self::with_generation(GENERATION)
    }
}

impl ResendRegistry {
    pub fn with_generation(generation: usize) -> Self {
        ResendRegistry {
            newer: Generation::default(),
            older: Generation::default(),
            generation,
        }
    }

    /// Where this payload was first sent if that was another connection; else remember it.
    pub fn first_copy(
        &mut self,
        stream: u64,
        payload: &[u8],
        frame: Option<u64>,
        seq: u32,
    ) -> Option<FirstCopy> {
        let key = fingerprint(payload);
        let place = Packed::from(FirstCopy { stream, frame, seq });
        let mut first = *self.newer.entry(key).or_insert(place);
        if first == place {
            // Not in the newer generation (or the very same place again).
            match self.older.get(&key) {
                None => {
                    if self.newer.len() >= self.generation {
                        self.older = std::mem::take(&mut self.newer);
                    }
                    return None;
                }
                Some(&older) => {
                    self.newer.insert(key, older);
                    first = older;
                }
            }
        }
        (first.stream != stream).then_some(first.into())
    }

    pub fn len(&self) -> usize {
        self.newer.len() + self.older.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resend_on_another_connection_names_the_first_place() {
        let mut r = ResendRegistry::default();
        assert_eq!(r.first_copy(3, b"event", Some(5), 9), None);
        assert_eq!(r.first_copy(3, b"event", Some(7), 1), None); // same connection
        let first = FirstCopy {
            stream: 3,
            frame: Some(5),
            seq: 9,
        };
        assert_eq!(r.first_copy(4, b"event", Some(9), 2), Some(first));
        assert_eq!(r.first_copy(4, b"other", Some(9), 3), None);
    }

    #[test]
    fn recent_payloads_are_remembered_however_long_the_capture() {
        let mut r = ResendRegistry::with_generation(3);
        for i in 0..10u32 {
            assert_eq!(
                r.first_copy(0, i.to_string().as_bytes(), Some(u64::from(i) + 1), i + 1),
                None
            );
        }
        assert!(r.len() <= 6);
        let at = |frame, seq| {
            Some(FirstCopy {
                stream: 0,
                frame: Some(frame),
                seq,
            })
        };
        assert_eq!(r.first_copy(1, b"9", Some(20), 1), at(10, 10));
        assert_eq!(r.first_copy(1, b"6", Some(21), 2), at(7, 7));
        assert_eq!(r.first_copy(1, b"6", Some(22), 3), at(7, 7));
        assert_eq!(r.first_copy(1, b"0", Some(23), 4), None);
    }
}
