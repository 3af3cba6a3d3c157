//! Byte-range splits of one uncompressed capture, so that several tasks can read one huge file.
//!
//! A task given `[start, end)` must find the first record boundary at or after `start` without
//! having read what comes before. `Scanner` finds a candidate whose header is plausible and that
//! chains into the next `CHAIN` plausible records (or exactly to the end of the file), then walks
//! the record headers (never the packets) to count the frames that start before `end` and to find
//! `next`, the first record boundary at or after `end`, where the following split must begin.
//!
//! The heuristic can be fooled (a payload that spells a chain of record headers); the walk cannot,
//! because it starts from a boundary. So a plan is made consistent by induction (engine/splits.py):
//! split 0 starts at the file's first record, and wherever split i+1's `start` differs from split
//! i's `next`, split i+1 is scanned again from `next`. Frame numbers follow from the per-split
//! frame counts.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "file positions (u64) and record lengths (u32 + 16) of one input; positions only move forward inside the buffer it holds"
)]

use super::bytes::u32_in;
use super::pcap;
use super::pcapng;
use super::reader::MAX_BLOCK;

/// Records after a candidate that must also be plausible (unless the file ends before).
pub const CHAIN: usize = 8;
/// A record's timestamp must lie within this many seconds of the file's first packet.
const TS_WINDOW: u32 = 366 * 86_400;

/// How a capture's records are laid out, from the file's first bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum Layout {
    Pcap {
        big: bool,
        nanos: bool,
        /// The largest captured length a record may have.
        limit: u32,
        /// The first record's seconds (None: the file holds no record).
        first_sec: Option<u32>,
    },
    Pcapng {
        big: bool,
    },
}

/// The layout of a capture and where its first record starts; the head a reader of any split
/// needs first (pcap: the file header; pcapng: none, its context blocks are collected by scans).
#[derive(Clone, Debug, PartialEq)]
pub struct Head {
    pub layout: Layout,
    pub first: u64,
    pub bytes: Vec<u8>,
}

impl Head {
    /// From the file's first bytes (40 are enough for pcap, 12 for pcapng).
    pub fn parse(prefix: &[u8]) -> Result<Head, String> {
        let magic = prefix.get(..4).ok_or("too short to be a capture")?;
        if pcap::is_magic(magic) {
            let header = prefix
                .get(..pcap::HEADER_LEN)
                .ok_or("too short to be a capture")?;
            let big = magic == [0xa1, 0xb2, 0xc3, 0xd4] || magic == [0xa1, 0xb2, 0x3c, 0x4d];
            let nanos = matches!(magic, [0x4d, 0x3c, 0xb2, 0xa1] | [0xa1, 0xb2, 0x3c, 0x4d]);
            let snaplen = u32_in(header, 16, big).unwrap_or(0);
            let layout = Layout::Pcap {
                big,
                nanos,
                limit: MAX_BLOCK.min(snaplen.max(pcap::MIN_RECORD_LIMIT)),
                first_sec: u32_in(prefix, pcap::HEADER_LEN, big),
            };
            return Ok(Head {
                layout,
                first: pcap::HEADER_LEN as u64,
                bytes: header.to_vec(),
            });
        }
        if magic == pcapng::SHB_MAGIC {
            let bom = prefix.get(8..12).ok_or("too short to be a capture")?;
            let big = pcapng::byte_order(bom).ok_or("bad pcapng byte-order magic")?;
            return Ok(Head {
                layout: Layout::Pcapng { big },
                first: 0,
                bytes: Vec::new(),
            });
        }
        Err("not a pcap or pcapng capture".to_owned())
    }
}

/// The record at the start of `data`: Some(length) when its header is plausible and `data` holds
/// all of it, Some(0) when it is plausible but `data` ends inside it, None when implausible.
fn record(layout: &Layout, data: &[u8]) -> Option<usize> {
    match *layout {
        Layout::Pcap {
            big,
            nanos,
            limit,
            first_sec,
        } => {
            let word = |at| u32_in(data, at, big);
            let (Some(sec), Some(frac), Some(incl), Some(orig)) =
                (word(0), word(4), word(8), word(12))
            else {
                return Some(0);
            };
            let plausible = frac < if nanos { 1_000_000_000 } else { 1_000_000 }
                && incl <= limit
                && incl <= orig
                && orig <= MAX_BLOCK
                && first_sec.is_none_or(|first| sec.abs_diff(first) <= TS_WINDOW);
            let len = 16 + incl as usize;
            plausible.then_some(if data.len() >= len { len } else { 0 })
        }
        Layout::Pcapng { big } => {
            let (Some(btype), Some(blen)) = (u32_in(data, 0, big), u32_in(data, 4, big)) else {
                return Some(0);
            };
            if !pcapng::is_known_block(btype) || blen < 12 || blen % 4 != 0 || blen > MAX_BLOCK {
                return None;
            }
            let len = blen as usize;
            match u32_in(data, len - 4, big) {
                None => Some(0),
                Some(trailer) => (trailer == blen).then_some(len),
            }
        }
    }
}

/// Whether a boundary at the start of `data` chains: None when more bytes are needed to tell
/// (`eof`: `data` runs to the end of the file, a chain that ends there is whole).
fn chains(layout: &Layout, data: &[u8], eof: bool) -> Option<bool> {
    let mut at = 0;
    for _ in 0..=CHAIN {
        if at == data.len() && eof {
            return Some(true);
        }
        match record(layout, &data[at..]) {
            None => return Some(false),
            Some(0) => return if eof { Some(false) } else { None },
            Some(len) => at += len,
        }
    }
    Some(true)
}

/// What a scan found in its split.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scan {
    /// The first record boundary at or after the split's start (None: none before its end).
    pub start: Option<u64>,
    /// The first record boundary at or after the split's end (or the end of the file).
    pub next: u64,
    /// Frames whose record starts in `[start, next)`.
    pub frames: u64,
    /// pcapng blocks a reader of a later split needs (sections, interfaces, secrets), with their
    /// file offsets; a section header drops the blocks before it.
    pub context: Vec<(u64, Vec<u8>)>,
    /// Damaged byte ranges `[from, to)` the walk skipped: an implausible record where a boundary
    /// had to be, up to the next boundary the search finds (or the split's end, or the file's).
    pub holes: Vec<(u64, u64)>,
}

/// Finds a split's first boundary and walks it, fed the file's bytes from the split's start on.
#[derive(Debug)]
pub struct Scanner {
    layout: Layout,
    end: u64,
    /// File offset of `buf[0]`.
    base: u64,
    buf: Vec<u8>,
    /// A confirmed boundary: the walk's position (file offset).
    walk: Option<u64>,
    /// Trust `start` as a boundary (split 0, or a start fixed by the previous split's walk).
    trusted: bool,
    /// Where the damaged range being searched through began.
    hole: Option<u64>,
    scan: Scan,
    done: bool,
}

impl Scanner {
    /// `start` is trusted as a boundary when `trusted`; otherwise the first plausible chained
    /// boundary at or after it is searched for.
    pub fn new(head: &Head, start: u64, end: u64, trusted: bool) -> Self {
        let start = start.max(head.first);
        Scanner {
            layout: head.layout.clone(),
            end,
            base: start,
            buf: Vec::new(),
            walk: None,
            trusted,
            hole: None,
            scan: Scan {
                next: end,
                ..Scan::default()
            },
            done: start >= end,
        }
    }

    /// Whether the scan needs no more bytes.
    pub fn done(&self) -> bool {
        self.done
    }

    /// The next bytes of the file (contiguous with the previous ones); `eof`: they end the file.
    pub fn feed(&mut self, data: &[u8], eof: bool) {
        if self.done {
            return;
        }
        self.buf.extend_from_slice(data);
        if self.walk.is_none() {
            self.sync(eof);
        }
        if let Some(pos) = self.walk {
            self.step(pos, eof);
        }
        if eof {
            if self.walk.is_none() && !self.done {
                // the search ran to the end of the file (not stopped by the split's end)
                self.scan.next = self.base + self.buf.len() as u64;
                self.close_hole(self.scan.next);
            }
            self.done = true;
        }
    }

    /// A damaged range searched through ends at `to`.
    fn close_hole(&mut self, to: u64) {
        if let Some(from) = self.hole.take() {
            self.scan.holes.push((from, to));
        }
    }

    pub fn result(&self) -> &Scan {
        &self.scan
    }

    fn sync(&mut self, eof: bool) {
        let stride = match self.layout {
            Layout::Pcapng { .. } => 4, // blocks are 32-bit aligned from the file's start
            Layout::Pcap { .. } => 1,
        };
        let mut at = 0usize;
        if !self.trusted {
            if let Layout::Pcapng { .. } = self.layout {
                at = (4 - (self.base % 4) as usize) % 4;
            }
        }
        loop {
            if self.base + at as u64 >= self.end {
                self.scan.next = self.base + at as u64;
                self.close_hole(self.scan.next);
                self.done = true;
                return;
            }
            let found = if self.trusted {
                Some(true)
            } else {
                chains(&self.layout, &self.buf[at.min(self.buf.len())..], eof)
            };
            match found {
                None => break,
                Some(true) => {
                    let pos = self.base + at as u64;
                    if self.hole.is_some() {
                        self.close_hole(pos);
                    } else {
                        self.scan.start = Some(pos);
                    }
                    self.walk = Some(pos);
                    break;
                }
                Some(false) if at >= self.buf.len() => break,
                Some(false) => at += stride,
            }
        }
        let drop = at.min(self.buf.len());
        self.buf.drain(..drop);
        self.base += drop as u64;
    }

    /// Walk record headers from `pos` while records start before the split's end.
    fn step(&mut self, mut pos: u64, eof: bool) {
        while pos < self.end {
            let at = (pos - self.base) as usize;
            let Some(data) = self.buf.get(at..) else {
                break;
            };
            let Some((btype, len)) = self.header(data) else {
                break; // more bytes needed
            };
            if len == 0 {
                // an implausible record where a boundary must be: the file is damaged here, so
                // search on for the next boundary (as an untrusted split start is searched for)
                self.hole = Some(pos);
                self.walk = None;
                self.trusted = false;
                let skip = (pos + 1 - self.base) as usize;
                self.buf.drain(..skip.min(self.buf.len()));
                self.base = pos + 1;
                self.sync(eof);
                match self.walk {
                    Some(found) => pos = found,
                    None => return,
                }
                continue;
            }
            let Some(block) = data.get(..len) else {
                if btype.is_some_and(pcapng::is_context_block) {
                    break; // a context block is kept whole
                }
                if data.len() >= 12 {
                    // a frame is counted from its header: its bytes need not be kept
                    self.scan.frames += u64::from(self.is_frame(btype, len));
                    pos += len as u64;
                    continue;
                }
                break;
            };
            if let Some(t) = btype {
                if pcapng::is_context_block(t) {
                    if t == u32::from_le_bytes(pcapng::SHB_MAGIC) {
                        self.scan.context.clear();
                    }
                    self.scan.context.push((pos, block.to_vec()));
                }
            }
            self.scan.frames += u64::from(self.is_frame(btype, len));
            pos += len as u64;
        }
        self.walk = Some(pos);
        if pos >= self.end {
            self.scan.next = pos;
            self.done = true;
        } else if eof && pos >= self.base + self.buf.len() as u64 {
            self.scan.next = pos;
        }
        // keep only the bytes from the walk's position on
        let keep_from = pos.saturating_sub(self.base).min(self.buf.len() as u64) as usize;
        self.buf.drain(..keep_from);
        self.base += keep_from as u64;
    }

    /// (pcapng block type, record length) of the header at the start of `data`; length 0 when
    /// the header is implausible; None when `data` is too short to tell.
    fn header(&self, data: &[u8]) -> Option<(Option<u32>, usize)> {
        match self.layout {
            Layout::Pcap { big, limit, .. } => {
                let incl = u32_in(data, 8, big)?;
                Some((None, if incl > limit { 0 } else { 16 + incl as usize }))
            }
            Layout::Pcapng { big } => {
                let btype = u32_in(data, 0, big)?;
                let blen = u32_in(data, 4, big)?;
                let ok = blen >= 12 && blen % 4 == 0 && blen <= MAX_BLOCK;
                Some((Some(btype), if ok { blen as usize } else { 0 }))
            }
        }
    }

    fn is_frame(&self, btype: Option<u32>, len: usize) -> bool {
        btype.is_none_or(|t| pcapng::is_frame_block(t, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::testkit::*;

    /// A pcap of `n` packets whose payloads spell pcap record headers, to tempt the search.
    fn tempting_pcap(n: usize) -> Vec<u8> {
        let frames: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                let mut fake = Vec::new();
                for _ in 0..3 {
                    fake.extend_from_slice(&(T0_NS / 1_000_000_000).to_le_bytes()[..4]);
                    fake.extend_from_slice(&[
                        0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, b'x', b'x', b'x', b'x',
                    ]);
                }
                let payload = [format!("packet {i:05} ").into_bytes(), fake].concat();
                Tcp::new(1000 + 100 * i as u32, &payload).frame()
            })
            .collect();
        pcap(&frames)
    }

    fn scan(file: &[u8], start: u64, end: u64, trusted: bool, piece: usize) -> Scan {
        let head = Head::parse(file).unwrap();
        let mut s = Scanner::new(&head, start, end, trusted);
        let mut at = start.max(head.first) as usize;
        while !s.done() {
            let stop = (at + piece).min(file.len());
            s.feed(&file[at..stop], stop == file.len());
            at = stop;
        }
        s.result().clone()
    }

    /// Plans splits of `size` bytes made consistent by induction; returns (start, frames) each.
    fn plan(file: &[u8], size: u64, piece: usize) -> Vec<(u64, u64)> {
        let head = Head::parse(file).unwrap();
        let len = file.len() as u64;
        let mut out = Vec::new();
        let mut start = head.first;
        let mut lo = 0;
        while lo < len {
            let hi = (lo + size).min(len);
            let mut s = scan(file, start.max(lo), hi, lo == 0, piece);
            if s.start.is_some_and(|st| st != start) && start < hi {
                s = scan(file, start, hi, true, piece);
            }
            if start < hi {
                out.push((start, s.frames));
                start = s.next;
            }
            lo = hi;
        }
        out
    }

    #[test]
    fn a_damaged_range_is_skipped_and_the_walk_goes_on_after_it() {
        let mut file = tempting_pcap(60);
        let (from, to) = (file.len() / 2, file.len() / 2 + 700);
        file[from..to].fill(0xff);
        let whole = scan(&file, 0, file.len() as u64, true, 1 << 20);
        assert_eq!(whole.next, file.len() as u64);
        let [(lo, hi)] = whole.holes[..] else {
            panic!("one hole expected: {:?}", whole.holes)
        };
        // the hole starts at the first damaged record header (damage may begin inside the payload
        // of the record before it, whose header is intact) and ends at the next true boundary
        assert!(
            lo as usize + 100 > from && (lo as usize) < to && hi as usize >= to,
            "{lo}..{hi}"
        );
        assert!(hi - lo < 700 + 2 * 100, "{lo}..{hi}");
        let intact = scan(&tempting_pcap(60), 0, file.len() as u64, true, 1 << 20);
        assert!(whole.frames < intact.frames && whole.frames >= intact.frames - 12);
        for piece in [7, 64] {
            assert_eq!(scan(&file, 0, file.len() as u64, true, piece), whole);
        }
    }

    #[test]
    fn every_packet_once_whatever_the_split_size() {
        let file = tempting_pcap(60);
        let whole = scan(&file, 0, file.len() as u64, true, 1 << 20);
        assert_eq!(whole.frames, 60);
        for size in [40, 97, 128, 300, 1000, 4096] {
            for piece in [7, 64, 1 << 20] {
                let splits = plan(&file, size, piece);
                let total: u64 = splits.iter().map(|s| s.1).sum();
                assert_eq!(total, 60, "size {size} piece {piece}");
            }
        }
    }

    #[test]
    fn payloads_that_spell_records_fool_the_search_but_not_the_plan() {
        let file = tempting_pcap(30);
        let len = file.len() as u64;
        let mut real = vec![24u64];
        while let Some(&last) = real.last().filter(|&&p| p < len) {
            let incl = u32::from_le_bytes(
                file[last as usize + 8..last as usize + 12]
                    .try_into()
                    .unwrap(),
            );
            real.push(last + 16 + u64::from(incl));
        }
        let (mut fooled, mut right) = (0, 0);
        for start in (25..len).step_by(3) {
            match scan(&file, start, len, false, 1 << 20).start {
                Some(found) if real.contains(&found) => right += 1,
                Some(_) => fooled += 1,
                None => {}
            }
        }
        assert!(fooled > 0 && right > 0, "fooled {fooled}, right {right}");
        let total: u64 = plan(&file, 200, 1 << 20).iter().map(|s| s.1).sum();
        assert_eq!(total, 30);
    }

    #[test]
    fn pcapng_context_blocks_are_collected() {
        let frame = Tcp::new(1000, b"abcd").frame();
        let mut file = [shb(false), idb1(1)].concat();
        for i in 0..10 {
            file.extend(epb(
                0,
                ts_units(T0_NS + i * 1000, None, 0),
                &frame,
                None,
                false,
            ));
        }
        let all = scan(&file, 0, file.len() as u64, true, 1 << 20);
        assert_eq!(all.frames, 10);
        let types: Vec<u32> = all
            .context
            .iter()
            .map(|(_, b)| u32::from_le_bytes(b[..4].try_into().unwrap()))
            .collect();
        assert_eq!(types, [0x0A0D_0D0A, 1]);
        for size in [64, 100, 333] {
            let total: u64 = plan(&file, size, 50).iter().map(|s| s.1).sum();
            assert_eq!(total, 10, "size {size}");
        }
    }
}
