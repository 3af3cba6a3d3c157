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
#![allow(
    clippy::arithmetic_side_effects,
    reason = "fragment offsets are 13-bit units of 8 bytes and lengths are below 2^16, so their sums fit u32 and u64; stored bytes and fragment counts are bounded by the pool's caps and only subtract what was added"
)]

use std::collections::{BTreeMap, HashMap};

use super::report::limited;
use crate::model::{Finding, FindingSink, Severity};

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
        if self.covered.get(i).is_none_or(|&(s, _)| s >= end) {
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
        // within MAX_DATAGRAM from here on, so every offset and end fits in u32; what was captured
        // of a fragment is never more than its length
        let data = data
            .get(..data.len().min(length as usize))
            .unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::testkit::*;
    use crate::model::Value;

    fn payload() -> Vec<u8> {
        (0..=255u8).cycle().take(3072).collect()
    }

    fn v4(size: usize, ident: u16) -> Vec<Vec<u8>> {
        let mut tcp = Tcp::new(555, &payload()).addrs("10.0.0.1", "10.0.0.2");
        (tcp.sport, tcp.ident) = (1234, ident);
        v4_fragments(&tcp, size)
    }

    fn v6(size: usize, ident: u32, dest_opts: bool) -> Vec<Vec<u8>> {
        let mut tcp = Tcp::new(999, &payload()).v6();
        tcp.sport = 1234;
        let mut part = Vec::new();
        let first = if dest_opts {
            part.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
            60
        } else {
            6
        };
        part.extend(tcp.segment());
        v6_fragments("2001:db8::1", "2001:db8::2", ident, first, &part, size)
    }

    fn pick(frames: &[Vec<u8>], order: &[usize]) -> Vec<Vec<u8>> {
        order.iter().map(|&i| frames[i].clone()).collect()
    }

    #[test]
    fn ipv4_fragments_in_order() {
        let frags = v4(800, 77);
        assert_eq!(frags.len(), 4);
        let out = read(&pcap(&frags));
        assert!(out.findings.is_empty());
        let s = &out.segs[0];
        assert_eq!(
            (s.sport, s.dport, s.seq, &s.payload, s.missing),
            (1234, 5044, 555, &payload(), 0)
        );
        // the completing fragment's number and time
        assert_eq!((s.frame, s.ts), (4, T0_NS / 1000 * 1000 + 3_000_000));
        assert_eq!((out.info.packets, out.info.tcp_packets), (4, 4));
    }

    #[test]
    fn ipv4_fragments_out_of_order_and_interleaved() {
        let (a, b) = (v4(800, 1), v4(504, 2));
        assert_eq!(b.len(), 7);
        let order = [
            &a[2], &b[5], &a[0], &b[0], &b[1], &a[3], &b[2], &b[3], &b[4], &a[1], &b[6],
        ];
        let out = read(&pcap(&order.map(Vec::clone)));
        assert!(out.findings.is_empty());
        let got: Vec<_> = out
            .segs
            .iter()
            .map(|s| (s.frame, s.payload.clone()))
            .collect();
        assert_eq!(got, [(10, payload()), (11, payload())]);
    }

    #[test]
    fn ipv4_duplicate_fragment_is_harmless() {
        let out = read(&pcap(&pick(&v4(800, 77), &[0, 1, 1, 2, 3])));
        assert_eq!(out.payloads(), [payload()]);
        assert!(out.findings.is_empty());
    }

    #[test]
    fn ipv4_overlap_with_different_bytes_first_wins() {
        let f = v4(800, 77);
        let mut forged = f[1].clone();
        let n = forged.len();
        forged[n - 10..].copy_from_slice(&[b'X'; 10]);
        let out = read(&pcap(&[
            f[0].clone(),
            f[1].clone(),
            forged,
            f[2].clone(),
            f[3].clone(),
        ]));
        assert_eq!(out.payloads(), [payload()]);
        assert_eq!(out.codes(), ["ip.fragment-overlap"]);
        let o = &out.findings[0];
        assert_eq!(o.frame, Some(3));
        assert_eq!(
            o.message,
            "IP fragment in packet 3 overlaps packet 2 with different bytes (datagram bytes \
             800..1600); the first copy is kept"
        );
        let fields: Vec<_> = o.fields.iter().map(|(k, v)| (*k, v.clone())).collect();
        assert_eq!(
            fields,
            [
                ("first_frame", Value::from(2)),
                ("start", Value::from(800)),
                ("end", Value::from(1600))
            ]
        );
    }

    #[test]
    fn ipv4_missing_fragment_reported_at_end() {
        let out = read(&pcap(&pick(&v4(800, 77), &[0, 1, 3])));
        assert!(out.segs.is_empty());
        assert_eq!(out.info.tcp_packets, 3);
        assert_eq!(out.codes(), ["ip.fragments-incomplete"]);
        let f = &out.findings[0];
        assert_eq!(
            (f.frame, f.ts, f.protocol()),
            (Some(1), Some(T0_NS / 1000 * 1000), "ip")
        );
        assert_eq!(
            f.message,
            "IP datagram whose first fragment is packet 1 was never completed (2292 bytes of 3092 \
             bytes seen, 3 fragments; capture ended)"
        );
        assert_eq!(field(f, "fragments"), Some(Value::from(3)));
    }

    #[test]
    fn ipv6_fragments_in_and_out_of_order() {
        let f = v6(1000, 9, false);
        assert!(f.len() >= 3);
        for order in [vec![0, 1, 2, 3], vec![2, 0, 3, 1]] {
            let out = read(&pcap(&pick(&f, &order)));
            assert!(out.findings.is_empty());
            let s = &out.segs[0];
            assert_eq!(
                (s.seq, &s.payload, s.src.is_ipv6(), s.frame),
                (999, &payload(), true, 4)
            );
        }
    }

    #[test]
    fn ipv6_fragment_with_destination_options_inside() {
        let out = read(&pcap(&v6(1200, 3, true)));
        assert_eq!(out.payloads(), [payload()]);
        assert!(out.findings.is_empty());
    }

    #[test]
    fn unfragmented_tcp_between_fragments() {
        let f = v4(800, 77);
        let plain = Tcp::new(1, b"plain").frame();
        let out = read(&pcap(&[
            f[0].clone(),
            plain,
            f[1].clone(),
            f[2].clone(),
            f[3].clone(),
        ]));
        let got: Vec<_> = out
            .segs
            .iter()
            .map(|s| (s.frame, s.payload.clone()))
            .collect();
        assert_eq!(got, [(2, b"plain".to_vec()), (5, payload())]);
    }

    // ------------------------------------------------------------------ bounds

    fn key(i: u32) -> Key {
        Key::v4([10, 0, 0, 1], [10, 0, 0, 2], i as u16)
    }

    fn frag(key: Key, offset: u32, data: &[u8], length: u64, more: bool) -> Fragment<'_> {
        Fragment {
            key,
            offset,
            data,
            length,
            more,
            meta: None,
        }
    }

    fn at(frame: u64, ts: i64) -> Origin {
        Origin { frame, ts }
    }

    fn limits(max_sets: usize, max_bytes: usize, timeout_ns: i64) -> Limits {
        Limits {
            max_sets,
            max_bytes,
            timeout_ns,
        }
    }

    #[test]
    fn set_count_is_bounded_and_oldest_evicted() {
        let mut d = Defragmenter::new(limits(3, MAX_BYTES, TIMEOUT_NS));
        let mut sink = FindingSink::default();
        for i in 0..5 {
            assert!(d
                .add(
                    &mut sink,
                    at(u64::from(i) + 1, 0),
                    frag(key(i), 0, b"aaaaaaaa", 8, true)
                )
                .is_none());
        }
        let frames: Vec<_> = sink.out.iter().map(|f| (f.code, f.frame)).collect();
        assert_eq!(
            frames,
            [
                ("ip.fragments-incomplete", Some(1)),
                ("ip.fragments-incomplete", Some(2))
            ]
        );
        assert!(sink.out[0]
            .message
            .ends_with("(8 bytes of unknown size seen, 1 fragments; evicted to bound memory)"));
        let done = d.add(&mut sink, at(9, 0), frag(key(4), 8, b"b", 1, false));
        assert_eq!(done, Some((b"aaaaaaaab".to_vec(), None)));
    }

    #[test]
    fn buffered_bytes_are_bounded() {
        let mut d = Defragmenter::new(limits(MAX_SETS, 1000, TIMEOUT_NS));
        let mut sink = FindingSink::default();
        for i in 0..10 {
            d.add(
                &mut sink,
                at(u64::from(i) + 1, 0),
                frag(key(i), 0, &[b'z'; 400], 400, true),
            );
        }
        assert!(d.bytes <= 1000);
        assert_eq!(sink.out.len(), 8);
    }

    #[test]
    fn old_sets_time_out() {
        let mut d = Defragmenter::new(limits(MAX_SETS, MAX_BYTES, 10));
        let mut sink = FindingSink::default();
        d.add(&mut sink, at(1, 0), frag(key(1), 0, b"aaaaaaaa", 8, true));
        d.add(&mut sink, at(2, 10), frag(key(2), 0, b"aaaaaaaa", 8, true));
        assert!(sink.out.is_empty());
        d.add(&mut sink, at(3, 11), frag(key(3), 0, b"aaaaaaaa", 8, true));
        assert_eq!(sink.out.len(), 1);
        assert!(sink.out[0].message.ends_with("timed out)"));
        // extreme timestamps never overflow
        d.add(&mut sink, at(4, i64::MIN), frag(key(4), 0, b"a", 8, true));
        d.add(&mut sink, at(5, i64::MAX), frag(key(5), 0, b"a", 8, true));
        assert_eq!(sink.out.len(), 4);
    }

    #[test]
    fn fragment_beyond_largest_datagram_is_malformed() {
        let mut d = Defragmenter::default();
        let mut sink = FindingSink::default();
        assert!(d
            .add(
                &mut sink,
                at(1, 0),
                frag(key(1), 65528, &[b'x'; 16], 16, false)
            )
            .is_none());
        assert_eq!(sink.out.len(), 1);
        assert_eq!(
            sink.out[0].message,
            "fragment in packet 1 ends at byte 65544, beyond the largest datagram"
        );
        assert!(d.sets.is_empty());
    }

    #[test]
    fn snaplen_cut_fragment_never_completes_falsely() {
        let mut d = Defragmenter::default();
        let mut sink = FindingSink::default();
        d.add(&mut sink, at(1, 0), frag(key(1), 0, b"aaaaaaaa", 8, true));
        assert!(d
            .add(&mut sink, at(2, 0), frag(key(1), 8, b"bbbb", 8, false))
            .is_none());
        d.finish(&mut sink);
        assert_eq!(sink.out.len(), 1);
        assert!(sink.out[0]
            .message
            .contains("(12 bytes of 16 bytes seen, 2 fragments; capture ended)"));
    }

    #[test]
    fn an_empty_fragment_beyond_the_end_keeps_the_datagram_incomplete() {
        // like the sorted sweep of the Python original: an empty fragment past the covered bytes
        // is a hole
        let mut d = Defragmenter::default();
        let mut sink = FindingSink::default();
        d.add(&mut sink, at(1, 0), frag(key(1), 64, b"", 0, true));
        d.add(&mut sink, at(2, 0), frag(key(1), 0, b"aaaaaaaa", 8, true));
        assert!(d
            .add(&mut sink, at(3, 0), frag(key(1), 8, b"b", 1, false))
            .is_none());
        // one inside the covered bytes does not
        d.add(&mut sink, at(4, 0), frag(key(2), 8, b"", 0, true));
        d.add(&mut sink, at(5, 0), frag(key(2), 0, b"aaaaaaaa", 8, true));
        let done = d.add(&mut sink, at(6, 0), frag(key(2), 8, b"b", 1, false));
        assert_eq!(done, Some((b"aaaaaaaab".to_vec(), None)));
        d.finish(&mut sink);
        assert!(sink.out[0]
            .message
            .contains("(9 bytes of 9 bytes seen, 3 fragments; capture ended)"));
    }

    #[test]
    fn meta_comes_from_the_last_offset_zero_fragment() {
        let mut d = Defragmenter::default();
        let mut sink = FindingSink::default();
        let mut first = frag(key(1), 0, b"aaaaaaaa", 8, true);
        first.meta = Some(6);
        d.add(&mut sink, at(1, 0), first);
        let mut again = frag(key(1), 0, b"aaaaaaaa", 8, true);
        again.meta = Some(60);
        d.add(&mut sink, at(2, 0), again); // a duplicate: not stored, but its meta counts
        let done = d.add(&mut sink, at(3, 0), frag(key(1), 8, b"b", 1, false));
        assert_eq!(done, Some((b"aaaaaaaab".to_vec(), Some(60))));
    }

    #[test]
    fn overlaps_are_reported_per_earlier_fragment_and_the_first_copy_wins() {
        let mut d = Defragmenter::default();
        let mut sink = FindingSink::default();
        d.add(&mut sink, at(1, 0), frag(key(1), 0, b"aaaaaaaa", 8, true));
        d.add(&mut sink, at(2, 0), frag(key(1), 8, b"bbbbbbbb", 8, true));
        d.add(
            &mut sink,
            at(3, 0),
            frag(key(1), 4, b"XXXXbbbbbb", 10, true),
        );
        let spans: Vec<_> = sink
            .out
            .iter()
            .map(|f| (field(f, "first_frame"), field(f, "start"), field(f, "end")))
            .collect();
        assert_eq!(
            spans,
            [(
                Some(Value::from(1)),
                Some(Value::from(4)),
                Some(Value::from(8))
            )]
        );
        let done = d.add(&mut sink, at(4, 0), frag(key(1), 16, b"c", 1, false));
        assert_eq!(done, Some((b"aaaaaaaabbbbbbbbc".to_vec(), None)));
    }

    #[test]
    fn overlap_reports_per_fragment_are_capped() {
        let mut d = Defragmenter::default();
        let mut sink = FindingSink::default();
        for i in 0..40u32 {
            d.add(
                &mut sink,
                at(u64::from(i) + 1, 0),
                frag(key(1), i * 8, b"aaaaaaaa", 8, true),
            );
        }
        d.add(
            &mut sink,
            at(41, 0),
            frag(key(1), 0, &[b'X'; 320], 320, true),
        );
        assert_eq!(sink.out.len(), MAX_OVERLAP_REPORTS);
    }

    #[test]
    fn too_many_fragments_in_one_set_evict_it() {
        let mut d = Defragmenter::default();
        let mut sink = FindingSink::default();
        for i in 0..=MAX_SET_FRAGMENTS as u32 {
            let byte = [(i % 251) as u8];
            d.add(
                &mut sink,
                at(u64::from(i) + 1, 0),
                frag(key(1), 8 * (i % 8000), &byte, 8, true),
            );
        }
        let incomplete: Vec<_> = sink
            .out
            .iter()
            .filter(|f| f.code == "ip.fragments-incomplete")
            .collect();
        assert_eq!(incomplete.len(), 1);
        assert!(incomplete[0]
            .message
            .ends_with("8193 fragments; evicted to bound memory)"));
        assert!(d.sets.is_empty() && d.index.is_empty() && d.bytes == 0 && d.fragments == 0);
    }
}
