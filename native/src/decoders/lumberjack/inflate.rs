//! Inflate the zlib body of a `C` frame with a hard output cap.
//!
//! Neither Logstash nor go-lumber caps the inflated size, so a capture can hold a decompression
//! bomb: inflation stops at the cap instead of allocating it, and the output grows only as far as
//! the data really inflates. Outcomes and their wording are those of Python's
//! `zlib.decompressobj().decompress(body, cap)`, so findings read as they did before the core.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "output lengths are bounded by the inflate cap; zlib's totals only grow"
)]

use crate::model::text::hex;
use flate2::{Decompress, FlushDecompress, Status};

const LEVEL_CLASSES: [&str; 4] = ["0-1", "2-5", "6", "7-9"];

/// What went wrong, as a finding code suffix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Problem {
    ZlibError,
    InflateLimit,
    CompressedTruncated,
}

impl Problem {
    pub fn code(self) -> &'static str {
        match self {
            Problem::ZlibError => "lumberjack.zlib-error",
            Problem::InflateLimit => "lumberjack.inflate-limit",
            Problem::CompressedTruncated => "lumberjack.compressed-truncated",
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            Problem::ZlibError => "invalid zlib data in C frame",
            Problem::InflateLimit => {
                "C frame inflation stopped at the size cap (decompression bomb?)"
            }
            Problem::CompressedTruncated => {
                "zlib stream in C frame ends early (Logstash: 'Insufficient bytes in compressed \
                 content to decode')"
            }
        }
    }
}

/// What came out of one zlib body.
#[derive(Debug)]
pub struct Inflated {
    pub header: String,
    pub level: Option<&'static str>,
    pub problem: Option<(Problem, String)>,
    /// Bytes left after the end of the zlib stream, inside the C frame.
    pub trailing: usize,
}

/// The compression level class from a zlib header, or None when it is not a zlib header.
pub fn level_class(cmf: u8, flg: u8) -> Option<&'static str> {
    if cmf & 0x0F != 8 || ((u32::from(cmf) << 8) | u32::from(flg)) % 31 != 0 {
        return None;
    }
    Some(LEVEL_CLASSES[usize::from(flg >> 6)])
}

/// A zlib inflater used for body after body: a new one allocates its 32 KiB window and state each
/// time (1 % of the samples converting a Beats capture, whose windows have 20-60 events a C
/// frame); a reset keeps them and starts the stream over as a new one would.
#[derive(Debug)]
pub struct Inflater(Decompress);

impl Default for Inflater {
    fn default() -> Self {
        Inflater(Decompress::new(true))
    }
}

impl Inflater {
    /// Inflate `body` (RFC 1950 zlib) into `out` (cleared first), producing at most `cap` bytes.
    /// `out` keeps the bytes only when the outcome has them (complete, or cut short).
    pub fn inflate(&mut self, body: &[u8], cap: usize, out: &mut Vec<u8>) -> Inflated {
        self.0.reset(true);
        inflate_with(&mut self.0, body, cap, out)
    }
}

fn inflate_with(dec: &mut Decompress, body: &[u8], cap: usize, out: &mut Vec<u8>) -> Inflated {
    out.clear();
    let header = hex(&body[..body.len().min(2)]);
    let level = if body.len() >= 2 {
        level_class(body[0], body[1])
    } else {
        None
    };
    let fail = |level, problem, detail: String, header: String| Inflated {
        header,
        level,
        problem: Some((problem, detail)),
        trailing: 0,
    };
    if level.is_none() {
        let kind = if body.starts_with(b"\x1f\x8b") {
            "gzip"
        } else {
            "raw deflate or garbage"
        };
        let detail = format!("not a zlib header ({header}: {kind})");
        return fail(None, Problem::ZlibError, detail, header);
    }
    let cap = cap.max(1); // Python: max_length 0 would mean "no limit"
    let mut end = false;
    // Inflated into `out`'s spare capacity (`decompress_vec`): the buffer is kept from body to
    // body, and zeroing the room first was a pass over every inflated byte. Room a kept buffer
    // has past the cap may be filled; more than `cap` bytes is refused below as the cap is.
    while out.len() < cap {
        if out.len() == out.capacity() {
            // Grow geometrically, never past the cap: a bomb costs the cap, not its claim.
            let grow = out.len().max(body.len().saturating_mul(4)).max(4096);
            out.reserve_exact(grow.min(cap - out.len()));
        }
        let (in_before, out_before) = (dec.total_in(), dec.total_out());
        let input = &body[in_before as usize..];
        let res = dec.decompress_vec(input, out, FlushDecompress::None);
        match res {
            Err(e) => {
                out.clear();
                let detail = error_text(&e, body, cap);
                return fail(level, Problem::ZlibError, detail, header);
            }
            Ok(Status::StreamEnd) => {
                end = true;
                break;
            }
            Ok(_) => {}
        }
        let stalled = dec.total_in() == in_before && dec.total_out() == out_before;
        if stalled && out.len() < out.capacity() {
            break; // no progress with room left: the input is used up
        }
    }
    let consumed = dec.total_in() as usize;
    if out.len() > cap || (!end && out.len() >= cap) {
        out.clear();
        let detail = format!("inflates to more than {cap} bytes");
        return fail(level, Problem::InflateLimit, detail, header);
    }
    if !end {
        let detail = format!(
            "{} bytes inflate to {} without reaching the end of the stream",
            body.len(),
            out.len()
        );
        return Inflated {
            header,
            level,
            problem: Some((Problem::CompressedTruncated, detail)),
            trailing: 0,
        };
    }
    Inflated {
        header,
        level,
        problem: None,
        trailing: body.len() - consumed,
    }
}

/// Python's wording of a zlib error.
fn error_text(e: &flate2::DecompressError, body: &[u8], cap: usize) -> String {
    if e.needs_dictionary().is_some() {
        return "Error 2 while decompressing data".to_owned();
    }
    let mut msg = e.message().unwrap_or("invalid input data").to_owned();
    if msg == "repeated call with bad state" {
        // zlib-rs names only its own state when its fast loop (used while at least 258 bytes of
        // output room are free) meets the damage; with less room the step-by-step loop names
        // the damage itself, as zlib does. Error paths only, and never past the cap.
        let mut dec = Decompress::new(true);
        let mut step = [0u8; 256];
        while (dec.total_out() as usize) < cap {
            let input = &body[(dec.total_in() as usize).min(body.len())..];
            let before = (dec.total_in(), dec.total_out());
            match dec.decompress(input, &mut step, FlushDecompress::None) {
                Err(e) => {
                    msg = e.message().unwrap_or("invalid input data").to_owned();
                    break;
                }
                Ok(Status::StreamEnd) => break,
                Ok(_) if (dec.total_in(), dec.total_out()) == before => break,
                Ok(_) => {}
            }
        }
    }
    format!("Error -3 while decompressing data: {msg}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{write::ZlibEncoder, Compression};
    use std::io::Write;

    fn zlib(data: &[u8], level: u32) -> Vec<u8> {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::new(level));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn level_classes_from_the_header() {
        assert_eq!(level_class(0x78, 0x5e), Some("2-5"));
        assert_eq!(level_class(0x78, 0x9c), Some("6"));
        assert_eq!(level_class(0x78, 0xda), Some("7-9"));
        assert_eq!(level_class(0x78, 0x01), Some("0-1"));
        assert_eq!(level_class(0x1f, 0x8b), None);
    }

    /// Each call on one inflater (as a connection's C frames use it).
    fn inflate(body: &[u8], cap: usize, out: &mut Vec<u8>) -> Inflated {
        thread_local!(static ONE: std::cell::RefCell<Inflater> = Default::default());
        ONE.with(|z| z.borrow_mut().inflate(body, cap, out))
    }

    /// Whatever the last body left the inflater in (cut short, capped, damaged, trailing bytes),
    /// the next one inflates as a new inflater inflates it.
    #[test]
    fn a_reused_inflater_inflates_as_a_new_one() {
        let good = zlib(
            &(0..50_000u32)
                .map(|i| (i * 7 % 251) as u8)
                .collect::<Vec<_>>(),
            6,
        );
        let mut trailing = good.clone();
        trailing.extend(b"junk");
        let bodies: [(&[u8], usize); 7] = [
            (&good[..good.len() / 2], 1 << 20),
            (&good, 1 << 20),
            (&good, 1000),
            (&good, 1 << 20),
            (b"\x78\x9c\xff\xff\xff\xff", 100),
            (&trailing, 1 << 20),
            (&good, 1 << 20),
        ];
        let mut reused = Inflater::default();
        let mut out = Vec::new();
        for (body, cap) in bodies {
            let r = reused.inflate(body, cap, &mut out);
            let mut fresh_out = Vec::new();
            let fresh = Inflater::default().inflate(body, cap, &mut fresh_out);
            assert_eq!(
                (r.problem, r.trailing, r.level),
                (fresh.problem, fresh.trailing, fresh.level)
            );
            assert_eq!(out, fresh_out);
        }
        assert_eq!(out.len(), 50_000);
    }

    #[test]
    fn complete_truncated_trailing_and_capped() {
        let mut out = Vec::new();
        let body = zlib(&[b'a'; 10_000], 6);
        let r = inflate(&body, 1 << 20, &mut out);
        assert_eq!((r.problem, r.trailing, out.len()), (None, 0, 10_000));
        let mut long = body.clone();
        long.extend(b"junk");
        assert_eq!(inflate(&long, 1 << 20, &mut out).trailing, 4);
        let r = inflate(&body[..body.len() - 6], 1 << 20, &mut out);
        assert_eq!(r.problem.unwrap().0, Problem::CompressedTruncated);
        let r = inflate(&body, 1000, &mut out);
        assert_eq!(
            r.problem,
            Some((
                Problem::InflateLimit,
                "inflates to more than 1000 bytes".into()
            ))
        );
        assert!(out.is_empty());
        // exactly the cap: the stream's end is reached within it
        assert_eq!(inflate(&body, 10_000, &mut out).problem, None);
    }

    #[test]
    fn errors_worded_as_python_zlib() {
        let mut out = Vec::new();
        let r = inflate(b"\x1f\x8b\x08\x00", 100, &mut out);
        assert_eq!(r.problem.unwrap().1, "not a zlib header (1f8b: gzip)");
        // damage met by zlib-rs's fast loop: named as zlib names it, not by zlib-rs's state
        let hex = "78da33f262606060625c60d4a9180544032350a83102317bb552ae9295614b7681d170251100007cac1fd6";
        let body: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let r = inflate(&body, 1 << 20, &mut out);
        assert_eq!(
            r.problem.unwrap().1,
            "Error -3 while decompressing data: invalid distance too far back"
        );
        let r = inflate(b"\x78\x9c\xff\xff\xff\xff", 100, &mut out);
        assert_eq!(
            r.problem.unwrap().1,
            "Error -3 while decompressing data: invalid block type"
        );
    }
}
