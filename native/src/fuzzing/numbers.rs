//! The body of the `numbers` fuzz target: structure-aware, so that the numbers on the wire are the
//! fuzzer's choice while everything around them is well formed. libFuzzer's byte mutations rarely
//! turn a valid frame's length into 2^64 − 2 and keep the rest decodable (issue 29 found 62 such
//! inputs that ten million byte-level runs never reached).
//!
//! The input, read through `arbitrary::Unstructured`, picks a protocol and builds one connection
//! of it: Gate HTTP heads (Content-Length, chunk sizes, Original-Content-Length) around Hercules
//! batches (event counts, tag counts, string and vector lengths, timestamps); CQL v4 envelopes
//! (stream ids, body lengths, string-map, long-string and value lengths, Rows column and row
//! counts, cell lengths); CQL v5 outer frames (payload and uncompressed lengths, with the CRC24
//! that makes the decoder believe them); Log Courier frames (lengths, event lengths, ACKN
//! sequences) and Lumberjack frames (window sizes, sequence numbers, lengths, pair counts). Each
//! number is the one that fits, a boundary (0, 1, 2^31 − 1, 2^32 − 1, 2^63 − 1, 2^64 − 1, ...),
//! one near what fits, or any. The messages go through the capture pipeline's own entry
//! (`Pipeline::segments`: TCP reassembly, detection, the decoder, the delivery verdict) in both
//! directions, cut into segments at chosen points, with sequence numbers anywhere, across the
//! 2^32 wrap included. Check: no panic, and no `internal.panic` finding (the session catches a
//! decoder's panic; libFuzzer aborts on it first, `cargo test` replays see the finding).

use std::net::{IpAddr, Ipv4Addr};

use arbitrary::{Result, Unstructured};

use super::zlib_stored;
use crate::capture::Segment;
use crate::decoders::cql::fuzz::{crc32, encode_header};
use crate::decoders::detect::well_known_ports;
use crate::decoders::Limits;
use crate::model::Record;
use crate::pipeline::out::{Form, RecordOut, Taken};
use crate::pipeline::{Item, Pipeline, Session};
use crate::records::filter::Filter;
use crate::tcp::Config;

/// Where integer arithmetic breaks, in every width the protocols use.
const EDGES: [u64; 17] = [
    0,
    1,
    2,
    0x7F,
    0xFF,
    0x7FFF,
    0xFFFF,
    0x1_FFFF, // a v5 frame's 17-bit length
    0x7FFF_FFFF,
    0x8000_0000,
    0xFFFF_FFFF,
    1 << 32,
    i64::MAX as u64,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
    10_000_000_000_000_000_000, // the first 20-digit decimal
];

/// Decimals no u64 holds (HTTP numbers are text).
const HUGE_DECIMALS: [&str; 4] = [
    "18446744073709551616",
    "99999999999999999999",
    "1234567890123456789012345",
    "000000000000000000000000000012",
];

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_ACK: u8 = 0x10;

pub fn numbers(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(conversation) = Conversation::build(&mut u) else {
        return;
    };
    for (stamp, record) in conversation.run() {
        if let Record::Finding(f) = &record {
            assert_ne!(f.code, "internal.panic", "{stamp:?} {}", f.message);
        }
    }
}

/// A number as the fuzzer chooses it: the one that fits (`fit`), a boundary, near `fit`, or any.
fn number(u: &mut Unstructured<'_>, fit: u64) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=7)? {
        0..=3 => fit,
        4 | 5 => *u.choose(&EDGES)?,
        6 => fit.wrapping_add_signed(i64::from(u.arbitrary::<i8>()?)),
        _ => u.arbitrary()?,
    })
}

/// A decimal for an HTTP header: `number`'s choice, or one past every integer type.
fn decimal(u: &mut Unstructured<'_>, fit: u64) -> Result<String> {
    if u.ratio(1u8, 8)? {
        return Ok((*u.choose(&HUGE_DECIMALS)?).to_owned());
    }
    Ok(number(u, fit)?.to_string())
}

fn u32_of(u: &mut Unstructured<'_>, fit: usize) -> Result<[u8; 4]> {
    Ok((number(u, fit as u64)? as u32).to_be_bytes())
}

fn u16_of(u: &mut Unstructured<'_>, fit: usize) -> Result<[u8; 2]> {
    Ok((number(u, fit as u64)? as u16).to_be_bytes())
}

/// A few bytes of content (kept short: the numbers are the point).
fn bytes<'a>(u: &mut Unstructured<'a>) -> Result<&'a [u8]> {
    let n = u.int_in_range(0usize..=24)?;
    u.bytes(n.min(u.len()))
}

/// A small JSON event document.
fn document(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => format!("{{\"n\":{}}}", number(u, 1)?).into_bytes(),
        1 => format!("{{\"n\":-{}}}", decimal(u, 1)?).into_bytes(),
        2 => b"{\"message\":\"hello\"}".to_vec(),
        _ => bytes(u)?.to_vec(),
    })
}

struct Conversation {
    server_port: u16,
    /// (client to server, bytes) in the order they are sent.
    messages: Vec<(bool, Vec<u8>)>,
    /// Where each message is cut into segments (relative places, 0..=255 of its length).
    cuts: Vec<Vec<u8>>,
    isn: [u32; 2],
    handshake: bool,
    small_limits: bool,
}

impl Conversation {
    fn build(u: &mut Unstructured<'_>) -> Result<Conversation> {
        let protocol = u.int_in_range(0u8..=4)?;
        let (server_port, mut messages) = match protocol {
            0 => (6306, Vec::new()),
            1 | 2 => (9042, Vec::new()),
            3 => (5045, Vec::new()),
            _ => (5044, Vec::new()),
        };
        if protocol == 2 {
            cql_v5_startup(u, &mut messages)?;
        }
        let count = u.int_in_range(1usize..=6)?;
        for _ in 0..count {
            let c2s = u.ratio(2u8, 3)?;
            let message = match protocol {
                0 => gate(u, c2s)?,
                1 => cql_envelope(u, c2s, if c2s { 0x04 } else { 0x84 })?,
                2 => cql_v5_frame(u, c2s)?,
                3 => courier(u, c2s)?,
                _ => lumberjack(u, c2s)?,
            };
            messages.push((c2s, message));
        }
        let mut cuts = Vec::with_capacity(messages.len());
        for _ in &messages {
            let n = u.int_in_range(0usize..=3)?;
            let mut at = (0..n)
                .map(|_| u.arbitrary::<u8>())
                .collect::<Result<Vec<u8>>>()?;
            at.sort_unstable();
            cuts.push(at);
        }
        Ok(Conversation {
            server_port,
            messages,
            cuts,
            isn: [u.arbitrary()?, u.arbitrary()?],
            handshake: u.ratio(3u8, 4)?,
            small_limits: u.ratio(1u8, 4)?,
        })
    }

    /// The conversation as TCP segments through the pipeline; every record it made.
    fn run(&self) -> Vec<(Option<crate::model::Stamp>, Record)> {
        let limits = if self.small_limits {
            Limits {
                max_frame: 512,
                max_inflated: 1024,
                max_depth: 2,
                max_pending_events: 3,
                held_memory: 0,
                fate_horizon_ns: None,
            }
        } else {
            Limits::default()
        };
        let out = RecordOut::new("fuzz", Filter::default(), Form::Records(Vec::new()));
        let session = Session::new("fuzz", out, false, limits);
        let cfg = Config {
            server_ports: well_known_ports(),
            ..Config::default()
        };
        let mut pipeline = Pipeline::new("fuzz", None, cfg, session, true, false);
        let segments = self.segments();
        pipeline.segments(|each| {
            for (frame, (c2s, seq, ack, flags, payload)) in segments.iter().enumerate() {
                let (client, server) = (
                    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
                );
                let (src, sport, dst, dport) = if *c2s {
                    (client, 40000, server, self.server_port)
                } else {
                    (server, self.server_port, client, 40000)
                };
                each(&Segment {
                    frame: frame as u64 + 1,
                    ts: frame as i64 * 1_000_000,
                    src,
                    sport,
                    dst,
                    dport,
                    seq: *seq,
                    ack: *ack,
                    flags: *flags,
                    payload,
                    missing: 0,
                });
            }
        });
        let mut records = Vec::new();
        let mut take = |pipeline: &mut Pipeline| {
            for item in pipeline.take_items() {
                if let Item::Records(Taken::Records(list)) = item {
                    records.extend(list);
                }
            }
        };
        take(&mut pipeline);
        pipeline
            .finish(None)
            .expect("segments are not capture bytes");
        take(&mut pipeline);
        while pipeline.pending() {
            pipeline.more();
            take(&mut pipeline);
        }
        records
    }

    /// (client to server, seq, ack, flags, payload) of every segment: the handshake (or none),
    /// each message cut at its places, each acknowledging what the peer sent, then a FIN each way.
    #[allow(clippy::type_complexity)]
    fn segments(&self) -> Vec<(bool, u32, u32, u8, &[u8])> {
        let mut next = [self.isn[0], self.isn[1]];
        let mut out = Vec::new();
        if self.handshake {
            out.push((true, next[0], 0, TCP_SYN, &[][..]));
            next[0] = next[0].wrapping_add(1);
            out.push((false, next[1], next[0], TCP_SYN | TCP_ACK, &[][..]));
            next[1] = next[1].wrapping_add(1);
            out.push((true, next[0], next[1], TCP_ACK, &[][..]));
        }
        for ((c2s, message), cuts) in self.messages.iter().zip(&self.cuts) {
            let (me, peer) = if *c2s { (0, 1) } else { (1, 0) };
            let mut start = 0;
            let places = cuts
                .iter()
                .map(|&c| message.len() * usize::from(c) / 255)
                .chain([message.len()]);
            for end in places {
                if end <= start {
                    continue;
                }
                out.push((*c2s, next[me], next[peer], TCP_ACK, &message[start..end]));
                next[me] = next[me].wrapping_add((end - start) as u32);
                start = end;
            }
        }
        out.push((true, next[0], next[1], TCP_FIN | TCP_ACK, &[][..]));
        next[0] = next[0].wrapping_add(1);
        out.push((false, next[1], next[0], TCP_FIN | TCP_ACK, &[][..]));
        next[1] = next[1].wrapping_add(1);
        out.push((true, next[0], next[1], TCP_ACK, &[][..]));
        out
    }
}

/// A Gate request (a Hercules batch, framed by Content-Length, chunks or as lz4) or a response.
fn gate(u: &mut Unstructured<'_>, c2s: bool) -> Result<Vec<u8>> {
    if !c2s {
        let body = bytes(u)?;
        let status = *u.choose(&[200u16, 400, 413, 100, 204, 500])?;
        let mut v = format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n",
            decimal(u, body.len() as u64)?
        )
        .into_bytes();
        v.extend_from_slice(body);
        return Ok(v);
    }
    let body = hercules_batch(u)?;
    let mut v = b"POST /stream/send?stream=s HTTP/1.1\r\napiKey: k\r\n".to_vec();
    match u.int_in_range(0u8..=2)? {
        0 => {
            v.extend(format!("Content-Length: {}\r\n\r\n", decimal(u, body.len() as u64)?).bytes());
            v.extend_from_slice(&body);
        }
        1 => {
            v.extend(b"Transfer-Encoding: chunked\r\n\r\n");
            let size = u.int_in_range(1usize..=64)?;
            for part in body.chunks(size) {
                let n = if u.ratio(1u8, 8)? {
                    "1ffffffffffffffff".to_owned()
                } else {
                    format!("{:x}", number(u, part.len() as u64)?)
                };
                v.extend(format!("{n}\r\n").bytes());
                v.extend_from_slice(part);
                v.extend(b"\r\n");
            }
            v.extend(b"0\r\n\r\n");
        }
        _ => {
            let packed = lz4_flex::block::compress(&body);
            v.extend(
                format!(
                    "Content-Encoding: lz4\r\nOriginal-Content-Length: {}\r\nContent-Length: {}\r\n\r\n",
                    decimal(u, body.len() as u64)?,
                    decimal(u, packed.len() as u64)?
                )
                .bytes(),
            );
            v.extend_from_slice(&packed);
        }
    }
    Ok(v)
}

/// `Count:i32` then events: version, timestamp, uuid, a container of a string tag and a vector tag.
fn hercules_batch(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let events = u.int_in_range(0usize..=3)?;
    let mut v = u32_of(u, events)?.to_vec();
    for _ in 0..events {
        v.push(1);
        v.extend_from_slice(&number(u, 16_000_000_000_000_000)?.to_be_bytes());
        v.extend_from_slice(&[7; 16]);
        v.extend_from_slice(&u16_of(u, 2)?);
        let text = bytes(u)?;
        v.extend_from_slice(&[1, b's', 0x09]);
        v.extend_from_slice(&u32_of(u, text.len())?);
        v.extend_from_slice(text);
        // a vector: its element type, count and elements of that type's smallest size
        let (elem, size) =
            *u.choose(&[(0x02u8, 1usize), (0x04, 4), (0x05, 8), (0x09, 4), (0x0B, 0)])?;
        let n = u.int_in_range(0usize..=4)?;
        v.extend_from_slice(&[1, b'v', 0x80, elem]);
        v.extend_from_slice(&u32_of(u, n)?);
        v.extend(std::iter::repeat_n(0, n * size));
    }
    Ok(v)
}

/// A CQL envelope of `version` whose opcode, stream id, length and body numbers are chosen.
fn cql_envelope(u: &mut Unstructured<'_>, c2s: bool, version: u8) -> Result<Vec<u8>> {
    let opcode = if c2s {
        *u.choose(&[0x01u8, 0x05, 0x07, 0x09, 0x0A, 0x0B, 0x0D, 0x0F])?
    } else {
        *u.choose(&[0x00u8, 0x02, 0x03, 0x06, 0x08, 0x0C, 0x0E, 0x10])?
    };
    let body = cql_body(u, opcode)?;
    let mut v = vec![version, 0];
    v.extend_from_slice(&u16_of(u, 1)?);
    v.push(opcode);
    v.extend_from_slice(&u32_of(u, body.len())?);
    v.extend_from_slice(&body);
    Ok(v)
}

/// A body whose counts and lengths are chosen: a string map (STARTUP, SUPPORTED), a long string
/// with values (QUERY, PREPARE, EXECUTE, BATCH), Rows (RESULT), or bytes.
fn cql_body(u: &mut Unstructured<'_>, opcode: u8) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    match opcode {
        0x01 | 0x06 => {
            let pairs = u.int_in_range(0usize..=2)?;
            v.extend_from_slice(&u16_of(u, pairs)?);
            for _ in 0..pairs * 2 {
                let s = bytes(u)?;
                v.extend_from_slice(&u16_of(u, s.len())?);
                v.extend_from_slice(s);
            }
        }
        0x07 | 0x09 | 0x0A | 0x0D => {
            let s = bytes(u)?;
            v.extend_from_slice(&u32_of(u, s.len())?);
            v.extend_from_slice(s);
            v.extend_from_slice(&[0, 1, 0x01]); // consistency ONE, flags: values
            let values = u.int_in_range(0usize..=3)?;
            v.extend_from_slice(&u16_of(u, values)?);
            for _ in 0..values {
                let cell = bytes(u)?;
                v.extend_from_slice(&u32_of(u, cell.len())?);
                v.extend_from_slice(cell);
            }
        }
        0x08 => {
            let (columns, rows) = (u.int_in_range(0usize..=3)?, u.int_in_range(0usize..=3)?);
            v.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 1]); // Rows, global table spec
            v.extend_from_slice(&u32_of(u, columns)?);
            v.extend_from_slice(&[0, 1, b'k', 0, 1, b't']);
            for _ in 0..columns {
                // a name and a type: int, varchar, list<int>, or a custom class
                v.extend_from_slice(&[0, 1, b'c']);
                match u.int_in_range(0u8..=3)? {
                    0 => v.extend_from_slice(&[0, 0x09]),
                    1 => v.extend_from_slice(&[0, 0x0D]),
                    2 => v.extend_from_slice(&[0, 0x20, 0, 0x09]),
                    _ => {
                        let class = bytes(u)?;
                        v.extend_from_slice(&[0, 0]);
                        v.extend_from_slice(&u16_of(u, class.len())?);
                        v.extend_from_slice(class);
                    }
                }
            }
            v.extend_from_slice(&u32_of(u, rows)?);
            for _ in 0..rows * columns {
                let cell = bytes(u)?;
                v.extend_from_slice(&u32_of(u, cell.len())?);
                v.extend_from_slice(cell);
            }
        }
        _ => v.extend_from_slice(bytes(u)?),
    }
    Ok(v)
}

/// STARTUP (with LZ4 or not) and READY as v5 envelopes: the frames that follow are v5 frames.
fn cql_v5_startup(u: &mut Unstructured<'_>, messages: &mut Vec<(bool, Vec<u8>)>) -> Result<()> {
    let mut body = vec![0, 1, 0, 11];
    body.extend_from_slice(b"COMPRESSION");
    body.extend_from_slice(&[0, 3]);
    body.extend_from_slice(b"lz4");
    let startup = if u.arbitrary()? {
        &body[..]
    } else {
        &[0, 0][..]
    };
    let mut v = vec![5, 0, 0, 1, 0x01];
    v.extend_from_slice(&(startup.len() as u32).to_be_bytes());
    v.extend_from_slice(startup);
    messages.push((true, v));
    messages.push((false, vec![0x85, 0, 0, 1, 0x02, 0, 0, 0, 0]));
    Ok(())
}

/// A v5 outer frame around envelopes: its payload and uncompressed lengths chosen, its CRC24 right
/// for them (so the decoder believes the header), its CRC32 right or chosen. The decoder tells a
/// LZ4 session by the STARTUP, so the header may claim the other layout: that is a number too.
fn cql_v5_frame(u: &mut Unstructured<'_>, c2s: bool) -> Result<Vec<u8>> {
    let mut payload = Vec::new();
    for _ in 0..u.int_in_range(1u8..=2)? {
        payload.extend(cql_envelope(u, c2s, if c2s { 0x05 } else { 0x85 })?);
    }
    let lz4 = u.arbitrary()?;
    let length = number(u, payload.len() as u64)? as usize & 0x1_FFFF;
    let uncompressed = if lz4 {
        number(u, 0)? as usize & 0x1_FFFF
    } else {
        0
    };
    let mut v = encode_header(length, uncompressed, u.ratio(7u8, 8)?, lz4);
    v.extend_from_slice(&payload);
    let crc = number(u, u64::from(crc32(&payload)))? as u32;
    v.extend_from_slice(&crc.to_le_bytes());
    Ok(v)
}

/// A Log Courier frame: JDAT (nonce, zlib of `[u32 length][JSON]` events) or PING from the
/// client; ACKN (nonce, sequence), PONG or VERS from the server; every length chosen.
fn courier(u: &mut Unstructured<'_>, c2s: bool) -> Result<Vec<u8>> {
    let nonce = [0x5A; 16];
    let (kind, body): (&[u8], Vec<u8>) = match (c2s, u.int_in_range(0u8..=3)?) {
        (true, 0) => (b"PING", Vec::new()),
        (true, 1) => (
            b"HELO",
            [0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 12, 0, 0, 0, 0].to_vec(),
        ),
        (true, _) => {
            let mut events = Vec::new();
            for _ in 0..u.int_in_range(0u8..=3)? {
                let doc = document(u)?;
                events.extend_from_slice(&u32_of(u, doc.len())?);
                events.extend_from_slice(&doc);
            }
            let block = u.int_in_range(1usize..=64)?;
            (b"JDAT", [&nonce[..], &zlib_stored(&events, block)].concat())
        }
        (false, 0) => (b"PONG", Vec::new()),
        (false, 1) => (
            b"VERS",
            [0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 12, 0, 0, 0, 0].to_vec(),
        ),
        (false, _) => {
            let seq = u32_of(u, 1)?;
            (b"ACKN", [&nonce[..], &seq].concat())
        }
    };
    let mut v = kind.to_vec();
    v.extend_from_slice(&u32_of(u, body.len())?);
    v.extend_from_slice(&body);
    Ok(v)
}

/// A Lumberjack frame: a window, JSON and compressed frames (v2), data frames (v1) from the
/// client, an ACK from the server; sizes, sequence numbers, lengths and pair counts chosen.
fn lumberjack(u: &mut Unstructured<'_>, c2s: bool) -> Result<Vec<u8>> {
    if !c2s {
        let mut v = if u.arbitrary()? { b"2A" } else { b"1A" }.to_vec();
        v.extend_from_slice(&u32_of(u, 1)?);
        return Ok(v);
    }
    let mut v = Vec::new();
    match u.int_in_range(0u8..=3)? {
        0 => {
            v.extend_from_slice(if u.arbitrary()? { b"2W" } else { b"1W" });
            v.extend_from_slice(&u32_of(u, 1)?);
        }
        1 => v.extend(lumberjack_json(u)?),
        2 => {
            let mut inner = Vec::new();
            for _ in 0..u.int_in_range(0u8..=2)? {
                inner.extend(lumberjack_json(u)?);
            }
            let packed = zlib_stored(&inner, u.int_in_range(1usize..=64)?);
            v.extend_from_slice(b"2C");
            v.extend_from_slice(&u32_of(u, packed.len())?);
            v.extend_from_slice(&packed);
        }
        _ => {
            v.extend_from_slice(b"1D");
            v.extend_from_slice(&u32_of(u, 1)?);
            let pairs = u.int_in_range(0usize..=2)?;
            v.extend_from_slice(&u32_of(u, pairs)?);
            for _ in 0..pairs * 2 {
                let s = bytes(u)?;
                v.extend_from_slice(&u32_of(u, s.len())?);
                v.extend_from_slice(s);
            }
        }
    }
    Ok(v)
}

fn lumberjack_json(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let doc = document(u)?;
    let mut v = b"2J".to_vec();
    v.extend_from_slice(&u32_of(u, 1)?);
    v.extend_from_slice(&u32_of(u, doc.len())?);
    v.extend_from_slice(&doc);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_regressions() {
        crate::fuzzing::replay("numbers", numbers);
    }

    /// The builders make conversations the decoders read: with every number the one that fits
    /// (all-zero choices), each protocol's connection decodes without a finding of error severity.
    #[test]
    fn fitting_numbers_make_clean_conversations() {
        for protocol in 0u8..=4 {
            let data = [protocol; 1]
                .iter()
                .copied()
                .chain(std::iter::repeat_n(0, 256))
                .collect::<Vec<u8>>();
            let mut u = Unstructured::new(&data);
            let conversation = Conversation::build(&mut u).unwrap();
            let records = conversation.run();
            assert!(
                records.iter().any(|(_, r)| matches!(r, Record::Message(_))),
                "protocol {protocol}: no message"
            );
        }
    }
}
