//! The body of the `hercules` fuzz target (native/fuzz/fuzz_targets/hercules.rs), here so that
//! `cargo test` replays every input a fuzzer crashed on (native/fuzz/regressions/hercules/).
//!
//! The input drives one connection: its first byte picks small or default limits, then each op
//! byte says direction, kind and length: data taken from the input, a gap, or the next bytes
//! wrapped in a Gate message (a POST to /stream/send, plain, chunked or as an lz4 block, or a
//! response with a status), so that the fuzzer reaches the Gate and codec paths without inventing
//! HTTP. Checks: no panic; messages (requests, responses, batches, events) come out in stream order
//! per direction; only events carry `acked`; a record of each kind can be written as NDJSON.

use super::HerculesDecoder;
use crate::decoders::{Chunk, Decoder, Gap, Limits, Shared, StreamContext};
use crate::fuzzing::writes_as_ndjson;
use crate::model::{Direction, Record};

pub fn hercules(data: &[u8]) {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let limits = if mode & 1 == 0 {
        Limits::default()
    } else {
        Limits {
            max_frame: 300,
            max_inflated: 600,
            max_depth: 2,
            max_pending_events: 3,
            held_memory: 0,
            fate_horizon_ns: None,
        }
    };
    let ctx = StreamContext {
        stream: u64::from(mode >> 4),
        show_secrets: mode & 2 != 0,
        limits,
        ..StreamContext::default()
    };
    let mut shared = Shared::new(&ctx.limits);
    let mut dec = HerculesDecoder::new(ctx);
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
        let ts = Some(frame as i64 * 1_000_000);
        if (op >> 1) & 3 == 2 {
            let gap = Gap {
                direction: d,
                offset: offsets[i],
                length: len as u64 + 1,
                frame: Some(frame),
                ts,
            };
            dec.gap(&gap, &mut shared, &mut out);
            offsets[i] += len as u64 + 1;
            continue;
        }
        let take = (len * if (op >> 1) & 3 == 3 { 4 } else { 1 }).min(rest.len());
        let (bytes, tail) = rest.split_at(take);
        rest = tail;
        let wrapped;
        let bytes = if (op >> 1) & 3 == 3 {
            wrapped = wrap(d, bytes, op >> 6);
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
    let before = out.len();
    while dec.close(&mut shared, &mut out) == crate::decoders::Closing::More {}
    check(&out[..before], &out[before..]);
}

/// `body` as a Gate request (`how`: plain, lz4, chunked, lz4 with a wrong size) or a response
/// whose status comes from the body's first byte.
fn wrap(d: Direction, body: &[u8], how: u8) -> Vec<u8> {
    if d == Direction::S2C {
        let status = [200, 400, 404, 100, 204, 500, 200, 413]
            [usize::from(body.first().map_or(0, |b| b & 7))];
        let mut v = format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        v.extend_from_slice(body);
        return v;
    }
    let mut v = b"POST /stream/send?stream=f HTTP/1.1\r\napiKey: k\r\n".to_vec();
    match how {
        0 => {
            v.extend(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            v.extend_from_slice(body);
        }
        2 => {
            v.extend(b"Transfer-Encoding: chunked\r\n\r\n");
            for part in body.chunks(7) {
                v.extend(format!("{:x}\r\n", part.len()).as_bytes());
                v.extend_from_slice(part);
                v.extend(b"\r\n");
            }
            v.extend(b"0\r\n\r\n");
        }
        _ => {
            let packed = lz4_flex::block::compress(body);
            let size = body.len() + usize::from(how == 3) * 5;
            v.extend(
                format!(
                    "Content-Encoding: lz4\r\nOriginal-Content-Length: {size}\r\nContent-Length: {}\r\n\r\n",
                    packed.len()
                )
                .as_bytes(),
            );
            v.extend_from_slice(&packed);
        }
    }
    v
}

fn check(fed: &[Record], closed: &[Record]) {
    writes_as_ndjson(fed.iter().chain(closed));
    let mut last = [0u64; 2];
    for r in fed.iter().chain(closed) {
        let Record::Message(m) = r else { continue };
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
        if m.kind != "event" {
            assert!(m.acked.is_none());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    #[test]
    fn regressions() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/hercules");
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            if let Ok(data) = fs::read(entry.path()) {
                super::hercules(&data);
            }
        }
    }

    #[test]
    fn a_few_shapes() {
        super::hercules(b"");
        super::hercules(&[0, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xff]);
        super::hercules(&[1, 0x0e, 0, 0, 0, 1, 0x4f, 0x0f, 0]);
    }
}
