//! Which software is on each end, from what the bytes betray (reference/courier.md §3,
//! Fingerprints). Evidence: HELO/VERS length and client ID (32 = Go >= 2.6.4, 20 = Ruby >=
//! 2.7.2, 8 = Ruby 2.7.0–2.7.1, 0/1 = Go 2.5.0–2.6.3, none = legacy), the zlib level in each
//! payload's header (78 5e = Go level 3, 78 9c = Ruby default) and Go's stream tail, and nonces:
//! Go's `Intn(255)` never yields 0xFF, and the unseeded Go 2.0–2.6.3 always starts with the same
//! nonce.

use std::collections::BTreeSet;

use crate::model::Value;

use super::handshake::{helo_class, vers_class, Handshake};

/// Go's default seed: the first 16 `Intn(255)` values.
const UNSEEDED_GO_FIRST_NONCE: [u8; 16] = [
    0x56, 0x84, 0x7a, 0xfe, 0x97, 0x99, 0x73, 0x9b, 0x3d, 0x96, 0x77, 0x97, 0x2a, 0x3b, 0x58, 0xef,
];

#[derive(Debug, Default)]
pub struct Fingerprint {
    pub helo: Option<Handshake>,
    pub vers: Option<Handshake>,
    /// The server answered HELO with ????.
    pub server_declined: bool,
    pub zlib_levels: BTreeSet<&'static str>,
    pub go_tail: bool,
    nonces: u64,
    nonce_with_ff: bool,
    unseeded_nonce: bool,
    pub client_messages: u64,
}

impl Fingerprint {
    pub fn see_nonce(&mut self, nonce: &[u8]) {
        if self.nonces == 0 && nonce == UNSEEDED_GO_FIRST_NONCE {
            self.unseeded_nonce = true;
        }
        self.nonces = self.nonces.saturating_add(1);
        self.nonce_with_ff |= nonce.contains(&0xff);
    }

    /// Could nonces repeat across runs (Go 2.0–2.6.3: no HELO or an empty one, no 0xFF)?
    pub fn unseeded_possible(&self) -> bool {
        let legacy = self.helo.as_ref().is_none_or(|h| h.length == 0);
        legacy && !self.nonce_with_ff
    }

    /// (implementation, version class) of the client.
    pub fn client(&self) -> (Option<&'static str>, Option<String>) {
        if let Some(h) = &self.helo {
            let (imp, cls) = match helo_class(h.length) {
                Some((i, c)) => (Some(i), c.to_owned()),
                None => (None, format!("unknown HELO layout ({} bytes)", h.length)),
            };
            let cls = if h.client_id.as_deref() == Some("LCVR") {
                cls.replace("log-courier", "Log Carver")
            } else {
                cls
            };
            return (imp, Some(cls));
        }
        if self.client_messages == 0 {
            return (None, None);
        }
        let fast = self.zlib_levels.contains("fast") || self.go_tail;
        if self.unseeded_nonce || (fast && !self.nonce_with_ff) {
            return (
                Some("go"),
                Some("Go log-courier < 2.5 (no handshake)".to_owned()),
            );
        }
        if self.zlib_levels.contains("default") || self.nonce_with_ff {
            let cls = "Ruby gem <= 1.10 or handshake disabled (no HELO)";
            return (Some("ruby"), Some(cls.to_owned()));
        }
        let cls = "legacy client (no HELO): Go < 2.5 or Ruby gem <= 1.10";
        (None, Some(cls.to_owned()))
    }

    fn server(&self) -> (Option<&'static str>, Option<String>) {
        if let Some(v) = &self.vers {
            return match vers_class(v.length) {
                Some((i, c)) => (Some(i), Some(c.to_owned())),
                None => (
                    None,
                    Some(format!("unknown VERS layout ({} bytes)", v.length)),
                ),
            };
        }
        if self.server_declined {
            let cls = "Ruby server without handshake (disable_handshake or gem <= 1.10)";
            return (Some("ruby"), Some(cls.to_owned()));
        }
        (None, None)
    }

    /// The summary's fingerprint fields, in order.
    pub fn fields(&self, out: &mut Vec<(&'static str, Value)>) {
        let opt = |v: Option<String>| v.map_or(Value::Null, Value::from);
        let (client_impl, client_class) = self.client();
        let (server_impl, server_class) = self.server();
        let helo = self.helo.as_ref();
        let vers = self.vers.as_ref();
        out.extend([
            ("client_impl", client_impl.into()),
            ("client_class", opt(client_class)),
            ("client_version", opt(helo.and_then(|h| h.version.clone()))),
            ("client_id", opt(helo.and_then(|h| h.client_id.clone()))),
            ("helo_length", helo.map(|h| h.length).into()),
            ("server_impl", server_impl.into()),
            ("server_class", opt(server_class)),
            ("server_version", opt(vers.and_then(|h| h.version.clone()))),
            ("server_id", opt(vers.and_then(|h| h.client_id.clone()))),
            ("vers_length", vers.map(|h| h.length).into()),
            ("evnt_negotiated", vers.is_some_and(Handshake::evnt).into()),
            (
                "zlib_levels",
                Value::Array(self.zlib_levels.iter().map(|&l| l.into()).collect()),
            ),
            ("zlib_go_tail", self.go_tail.into()),
            ("nonce_with_ff", self.nonce_with_ff.into()),
            ("unseeded_go_nonce", self.unseeded_nonce.into()),
        ]);
    }
}
