//! IP fragment reassembly (IPv4 and IPv6), bounded in memory and time.
//!
//! Fragments are collected per datagram key; when every byte from 0 to the end announced by the
//! last fragment is present, the payload is returned and the datagram gets the frame number and
//! timestamp of the fragment that completed it (what Wireshark shows). Bytes covered twice keep the
//! first copy (first-wins, like the TCP default); a later copy with different bytes is an
//! `ip.fragment-overlap` finding naming both frames. Sets that never complete, are evicted (too
//! many, too many bytes or fragments, or older than the timeout in capture time) or are still open
//! at the end are `ip.fragments-incomplete`.
//!
//! Written here rather than taken from etherparse: its `IpDefragPool` is documented as not safe
//! against out-of-memory attacks, and its buffer lets the last copy of a byte win without a word.

use std::collections::{BTreeMap, HashMap};

use super::report::limited;
use crate::records::{Finding, FindingSink, Severity};

/// The largest IP datagram: no fragment may end beyond it.
const MAX_DATAGRAM: u64 = 65535;
const MAX_SETS: usize = 1024;
const MAX_BYTES: usize = 64 << 20;
const TIMEOUT_NS: i64 = 60 * 1_000_000_000;
/// Stored fragments of one datagram: 8-byte fragments of the largest datagram fit. Past it the
/// set is evicted (this also bounds the work per fragment, which compares against each stored one).
const MAX_SET_FRAGMENTS: usize = 8192;
/// Stored fragments of all datagrams, so that per-fragment bookkeeping stays bounded too.
const MAX_FRAGMENTS: usize = 1 << 18;
/// `ip.fragment-overlap` findings for one arriving fragment (one per earlier fragment it
/// contradicts, up to this many).
const MAX_OVERLAP_REPORTS: usize = 16;

/// Which datagram a fragment belongs to: IP version, addresses and identification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Key {
    v6: bool,
    src: [u8; 16],
    dst: [u8; 16],
    ident: u32,
}

impl Key {
    pub fn v4(src: [u8; 4], dst: [u8; 4], ident: u16) -> Key {
        let widen = |a: [u8; 4]| {
            let mut out = [0; 16];
            out[..4].copy_from_slice(&a);
            out
        };
        Key {
            v6: false,
            src: widen(src),
            dst: widen(dst),
            ident: ident.into(),
        }
    }

    pub fn v6(src: [u8; 16], dst: [u8; 16], ident: u32) -> Key {
        Key {
            v6: true,
            src,
            dst,
            ident,
        }
    }
}

/// One arriving fragment: `data` is what was captured of its `length` payload bytes at `offset`.
/// `meta` is kept from the offset-0 fragment and returned with the datagram (IPv6: the header
/// that follows the fragment header).
pub(super) struct Fragment<'a> {
    pub key: Key,
    pub offset: u32,
    pub data: &'a [u8],
    pub length: u64,
    pub more: bool,
    pub meta: Option<u8>,
}

/// Where a fragment came from, for findings.
#[derive(Clone, Copy, Debug)]
pub(super) struct Origin {
    pub frame: u64,
    pub ts: i64,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    pub max_sets: usize,
    pub max_bytes: usize,
    pub timeout_ns: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_sets: MAX_SETS,
            max_bytes: MAX_BYTES,
            timeout_ns: TIMEOUT_NS,
        }
    }
}

/// A stored (non-empty) fragment: its bytes are `Set::data[at..at + len]`.
#[derive(Debug)]
struct Stored {
    offset: u32,
    len: u32,
    at: usize,
    frame: u64,
}

/// The fragments seen so far of one datagram.
#[derive(Debug)]
struct Set {
    key: Key,
    stored: Vec<Stored>, // arrival order
    data: Vec<u8>,       // their bytes, one after the other
    /// Zero-length fragments: never stored, never overlapping; they count, and one beyond the
    /// bytes covered keeps the datagram incomplete.
    empty: u64,
    empty_max: Option<u32>,
    covered: Vec<(u32, u32)>, // the union of the stored fragments: sorted, merged, [start, end)
    total: Option<u32>,       // payload length, known once the last fragment arrived
    meta: Option<u8>,
    first: Origin,
}

impl Set {
    fn new(key: Key, first: Origin) -> Set {
        Set {
            key,
            stored: Vec::new(),
            data: Vec::new(),
            empty: 0,
            empty_max: None,
            covered: Vec::new(),
            total: None,
            meta: None,
            first,
        }
    }

    fn bytes(&self, fragment: &Stored) -> &[u8] {
        let end = fragment.at.saturating_add(fragment.len as usize);
        self.data.get(fragment.at..end).unwrap_or_default()
    }

    fn fragments(&self) -> u64 {
        self.stored.len() as u64 + self.empty
    }

    /// Reports differing bytes covered twice; true when `data` is an exact duplicate of an earlier
    /// fragment (then it is not stored).
    fn overlaps(&self, sink: &mut FindingSink, at: Origin, offset: u32, data: &[u8]) -> bool {
        let end = offset + data.len() as u32;
        let i = self.covered.partition_point(|&(_, e)| e <= offset);
        if !self.covered.get(i).is_some_and(|&(s, _)| s < end) {
            return false;
        }
        let mut reported = 0;
        for old in &self.stored {
            let (lo, hi) = (old.offset.max(offset), (old.offset + old.len).min(end));
            if lo >= hi {
                continue;
            }
            let old_bytes = self.bytes(old);
            if old.offset == offset && old_bytes == data {
                return true;
            }
            let theirs = old_bytes.get((lo - old.offset) as usize..(hi - old.offset) as usize);
            let ours = data.get((lo - offset) as usize..(hi - offset) as usize);
            if theirs != ours && reported < MAX_OVERLAP_REPORTS {
                reported += 1;
                let message = format!(
                    "IP fragment in packet {} overlaps packet {} with different bytes (datagram \
                     bytes {lo}..{hi}); the first copy is kept",
                    at.frame, old.frame
                );
                sink.add(
                    Finding::new("ip.fragment-overlap", Severity::Warning, message)
                        .at(Some(at.frame), Some(at.ts))
                        .field("first_frame", old.frame)
                        .field("start", lo)
                        .field("end", hi),
                );
            }
        }
        false
    }

    fn store(&mut self, at: Origin, offset: u32, data: &[u8]) {
        if data.is_empty() {
            self.empty += 1;
            self.empty_max = self.empty_max.max(Some(offset));
            return;
        }
        let len = data.len() as u32;
        self.stored.push(Stored {
            offset,
            len,
            at: self.data.len(),
            frame: at.frame,
        });
        self.data.extend_from_slice(data);
        self.cover(offset, offset + len);
    }

    fn cover(&mut self, lo: u32, hi: u32) {
        let i = self.covered.partition_point(|&(_, e)| e < lo);
        let (mut start, mut end, mut j) = (lo, hi, i);
        while let Some(&(s, e)) = self.covered.get(j).filter(|&&(s, _)| s <= hi) {
            start = start.min(s);
            end = end.max(e);
            j += 1;
        }
        self.covered.splice(i..j, [(start, end)]);
    }

    /// Every byte from 0 to the announced end is present (and no empty fragment lies beyond).
    fn complete(&self) -> bool {
        let Some(total) = self.total else {
            return false;
        };
        let reach = match self.covered.as_slice() {
            [] => 0,
            [(0, end)] => *end,
            _ => return false,
        };
        reach >= total && self.empty_max.is_none_or(|offset| offset <= reach)
    }

    /// The payload; the first copy of any byte wins.
    fn assemble(&self) -> Vec<u8> {
        let total = self.total.unwrap_or(0) as usize;
        let mut out = vec![0; total];
        for fragment in self.stored.iter().rev() {
            let offset = fragment.offset as usize;
            let n = (fragment.len as usize).min(total.saturating_sub(offset));
            if let (Some(to), Some(from)) = (
                out.get_mut(offset..offset + n),
                self.data.get(fragment.at..fragment.at + n),
            ) {
                to.copy_from_slice(from);
            }
        }
        out
    }
}

/// Collects the fragments of one capture; `add` returns a datagram's payload once it is complete.
#[derive(Debug)]
pub(super) struct Defragmenter {
    index: HashMap<Key, u64>, // key → age
    sets: BTreeMap<u64, Set>, // by age: oldest first
    next_age: u64,
    bytes: usize,
    fragments: usize,
    limits: Limits,
}

impl Default for Defragmenter {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Defragmenter {
    pub fn new(limits: Limits) -> Self {
        Defragmenter {
            index: HashMap::new(),
            sets: BTreeMap::new(),
            next_age: 0,
            bytes: 0,
            fragments: 0,
            limits,
        }
    }

    /// Adds one fragment. Returns (payload, meta of the offset-0 fragment) when the datagram is
    /// complete. A fragment cut by the snaplen leaves a hole, so its datagram stays incomplete.
    pub fn add(
        &mut self,
        sink: &mut FindingSink,
        at: Origin,
        fragment: Fragment,
    ) -> Option<(Vec<u8>, Option<u8>)> {
        let Fragment {
            key,
            offset,
            data,
            length,
            more,
            meta,
        } = fragment;
        let end = u64::from(offset) + length;
        if end > MAX_DATAGRAM {
            limited(sink, "ip.malformed", Severity::Warning, || {
                let message = format!(
                    "fragment in packet {} ends at byte {end}, beyond the largest datagram",
                    at.frame
                );
                Finding::new("ip.malformed", Severity::Warning, message)
                    .at(Some(at.frame), Some(at.ts))
            });
            return None;
        }
        // within MAX_DATAGRAM from here on, so every offset and end fits in u32
        self.expire(sink, at.ts);
        let age = *self.index.entry(key).or_insert_with(|| {
            let age = self.next_age;
            self.next_age += 1;
            self.sets.insert(age, Set::new(key, at));
            age
        });
        let set = self.sets.get_mut(&age)?;
        if !more && set.total.is_none() {
            set.total = Some(end as u32);
        }
        if offset == 0 {
            set.meta = meta;
        }
        if set.overlaps(sink, at, offset, data) {
            return None;
        }
        set.store(at, offset, data);
        self.bytes += data.len();
        self.fragments += usize::from(!data.is_empty());
        if set.complete() {
            let set = self.remove(age)?;
            return Some((set.assemble(), set.meta));
        }
        if set.stored.len() > MAX_SET_FRAGMENTS {
            self.evict(sink, age, "evicted to bound memory");
        }
        while let Some(&oldest) = self.sets.keys().next() {
            let over = self.sets.len() > self.limits.max_sets
                || self.bytes > self.limits.max_bytes
                || self.fragments > MAX_FRAGMENTS;
            if !over {
                break;
            }
            self.evict(sink, oldest, "evicted to bound memory");
        }
        None
    }

    fn expire(&mut self, sink: &mut FindingSink, now: i64) {
        while let Some((&age, set)) = self.sets.iter().next() {
            if now.saturating_sub(set.first.ts) <= self.limits.timeout_ns {
                return;
            }
            self.evict(sink, age, "timed out");
        }
    }

    fn remove(&mut self, age: u64) -> Option<Set> {
        let set = self.sets.remove(&age)?;
        self.index.remove(&set.key);
        self.bytes -= set.data.len();
        self.fragments -= set.stored.len();
        Some(set)
    }

    fn evict(&mut self, sink: &mut FindingSink, age: u64, why: &str) {
        let Some(set) = self.remove(age) else {
            return;
        };
        let (first, fragments) = (set.first, set.fragments());
        limited(sink, "ip.fragments-incomplete", Severity::Warning, || {
            let size = match set.total {
                Some(total) => format!("{total} bytes"),
                None => "unknown size".to_owned(),
            };
            let message = format!(
                "IP datagram whose first fragment is packet {} was never completed ({} bytes of \
                 {size} seen, {fragments} fragments; {why})",
                first.frame,
                set.data.len()
            );
            Finding::new("ip.fragments-incomplete", Severity::Warning, message)
                .at(Some(first.frame), Some(first.ts))
                .field("fragments", fragments)
        });
    }

    /// Reports every datagram still incomplete at the end of the capture.
    pub fn finish(&mut self, sink: &mut FindingSink) {
        while let Some(&oldest) = self.sets.keys().next() {
            self.evict(sink, oldest, "capture ended");
        }
    }
}
