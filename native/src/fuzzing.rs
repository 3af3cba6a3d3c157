//! The bodies of the fuzz targets (native/fuzz/), here so that `cargo test` replays every input a
//! fuzzer ever crashed on (native/fuzz/regressions/<target>/) through the same checks.

pub mod numbers;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use crate::capture::{CaptureInfo, CaptureInput, Segment};
use crate::decoders::{Chunk, Gap};
use crate::model::{Direction, Finding, FindingSink, Record};
use crate::records::json::record_line;
use crate::tcp::{Config, Event, Reassembler, StreamIds};

/// The reassembler on arbitrary segment sequences: a few connections sharing ports, every flag
/// combination, sequence and ack numbers near each other and across the 2^32 wrap, both overlap
/// policies, small limits so that eviction, buffer-full and reorder-window paths all run. Checks:
/// each direction's chunks and gaps tile its offsets, and producing chunks or not (convert and
/// `streams --dump` vs `streams --json`) decides the same streams, gaps and byte counts.
pub fn reassembly(data: &[u8]) {
    assert_eq!(reassemble(data, true), reassemble(data, false));
}

/// What one run decided, in a canonical order: its stream summaries, gaps and findings (chunks are
/// checked as they come).
fn reassemble(data: &[u8], emit_data: bool) -> Vec<Decided> {
    let mut kept = Vec::new();
    let Some((&mode, mut rest)) = data.split_first() else {
        return Vec::new();
    };
    let cfg = Config {
        server_ports: vec![5044],
        last_wins: mode & 1 != 0,
        max_pending: 4096,
        max_segments: 16,
        history: 256,
        idle_timeout_ns: 50_000,
        close_grace_ns: 5_000,
        max_connections: 3,
        sweep_every: 7,
        reorder_packets: u64::from(mode >> 4),
        reorder_ns: i64::from((mode >> 1) & 7) * 50_000,
        reorder_bytes: 2048,
        emit_data,
        ids: if mode & 2 != 0 {
            StreamIds::Frames
        } else {
            StreamIds::Counter
        },
    };
    let mut r = Reassembler::new(cfg);
    let mut events = Vec::new();
    let mut next = HashMap::new();
    let hosts = [
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    ];
    let mut frame = 0u64;
    let base = u32::MAX - 300; // sequence numbers cross the wrap
    while rest.len() >= 8 {
        let (head, tail) = rest.split_at(8);
        let len = usize::from(head[7] & 0x3F).min(tail.len());
        let (payload, tail) = tail.split_at(len);
        rest = tail;
        frame += 1;
        let c2s = head[0] & 1 == 0;
        let port = 40000 + u16::from(head[0] >> 6); // up to four connections
        let (src, dst) = if c2s {
            (hosts[0], hosts[1])
        } else {
            (hosts[1], hosts[0])
        };
        let (sport, dport) = if c2s { (port, 5044) } else { (5044, port) };
        let seg = Segment {
            frame,
            ts: i64::from(head[1]) * 1000 + frame as i64,
            src,
            sport,
            dst,
            dport,
            seq: base.wrapping_add(u32::from(u16::from_le_bytes([head[2], head[3]]))),
            ack: base.wrapping_add(u32::from(u16::from_le_bytes([head[4], head[5]]))),
            flags: head[6],
            payload,
            missing: u32::from(head[7] >> 7) * 3,
        };
        r.segment(&seg, &mut events);
        absorb(emit_data, &mut next, &mut events, &mut kept);
    }
    r.finish(&mut events);
    absorb(emit_data, &mut next, &mut events, &mut kept);
    let mut decided: Vec<Decided> = kept.into_iter().filter_map(Decided::of).collect();
    decided.sort_by(|a, b| (a.key, &a.what).cmp(&(b.key, &b.what)));
    decided
}

/// Check a step's chunks (when produced) and keep what it decided.
fn absorb(
    emit_data: bool,
    next: &mut HashMap<(u64, bool), u64>,
    events: &mut Vec<Event>,
    kept: &mut Vec<Event>,
) {
    if emit_data {
        check(next, events);
    }
    kept.append(events);
}

/// A decision of the reassembler, comparable across runs whatever the order of events.
#[derive(Debug, PartialEq)]
struct Decided {
    key: (u64, u8, u64, u64, u64), // stream, kind, offset, length or frame, frame
    what: Option<String>,          // a finding's code and sentence
    end: Option<crate::tcp::StreamInfo>,
}

impl Decided {
    fn of(event: Event) -> Option<Decided> {
        Some(match event {
            Event::Gap {
                stream,
                direction,
                offset,
                length,
                frame,
                ..
            } => Decided {
                key: (
                    stream,
                    direction.as_str().len() as u8,
                    offset,
                    length,
                    frame,
                ),
                what: Some(direction.as_str().to_owned()),
                end: None,
            },
            Event::Finding(f) => Decided {
                key: (
                    f.stream.unwrap_or(u64::MAX),
                    9,
                    f.offset.unwrap_or(0),
                    0,
                    f.frame.unwrap_or(0),
                ),
                what: Some(format!("{} {}", f.code, f.message)),
                end: None,
            },
            Event::End(info) => Decided {
                key: (info.stream, 10, 0, 0, 0),
                what: None,
                end: Some(*info),
            },
            Event::Chunk { .. } => return None,
        })
    }
}

/// Each direction's bytes and gaps tile its offsets: every chunk or gap starts where the last ended.
fn check(next: &mut HashMap<(u64, bool), u64>, events: &[Event]) {
    for event in events {
        let (key, offset, length) = match event {
            Event::Chunk {
                stream,
                direction,
                offset,
                data,
                ..
            } => {
                assert!(!data.is_empty());
                (
                    (*stream, direction.as_str() == "c2s"),
                    *offset,
                    data.len() as u64,
                )
            }
            Event::Gap {
                stream,
                direction,
                offset,
                length,
                ..
            } => ((*stream, direction.as_str() == "c2s"), *offset, *length),
            _ => continue,
        };
        let expected = next.entry(key).or_insert(0);
        assert_eq!(*expected, offset, "{key:?}");
        *expected = offset + length;
    }
}

type Seg = (
    u64,
    i64,
    String,
    u16,
    String,
    u16,
    u32,
    u32,
    u8,
    Vec<u8>,
    u32,
);

fn read(
    pieces: &[&[u8]],
    compression: Option<&str>,
) -> (Vec<Seg>, Vec<Finding>, CaptureInfo, Option<String>) {
    let mut reader = CaptureInput::new("fuzz", compression);
    let mut sink = FindingSink::default();
    let mut segs = Vec::new();
    let mut on_segment = |s: &Segment, _: &mut FindingSink| segs.push(seg_of(s));
    let mut error = None;
    for piece in pieces {
        if let Err(e) = reader.feed(piece, &mut sink, &mut on_segment) {
            error = Some(e);
            break;
        }
    }
    let finished = reader.finish(None, &mut sink, &mut on_segment);
    if let Some(error) = error {
        assert_eq!(
            finished.as_ref().err(),
            Some(&error),
            "an unusable input stays unusable"
        );
    }
    sink.finish();
    (segs, sink.drain(), reader.info().clone(), finished.err())
}

/// Capture reading on arbitrary bytes: the first byte picks where the rest is split between two
/// feeds; reading it so must give exactly what reading it in one feed gives, and never panic.
/// Input that starts with the gzip or zstd magic is inflated first, as the core does.
pub fn capture(data: &[u8]) {
    let Some((&at, bytes)) = data.split_first() else {
        return;
    };
    let cut = bytes.len() * usize::from(at) / 255;
    let (first, second) = bytes.split_at(cut);
    let compression = if bytes.starts_with(&[0x1f, 0x8b]) {
        Some("gzip")
    } else if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some("zstd")
    } else {
        None
    };
    let whole = read(&[bytes], compression);
    assert_eq!(read(&[first, second], compression), whole);
    if compression.is_none() {
        routed(bytes, u32::from(at % 4) + 1, &whole);
    }
    let (segs, _, info, _) = whole;
    assert!(info.packets >= segs.len() as u64);
    assert_eq!(info.tcp_packets + info.non_tcp_packets, info.packets);
}

fn seg_of(s: &Segment) -> Seg {
    let (src, dst) = (s.src.to_string(), s.dst.to_string());
    let payload = s.payload.to_vec();
    (
        s.frame, s.ts, src, s.sport, dst, s.dport, s.seq, s.ack, s.flags, payload, s.missing,
    )
}

/// The split engine's way (capture/route.rs): `bytes` routed into `groups` groups, each group's
/// packets read back. Never panics; the routing read makes the whole read's findings; and without
/// IP-layer trouble (fragments whose reassembly depends on the other hosts' packets: limits, time)
/// the groups together give exactly the whole read's segments.
fn routed(
    bytes: &[u8],
    groups: u32,
    whole: &(Vec<Seg>, Vec<Finding>, CaptureInfo, Option<String>),
) {
    let mut reader = CaptureInput::new("fuzz", None);
    let mut sink = FindingSink::default();
    let mut none = |_: &Segment, _: &mut FindingSink| {};
    reader.reader().route(groups, 0);
    let fed = reader.feed(bytes, &mut sink, &mut none);
    let routes = reader.reader().take_routes();
    let finished = reader.finish(None, &mut sink, &mut none);
    sink.finish();
    assert_eq!(fed.and(finished).err(), whole.3);
    assert_eq!(
        sink.drain(),
        whole.1,
        "the routing read's findings are the whole read's"
    );
    let mut back = Vec::new();
    for group in &routes {
        let mut reader = CaptureInput::new("fuzz", None);
        let mut sink = FindingSink::default();
        let mut keep = |s: &Segment, _: &mut FindingSink| back.push(seg_of(s));
        for span in crate::capture::route::spans(group) {
            let data = bytes
                .get(span.lo as usize..span.hi as usize)
                .expect("a span of the file");
            let fed = reader
                .reader()
                .feed_span(group, &span, data, &mut sink, &mut keep);
            fed.expect("every routed packet lies in its span");
        }
        if !group.is_empty() {
            // (a reader fed nothing is an empty capture, as the engine knows)
            let finished = reader.finish(None, &mut sink, &mut keep);
            finished.expect("a routed reader has no format to refuse");
        }
    }
    if !whole.1.iter().any(|f| f.code.starts_with("ip.")) {
        back.sort_by_key(|s| s.0);
        assert_eq!(
            back, whole.0,
            "the groups read back give the whole read's segments"
        );
    }
}

/// The fuzzer's input read as a script by the decoder targets: one byte at a time, or pieces.
pub struct Script<'a>(pub &'a [u8]);

impl<'a> Script<'a> {
    pub fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    /// The next `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }

    /// A length-prefixed piece of the input.
    pub fn piece(&mut self) -> &'a [u8] {
        let n = self.byte().unwrap_or(0);
        self.take(usize::from(n))
    }
}

/// `bytes` of one direction as packets would carry them: cut in two at `cut` (an empty piece is
/// not fed), each piece handed to `feed` at its stream offset, which `offset` then passes.
pub fn in_two(
    bytes: &[u8],
    cut: usize,
    direction: Direction,
    offset: &mut u64,
    (frame, ts): (u64, i64),
    mut feed: impl FnMut(&Chunk<'_>),
) {
    for part in [&bytes[..cut], &bytes[cut..]] {
        if part.is_empty() {
            continue;
        }
        feed(&Chunk {
            direction,
            offset: *offset,
            data: part,
            frame: Some(frame),
            ts: Some(ts),
        });
        *offset += part.len() as u64;
    }
}

/// Each record whose kind (a message's kind, a finding's code) `records` has not shown before
/// written as NDJSON, which must end the line's object. Once per kind rather than every record:
/// inputs yield thousands of alike findings, and writing them all took half the fuzzer's time.
/// Every field a decoder writes (`Written`) is held to its tree's text, in every message.
pub fn writes_as_ndjson<'a>(records: impl IntoIterator<Item = &'a Record>) {
    let mut seen = std::collections::HashSet::new();
    let mut line = String::new();
    for r in records {
        let kind = match r {
            Record::Message(m) => m.kind,
            Record::Finding(f) => f.code,
        };
        if seen.insert(kind) {
            line.clear();
            record_line(&mut line, "", None, r, None);
            assert!(line.ends_with("}\n"), "{line}");
        }
        // a field its decoder writes is, byte for byte, the JSON text of its tree
        let Record::Message(m) = r else { continue };
        if let Some(doc) = &m.event {
            crate::records::hercules::maps_as_its_text(doc);
        }
        for (name, field) in &m.fields {
            if let crate::model::Field::Written(w) = field {
                let (mut text, mut tree) = (String::new(), String::new());
                w.write_json(&mut text);
                crate::model::json::value(&mut tree, w.tree());
                assert_eq!(text, tree, "{name}");
            }
        }
    }
}

/// `data` as a zlib stream of stored (uncompressed) deflate blocks of at most `block` bytes: valid
/// zlib the decoders inflate, built without a deflate encoder (whose set-up and instrumented
/// matching took half of each fuzz execution). Inflating real Huffman blocks stays covered by the
/// fuzzer's own bytes and the unit tests.
pub fn zlib_stored(data: &[u8], block: usize) -> Vec<u8> {
    let block = block.clamp(1, usize::from(u16::MAX));
    let mut out = Vec::with_capacity(data.len() + 6 + 5 * (data.len() / block + 1));
    out.extend_from_slice(&[0x78, 0x01]);
    let mut pieces = data.chunks(block).peekable();
    if pieces.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(piece) = pieces.next() {
        let len = piece.len() as u16;
        out.push(u8::from(pieces.peek().is_none()));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(piece);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

/// A gap of `length` bytes of one direction at `offset`, which then passes it.
pub fn gap_at(direction: Direction, offset: &mut u64, length: u64, frame: u64) -> Gap {
    let gap = Gap {
        direction,
        offset: *offset,
        length,
        frame: Some(frame),
        ts: None,
    };
    *offset += length;
    gap
}

/// Run a fuzz target's body on every input a fuzzer failed on (`cargo test` replays them).
#[cfg(test)]
pub fn replay(target: &str, run: fn(&[u8])) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        run(&std::fs::read(entry.path()).unwrap());
    }
}

#[cfg(test)]
mod tests {
    use super::replay;

    #[test]
    fn stored_zlib_inflates_to_its_data() {
        use std::io::Read;
        for (data, block) in [
            (&b""[..], 7),
            (b"x", 1),
            (&[7u8; 70_000][..], 65_535),
            (b"abcdefgh", 3),
        ] {
            let z = super::zlib_stored(data, block);
            let mut back = Vec::new();
            flate2::read::ZlibDecoder::new(&z[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, data);
        }
    }

    #[test]
    fn reassembly_regressions() {
        replay("reassembly", super::reassembly);
    }

    #[test]
    fn capture_regressions() {
        replay("capture", super::capture);
    }
}
