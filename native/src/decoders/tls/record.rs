//! TLS record framing of one direction (RFC 5246 §6.2, RFC 8446 §5.1): 5-byte headers, bodies
//! checked against the protocol's cap before they are buffered, and resynchronisation after lost
//! bytes: like Wireshark, scan for the next plausible record header; the caller confirms a
//! candidate (its tag verifies, or nothing can be checked) or rejects it and the scan goes on.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "a u16 record length plus 5 in u64; positions within the buffer"
)]

use crate::decoders::buffer::StreamBuffer;

/// The largest record body a peer may send: 2^14 plaintext + 2048 of expansion (TLS 1.2's
/// TLSCiphertext limit; TLS 1.3's is 2^14 + 256).
pub const MAX_BODY: usize = (1 << 14) + 2048;

pub const CHANGE_CIPHER_SPEC: u8 = 20;
pub const ALERT: u8 = 21;
pub const HANDSHAKE: u8 = 22;
pub const APPLICATION_DATA: u8 = 23;

/// One record as framed, with where it was on the wire.
#[derive(Clone, Debug, PartialEq)]
pub struct Framed {
    pub header: [u8; 5],
    pub body: Vec<u8>,
    /// Stream offset of the header.
    pub offset: u64,
    /// Frame and time of the segment that carried the record's last byte.
    pub frame: Option<u64>,
    pub ts: Option<i64>,
    /// Found by the scan after lost bytes: `settle` must confirm or reject it.
    pub candidate: bool,
}

impl Framed {
    pub fn ctype(&self) -> u8 {
        self.header[0]
    }

    pub fn version(&self) -> u16 {
        u16::from_be_bytes([self.header[1], self.header[2]])
    }

    pub fn wire_len(&self) -> u64 {
        5 + self.body.len() as u64
    }
}

/// What `next` found.
#[derive(Debug, PartialEq)]
pub enum Next {
    Record(Framed),
    /// Bytes at `offset` are not a record header (`head`: up to 16 of them); the framing is lost
    /// and a scan for the next plausible header starts.
    NotRecord {
        offset: u64,
        head: Vec<u8>,
        frame: Option<u64>,
        ts: Option<i64>,
    },
    /// More bytes are needed.
    Wait,
}

#[derive(Debug, Default)]
pub struct Framer {
    buf: StreamBuffer,
    /// Record boundaries are unknown (after a gap or a bad header): scanning.
    lost: bool,
    /// The record version seen last, which a scanned header must repeat.
    version: Option<[u8; 2]>,
}

/// A header a TLS peer could have sent: a known content type, version 3.x (`version` when the
/// direction has one), a body within the cap. Detection asks it too.
pub fn plausible(h: &[u8], version: Option<[u8; 2]>) -> bool {
    let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
    (CHANGE_CIPHER_SPEC..=APPLICATION_DATA).contains(&h[0])
        && h[1] == 3
        && h[2] <= 4
        && version.is_none_or(|v| v == [h[1], h[2]])
        && (1..=MAX_BODY).contains(&len)
}

impl Framer {
    pub fn push(&mut self, offset: u64, data: &[u8], frame: Option<u64>, ts: Option<i64>) {
        self.buf.append(offset, data, frame, ts);
    }

    /// Bytes are missing up to `resume`: what is buffered is dropped and the scan starts there.
    pub fn gap(&mut self, resume: u64) {
        self.buf.reset(resume);
        self.lost = true;
    }

    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// Bytes buffered and not yet framed.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    pub fn next_record(&mut self) -> Next {
        loop {
            let view = self.buf.view();
            if view.len() < 5 {
                return Next::Wait;
            }
            let head = &view[..5];
            if !plausible(head, if self.lost { self.version } else { None }) {
                if self.lost {
                    self.buf.skip(1);
                    continue;
                }
                let (frame, ts) = self.buf.origin();
                let next = Next::NotRecord {
                    offset: self.buf.offset(),
                    head: self.buf.peek(0, 16).to_vec(),
                    frame,
                    ts,
                };
                self.lost = true;
                return next;
            }
            let len = 5 + usize::from(u16::from_be_bytes([head[3], head[4]]));
            if view.len() < len {
                return Next::Wait;
            }
            let header: [u8; 5] = head.try_into().expect("5 bytes");
            let offset = self.buf.offset();
            let (frame, ts) = self.buf.origin_at(offset + len as u64 - 1);
            let framed = Framed {
                header,
                body: view[5..len].to_vec(),
                offset,
                frame,
                ts,
                candidate: self.lost,
            };
            if !self.lost {
                self.buf.skip(len);
                self.version = Some([header[1], header[2]]);
            }
            return Next::Record(framed);
        }
    }

    /// After a candidate: confirmed, the framing is back (the record is consumed); rejected, the
    /// scan goes on one byte later.
    pub fn settle(&mut self, framed: &Framed, confirmed: bool) {
        if confirmed {
            self.lost = false;
            self.version = Some([framed.header[1], framed.header[2]]);
            self.buf.skip(framed.wire_len() as usize);
        } else {
            self.buf.skip(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ctype: u8, body: &[u8]) -> Vec<u8> {
        let mut r = vec![ctype, 3, 3];
        r.extend_from_slice(&(body.len() as u16).to_be_bytes());
        r.extend_from_slice(body);
        r
    }

    #[test]
    fn frames_records_split_anywhere() {
        let mut wire = rec(HANDSHAKE, b"hello");
        wire.extend(rec(APPLICATION_DATA, &[9; 300]));
        let mut f = Framer::default();
        let mut got = Vec::new();
        for (i, b) in wire.iter().enumerate() {
            f.push(i as u64, &[*b], Some(i as u64 + 1), None);
            while let Next::Record(r) = f.next_record() {
                got.push((r.ctype(), r.body.len(), r.offset, r.frame));
            }
        }
        assert_eq!(got, [(22, 5, 0, Some(10)), (23, 300, 10, Some(315))]);
    }

    #[test]
    fn a_bad_header_is_reported_once_then_scanned_past() {
        let mut f = Framer::default();
        let mut wire = rec(HANDSHAKE, b"x");
        wire.extend_from_slice(b"GET / HTTP/1.1\r\n");
        wire.extend(rec(APPLICATION_DATA, b"abc"));
        f.push(0, &wire, Some(1), None);
        assert!(matches!(f.next_record(), Next::Record(r) if r.body == b"x"));
        let Next::NotRecord { offset, head, .. } = f.next_record() else {
            panic!()
        };
        assert_eq!((offset, &head[..4]), (6, &b"GET "[..]));
        let Next::Record(r) = f.next_record() else {
            panic!()
        };
        assert!(r.candidate && r.body == b"abc" && r.offset == 22);
        f.settle(&r, true);
        assert_eq!((f.is_lost(), f.next_record()), (false, Next::Wait));
    }

    #[test]
    fn after_a_gap_a_rejected_candidate_moves_the_scan_on() {
        let mut f = Framer::default();
        f.push(0, &rec(APPLICATION_DATA, b"a"), None, None);
        assert!(matches!(f.next_record(), Next::Record(_)));
        f.gap(106);
        // A header-looking run inside the lost record's tail, then the real next record.
        let mut wire = vec![23, 3, 3, 0, 2, 23];
        wire.extend(rec(APPLICATION_DATA, b"real"));
        f.push(106, &wire, None, None);
        let Next::Record(r) = f.next_record() else {
            panic!()
        };
        assert_eq!((r.offset, r.candidate), (106, true));
        f.settle(&r, false);
        let Next::Record(r) = f.next_record() else {
            panic!()
        };
        assert_eq!((r.offset, r.body.as_slice()), (112, &b"real"[..]));
    }

    #[test]
    fn oversized_lengths_are_not_records() {
        let mut f = Framer::default();
        f.push(0, &[23, 3, 3, 0xff, 0xff, 0], None, None);
        assert!(matches!(f.next_record(), Next::NotRecord { .. }));
        assert_eq!(f.next_record(), Next::Wait);
    }
}
