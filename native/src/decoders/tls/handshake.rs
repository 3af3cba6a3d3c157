//! Handshake messages (RFC 5246 §7.4, RFC 8446 §4): reassembled across records per direction, only
//! the few wirelog reads are kept (hellos, EncryptedExtensions, Finished, KeyUpdate), the others
//! skipped without being buffered; the hellos' fields read with every length checked.
//!
//! Hand-written rather than `tls-parser`: wirelog reads a dozen fields from three messages, and
//! that crate would bring nom, phf and its own record layer for it; each read below is bounded.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "a 24-bit handshake length and the 4-byte header"
)]

use crate::model::text::hex;

pub const CLIENT_HELLO: u8 = 1;
pub const SERVER_HELLO: u8 = 2;
pub const ENCRYPTED_EXTENSIONS: u8 = 8;
pub const FINISHED: u8 = 20;
pub const KEY_UPDATE: u8 = 24;

/// The largest handshake message kept (a ClientHello is at most 2^16 + a few bytes).
const MAX_KEPT: usize = 1 << 17;

/// The random a TLS 1.3 server sends in a HelloRetryRequest (RFC 8446 §4.1.3).
const HELLO_RETRY_REQUEST: [u8; 32] = [
    0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
    0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
];

/// Splits one direction's handshake bytes into messages.
#[derive(Debug, Default)]
pub struct Reassembler {
    header: Vec<u8>,
    /// Body bytes still to come of the current message.
    remaining: usize,
    keep: bool,
    body: Vec<u8>,
}

impl Reassembler {
    /// Feed handshake-record plaintext; complete kept messages go to `out` as (type, body).
    pub fn feed(&mut self, mut data: &[u8], out: &mut Vec<(u8, Vec<u8>)>) {
        while !data.is_empty() {
            if self.header.len() < 4 {
                let n = (4 - self.header.len()).min(data.len());
                self.header.extend_from_slice(&data[..n]);
                data = &data[n..];
                if self.header.len() < 4 {
                    return;
                }
                let h = &self.header;
                self.remaining =
                    usize::from(h[1]) << 16 | usize::from(h[2]) << 8 | usize::from(h[3]);
                self.keep = matches!(
                    h[0],
                    CLIENT_HELLO | SERVER_HELLO | ENCRYPTED_EXTENSIONS | FINISHED | KEY_UPDATE
                ) && self.remaining <= MAX_KEPT;
                self.body.clear();
            }
            let n = self.remaining.min(data.len());
            if self.keep {
                self.body.extend_from_slice(&data[..n]);
            }
            data = &data[n..];
            self.remaining -= n;
            if self.remaining == 0 {
                if self.keep {
                    out.push((self.header[0], std::mem::take(&mut self.body)));
                }
                self.header.clear();
            }
        }
    }

    /// Bytes were lost: a message in progress is dropped.
    pub fn reset(&mut self) {
        *self = Reassembler::default();
    }
}

/// What a ClientHello or ServerHello says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hello {
    pub legacy_version: u16,
    pub random: [u8; 32],
    pub session_id: Vec<u8>,
    /// ServerHello: the suite chosen.
    pub cipher_suite: Option<u16>,
    /// supported_versions: offered (ClientHello) or the one selected (ServerHello).
    pub versions: Vec<u16>,
    pub sni: Option<String>,
    pub alpn: Vec<String>,
    pub extended_master_secret: bool,
    pub encrypt_then_mac: bool,
    pub session_ticket: bool,
    /// A ServerHello that is a TLS 1.3 HelloRetryRequest.
    pub retry: bool,
    /// The message ended before its declared fields did.
    pub truncated: bool,
}

/// A bounds-checked reader over a message body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector with a 1- or 2-byte length prefix.
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

impl Hello {
    /// A ClientHello (`client`) or ServerHello body, read as far as it goes.
    pub fn parse(body: &[u8], client: bool) -> Hello {
        let mut h = Hello::default();
        h.truncated = h.read(&mut Reader(body), client).is_none();
        h
    }

    fn read(&mut self, r: &mut Reader<'_>, client: bool) -> Option<()> {
        self.legacy_version = r.u16()?;
        self.random = r.take(32)?.try_into().ok()?;
        self.retry = !client && self.random == HELLO_RETRY_REQUEST;
        self.session_id = r.vec8()?.to_vec();
        if client {
            r.vec16()?; // cipher suites
            r.vec8()?; // compression methods
        } else {
            self.cipher_suite = Some(r.u16()?);
            r.u8()?; // compression method
        }
        if r.0.is_empty() {
            return Some(()); // no extensions
        }
        let mut exts = Reader(r.vec16()?);
        while !exts.0.is_empty() {
            let kind = exts.u16()?;
            let data = exts.vec16()?;
            self.extension(kind, data, client)?;
        }
        Some(())
    }

    /// Read the extensions this module knows; the rest are skipped.
    pub fn extension(&mut self, kind: u16, data: &[u8], client: bool) -> Option<()> {
        let mut r = Reader(data);
        match kind {
            0 if client => {
                let mut names = Reader(r.vec16()?);
                while !names.0.is_empty() {
                    let name_type = names.u8()?;
                    let name = names.vec16()?;
                    if name_type == 0 {
                        self.sni = Some(String::from_utf8_lossy(name).into_owned());
                    }
                }
            }
            16 => {
                let mut names = Reader(r.vec16()?);
                while !names.0.is_empty() {
                    self.alpn
                        .push(String::from_utf8_lossy(names.vec8()?).into_owned());
                }
            }
            22 => self.encrypt_then_mac = true,
            23 => self.extended_master_secret = true,
            35 => self.session_ticket = true,
            43 if client => {
                let mut v = Reader(r.vec8()?);
                while !v.0.is_empty() {
                    self.versions.push(v.u16()?);
                }
            }
            43 => self.versions = vec![r.u16()?],
            _ => {}
        }
        Some(())
    }

    /// The version this hello settles: supported_versions' choice, else the legacy field.
    pub fn version(&self) -> u16 {
        match self.versions.as_slice() {
            [v] => *v,
            _ => self.legacy_version,
        }
    }

    pub fn session_id_hex(&self) -> String {
        hex(&self.session_id)
    }
}

/// The ALPN protocol an EncryptedExtensions message (TLS 1.3) selects.
pub fn encrypted_extensions_alpn(body: &[u8]) -> Option<String> {
    let mut r = Reader(body);
    let mut exts = Reader(r.vec16()?);
    let mut h = Hello::default();
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let data = exts.vec16()?;
        h.extension(kind, data, false)?;
    }
    h.alpn.into_iter().next()
}

/// A version number as people write it.
pub fn version_name(v: u16) -> Option<&'static str> {
    Some(match v {
        0x0300 => "SSL 3.0",
        0x0301 => "TLS 1.0",
        0x0302 => "TLS 1.1",
        0x0303 => "TLS 1.2",
        0x0304 => "TLS 1.3",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::text::unhex;

    /// RFC 8448 §3's ClientHello (handshake header removed): SNI "server", TLS 1.3 offered.
    const CLIENT_HELLO_8448: &str = "03 03 cb 34 ec b1 e7 81 63 ba 1c 38 c6 da cb 19 6a 6d ff a2 1a 8d 99 12
        ec 18 a2 ef 62 83 02 4d ec e7 00 00 06 13 01 13 03 13 02 01 00 00 91 00 00 00 0b 00 09 00 00 06
        73 65 72 76 65 72 ff 01 00 01 00 00 0a 00 14 00 12 00 1d 00 17 00 18 00 19 01 00 01 01 01 02 01
        03 01 04 00 23 00 00 00 33 00 26 00 24 00 1d 00 20 99 38 1d e5 60 e4 bd 43 d2 3d 8e 43 5a 7d ba
        fe b3 c0 6e 51 c1 3c ae 4d 54 13 69 1e 52 9a af 2c 00 2b 00 03 02 03 04 00 0d 00 20 00 1e 04 03
        05 03 06 03 02 03 08 04 08 05 08 06 04 01 05 01 06 01 02 01 04 02 05 02 06 02 02 02 00 2d 00 02
        01 01 00 1c 00 02 40 01";

    #[test]
    fn rfc8448_client_hello() {
        let h = Hello::parse(&unhex(CLIENT_HELLO_8448), true);
        assert!(!h.truncated);
        assert_eq!(h.sni.as_deref(), Some("server"));
        assert_eq!(h.versions, [0x0304]);
        assert_eq!(h.random[..4], [0xcb, 0x34, 0xec, 0xb1]);
        assert!(h.session_ticket && h.session_id.is_empty());
        // Every cut is read as far as it goes, never past; a hello may end before its
        // extensions (byte 45 here).
        let body = unhex(CLIENT_HELLO_8448);
        for cut in 0..body.len() {
            assert_eq!(
                Hello::parse(&body[..cut], true).truncated,
                cut != 45,
                "{cut}"
            );
        }
    }

    #[test]
    fn server_hello_with_alpn_ems_etm_and_retry() {
        let mut body = vec![3, 3];
        body.extend_from_slice(&HELLO_RETRY_REQUEST);
        body.extend_from_slice(&[1, 0xaa, 0xc0, 0x2f, 0]);
        let exts: &[u8] = &[
            0, 16, 0, 5, 0, 3, 2, b'h', b'2', 0, 23, 0, 0, 0, 22, 0, 0, 0, 43, 0, 2, 3, 4,
        ];
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(exts);
        let h = Hello::parse(&body, false);
        assert_eq!(
            (
                h.retry,
                h.cipher_suite,
                h.version(),
                h.alpn.clone(),
                h.session_id_hex()
            ),
            (
                true,
                Some(0xc02f),
                0x0304,
                vec!["h2".to_owned()],
                "aa".to_owned()
            )
        );
        assert!(h.extended_master_secret && h.encrypt_then_mac && !h.truncated);
    }

    #[test]
    fn messages_span_records_and_unkept_ones_are_skipped() {
        let mut wire = vec![11, 0, 0, 3, 1, 2, 3]; // Certificate: skipped
        wire.extend_from_slice(&[20, 0, 0, 2, 7, 8]);
        wire.extend_from_slice(&[KEY_UPDATE, 0, 0, 1, 0]);
        let mut r = Reassembler::default();
        let mut out = Vec::new();
        for b in &wire {
            r.feed(&[*b], &mut out);
        }
        assert_eq!(out, [(FINISHED, vec![7, 8]), (KEY_UPDATE, vec![0])]);
        // A huge declared length is skipped as it streams, never buffered.
        let mut out = Vec::new();
        r.feed(&[CLIENT_HELLO, 0xff, 0xff, 0xff, 1, 2, 3], &mut out);
        assert!(out.is_empty() && r.body.is_empty());
    }
}
