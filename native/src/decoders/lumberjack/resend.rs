//! Recognise events resent on a later connection, by content.
//!
//! Beats resend a batch after a timeout or a reconnect; their seqs restart at 1, so only the
//! payload identifies a resend. Fingerprints live in the capture's `Shared` state, in two
//! generations: when the newer one is full it becomes the older one (the older one is emptied and
//! becomes the newer), so memory is bounded and the most recent GENERATION..2*GENERATION events
//! are always remembered, however long the capture (Beats resend within seconds of the first copy).

/// Payload fingerprints per generation (both generations and the filter: ~39 MB at most).
pub const GENERATION: usize = 458_752;
/// The older generation's filter has 2^FILTER_BITS bits (1 MiB: it stays in a core's cache).
const FILTER_BITS: u32 = 23;
/// A slot holds an entry's index + 1 in its low INDEX_BITS bits (a generation holds fewer entries)
/// and the fingerprint's top 64 - INDEX_BITS bits above them; the entry holds the other bits.
const INDEX_BITS: u32 = 24;
const LOW: u64 = (1 << INDEX_BITS) - 1;

/// Where a payload was first sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FirstCopy {
    pub stream: u64,
    pub frame: Option<u64>,
    pub seq: u32,
}

/// Where a payload was first sent and the low INDEX_BITS bits of its fingerprint, in 24 bytes (no
/// capture reaches frame u64::MAX: it stands for none).
#[derive(Clone, Copy, Debug)]
struct Entry {
    low: u32,
    seq: u32,
    stream: u64,
    frame: u64,
}

impl Entry {
    fn new(key: u64, first: FirstCopy) -> Self {
        Entry {
            low: (key & LOW) as u32,
            seq: first.seq,
            stream: first.stream,
            frame: first.frame.unwrap_or(u64::MAX),
        }
    }

    fn first(&self) -> FirstCopy {
        FirstCopy {
            stream: self.stream,
            frame: (self.frame != u64::MAX).then_some(self.frame),
            seq: self.seq,
        }
    }
}

/// One generation's fingerprints: an open-addressing table of 8-byte slots (linear probing, at
/// most half full) naming entries in a list filled in order.
///
/// Hand-written, not a `HashMap<u64, FirstCopy>`: nearly every event is new, so each costs an
/// insert at a random place of the table. hashbrown's 32-byte buckets made the newer generation
/// 16.5 MB, and that insert's cache misses were a sixth of a Lumberjack conversion's CPU. Here the
/// random access touches 8 MB of slots, which `ResendRegistry::warm` brings into the cache for
/// many events at once; the entries are written one after another.
#[derive(Debug, Default)]
struct Generation {
    slots: Vec<u64>,
    entries: Vec<Entry>,
}

impl Generation {
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry of `key`, or the empty slot where it belongs (`Err`; usize::MAX when the table
    /// has no slots yet).
    fn find(&self, key: u64) -> Result<usize, usize> {
        let mask = self.slots.len().wrapping_sub(1);
        let (tag, low) = (key >> INDEX_BITS, (key & LOW) as u32);
        let mut at = key as usize & mask;
        loop {
            let Some(&slot) = self.slots.get(at) else {
                return Err(usize::MAX);
            };
            if slot == 0 {
                return Err(at);
            }
            if slot >> INDEX_BITS == tag {
                let index = (slot & LOW) as usize - 1;
                if self.entries[index].low == low {
                    return Ok(index);
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// The slot a lookup of `key` reads first.
    fn home(&self, key: u64) -> u64 {
        let mask = self.slots.len().wrapping_sub(1);
        self.slots.get(key as usize & mask).copied().unwrap_or(0)
    }

    fn get(&self, key: u64) -> Option<FirstCopy> {
        self.find(key).ok().map(|index| self.entries[index].first())
    }

    /// Remember `key` (which `find` did not find) and where it was first sent.
    fn insert(&mut self, key: u64, first: FirstCopy) {
        if 2 * (self.len() + 1) > self.slots.len() {
            self.grow();
        }
        let at = self
            .find(key)
            .expect_err("a fingerprint not yet in the generation");
        self.entries.push(Entry::new(key, first));
        self.slots[at] = (key >> INDEX_BITS << INDEX_BITS) | self.entries.len() as u64;
    }

    /// Twice the slots (the generation's first slots: 64), each entry placed again.
    fn grow(&mut self) {
        let size = (2 * self.slots.len()).max(64);
        let old = std::mem::replace(&mut self.slots, vec![0; size]);
        for slot in old.into_iter().filter(|&slot| slot != 0) {
            let mut at = self.key(slot) as usize & (size - 1);
            while self.slots[at] != 0 {
                at = (at + 1) & (size - 1);
            }
            self.slots[at] = slot;
        }
    }

    /// The whole fingerprint named by a slot.
    fn key(&self, slot: u64) -> u64 {
        let index = (slot & LOW) as usize - 1;
        (slot >> INDEX_BITS << INDEX_BITS) | u64::from(self.entries[index].low)
    }

    fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.slots
            .iter()
            .filter(|&&slot| slot != 0)
            .map(|&slot| self.key(slot))
    }

    /// Forget every fingerprint, keeping the memory for the next generation (freed and taken
    /// again, blocks this large stay in the allocator's heap and the process grows).
    fn clear(&mut self) {
        self.slots.fill(0);
        self.entries.clear();
    }
}

/// Which fingerprints a generation may hold, by their top bits (~5 % false positives when full).
/// Nearly every event is new, and without it each one paid a lookup in the older table that
/// missed the cache only to find nothing.
#[derive(Debug, Default)]
struct Filter(Vec<u64>);

impl Filter {
    fn of(generation: &Generation) -> Self {
        let mut words = vec![0u64; 1 << (FILTER_BITS - 6)];
        for key in generation.keys() {
            let bit = key >> (64 - FILTER_BITS);
            words[(bit >> 6) as usize] |= 1 << (bit & 63);
        }
        Filter(words)
    }

    fn may_hold(&self, key: u64) -> bool {
        self.word(key) & (1 << ((key >> (64 - FILTER_BITS)) & 63)) != 0
    }

    /// The word holding `key`'s bit (0 for the empty filter).
    fn word(&self, key: u64) -> u64 {
        let bit = key >> (64 - FILTER_BITS);
        self.0.get((bit >> 6) as usize).copied().unwrap_or(0)
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
        // the newer generation holds up to twice `generation` (copies from the older one)
        assert!(2 * generation < 1 << INDEX_BITS, "generation too large");
        ResendRegistry {
            newer: Generation::default(),
            older: Generation::default(),
            in_older: Filter::default(),
            generation,
        }
    }

    /// Bring what the lookups of these fingerprints read into the cache, all at once. Safe Rust
    /// has no prefetch instruction, but these loads are independent of each other, so their
    /// cache misses overlap where one lookup after another would wait for each in turn.
    pub fn warm(&self, keys: impl IntoIterator<Item = u64>) {
        let mut sum = 0u64;
        for key in keys {
            sum = sum
                .wrapping_add(self.newer.home(key))
                .wrapping_add(self.in_older.word(key));
        }
        std::hint::black_box(sum);
    }

    /// Where the payload of this `fingerprint` was first sent if that was another connection;
    /// else remember it.
    pub fn first_copy(
        &mut self,
        stream: u64,
        key: u64,
        frame: Option<u64>,
        seq: u32,
    ) -> Option<FirstCopy> {
        let first = match self.newer.find(key) {
            Ok(index) => self.newer.entries[index].first(),
            Err(_) => {
                let here = FirstCopy { stream, frame, seq };
                match self.in_older.may_hold(key).then(|| self.older.get(key)) {
                    // Seen in the older generation: that is still where it was first sent (the
                    // newer one may outgrow GENERATION by these, at most the older one's size).
                    Some(Some(older)) => {
                        self.newer.insert(key, older);
                        older
                    }
                    _ => {
                        self.newer.insert(key, here);
                        if self.newer.len() >= self.generation {
                            std::mem::swap(&mut self.newer, &mut self.older);
                            self.newer.clear();
                            self.in_older = Filter::of(&self.older);
                        }
                        here
                    }
                }
            }
        };
        (first.stream != stream).then_some(first)
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
    use crate::decoders::fingerprint::fingerprint;

    #[test]
    fn a_resend_on_another_connection_names_the_first_place() {
        let mut r = ResendRegistry::default();
        assert_eq!(r.first_copy(3, fingerprint(b"event"), Some(5), 9), None);
        assert_eq!(r.first_copy(3, fingerprint(b"event"), Some(7), 1), None); // same connection
        let first = FirstCopy {
            stream: 3,
            frame: Some(5),
            seq: 9,
        };
        assert_eq!(
            r.first_copy(4, fingerprint(b"event"), Some(9), 2),
            Some(first)
        );
        assert_eq!(r.first_copy(4, fingerprint(b"other"), Some(9), 3), None);
    }

    #[test]
    fn recent_payloads_are_remembered_however_long_the_capture() {
        let mut r = ResendRegistry::with_generation(3);
        for i in 0..10u32 {
            assert_eq!(
                r.first_copy(
                    0,
                    fingerprint(i.to_string().as_bytes()),
                    Some(u64::from(i) + 1),
                    i + 1
                ),
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
        assert_eq!(r.first_copy(1, fingerprint(b"9"), Some(20), 1), at(10, 10));
        assert_eq!(r.first_copy(1, fingerprint(b"6"), Some(21), 2), at(7, 7));
        assert_eq!(r.first_copy(1, fingerprint(b"6"), Some(22), 3), at(7, 7));
        assert_eq!(r.first_copy(1, fingerprint(b"0"), Some(23), 4), None);
    }

    #[test]
    fn the_filter_hides_no_payload_of_the_older_generation() {
        let mut r = ResendRegistry::with_generation(20_000);
        let payload = |i: u32| format!("event {i}");
        for i in 0..30_000u32 {
            assert_eq!(
                r.first_copy(0, fingerprint(payload(i).as_bytes()), Some(i.into()), i),
                None
            );
        }
        assert_eq!((r.older.len(), r.newer.len()), (20_000, 10_000));
        for i in 0..30_000u32 {
            let first = r.first_copy(1, fingerprint(payload(i).as_bytes()), None, 1);
            assert_eq!(first.map(|f| f.seq), Some(i), "payload {i}");
        }
    }

    #[test]
    fn a_generation_tells_fingerprints_apart_by_every_bit_and_keeps_them_as_it_grows() {
        let mut g = Generation::default();
        let at = |seq: u32| FirstCopy {
            stream: 1,
            frame: Some(seq.into()),
            seq,
        };
        let k = 0x1234_5678_9abc_def0_u64;
        // Another tag; the same tag and home slot but other low bits (told apart by the entry);
        // the next home slot; the same home slot and tag as `k` once the table is small.
        let alike = [k, k ^ (1 << 40), k ^ (1 << 22), k + 1, k ^ (1 << 63)];
        let fillers = (0..20_000u64).map(|i| fingerprint(&i.to_le_bytes()));
        let keys: Vec<u64> = alike.into_iter().chain(fillers).collect();
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(g.get(key), None, "key {i} before it was inserted");
            g.insert(key, at(i as u32));
        }
        assert_eq!(g.slots.len(), 65_536);
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(g.get(key), Some(at(i as u32)), "key {i}");
        }
        let (mut held, mut sorted) = (g.keys().collect::<Vec<_>>(), keys.clone());
        held.sort_unstable();
        sorted.sort_unstable();
        assert_eq!(held, sorted);
        g.clear();
        assert!(keys.iter().all(|&key| g.get(key).is_none()));
    }

    #[test]
    fn the_filter_rules_out_most_fingerprints_it_never_saw() {
        let mut generation = Generation::default();
        let nowhere = FirstCopy {
            stream: 0,
            frame: None,
            seq: 0,
        };
        for i in 0..GENERATION as u64 {
            generation.insert(fingerprint(&i.to_le_bytes()), nowhere);
        }
        let filter = Filter::of(&generation);
        assert!(generation.keys().all(|k| filter.may_hold(k)));
        let strangers = (0..100_000u64)
            .filter(|i| filter.may_hold(fingerprint(&(u64::MAX - i).to_le_bytes())))
            .count();
        assert!(strangers < 7_000, "{strangers} false positives in 100,000");
        assert!(!Filter::default().may_hold(0));
    }
}
