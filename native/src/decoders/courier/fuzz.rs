//! The body of the `courier` fuzz target (native/fuzz/fuzz_targets/courier.rs), here so that
//! `cargo test` replays every input a fuzzer failed on (native/fuzz/regressions/courier/).
//!
//! The input is a script: a settings byte (mid-stream or not, small limits so that the caps,
//! overflow and resync paths run), then operations on either direction: raw bytes, gaps, genuine
//! messages, and JDAT/EVNT payloads built from the input's own event bytes (valid zlib, so the
//! delivery paths are reached without the fuzzer having to invent Adler-32s). Checks: no panic;
//! the frame messages of each direction come out in offset order; close() ends with the
//! connection summary whenever a message was seen; every payload gets one delivery record and
//! the summary's counts add up.

use crate::decoders::{Decoder, Limits, Shared, StreamContext};
use crate::model::{Direction, Record, Value};

use super::CourierDecoder;
use crate::fuzzing::{gap_at, in_two, zlib_stored, Script};

const NONCES: [[u8; 16]; 3] = [[0x11; 16], [0xff; 16], [0x56; 16]];
const HELO: &[u8] =
    b"HELO\0\0\0\x20\0\0\0\0\0\0\0\x02\0\0\0\x0c\0\0\0\0LCOR\0\0\0\0\0\0\0\0\0\0\0\0";
const VERS_EVNT: &[u8] =
    b"VERS\0\0\0\x20\x01\0\0\0\0\0\0\x02\0\0\0\x0c\0\0\0\0LCVR\0\0\0\0\0\0\0\0\0\0\0\0";
const VERS: &[u8] = b"VERS\0\0\0\x14\0\0\0\0\0\0\0\x02\0\0\0\x0c\0\0\0\0RYLC";

/// A JDAT (or streamed EVNT) carrying `events`, deflated into stored blocks of `block` bytes.
fn payload(nonce: &[u8; 16], events: &[&[u8]], block: usize, streamed: bool) -> Vec<u8> {
    let mut plain = Vec::new();
    for e in events {
        plain.extend_from_slice(&(e.len() as u32).to_be_bytes());
        plain.extend_from_slice(e);
    }
    let zdata = zlib_stored(&plain, block);
    let mut out = Vec::with_capacity(24 + zdata.len());
    out.extend_from_slice(if streamed { b"EVNT" } else { b"JDAT" });
    let len = if streamed {
        u32::MAX
    } else {
        (16 + zdata.len()) as u32
    };
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(nonce);
    out.extend_from_slice(&zdata);
    out
}

pub fn courier(data: &[u8]) {
    let mut s = Script(data);
    let Some(settings) = s.byte() else {
        return;
    };
    let small = settings & 2 != 0;
    let limits = Limits {
        max_frame: if small { 300 } else { 64 << 20 },
        max_inflated: if small { 200 } else { 64 << 20 },
        max_pending_events: if settings & 4 != 0 { 3 } else { 100_000 },
        held_memory: if small { 0 } else { 128 << 20 },
        ..Limits::default()
    };
    let ctx = StreamContext {
        midstream: settings & 1 != 0,
        limits,
        ..StreamContext::default()
    };
    let mut shared = Shared::new(&ctx.limits);
    let mut dec = CourierDecoder::new(ctx);
    let mut out = Vec::new();
    let mut offsets = [0u64; 2];
    let mut frame = 0u64;
    while let Some(op) = s.byte() {
        frame += 1;
        let d = if op & 1 == 0 {
            Direction::C2S
        } else {
            Direction::S2C
        };
        let i = usize::from(op & 1);
        let arg = s.byte().unwrap_or(0);
        let bytes: Vec<u8> = match op >> 1 & 7 {
            0 | 1 => s.take(usize::from(arg)).to_vec(),
            2 => {
                let gap = gap_at(d, &mut offsets[i], u64::from(arg) + 1, frame);
                dec.gap(&gap, &mut shared, &mut out);
                continue;
            }
            3 => [
                HELO,
                VERS_EVNT,
                VERS,
                b"PING\0\0\0\0",
                b"PONG\0\0\0\0",
                b"????\0\0\0\0",
            ][usize::from(arg) % 6]
                .to_vec(),
            4 => {
                let mut m = b"ACKN\0\0\0\x14".to_vec();
                m.extend_from_slice(&NONCES[usize::from(arg) % 3]);
                m.extend_from_slice(&u32::from(arg >> 2 & 7).to_be_bytes());
                m
            }
            _ => {
                let body = s.take(usize::from(s.0.first().copied().unwrap_or(0)));
                let events: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
                payload(
                    &NONCES[usize::from(arg) % 3],
                    &events,
                    [1, 5, 64, 4096, 65_535][usize::from(arg >> 2 & 7) % 5],
                    op & 16 != 0,
                )
            }
        };
        // Fed in up to three pieces, as packets would carry them.
        let cut = usize::from(arg) % (bytes.len() + 1);
        let when = (frame, frame as i64 * 1_000_000);
        in_two(&bytes, cut, d, &mut offsets[i], when, |chunk| {
            dec.feed(chunk, &mut shared, &mut out)
        });
    }
    while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    check(&out);
}

fn check(records: &[Record]) {
    let mut last = [0u64; 2];
    let mut frames = 0usize;
    let (mut deliveries, mut events) = (0u64, 0u64);
    for r in records {
        let Record::Message(m) = r else { continue };
        match m.kind {
            "helo" | "vers" | "ping" | "pong" | "jdat" | "evnt" | "ackn" | "unknown_reply"
            | "unknown_type" => {
                let i = usize::from(m.direction == Some(Direction::S2C));
                let off = m.offset.unwrap_or(0);
                assert!(off >= last[i], "{} at {off} after {}", m.kind, last[i]);
                last[i] = off;
                frames += 1;
            }
            "delivery" => deliveries += 1,
            "event" => events += 1,
            _ => {}
        }
    }
    let summary = records.iter().rev().find_map(|r| match r {
        Record::Message(m) if m.kind == "connection" => Some(m),
        _ => None,
    });
    if frames == 0 {
        return;
    }
    let Some(Record::Message(summary)) = records.last() else {
        panic!("no connection summary at close: {summary:?}");
    };
    assert_eq!(summary.kind, "connection");
    let n = |k: &str| summary.get(k).and_then(Value::as_u64).unwrap_or(u64::MAX);
    assert_eq!(n("payloads"), deliveries);
    assert!(events >= n("events"));
    assert_eq!(n("acked_events") + n("unacked_events"), n("events"));
}

#[cfg(test)]
mod tests {
    #[test]
    fn courier_regressions() {
        crate::fuzzing::replay("courier", super::courier);
    }

    #[test]
    fn scripts_of_every_operation() {
        let mut script = vec![0u8];
        for op in 0..32u8 {
            script.extend_from_slice(&[op, op.wrapping_mul(37), 5, b'{', b'}', b'\n', b'x', b'\n']);
        }
        super::courier(&script);
        script[0] = 7;
        super::courier(&script);
    }
}
