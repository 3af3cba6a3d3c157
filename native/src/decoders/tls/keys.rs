//! From a key log's secrets to record keys: the TLS 1.2 PRF key block (RFC 5246 §5, §6.3) and the
//! TLS 1.3 traffic keys, IVs and key updates (RFC 8446 §7.1-§7.3, HKDF-Expand-Label).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "key, IV and MAC sizes of a cipher suite"
)]

use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::{Sha256, Sha384};

/// The hashes TLS 1.2 and 1.3 suites use for their MAC, PRF or HKDF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    Sha1,
    Sha256,
    Sha384,
}

impl Hash {
    pub fn size(self) -> usize {
        match self {
            Hash::Sha1 => 20,
            Hash::Sha256 => 32,
            Hash::Sha384 => 48,
        }
    }
}

/// HMAC of the concatenation of `parts`.
pub fn hmac(hash: Hash, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        let mut m = <M as hmac::digest::KeyInit>::new_from_slice(key)
            .expect("HMAC takes keys of any length");
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().to_vec()
    }
    match hash {
        Hash::Sha1 => run::<Hmac<Sha1>>(key, parts),
        Hash::Sha256 => run::<Hmac<Sha256>>(key, parts),
        Hash::Sha384 => run::<Hmac<Sha384>>(key, parts),
    }
}

/// The TLS 1.2 PRF: P_hash(secret, label + seed) cut to `len` bytes (RFC 5246 §5).
pub fn prf12(hash: Hash, secret: &[u8], label: &[u8], seed: &[&[u8]], len: usize) -> Vec<u8> {
    let mut label_seed = label.to_vec();
    for s in seed {
        label_seed.extend_from_slice(s);
    }
    let mut out = Vec::with_capacity(len + hash.size());
    let mut a = hmac(hash, secret, &[&label_seed]);
    while out.len() < len {
        out.extend(hmac(hash, secret, &[&a, &label_seed]));
        a = hmac(hash, secret, &[&a]);
    }
    out.truncate(len);
    out
}

/// The keys of one direction of a TLS 1.2 connection.
#[derive(Clone, Debug, PartialEq)]
pub struct Keys12 {
    pub mac: Vec<u8>,
    pub key: Vec<u8>,
    /// The implicit part of the nonce (GCM's 4-byte salt, ChaCha20's 12 bytes); empty for CBC.
    pub iv: Vec<u8>,
}

/// The key block of a TLS 1.2 connection cut into (client, server) keys (RFC 5246 §6.3):
/// client MAC, server MAC, client key, server key, client IV, server IV.
pub fn key_block12(
    prf: Hash,
    master: &[u8],
    client_random: &[u8; 32],
    server_random: &[u8; 32],
    (mac_len, key_len, iv_len): (usize, usize, usize),
) -> (Keys12, Keys12) {
    let block = prf12(
        prf,
        master,
        b"key expansion",
        &[server_random, client_random],
        2 * (mac_len + key_len + iv_len),
    );
    let mut rest = &block[..];
    let mut take = |n: usize| {
        let (head, tail) = rest.split_at(n);
        rest = tail;
        head.to_vec()
    };
    let (cmac, smac) = (take(mac_len), take(mac_len));
    let (ckey, skey) = (take(key_len), take(key_len));
    let (civ, siv) = (take(iv_len), take(iv_len));
    (
        Keys12 {
            mac: cmac,
            key: ckey,
            iv: civ,
        },
        Keys12 {
            mac: smac,
            key: skey,
            iv: siv,
        },
    )
}

/// HKDF-Expand-Label(secret, label, context, len) of RFC 8446 §7.1.
pub fn expand_label(hash: Hash, secret: &[u8], label: &str, context: &[u8], len: usize) -> Vec<u8> {
    let full = [b"tls13 ", label.as_bytes()].concat();
    let mut info = Vec::with_capacity(4 + full.len() + context.len());
    info.extend_from_slice(&(len as u16).to_be_bytes());
    info.push(full.len() as u8);
    info.extend_from_slice(&full);
    info.push(context.len() as u8);
    info.extend_from_slice(context);
    let mut out = vec![0; len];
    let ok = match hash {
        Hash::Sha256 => Hkdf::<Sha256>::from_prk(secret).map(|h| h.expand(&info, &mut out)),
        Hash::Sha384 => Hkdf::<Sha384>::from_prk(secret).map(|h| h.expand(&info, &mut out)),
        Hash::Sha1 => unreachable!("TLS 1.3 suites hash with SHA-256 or SHA-384"),
    };
    debug_assert!(matches!(ok, Ok(Ok(()))), "key log secrets are hash-sized");
    out
}

/// A TLS 1.3 traffic secret's record key and IV (RFC 8446 §7.3).
pub fn traffic13(hash: Hash, secret: &[u8], key_len: usize) -> (Vec<u8>, Vec<u8>) {
    (
        expand_label(hash, secret, "key", b"", key_len),
        expand_label(hash, secret, "iv", b"", 12),
    )
}

/// The traffic secret after a KeyUpdate (RFC 8446 §7.2).
pub fn next_secret13(hash: Hash, secret: &[u8]) -> Vec<u8> {
    expand_label(hash, secret, "traffic upd", b"", hash.size())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::text::unhex;

    /// RFC 8448 §3 (simple 1-RTT handshake): the server's handshake traffic secret and the
    /// client's application traffic secret give the key and IV the trace lists.
    #[test]
    fn rfc8448_traffic_keys() {
        let shts = unhex("b6 7b 7d 69 0c c1 6c 4e 75 e5 42 13 cb 2d 37 b4 e9 c9 12 bc de d9 10 5d 42 be fd 59 d3 91 ad 38");
        let (key, iv) = traffic13(Hash::Sha256, &shts, 16);
        assert_eq!(
            key,
            unhex("3f ce 51 60 09 c2 17 27 d0 f2 e4 e8 6e e4 03 bc")
        );
        assert_eq!(iv, unhex("5d 31 3e b2 67 12 76 ee 13 00 0b 30"));
        let cats = unhex("9e 40 64 6c e7 9a 7f 9d c0 5a f8 88 9b ce 65 52 87 5a fa 0b 06 df 00 87 f7 92 eb b7 c1 75 04 a5");
        let (key, iv) = traffic13(Hash::Sha256, &cats, 16);
        assert_eq!(
            key,
            unhex("17 42 2d da 59 6e d5 d9 ac d8 90 e3 c6 3f 50 51")
        );
        assert_eq!(iv, unhex("5b 78 92 3d ee 08 57 90 33 e5 23 d9"));
    }

    /// RFC 5246's PRF as published test vectors give it (TLS 1.2 PRF with SHA-256, the IETF
    /// TLS WG's vector also used by Go's and NSS's tests).
    #[test]
    fn prf_sha256_vector() {
        let secret = unhex("9b be 43 6b a9 40 f0 17 b1 76 52 84 9a 71 db 35");
        let seed = unhex("a0 ba 9f 93 6c da 31 18 27 a6 f7 96 ff d5 19 8c");
        let out = prf12(Hash::Sha256, &secret, b"test label", &[&seed], 100);
        assert_eq!(
            out,
            unhex(
                "e3 f2 29 ba 72 7b e1 7b 8d 12 26 20 55 7c d4 53 c2 aa b2 1d 07 c3 d4 95 32 9b 52 d4 e6 1e db 5a
                 6b 30 17 91 e9 0d 35 c9 c9 a4 6b 4e 14 ba f9 af 0f a0 22 f7 07 7d ef 17 ab fd 37 97 c0 56 4b ab
                 4f bc 91 66 6e 9d ef 9b 97 fc e3 4f 79 67 89 ba a4 80 82 d1 22 ee 42 c5 a7 2e 5a 51 10 ff f7 01
                 87 34 7b 66"
            )
        );
    }

    #[test]
    fn key_update_is_a_new_secret_of_the_hash_length() {
        let s = vec![7u8; 48];
        let next = next_secret13(Hash::Sha384, &s);
        assert_eq!(next.len(), 48);
        assert_ne!(next, s);
        assert_eq!(next, expand_label(Hash::Sha384, &s, "traffic upd", b"", 48));
    }
}
