//! NSS key log files (SSLKEYLOGFILE): what browsers, OpenSSL, Go's `KeyLogWriter`, Python's
//! `keylog_filename`, Node's `keylog` event and Wireshark all write, one secret per line:
//! `LABEL <client random, 64 hex digits> <secret, hex>`. Lines are keyed by the ClientHello's
//! random, so one file serves every connection of a capture.
//!
//! A key log can be as large as the traffic it serves (a line per connection and secret), so it
//! costs what its secrets do, not its text: a `Reader` is fed the file in pieces of any size and
//! keeps one line at a time (never more than `MAX_LINE` bytes: a longer line is counted and
//! skipped, not held), and each valid line becomes an 88-byte `Entry` in a sorted array that
//! every connection of every capture of the run shares. Bad lines are findings, the first
//! `REPORTED` one by one and the rest in one summary with their count (`FindingSink`), as a
//! decoder's repeated findings are.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "line numbers and byte counts of a key log"
)]

use std::sync::Arc;

use crate::model::{Finding, FindingSink, Severity};

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

/// The longest secret a kept label has (SHA-384's 48 bytes).
const SECRET_MAX: usize = 48;

/// One valid line: the secret of one label for one client random (88 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    random: [u8; 32],
    slot: u8,
    len: u8,
    secret: [u8; SECRET_MAX],
    /// Its place among the key log's entries: of two lines for the same secret the later wins.
    seq: u32,
}

/// Every secret of the key logs given to one run: sorted arrays of entries, one per key log read,
/// shared (a clone copies pointers); a later key log's secret wins over an earlier one's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyLog {
    parts: Vec<Arc<Vec<Entry>>>,
}

/// Where a label's secret goes, and the lengths it may have.
const LABELS: &[(&str, &[usize])] = &[
    ("CLIENT_RANDOM", &[48]),
    ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", &[32, 48]),
    ("SERVER_HANDSHAKE_TRAFFIC_SECRET", &[32, 48]),
    ("CLIENT_TRAFFIC_SECRET_0", &[32, 48]),
    ("SERVER_TRAFFIC_SECRET_0", &[32, 48]),
];

/// Labels that are valid but carry nothing wirelog decrypts (0-RTT data, exporters).
const IGNORED: &[&str] = &[
    "CLIENT_EARLY_TRAFFIC_SECRET",
    "EARLY_EXPORTER_SECRET",
    "EXPORTER_SECRET",
    "RSA",
];

/// Bytes a line may have: the longest valid one (a 31-letter label, the random and a 48-byte
/// secret in hex: 193 bytes) with room for the spaces and tabs writers put between them.
pub const MAX_LINE: usize = 1024;

/// Bad lines of one key log reported one by one before their summary (as a decoder reports a
/// repeated problem: decoders/hercules/records.rs, `REPEAT_LIMIT`).
pub const REPORTED: u64 = 100;

const CODE: &str = "tls.bad-keylog-line";

impl KeyLog {
    /// Add the lines of one key log given whole (`source` names it in findings): a pcapng's
    /// Decryption Secrets Block. A line that cannot be read is a warning naming its line number,
    /// and the rest of the text is still used.
    pub fn add(&mut self, source: &str, text: &str, findings: &mut Vec<Finding>) {
        let mut reader = Reader::new(source);
        reader.feed(text.as_bytes());
        findings.extend(reader.finish(self));
    }

    /// The key logs of `other` too, after this one's (shared, not copied).
    pub fn extend(&mut self, other: &KeyLog) {
        self.parts.extend(other.parts.iter().cloned());
    }

    pub fn get(&self, client_random: &[u8; 32]) -> Option<Secrets> {
        let mut found: Option<Secrets> = None;
        for part in &self.parts {
            let from = part.partition_point(|e| e.random < *client_random);
            for e in part[from..]
                .iter()
                .take_while(|e| e.random == *client_random)
            {
                let secrets = found.get_or_insert_with(Secrets::default);
                let slot = match e.slot {
                    0 => &mut secrets.master,
                    1 => &mut secrets.client_handshake,
                    2 => &mut secrets.server_handshake,
                    3 => &mut secrets.client_traffic,
                    _ => &mut secrets.server_traffic,
                };
                *slot = Some(e.secret[..usize::from(e.len)].to_vec());
            }
        }
        found
    }

    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(|p| p.is_empty())
    }

    /// Valid lines kept (one entry per client random and label).
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }
}

/// One key log being read, fed its bytes in pieces of any size.
pub struct Reader {
    source: String,
    /// Lines completed so far.
    line: u64,
    /// The current line, at most `MAX_LINE` bytes.
    partial: Vec<u8>,
    /// Bytes of the current line when it is longer than `MAX_LINE` (its bytes are not kept).
    overlong: u64,
    entries: Vec<Entry>,
    findings: FindingSink,
}

impl Reader {
    pub fn new(source: &str) -> Self {
        Reader {
            source: source.to_owned(),
            line: 0,
            partial: Vec::new(),
            overlong: 0,
            entries: Vec::new(),
            findings: FindingSink::new(REPORTED),
        }
    }

    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let end = memchr::memchr(b'\n', data);
            let (piece, rest) = data.split_at(end.map_or(data.len(), |at| at + 1));
            self.take(&piece[..end.map_or(piece.len(), |_| piece.len() - 1)]);
            if end.is_some() {
                self.end_line();
            }
            data = rest;
        }
    }

    /// Bytes of the current line.
    fn take(&mut self, piece: &[u8]) {
        if self.overlong > 0 {
            self.overlong += piece.len() as u64;
        } else if self.partial.len() + piece.len() > MAX_LINE {
            self.overlong = (self.partial.len() + piece.len()) as u64;
            // its first bytes only, which say whether it is a comment
            let room = MAX_LINE - self.partial.len();
            self.partial.extend_from_slice(&piece[..room]);
        } else {
            self.partial.extend_from_slice(piece);
        }
    }

    fn end_line(&mut self) {
        self.line += 1;
        let why = if self.overlong > 0 {
            // a comment may be as long as it likes: its first bytes, kept, say whether it is one
            (!self.partial.trim_ascii_start().starts_with(b"#")).then(|| {
                format!(
                    "a line of {} bytes, longer than any valid one (at most {MAX_LINE})",
                    self.overlong
                )
            })
        } else {
            match std::str::from_utf8(self.partial.trim_ascii()) {
                Ok(line) if line.is_empty() || line.starts_with('#') => None,
                Ok(line) => entry(line, &mut self.entries).err(),
                Err(_) => Some("not text".into()),
            }
        };
        self.partial.clear();
        self.overlong = 0;
        if let Some(why) = why {
            if self.findings.keeps_individually(CODE) {
                let text = format!("{} line {}: {why}; line ignored", self.source, self.line);
                self.findings
                    .limited(Finding::new(CODE, Severity::Warning, text).field("line", self.line));
            } else {
                // only counted now, for the summary: no sentence to write
                self.findings
                    .limited(Finding::new(CODE, Severity::Warning, String::new()));
            }
        }
    }

    /// The key log read (its last line needs no newline) added to `log`; the findings of its bad
    /// lines, the first `REPORTED` and then one summary with their count.
    pub fn finish(mut self, log: &mut KeyLog) -> Vec<Finding> {
        if !self.partial.is_empty() || self.overlong > 0 {
            self.end_line();
        }
        // sorted by random then label, in place (a stable sort would take half as much again);
        // of two lines for the same secret the later wins: dedup keeps the first of a run
        let mut entries = std::mem::take(&mut self.entries);
        entries.sort_unstable_by(|a, b| {
            (a.random, a.slot, std::cmp::Reverse(a.seq)).cmp(&(
                b.random,
                b.slot,
                std::cmp::Reverse(b.seq),
            ))
        });
        entries.dedup_by(|a, b| (a.random, a.slot) == (b.random, b.slot));
        entries.shrink_to_fit();
        if !entries.is_empty() {
            log.parts.push(Arc::new(entries)); // no copy: an Arc<[Entry]> would be one
        }
        self.findings.finish();
        self.findings.drain()
    }
}

/// The entry of one valid line, pushed onto `entries`; a line with an ignored label adds none.
fn entry(line: &str, entries: &mut Vec<Entry>) -> Result<(), String> {
    let mut words = line.split_ascii_whitespace();
    let (Some(label), Some(random), Some(secret), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err("not `LABEL <client random> <secret>`".into());
    };
    if IGNORED.contains(&label) {
        return Ok(());
    }
    let mut r = [0u8; 32];
    if hex_into(random, &mut r) != Some(32) {
        return Err("the client random is not 64 hex digits".into());
    }
    let Some(slot) = LABELS.iter().position(|(l, _)| *l == label) else {
        return Err(format!("unknown label {label:?}"));
    };
    let mut bytes = [0u8; SECRET_MAX];
    let Some(len) = hex_into(secret, &mut bytes) else {
        return Err(if secret.len() / 2 > SECRET_MAX && is_hex(secret) {
            format!("a {label} secret of {} bytes", secret.len() / 2)
        } else {
            "the secret is not hex".into()
        });
    };
    if !LABELS[slot].1.contains(&len) {
        return Err(format!("a {label} secret of {len} bytes"));
    }
    entries.push(Entry {
        random: r,
        slot: slot as u8,
        len: len as u8,
        secret: bytes,
        // past 2^32 lines (350 GB of key log) a repeated secret may lose to an earlier line
        seq: u32::try_from(entries.len()).unwrap_or(u32::MAX),
    });
    Ok(())
}

fn is_hex(s: &str) -> bool {
    s.len() % 2 == 0 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Even-length hex digits decoded into `out`: how many bytes, None when `s` is not hex or does not
/// fit.
fn hex_into(s: &str, out: &mut [u8]) -> Option<usize> {
    if !is_hex(s) || s.len() / 2 > out.len() {
        return None;
    }
    for (byte, pair) in out.iter_mut().zip(s.as_bytes().chunks_exact(2)) {
        let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(s.len() / 2)
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

    fn line(label: &str, random: u8, secret: u8, len: usize) -> String {
        format!(
            "{label} {} {}\n",
            format!("{random:02x}").repeat(32),
            format!("{secret:02x}").repeat(len)
        )
    }

    #[test]
    fn pieces_of_any_size_read_the_same_and_a_later_line_wins() {
        let text = [
            line("CLIENT_RANDOM", 1, 0x11, 48),
            "# a comment\r\n".into(),
            line("CLIENT_TRAFFIC_SECRET_0", 2, 0x22, 32),
            line("CLIENT_RANDOM", 1, 0x33, 48),
            "CLIENT_RANDOM zz 00\n".into(),
            line("SERVER_TRAFFIC_SECRET_0", 2, 0x44, 48)
                .trim_end()
                .into(),
        ]
        .concat();
        let mut whole = KeyLog::default();
        let mut expected = Vec::new();
        whole.add("k", &text, &mut expected);
        assert_eq!(whole.len(), 3);
        let s = whole.get(&[1; 32]).unwrap();
        assert_eq!(s.master.as_deref(), Some(&[0x33; 48][..]));
        let s = whole.get(&[2; 32]).unwrap();
        assert_eq!(s.client_traffic.as_deref(), Some(&[0x22; 32][..]));
        assert_eq!(s.server_traffic.as_deref(), Some(&[0x44; 48][..]));
        assert_eq!(whole.get(&[3; 32]), None);
        for size in [1, 2, 7, 64, 193, 1000] {
            let mut log = KeyLog::default();
            let mut reader = Reader::new("k");
            for piece in text.as_bytes().chunks(size) {
                reader.feed(piece);
            }
            let findings = reader.finish(&mut log);
            assert_eq!(log, whole, "pieces of {size}");
            let lines: Vec<_> = findings.iter().map(|f| &f.message).collect();
            assert_eq!(
                lines,
                ["k line 5: the client random is not 64 hex digits; line ignored"]
            );
        }
    }

    #[test]
    fn a_line_longer_than_any_valid_one_is_refused_without_being_held() {
        let mut reader = Reader::new("k");
        reader.feed(b"CLIENT_RANDOM ");
        for _ in 0..10_000 {
            reader.feed(&[b'a'; 1000]);
            assert!(reader.partial.capacity() <= 2 * MAX_LINE);
        }
        reader.feed(b"\n# ");
        reader.feed(&[b'b'; 5000]); // a long comment is still a comment
        reader.feed(b"\n");
        reader.feed(line("CLIENT_RANDOM", 9, 0x99, 48).as_bytes());
        let mut log = KeyLog::default();
        let findings = reader.finish(&mut log);
        let lines: Vec<_> = findings.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            lines,
            ["k line 1: a line of 10000014 bytes, longer than any valid one (at most 1024); line ignored"]
        );
        assert!(log.get(&[9; 32]).is_some());
    }

    #[test]
    fn bad_lines_are_reported_up_to_the_limit_then_counted() {
        let mut log = KeyLog::default();
        let mut findings = Vec::new();
        log.add("k", &"nonsense\n".repeat(250), &mut findings);
        assert_eq!(findings.len() as u64, REPORTED + 1);
        assert_eq!(
            findings[99].message,
            "k line 100: not `LABEL <client random> <secret>`; line ignored"
        );
        let summary = findings.last().unwrap();
        assert_eq!(
            summary.message,
            "tls.bad-keylog-line occurred 250 times (only the first 100 are reported individually)"
        );
        assert_eq!(summary.fields, vec![("count", 250u64.into())]);
        assert!(log.is_empty());
    }
}
