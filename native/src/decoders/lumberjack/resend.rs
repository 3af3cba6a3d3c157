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
/// before it doubles (two generations and the filter: ~35 MB at most).
pub const GENERATION: usize = 458_752;
/// The older generation's filter has 2^FILTER_BITS bits (1 MiB: it stays in a core's cache).
const FILTER_BITS: u32 = 23;

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

/// Which fingerprints a generation may hold, by their top bits (~5 % false positives when full).
/// Nearly every event is new, and without it each one paid a lookup in the older table that
/// missed the cache (two 16 MB tables) only to find nothing: a tenth of a conversion's CPU.
#[derive(Debug, Default)]
struct Filter(Vec<u64>);

impl Filter {
    fn of(generation: &Generation) -> Self {
        let mut words = vec![0u64; 1 << (FILTER_BITS - 6)];
        for &key in generation.keys() {
            let bit = key >> (64 - FILTER_BITS);
            words[(bit >> 6) as usize] |= 1 << (bit & 63);
        }
        Filter(words)
    }

    fn may_hold(&self, key: u64) -> bool {
        let bit = key >> (64 - FILTER_BITS);
        self.0
            .get((bit >> 6) as usize)
            .is_some_and(|word| word & (1 << (bit & 63)) != 0)
    }
}

/// Payload fingerprint → where it was first seen, shared by every connection of a capture.
#[derive(Debug)]
pub struct ResendRegistry {
    newer: Generation,
    older: Generation,
    in_older: Filter,
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
            in_older: Filter::default(),
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
            let older = if self.in_older.may_hold(key) {
                self.older.get(&key)
            } else {
                None
            };
            match older {
                None => {
                    if self.newer.len() >= self.generation {
                        self.older = std::mem::take(&mut self.newer);
                        self.in_older = Filter::of(&self.older);
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

    #[test]
    fn the_filter_hides_no_payload_of_the_older_generation() {
        let mut r = ResendRegistry::with_generation(20_000);
        let payload = |i: u32| format!("event {i}");
        for i in 0..30_000u32 {
            assert_eq!(
                r.first_copy(0, payload(i).as_bytes(), Some(i.into()), i),
                None
            );
        }
        assert_eq!((r.older.len(), r.newer.len()), (20_000, 10_000));
        for i in 0..30_000u32 {
            let first = r.first_copy(1, payload(i).as_bytes(), None, 1);
            assert_eq!(first.map(|f| f.seq), Some(i), "payload {i}");
        }
    }

    #[test]
    fn the_filter_rules_out_most_fingerprints_it_never_saw() {
        let generation: Generation = (0..GENERATION as u64)
            .map(|i| {
                (
                    fingerprint(&i.to_le_bytes()),
                    Packed::from(FirstCopy {
                        stream: 0,
                        frame: None,
                        seq: 0,
                    }),
                )
            })
            .collect();
        let filter = Filter::of(&generation);
        assert!(generation.keys().all(|&k| filter.may_hold(k)));
        let strangers = (0..100_000u64)
            .filter(|i| filter.may_hold(fingerprint(&(u64::MAX - i).to_le_bytes())))
            .count();
        assert!(strangers < 7_000, "{strangers} false positives in 100,000");
        assert!(!Filter::default().may_hold(0));
    }
}
