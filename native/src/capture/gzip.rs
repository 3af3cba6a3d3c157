//! gzip (RFC 1952) inflated as its bytes arrive: sans-IO, member after member, output handed on in
//! pieces of at most `PIECE` bytes so memory stays bounded whatever the compression ratio.
//!
//! flate2's `Decompress` (zlib-rs backend) does the inflating; the member framing (header, CRC-32
//! and length trailer) is read here because flate2's gzip types are pull-based (`Read`), and the
//! reader is fed, not reading. Errors use the texts of Python's gzip module, which read these
//! captures before the core did, so a damaged file reads the same as ever.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions inside a gzip header capped at MAX_HEADER bytes (an extra field's u16 length plus a position fits usize); zlib's total_in/total_out only grow, so their differences are the bytes of one call"
)]

use flate2::{Crc, Decompress, FlushDecompress, Status};

use super::inflate::Inflate;

const PIECE: usize = 256 << 10;
/// A gzip header's optional fields (name, comment, extra) beyond this are not believed.
const MAX_HEADER: usize = 1 << 20;
const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;

#[derive(Debug, PartialEq)]
enum State {
    Header,
    Body,
    Trailer,
    /// Between members: padding zeros, then the next member or the end.
    Between,
}

pub struct Gunzip {
    state: State,
    gathered: Vec<u8>, // header or trailer bytes so far
    inflate: Decompress,
    crc: Crc,
    piece: Vec<u8>,
}

impl Default for Gunzip {
    fn default() -> Self {
        Gunzip {
            state: State::Header,
            gathered: Vec::new(),
            inflate: Decompress::new(false),
            crc: Crc::new(),
            piece: Vec::new(),
        }
    }
}

/// The length of the member header at the start of `h`, Ok(None) while more bytes are needed.
fn header_len(h: &[u8]) -> Result<Option<usize>, String> {
    if h.len() >= 3 && (h[0] != 0x1f || h[1] != 0x8b) {
        return Err(format!(
            "BadGzipFile: Not a gzipped file (b'{}')",
            h[..2].escape_ascii()
        ));
    }
    if h.len() < 10 {
        return Ok(None);
    }
    if h[2] != 8 {
        return Err("BadGzipFile: Unknown compression method".to_owned());
    }
    let flags = h[3];
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let Some(len) = h.get(at..at + 2) else {
            return Ok(None);
        };
        at += 2 + usize::from(u16::from_le_bytes([len[0], len[1]]));
    }
    for field in [FNAME, FCOMMENT] {
        if flags & field != 0 {
            match h
                .get(at..)
                .and_then(|rest| rest.iter().position(|&b| b == 0))
            {
                Some(end) => at += end + 1,
                None => return Ok(None),
            }
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
    }
    Ok((h.len() >= at).then_some(at))
}

impl Inflate for Gunzip {
    fn feed(&mut self, mut input: &[u8], out: &mut dyn FnMut(&[u8])) -> Result<(), String> {
        if self.piece.is_empty() {
            self.piece = vec![0; PIECE];
        }
        while !input.is_empty() {
            match self.state {
                State::Between => {
                    let zeros = input.iter().take_while(|&&b| b == 0).count();
                    input = &input[zeros..];
                    if !input.is_empty() {
                        self.state = State::Header;
                    }
                }
                State::Header => {
                    let take = input.len().min(MAX_HEADER + 16 - self.gathered.len());
                    let start = self.gathered.len();
                    self.gathered.extend_from_slice(&input[..take]);
                    match header_len(&self.gathered)? {
                        Some(len) => {
                            input = &input[len - start..];
                            self.gathered.clear();
                            self.state = State::Body;
                        }
                        None if self.gathered.len() > MAX_HEADER => {
                            return Err("BadGzipFile: header too long".to_owned());
                        }
                        None => input = &input[take..],
                    }
                }
                State::Body => {
                    let (before_in, before_out) =
                        (self.inflate.total_in(), self.inflate.total_out());
                    let result =
                        self.inflate
                            .decompress(input, &mut self.piece, FlushDecompress::None);
                    // what was inflated before damage is handed on all the same, so the bytes
                    // kept do not depend on how the input was split
                    let used = (self.inflate.total_in() - before_in) as usize;
                    let made = (self.inflate.total_out() - before_out) as usize;
                    input = &input[used.min(input.len())..];
                    self.crc.update(&self.piece[..made]);
                    if made > 0 {
                        out(&self.piece[..made]);
                    }
                    // one text whatever the inflater's detail: where it notices the damage depends on how the
                    // input was split, and the same capture must read the same
                    let status = result.map_err(|_| {
                        "zlib.error: Error -3 while decompressing data: invalid deflate data"
                            .to_owned()
                    })?;
                    if status == Status::StreamEnd {
                        self.state = State::Trailer;
                    } else if used == 0 && made == 0 {
                        break; // the inflater wants more input than there is
                    }
                }
                State::Trailer => {
                    let take = input.len().min(8 - self.gathered.len());
                    self.gathered.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    if self.gathered.len() == 8 {
                        self.end_member()?;
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(&self) -> Result<(), String> {
        match self.state {
            State::Between => Ok(()),
            State::Header if self.gathered.is_empty() => Ok(()),
            _ => Err(
                "gzip: the compressed file is truncated (it ends before its end-of-stream marker)"
                    .to_owned(),
            ),
        }
    }
}

impl Gunzip {
    fn end_member(&mut self) -> Result<(), String> {
        let t = &self.gathered;
        let crc = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        let size = u32::from_le_bytes([t[4], t[5], t[6], t[7]]);
        if crc != self.crc.sum() {
            return Err(format!(
                "BadGzipFile: CRC check failed {crc:#x} != {:#x}",
                self.crc.sum()
            ));
        }
        if size != self.inflate.total_out() as u32 {
            return Err("BadGzipFile: Incorrect length of data produced".to_owned());
        }
        self.gathered.clear();
        self.inflate.reset(false);
        self.crc.reset();
        self.state = State::Between;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::inflate::Inflate;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn inflate_in(pieces: &[&[u8]]) -> (Vec<u8>, Result<(), String>) {
        let mut g = Gunzip::default();
        let mut out = Vec::new();
        for p in pieces {
            if let Err(e) = g.feed(p, &mut |b| out.extend_from_slice(b)) {
                return (out, Err(e));
            }
        }
        let end = g.finish();
        (out, end)
    }

    #[test]
    fn members_padding_and_any_split() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut file = gz(&data[..1000]);
        file.extend_from_slice(&[0, 0, 0]);
        file.extend(gz(&data[1000..]));
        for step in [1, 7, 4096, file.len()] {
            let pieces: Vec<&[u8]> = file.chunks(step).collect();
            let (out, end) = inflate_in(&pieces);
            assert_eq!(end, Ok(()));
            assert_eq!(out, data, "step {step}");
        }
    }

    #[test]
    fn damage_keeps_what_came_before() {
        let data = vec![7u8; 100_000];
        let file = gz(&data);
        let (out, end) = inflate_in(&[&file[..file.len() / 2]]);
        assert!(end
            .unwrap_err()
            .contains("the compressed file is truncated"));
        assert!(!out.is_empty() && out.iter().all(|&b| b == 7));
        let mut bad = file.clone();
        let n = bad.len();
        bad[n - 8] ^= 1; // the CRC
        assert!(inflate_in(&[&bad])
            .1
            .unwrap_err()
            .contains("CRC check failed"));
        let mut junk = file;
        junk.extend_from_slice(b"junk");
        assert!(inflate_in(&[&junk])
            .1
            .unwrap_err()
            .contains("Not a gzipped file"));
    }

    #[test]
    fn header_fields_are_skipped() {
        let mut file = vec![
            0x1f,
            0x8b,
            8,
            FEXTRA | FNAME | FCOMMENT | FHCRC,
            0,
            0,
            0,
            0,
            0,
            255,
            3,
            0,
        ];
        file.extend_from_slice(b"xyzname\0comment\0\x00\x00");
        file.extend_from_slice(&gz(b"hello")[10..]);
        assert_eq!(inflate_in(&[&file]), (b"hello".to_vec(), Ok(())));
    }
}
