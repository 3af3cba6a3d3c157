//! Content detection of CQL streams on any port (reference/cql.md §13).
//!
//! Strong evidence: a v5 frame header whose CRC24 holds (1 in 16.7 M by chance), or an envelope
//! header of the right direction whose body decodes cleanly. Mid-stream samples are searched for a
//! CRC24-valid frame carrying a v5 envelope, or for two envelope headers back to back.

use super::envelope::{self, Header, FLAG_COMPRESSION, HEADER};
use super::frame_v5::crc24;
use crate::decoders::detect::Sample;

pub const PORTS: [u16; 2] = [9042, 9142];
/// A first envelope larger than this is not evidence of CQL.
const SANE_LENGTH: u32 = 16 << 20;

/// A v5 frame header (5 bytes for LZ4 frames, else 3) with zero padding bits and a valid CRC24
/// at the start of `data`.
fn frame_at(data: &[u8], lz4: bool) -> bool {
    let (n, top_bits) = if lz4 { (5, 3) } else { (3, 2) };
    let Some((value, [c0, c1, c2, ..])) = data.get(..n).zip(data.get(n..)) else {
        return false;
    };
    if value.last().is_some_and(|&b| b >> top_bits != 0) {
        return false; // the bits above the self-contained flag are written as 0
    }
    crc24(value) == u32::from_le_bytes([*c0, *c1, *c2, 0])
}

/// A plausible envelope header sent in this direction at the start of `data` (None past its end).
fn envelope_at(data: Option<&[u8]>, response: bool) -> Option<Header> {
    let h = envelope::parse(data?)?;
    let opcode_ok = if response {
        envelope::is_response(h.opcode)
    } else {
        envelope::is_request(h.opcode)
    };
    (envelope::known_version(h.version).is_some()
        && h.response == response
        && opcode_ok
        && h.flags & !0x1F == 0
        && h.length <= SANE_LENGTH)
        .then_some(h)
}

/// Confidence that `data` starts at a CQL boundary.
fn score_start(data: &[u8], response: bool) -> f64 {
    if frame_at(data, false) || frame_at(data, true) {
        return 0.95;
    }
    let Some(head) = envelope_at(Some(data), response) else {
        return 0.0;
    };
    let total = head.total() as usize;
    if data.len() < total {
        0.7
    } else if head.flags & FLAG_COMPRESSION != 0 && head.version < 5 {
        0.8 // compressed bodies are checked by the decoder
    } else if super::envelope_decodes(&data[..total]) {
        0.95
    } else {
        0.5
    }
}

/// Confidence from a boundary found later in the sample (mid-stream capture).
fn score_inside(data: &[u8], response: bool) -> f64 {
    for pos in 1..data.len().saturating_sub(HEADER) {
        let here = &data[pos..];
        for (lz4, skip) in [(false, 6), (true, 8)] {
            if frame_at(here, lz4)
                && envelope_at(here.get(skip..), response)
                    .is_some_and(|h| envelope::framed(h.version))
            {
                return 0.9;
            }
        }
        if let Some(head) = envelope_at(Some(here), response) {
            // total() is a u32 length plus 9: a usize on 64-bit targets
            if envelope_at(here.get(head.total() as usize..), response).is_some() {
                return 0.7;
            }
        }
    }
    0.0
}

pub fn detect(s: &Sample<'_>) -> Option<f64> {
    let sides = [(s.c2s, false), (s.s2c, true)];
    if sides.iter().all(|(d, _)| d.len() < HEADER) && !s.closed {
        return None;
    }
    let best = sides
        .iter()
        .map(|&(d, r)| score_start(d, r))
        .fold(0.0, f64::max);
    if best >= 0.9 {
        return Some(best);
    }
    Some(
        sides
            .iter()
            .map(|&(d, r)| score_inside(d, r))
            .fold(best, f64::max),
    )
}

#[cfg(test)]
mod tests {
    use super::super::frame_v5::encode_frame;
    use super::*;

    fn sample<'a>(c2s: &'a [u8], s2c: &'a [u8]) -> Sample<'a> {
        Sample {
            c2s,
            s2c,
            client_port: 40000,
            server_port: 1234,
            closed: false,
        }
    }

    #[test]
    fn envelopes_and_frames() {
        let options = envelope::encode(4, 0, 0, 0x05, b"");
        assert_eq!(detect(&sample(&options, b"")), Some(0.95));
        // a response opcode sent by the client is no evidence
        let ready = envelope::encode(4, 0, 0, 0x02, b"");
        assert_eq!(detect(&sample(&ready, b"")), Some(0.0));
        assert_eq!(detect(&sample(b"\x04\0", b"")), None);
        let frame = encode_frame(&envelope::encode(5, 0, 0, 0x05, b""), true, false);
        assert_eq!(detect(&sample(&frame, b"")), Some(0.95));
        let inside = [&b"garbage"[..], &frame, &frame].concat();
        assert_eq!(detect(&sample(&inside, b"")), Some(0.9));
        let two = [&b"xx"[..], &options, &options].concat();
        assert_eq!(detect(&sample(&two, b"")), Some(0.7));
    }
}
