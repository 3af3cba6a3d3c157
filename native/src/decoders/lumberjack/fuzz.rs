//! The body of the `lumberjack` fuzz target (native/fuzz/fuzz_targets/lumberjack.rs), here so that
//! `cargo test` replays every input a fuzzer crashed on (native/fuzz/regressions/lumberjack/).
//!
//! The input drives one connection: its first byte picks small or default limits, then each op
//! byte says direction, kind and length: data taken from the input, a gap, or the next bytes
//! wrapped in a zlib `C` frame of stored blocks (so that the fuzzer reaches the inflated paths without having to
//! invent zlib). Checks: no panic; event and ACK records come out in stream order per direction;
//! `close` ends with exactly one connection summary whose counts match the records; a record of
//! each kind can be written as NDJSON.

use super::LumberjackDecoder;
use crate::decoders::{Chunk, Decoder, Gap, Limits, Shared, StreamContext};
use crate::fuzzing::{writes_as_ndjson, zlib_stored};
use crate::model::{Direction, Record, Value};

pub fn lumberjack(data: &[u8]) {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let limits = if mode & 1 == 0 {
        Limits::default()
    } else {
        Limits {
            max_frame: 256,
            max_inflated: 1024,
            max_depth: 2,
            max_pending_events: 3,
            held_memory: 0,
            fate_horizon_ns: None,
        }
    };
    let ctx = StreamContext {
        stream: u64::from(mode >> 4),
        limits,
        ..StreamContext::default()
    };
    let mut shared = Shared::new(&ctx.limits);
    let mut dec = LumberjackDecoder::new(ctx);
    let mut out = Vec::new();
    let mut offsets = [0u64; 2];
    let mut frame = 0u64;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        frame += 1;
        let d = if op & 1 == 0 {
            Direction::C2S
        } else {
            Direction::S2C
        };
        let i = d as usize;
        let len = usize::from(op >> 3);
        let ts = Some(frame as i64 * 1_000_000 - i64::from(op & 4) * 500_000);
        match (op >> 1) & 3 {
            2 => {
                let gap = Gap {
                    direction: d,
                    offset: offsets[i],
                    length: len as u64 + 1,
                    frame: Some(frame),
                    ts,
                };
                dec.gap(&gap, &mut shared, &mut out);
                offsets[i] += len as u64 + 1;
            }
            kind => {
                let take = len.min(rest.len());
                let (bytes, tail) = rest.split_at(take);
                rest = tail;
                let wrapped;
                let bytes = if kind == 3 {
                    wrapped = cframe(bytes, u32::from(op >> 6));
                    &wrapped[..]
                } else {
                    bytes
                };
                let chunk = Chunk {
                    direction: d,
                    offset: offsets[i],
                    data: bytes,
                    frame: Some(frame),
                    ts,
                };
                dec.feed(&chunk, &mut shared, &mut out);
                offsets[i] += bytes.len() as u64;
            }
        }
    }
    let before = out.len();
    while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    assert!(out.len() > before);
    check(&out);
}

/// A `C` frame around `inner`, deflated into stored blocks of one of four sizes.
fn cframe(inner: &[u8], sizes: u32) -> Vec<u8> {
    let body = zlib_stored(inner, [1, 7, 512, 65_535][sizes as usize & 3]);
    let mut out = b"2C".to_vec();
    out.extend((body.len() as u32).to_be_bytes());
    out.extend(body);
    out
}

fn check(out: &[Record]) {
    writes_as_ndjson(out);
    let mut last = [0u64; 2];
    let (mut events, mut windows, mut summaries) = (0u64, 0u64, 0);
    for r in out {
        let Record::Message(m) = r else { continue };
        match m.kind {
            "event" | "ack" => {
                let (Some(d), Some(offset)) = (m.direction, m.offset) else {
                    panic!("{} without a position", m.kind)
                };
                let i = d as usize;
                assert!(
                    offset >= last[i],
                    "{} at {offset} after {}",
                    m.kind,
                    last[i]
                );
                last[i] = offset;
                events += u64::from(m.kind == "event");
            }
            "window" => windows += 1,
            "connection" => {
                summaries += 1;
                assert_eq!(m.get("events"), Some(&Value::from(events)));
                assert_eq!(m.get("windows"), Some(&Value::from(windows)));
            }
            _ => {}
        }
    }
    assert_eq!(summaries, 1);
    assert!(matches!(out.last(), Some(Record::Message(m)) if m.kind == "connection"));
}

#[cfg(test)]
mod tests {
    #[test]
    fn lumberjack_regressions() {
        crate::fuzzing::replay("lumberjack", super::lumberjack);
    }

    #[test]
    fn a_few_shapes() {
        super::lumberjack(b"");
        super::lumberjack(&[
            0, 0x30, b'2', b'W', 0, 0, 0, 1, 0x1e, b'2', b'J', 0, 0, 0, 1, 0, 0, 0,
        ]);
        super::lumberjack(&[1, 0x06 | 0xf8, b'x', 0x05, 0x0c]);
    }
}
