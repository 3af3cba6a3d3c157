//! NSS key log files (SSLKEYLOGFILE): what browsers, OpenSSL, Go's `KeyLogWriter`, Python's
//! `keylog_filename`, Node's `keylog` event and Wireshark all write, one secret per line:
//! `LABEL <client random, 64 hex digits> <secret, hex>`. Lines are keyed by the ClientHello's
//! random, so one file serves every connection of a capture.
#![allow(clippy::arithmetic_side_effects, reason = "line numbers of a key log")]

use std::collections::HashMap;

use crate::model::text::unhex;
use crate::model::{Finding, Severity};

/// The secrets a key log gives for one connection (one client random).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Secrets {
    /// TLS 1.2 and earlier: the 48-byte master secret (`CLIENT_RANDOM`).
    pub master: Option<Vec<u8>>,
    /// TLS 1.3: `CLIENT_HANDSHAKE_TRAFFIC_SECRET`, `SERVER_HANDSHAKE_TRAFFIC_SECRET`.
    pub client_handshake: Option<Vec<u8>>,
    pub server_handshake: Option<Vec<u8>>,
    /// TLS 1.3: `CLIENT_TRAFFIC_SECRET_0`, `SERVER_TRAFFIC_SECRET_0`.
    pub client_traffic: Option<Vec<u8>>,
    pub server_traffic: Option<Vec<u8>>,
}

/// Every secret of the key logs given to one run, by client random.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyLog {
    by_random: HashMap<[u8; 32], Secrets>,
}

/// Where a label's secret goes.
type Slot = fn(&mut Secrets) -> &mut Option<Vec<u8>>;

/// Labels that are valid but carry nothing wirelog decrypts (0-RTT data, exporters).
const IGNORED: &[&str] = &[
    "CLIENT_EARLY_TRAFFIC_SECRET",
    "EARLY_EXPORTER_SECRET",
    "EXPORTER_SECRET",
    "RSA",
];

impl KeyLog {
    /// Add the lines of one key log (`source` names it in findings); a line that cannot be read is
    /// a warning naming its line number, and the rest of the file is still used.
    pub fn add(&mut self, source: &str, text: &str, findings: &mut Vec<Finding>) {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Err(why) = self.add_line(line) {
                findings.push(
                    Finding::new(
                        "tls.bad-keylog-line",
                        Severity::Warning,
                        format!("{source} line {}: {why}; line ignored", i + 1),
                    )
                    .field("line", (i + 1) as u64),
                );
            }
        }
    }

    fn add_line(&mut self, line: &str) -> Result<(), String> {
        let mut words = line.split_ascii_whitespace();
        let (Some(label), Some(random), Some(secret), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err("not `LABEL <client random> <secret>`".into());
        };
        if IGNORED.contains(&label) {
            return Ok(());
        }
        let random: [u8; 32] = hex(random)
            .and_then(|r| r.try_into().ok())
            .ok_or("the client random is not 64 hex digits")?;
        let secret = hex(secret).ok_or("the secret is not hex")?;
        let (slot, lengths): (Slot, &[usize]) = match label {
            "CLIENT_RANDOM" => (|s| &mut s.master, &[48]),
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET" => (|s| &mut s.client_handshake, &[32, 48]),
            "SERVER_HANDSHAKE_TRAFFIC_SECRET" => (|s| &mut s.server_handshake, &[32, 48]),
            "CLIENT_TRAFFIC_SECRET_0" => (|s| &mut s.client_traffic, &[32, 48]),
            "SERVER_TRAFFIC_SECRET_0" => (|s| &mut s.server_traffic, &[32, 48]),
            _ => return Err(format!("unknown label {label:?}")),
        };
        if !lengths.contains(&secret.len()) {
            return Err(format!("a {label} secret of {} bytes", secret.len()));
        }
        *slot(self.by_random.entry(random).or_default()) = Some(secret);
        Ok(())
    }

    pub fn get(&self, client_random: &[u8; 32]) -> Option<&Secrets> {
        self.by_random.get(client_random)
    }

    pub fn is_empty(&self) -> bool {
        self.by_random.is_empty()
    }
}

/// Even-length hex digits as bytes (None otherwise).
fn hex(s: &str) -> Option<Vec<u8>> {
    (s.len() % 2 == 0 && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| unhex(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_label_and_names_bad_lines() {
        let r = "ab".repeat(32);
        let text = format!(
            "# comment\n\nCLIENT_RANDOM {r} {}\nCLIENT_TRAFFIC_SECRET_0 {r} {}\n\
             EXPORTER_SECRET {r} {}\nCLIENT_RANDOM {r}\nCLIENT_RANDOM zz {}\nSERVER_TRAFFIC_SECRET_0 {r} 0102\n\
             NEW_LABEL {r} 00\n",
            "11".repeat(48),
            "22".repeat(32),
            "33".repeat(32),
            "44".repeat(48),
        );
        let mut log = KeyLog::default();
        let mut findings = Vec::new();
        log.add("keys.txt", &text, &mut findings);
        let s = log.get(&[0xab; 32]).unwrap();
        assert_eq!(s.master.as_deref(), Some(&[0x11; 48][..]));
        assert_eq!(s.client_traffic.as_deref(), Some(&[0x22; 32][..]));
        assert_eq!(s.server_traffic, None);
        let lines: Vec<_> = findings.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            lines,
            [
                "keys.txt line 6: not `LABEL <client random> <secret>`; line ignored",
                "keys.txt line 7: the client random is not 64 hex digits; line ignored",
                "keys.txt line 8: a SERVER_TRAFFIC_SECRET_0 secret of 2 bytes; line ignored",
                "keys.txt line 9: unknown label \"NEW_LABEL\"; line ignored",
            ]
        );
        assert!(findings.iter().all(|f| f.code == "tls.bad-keylog-line"));
    }
}
