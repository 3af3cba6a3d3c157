//! The body of the `tls` fuzz target (native/fuzz/fuzz_targets/tls.rs), here so that `cargo test`
//! replays every input a fuzzer failed on (native/fuzz/regressions/tls/).
//!
//! The input is a script: a byte picking one of the genuine connections of testdata/ (its key log
//! is loaded, so the decrypt paths are reached), then operations on either direction: raw bytes,
//! gaps, and the connection's own flights (whole, cut, or with one byte changed), so that real
//! handshakes and records meet arbitrary bytes in every order. Checks: no panic; each direction's
//! plaintext and plaintext gaps tile its offsets; nothing is decrypted from raw bytes alone
//! unless a genuine flight was fed.

use std::sync::{Arc, OnceLock};

use super::conn::{Output, TlsConnection};
use super::keylog::KeyLog;
use crate::fuzzing::{gap_at, in_two, Script};
use crate::model::text::unhex;
use crate::model::Direction;

const CONNECTIONS: [(&str, &str); 4] = [
    (
        include_str!("testdata/tls12-aes128gcm.transcript"),
        include_str!("testdata/tls12-aes128gcm.keylog"),
    ),
    (
        include_str!("testdata/tls12-cbc-sha-etm.transcript"),
        include_str!("testdata/tls12-cbc-sha-etm.keylog"),
    ),
    (
        include_str!("testdata/tls13-aes128gcm.transcript"),
        include_str!("testdata/tls13-aes128gcm.keylog"),
    ),
    (
        include_str!("testdata/tls13-chacha20.transcript"),
        include_str!("testdata/tls13-chacha20.keylog"),
    ),
];

/// A genuine connection ready to replay: its flights, and its key log with and without keys.
struct Genuine {
    flights: Vec<(Direction, Vec<u8>)>,
    keys: [Arc<KeyLog>; 2],
}

/// The connections parsed once per process: hex-decoding them on every input took most of the
/// fuzzer's time.
fn genuine() -> &'static [Genuine] {
    static PARSED: OnceLock<Vec<Genuine>> = OnceLock::new();
    PARSED.get_or_init(|| {
        CONNECTIONS
            .iter()
            .map(|(transcript, log)| {
                let flights = transcript
                    .lines()
                    .filter_map(|l| l.split_once(' '))
                    .map(|(d, hex)| {
                        let d = if d == "c2s" {
                            Direction::C2S
                        } else {
                            Direction::S2C
                        };
                        (d, unhex(hex))
                    })
                    .collect();
                let mut keylog = KeyLog::default();
                keylog.add("fuzz", log, &mut Vec::new());
                Genuine {
                    flights,
                    keys: [Arc::new(keylog), Arc::new(KeyLog::default())],
                }
            })
            .collect()
    })
}

pub fn tls(data: &[u8]) {
    let mut s = Script(data);
    let Some(pick) = s.byte() else { return };
    let Genuine { flights, keys } = &genuine()[usize::from(pick) % CONNECTIONS.len()];
    let keylog = Arc::clone(&keys[usize::from(pick >> 7)]);
    let mut conn = TlsConnection::new(keylog);
    let mut out = Vec::new();
    let mut offsets = [0u64; 2];
    let mut next = [0u64; 2];
    let mut frame = 0u64;
    let mut genuine = false;
    while let Some(op) = s.byte() {
        frame += 1;
        let arg = s.byte().unwrap_or(0);
        let mut d = if op & 1 == 0 {
            Direction::C2S
        } else {
            Direction::S2C
        };
        let bytes: Vec<u8> = match op >> 1 & 3 {
            0 => s.take(usize::from(arg)).to_vec(),
            1 => {
                let i = usize::from(d == Direction::S2C);
                let gap = gap_at(d, &mut offsets[i], u64::from(arg) + 1, frame);
                conn.gap(&gap, &mut out);
                check(&mut next, &mut out);
                continue;
            }
            _ => {
                let (fd, mut flight) = flights[usize::from(arg) % flights.len()].clone();
                d = fd;
                genuine = true;
                if op & 8 != 0 && !flight.is_empty() {
                    let at = usize::from(s.byte().unwrap_or(0)) * flight.len() / 256;
                    flight[at] ^= s.byte().unwrap_or(1) | 1;
                }
                if op & 16 != 0 {
                    let keep = usize::from(s.byte().unwrap_or(0)) * flight.len() / 256;
                    flight.truncate(keep);
                }
                flight
            }
        };
        let i = usize::from(d == Direction::S2C);
        let cut = usize::from(op >> 5) * bytes.len() / 8;
        in_two(
            &bytes,
            cut,
            d,
            &mut offsets[i],
            (frame, frame as i64),
            |chunk| conn.feed(chunk, &mut out),
        );
        check(&mut next, &mut out);
    }
    conn.close(&mut out);
    check(&mut next, &mut out);
    assert!(genuine || !conn.info().decrypted, "decrypted without a key");
}

/// Each direction's plaintext and plaintext gaps start where the last ended; plaintext is never empty.
fn check(next: &mut [u64; 2], out: &mut Vec<Output>) {
    for o in out.drain(..) {
        let (d, offset, len) = match o {
            Output::Plain(c) => {
                assert!(!c.data.is_empty());
                (c.direction, c.offset, c.data.len() as u64)
            }
            Output::Gap(g) => (g.direction, g.offset, g.length),
            Output::Record(_) => continue,
        };
        let i = usize::from(d == Direction::S2C);
        assert_eq!(offset, next[i]);
        next[i] += len;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tls_regressions() {
        crate::fuzzing::replay("tls", super::tls);
    }

    #[test]
    fn scripts_of_every_operation() {
        for pick in [0u8, 1, 2, 3, 0x80] {
            let mut script = vec![pick];
            // The genuine connection in order, then every operation.
            for flight in 0..6u8 {
                script.extend_from_slice(&[4 + (flight % 2), flight]);
            }
            for op in 0..=255u8 {
                script.extend_from_slice(&[op, op.wrapping_mul(37), 3, 0x17, 3, 3]);
            }
            super::tls(&script);
        }
    }
}
