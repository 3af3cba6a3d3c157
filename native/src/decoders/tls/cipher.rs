//! Record protection: the cipher suites wirelog decrypts and how each opens a record.
//!
//! TLS 1.2 AEAD (RFC 5288 AES-GCM: 4-byte salt + 8-byte explicit nonce; RFC 7905 ChaCha20-Poly1305:
//! IV XOR sequence number; additional data = seq, type, version, plaintext length), TLS 1.2 AES-CBC
//! with HMAC (RFC 5246 §6.2.3.2, MAC-then-encrypt, or RFC 7366 encrypt-then-MAC), and TLS 1.3
//! (RFC 8446 §5.2-§5.3: IV XOR sequence number, the record header as additional data, the real
//! content type last in the plaintext, zero padding after it).

use aes::{Aes128, Aes256};
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use cbc::cipher::{block_padding::NoPadding, BlockDecryptMut, KeyIvInit};
use chacha20poly1305::ChaCha20Poly1305;

use super::keys::{hmac, Hash};

/// The bulk cipher of a suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bulk {
    Aes128Gcm,
    Aes256Gcm,
    ChaCha20Poly1305,
    /// AES-CBC with an HMAC of this hash.
    Aes128Cbc(Hash),
    Aes256Cbc(Hash),
}

impl Bulk {
    pub fn key_len(self) -> usize {
        match self {
            Bulk::Aes128Gcm | Bulk::Aes128Cbc(_) => 16,
            _ => 32,
        }
    }

    /// TLS 1.2 key block lengths: (MAC key, key, implicit IV).
    pub fn block12(self) -> (usize, usize, usize) {
        match self {
            Bulk::Aes128Gcm | Bulk::Aes256Gcm => (0, self.key_len(), 4),
            Bulk::ChaCha20Poly1305 => (0, 32, 12),
            Bulk::Aes128Cbc(h) | Bulk::Aes256Cbc(h) => (h.size(), self.key_len(), 0),
        }
    }
}

/// A cipher suite wirelog can decrypt: its IANA number and name, bulk cipher, and the hash of its
/// PRF (TLS 1.2) or HKDF (TLS 1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Suite {
    pub code: u16,
    pub name: &'static str,
    pub bulk: Bulk,
    pub hash: Hash,
    pub tls13: bool,
}

const fn s12(code: u16, name: &'static str, bulk: Bulk, hash: Hash) -> Suite {
    Suite {
        code,
        name,
        bulk,
        hash,
        tls13: false,
    }
}

use Bulk::*;
use Hash::*;

/// Every suite decrypted. The TLS 1.2 CBC suites whose MAC is SHA-1 use the SHA-256 PRF
/// (RFC 5246 §5); the *_SHA384 suites use SHA-384 for both.
pub const SUITES: &[Suite] = &[
    Suite {
        code: 0x1301,
        name: "TLS_AES_128_GCM_SHA256",
        bulk: Aes128Gcm,
        hash: Sha256,
        tls13: true,
    },
    Suite {
        code: 0x1302,
        name: "TLS_AES_256_GCM_SHA384",
        bulk: Aes256Gcm,
        hash: Sha384,
        tls13: true,
    },
    Suite {
        code: 0x1303,
        name: "TLS_CHACHA20_POLY1305_SHA256",
        bulk: ChaCha20Poly1305,
        hash: Sha256,
        tls13: true,
    },
    s12(0x009C, "TLS_RSA_WITH_AES_128_GCM_SHA256", Aes128Gcm, Sha256),
    s12(0x009D, "TLS_RSA_WITH_AES_256_GCM_SHA384", Aes256Gcm, Sha384),
    s12(
        0x009E,
        "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256",
        Aes128Gcm,
        Sha256,
    ),
    s12(
        0x009F,
        "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
        Aes256Gcm,
        Sha384,
    ),
    s12(
        0xC02B,
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        Aes128Gcm,
        Sha256,
    ),
    s12(
        0xC02C,
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        Aes256Gcm,
        Sha384,
    ),
    s12(
        0xC02F,
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        Aes128Gcm,
        Sha256,
    ),
    s12(
        0xC030,
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        Aes256Gcm,
        Sha384,
    ),
    s12(
        0xCCA8,
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ChaCha20Poly1305,
        Sha256,
    ),
    s12(
        0xCCA9,
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        ChaCha20Poly1305,
        Sha256,
    ),
    s12(
        0xCCAA,
        "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ChaCha20Poly1305,
        Sha256,
    ),
    s12(
        0x002F,
        "TLS_RSA_WITH_AES_128_CBC_SHA",
        Aes128Cbc(Sha1),
        Sha256,
    ),
    s12(
        0x0035,
        "TLS_RSA_WITH_AES_256_CBC_SHA",
        Aes256Cbc(Sha1),
        Sha256,
    ),
    s12(
        0x003C,
        "TLS_RSA_WITH_AES_128_CBC_SHA256",
        Aes128Cbc(Sha256),
        Sha256,
    ),
    s12(
        0x003D,
        "TLS_RSA_WITH_AES_256_CBC_SHA256",
        Aes256Cbc(Sha256),
        Sha256,
    ),
    s12(
        0x0033,
        "TLS_DHE_RSA_WITH_AES_128_CBC_SHA",
        Aes128Cbc(Sha1),
        Sha256,
    ),
    s12(
        0x0039,
        "TLS_DHE_RSA_WITH_AES_256_CBC_SHA",
        Aes256Cbc(Sha1),
        Sha256,
    ),
    s12(
        0x0067,
        "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256",
        Aes128Cbc(Sha256),
        Sha256,
    ),
    s12(
        0x006B,
        "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256",
        Aes256Cbc(Sha256),
        Sha256,
    ),
    s12(
        0xC009,
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        Aes128Cbc(Sha1),
        Sha256,
    ),
    s12(
        0xC00A,
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        Aes256Cbc(Sha1),
        Sha256,
    ),
    s12(
        0xC013,
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        Aes128Cbc(Sha1),
        Sha256,
    ),
    s12(
        0xC014,
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        Aes256Cbc(Sha1),
        Sha256,
    ),
    s12(
        0xC023,
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        Aes128Cbc(Sha256),
        Sha256,
    ),
    s12(
        0xC024,
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
        Aes256Cbc(Sha384),
        Sha384,
    ),
    s12(
        0xC027,
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        Aes128Cbc(Sha256),
        Sha256,
    ),
    s12(
        0xC028,
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
        Aes256Cbc(Sha384),
        Sha384,
    ),
];

pub fn suite(code: u16) -> Option<&'static Suite> {
    SUITES.iter().find(|s| s.code == code)
}

enum Engine {
    Aes128Gcm(Box<Aes128Gcm>),
    Aes256Gcm(Box<Aes256Gcm>),
    ChaCha(Box<ChaCha20Poly1305>),
    Cbc {
        key: Vec<u8>,
        mac: Hash,
        mac_key: Vec<u8>,
        etm: bool,
    },
}

/// The protection of one direction: open records with `open`.
pub struct RecordCipher {
    engine: Engine,
    /// TLS 1.2 GCM's salt, or the 12-byte IV XORed with the sequence number (ChaCha20, TLS 1.3).
    iv: Vec<u8>,
    tls13: bool,
}

impl std::fmt::Debug for RecordCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordCipher")
            .field("tls13", &self.tls13)
            .finish_non_exhaustive()
    }
}

const TAG: usize = 16;

impl RecordCipher {
    /// `mac_key` is empty for AEAD suites; `etm` is the encrypt_then_mac extension (CBC only).
    pub fn new(suite: &Suite, key: &[u8], iv: &[u8], mac_key: &[u8], etm: bool) -> Self {
        let engine = match suite.bulk {
            Aes128Gcm => Engine::Aes128Gcm(Box::new(
                Aes128Gcm::new_from_slice(key).expect("16-byte key"),
            )),
            Aes256Gcm => Engine::Aes256Gcm(Box::new(
                Aes256Gcm::new_from_slice(key).expect("32-byte key"),
            )),
            ChaCha20Poly1305 => Engine::ChaCha(Box::new(
                ChaCha20Poly1305::new_from_slice(key).expect("32-byte key"),
            )),
            Aes128Cbc(mac) | Aes256Cbc(mac) => Engine::Cbc {
                key: key.to_vec(),
                mac,
                mac_key: mac_key.to_vec(),
                etm,
            },
        };
        RecordCipher {
            engine,
            iv: iv.to_vec(),
            tls13: suite.tls13,
        }
    }

    /// The plaintext of record number `seq` (`header`: its 5-byte header, `body`: what follows) and
    /// its content type (TLS 1.3: the inner one); None when it does not authenticate.
    pub fn open(&self, seq: u64, header: &[u8; 5], body: &[u8]) -> Option<(u8, Vec<u8>)> {
        match &self.engine {
            Engine::Cbc {
                key,
                mac,
                mac_key,
                etm,
            } => cbc_open(key, *mac, mac_key, *etm, seq, header, body).map(|p| (header[0], p)),
            _ if self.tls13 => {
                let mut plain = self.aead(&self.xor_nonce(seq), header, body)?;
                let end = plain.iter().rposition(|&b| b != 0)?;
                let ctype = plain[end];
                plain.truncate(end);
                Some((ctype, plain))
            }
            Engine::ChaCha(_) => {
                let len = body.len().checked_sub(TAG)?;
                let aad = aad12(seq, header, len);
                self.aead(&self.xor_nonce(seq), &aad, body)
                    .map(|p| (header[0], p))
            }
            _ => {
                // GCM: salt || explicit nonce (the record's first 8 bytes).
                let explicit = body.get(..8)?;
                let len = body.len().checked_sub(8 + TAG)?;
                let nonce: Vec<u8> = self.iv.iter().chain(explicit).copied().collect();
                let aad = aad12(seq, header, len);
                self.aead(&nonce, &aad, &body[8..]).map(|p| (header[0], p))
            }
        }
    }

    /// The per-record nonce of ChaCha20 and TLS 1.3: the IV XOR the padded sequence number.
    fn xor_nonce(&self, seq: u64) -> Vec<u8> {
        let mut nonce = self.iv.clone();
        for (n, s) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
            *n ^= s;
        }
        nonce
    }

    fn aead(&self, nonce: &[u8], aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        let len = sealed.len().checked_sub(TAG)?;
        let (text, tag) = sealed.split_at(len);
        let mut buf = text.to_vec();
        let ok = match &self.engine {
            Engine::Aes128Gcm(c) => {
                c.decrypt_in_place_detached(nonce.into(), aad, &mut buf, tag.into())
            }
            Engine::Aes256Gcm(c) => {
                c.decrypt_in_place_detached(nonce.into(), aad, &mut buf, tag.into())
            }
            Engine::ChaCha(c) => {
                c.decrypt_in_place_detached(nonce.into(), aad, &mut buf, tag.into())
            }
            Engine::Cbc { .. } => return None,
        };
        ok.is_ok().then_some(buf)
    }
}

/// TLS 1.2's additional data: seq_num + type + version + length.
fn aad12(seq: u64, header: &[u8; 5], len: usize) -> [u8; 13] {
    let mut aad = [0; 13];
    aad[..8].copy_from_slice(&seq.to_be_bytes());
    aad[8..11].copy_from_slice(&header[..3]);
    aad[11..].copy_from_slice(&(len as u16).to_be_bytes());
    aad
}

/// AES-CBC with HMAC: explicit IV, then the ciphertext; the MAC inside the padding
/// (MAC-then-encrypt) or after the ciphertext (encrypt-then-MAC, RFC 7366).
fn cbc_open(
    key: &[u8],
    mac: Hash,
    mac_key: &[u8],
    etm: bool,
    seq: u64,
    header: &[u8; 5],
    body: &[u8],
) -> Option<Vec<u8>> {
    let mac_len = mac.size();
    let (sealed, tag) = if etm {
        body.split_at(body.len().checked_sub(mac_len)?)
    } else {
        (body, &[][..])
    };
    if etm {
        let aad = aad12(seq, header, sealed.len());
        if !same(&hmac(mac, mac_key, &[&aad, sealed]), tag) {
            return None;
        }
    }
    if sealed.len() < 32 || sealed.len() % 16 != 0 {
        return None;
    }
    let (iv, text) = sealed.split_at(16);
    let mut buf = text.to_vec();
    let decrypted = match key.len() {
        16 => cbc::Decryptor::<Aes128>::new_from_slices(key, iv)
            .ok()?
            .decrypt_padded_mut::<NoPadding>(&mut buf)
            .is_ok(),
        _ => cbc::Decryptor::<Aes256>::new_from_slices(key, iv)
            .ok()?
            .decrypt_padded_mut::<NoPadding>(&mut buf)
            .is_ok(),
    };
    if !decrypted {
        return None;
    }
    // padding: `pad` bytes of value `pad`, then the length byte `pad`.
    let pad = usize::from(*buf.last()?);
    let unpadded = buf.len().checked_sub(pad + 1)?;
    if buf[unpadded..].iter().any(|&b| usize::from(b) != pad) {
        return None;
    }
    buf.truncate(unpadded);
    if !etm {
        let len = buf.len().checked_sub(mac_len)?;
        let aad = aad12(seq, header, len);
        if !same(&hmac(mac, mac_key, &[&aad, &buf[..len]]), &buf[len..]) {
            return None;
        }
        buf.truncate(len);
    }
    Some(buf)
}

/// Equal MACs, compared in constant time.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoders::tls::keys::traffic13;
    use crate::model::text::unhex;

    /// RFC 8448 §3: the client's first application data record, from its traffic secret.
    #[test]
    fn rfc8448_client_application_data() {
        let secret = unhex(
            "9e 40 64 6c e7 9a 7f 9d c0 5a f8 88 9b ce 65 52 87 5a fa 0b 06 df 00 87 f7 92 eb b7 c1 75 04 a5",
        );
        let suite = suite(0x1301).unwrap();
        let (key, iv) = traffic13(suite.hash, &secret, suite.bulk.key_len());
        assert_eq!(
            key,
            unhex("17 42 2d da 59 6e d5 d9 ac d8 90 e3 c6 3f 50 51")
        );
        assert_eq!(iv, unhex("5b 78 92 3d ee 08 57 90 33 e5 23 d9"));
        let record = unhex(
            "17 03 03 00 43 a2 3f 70 54 b6 2c 94 d0 af fa fe 82 28 ba 55 cb ef ac ea 42 f9 14 aa 66
             bc ab 3f 2b 98 19 a8 a5 b4 6b 39 5b d5 4a 9a 20 44 1e 2b 62 97 4e 1f 5a 62 92 a2 97 70
             14 bd 1e 3d ea e6 3a ee bb 21 69 49 15 e4",
        );
        let cipher = RecordCipher::new(suite, &key, &iv, &[], false);
        let header: [u8; 5] = record[..5].try_into().unwrap();
        let (ctype, plain) = cipher.open(0, &header, &record[5..]).unwrap();
        assert_eq!((ctype, plain), (23, (0u8..50).collect::<Vec<u8>>()));
        // Another sequence number, or one flipped bit, does not authenticate.
        assert_eq!(cipher.open(1, &header, &record[5..]), None);
        let mut bad = record[5..].to_vec();
        bad[10] ^= 1;
        assert_eq!(cipher.open(0, &header, &bad), None);
    }

    #[test]
    fn short_or_misaligned_records_are_refused() {
        for code in [0x1301, 0xC02F, 0xCCA8, 0xC013, 0xC027] {
            let s = suite(code).unwrap();
            let (mac, key, iv) = s.bulk.block12();
            let c = RecordCipher::new(
                s,
                &vec![1; key],
                &vec![2; iv.max(12 * usize::from(s.tls13))],
                &vec![3; mac],
                false,
            );
            for len in [0, 1, 8, 16, 23, 31, 33] {
                assert_eq!(
                    c.open(0, &[23, 3, 3, 0, len as u8], &vec![0; len]),
                    None,
                    "{code:x} {len}"
                );
            }
        }
    }
}
