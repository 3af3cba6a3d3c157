//! Which protocol a stream speaks, from its first bytes in either direction.
//!
//! Content decides; ports only break ties (a bonus for a protocol's own server port).
//! `--decode-as PORT=PROTO` overrides everything (the session asks `detect` only when nothing is
//! forced). Each protocol's detector returns a confidence in [0, 1], or None when it needs more
//! bytes; `detect` weighs them. TLS is recognised here; its layer (decoders/tls/) decrypts it when
//! a key log allows, and the plaintext is detected again.

use super::{courier, cql, hercules, lumberjack, tls, Decoder, StreamContext};

/// Bytes per direction after which detection must decide.
pub const SAMPLE_LIMIT: usize = 512;
/// Added to the content score when the server port is one the protocol uses.
const PORT_BONUS: f64 = 0.25;
/// The least score that claims a stream.
const THRESHOLD: f64 = 0.5;
/// A score this high decides at once, even while other detectors want more bytes.
const CERTAIN: f64 = 0.9;

/// The first bytes of each direction of a stream.
#[derive(Clone, Copy, Debug)]
pub struct Sample<'a> {
    pub c2s: &'a [u8],
    pub s2c: &'a [u8],
    pub client_port: u16,
    pub server_port: u16,
    /// The stream ended: no more bytes will come, decide now.
    pub closed: bool,
}

/// In client bytes from anywhere in a stream, the offset of the first frame start recognised by a
/// signature too long to occur by chance (for captures that begin inside a frame).
pub type FindStart = fn(&[u8]) -> Option<usize>;

/// A protocol: what detection, the front ends and the session know of it. Each protocol's folder
/// declares its own (`PROTOCOL`); nothing else lists the protocols.
pub struct Protocol {
    pub name: &'static str,
    /// Its usual server ports (also used to tell the client side when no SYN was seen).
    pub ports: &'static [u16],
    pub detect: fn(&Sample<'_>) -> Option<f64>,
    pub find_start: Option<FindStart>,
    /// The kinds of the message records its decoder writes (docs/protocols/*.md, "Record kinds"):
    /// what `--kind` accepts.
    pub kinds: &'static [&'static str],
    /// Its decoder for a stream; None for TLS, which the session decrypts (decoders/tls/) to
    /// detect and decode what is inside.
    pub decoder: Option<fn(StreamContext) -> Box<dyn Decoder>>,
}

/// Every protocol, in the order detectors are asked (ties go to the earlier one). CQL comes last:
/// when nothing else is certain it scans the sample for a mid-stream v5 frame header (hundreds of
/// CRC24 checks), which a stream another detector is certain of never needs.
pub const PROTOCOLS: &[&Protocol] = &[
    &tls::PROTOCOL,
    &lumberjack::PROTOCOL,
    &courier::PROTOCOL,
    &hercules::PROTOCOL,
    &cql::PROTOCOL,
];

/// Detection's answer for a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// More bytes are needed (never once the sample is closed or full).
    Wait,
    /// No protocol claims the stream.
    Unknown,
    Protocol(&'static str),
}

/// The protocol called `name`.
pub fn protocol(name: &str) -> Option<&'static Protocol> {
    PROTOCOLS.iter().copied().find(|p| p.name == name)
}

/// The protocol of a stream from its first bytes.
pub fn detect(sample: &Sample<'_>) -> Decision {
    let must_decide =
        sample.closed || sample.c2s.len() >= SAMPLE_LIMIT || sample.s2c.len() >= SAMPLE_LIMIT;
    let (mut best, mut best_score, mut undecided) = (None, 0.0, false);
    for p in PROTOCOLS {
        let Some(mut score) = (p.detect)(sample) else {
            undecided = true;
            continue;
        };
        if score >= CERTAIN {
            return Decision::Protocol(p.name); // content alone is conclusive
        }
        if score > 0.0 && p.ports.contains(&sample.server_port) {
            score += PORT_BONUS;
        }
        if score > best_score {
            (best, best_score) = (Some(p.name), score);
        }
    }
    if undecided && !must_decide && best_score < CERTAIN {
        return Decision::Wait;
    }
    match best {
        Some(name) if best_score >= THRESHOLD => Decision::Protocol(name),
        _ => Decision::Unknown,
    }
}

/// Each protocol's own score for a sample (None: it wants more bytes), in `PROTOCOLS` order.
pub fn scores(sample: &Sample<'_>) -> Vec<(&'static str, Option<f64>)> {
    PROTOCOLS
        .iter()
        .map(|p| (p.name, (p.detect)(sample)))
        .collect()
}

/// The earliest frame start any protocol recognises in `data` (client bytes from the middle of
/// a stream), with that protocol.
pub fn find_start(data: &[u8]) -> Option<(&'static str, usize)> {
    PROTOCOLS
        .iter()
        .filter_map(|p| Some((p.name, (p.find_start?)(data)?)))
        .min_by_key(|&(_, at)| at)
}

/// Server ports of log pipelines besides the protocols' own: syslog/Logstash inputs,
/// Elasticsearch, HTTP proxies in front of gateways. Used only to tell client from server when no
/// SYN was seen.
const PIPELINE_PORTS: [u16; 7] = [5000, 5140, 6514, 8080, 8443, 9200, 9300];

/// Server ports used to infer the client side of SYN-less streams (docs/records.md), sorted.
pub fn well_known_ports() -> Vec<u16> {
    let mut ports: Vec<u16> = PROTOCOLS
        .iter()
        .flat_map(|p| p.ports.iter().copied())
        .chain(PIPELINE_PORTS)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample<'a>(c2s: &'a [u8], s2c: &'a [u8], server_port: u16, closed: bool) -> Sample<'a> {
        Sample {
            c2s,
            s2c,
            client_port: 40000,
            server_port,
            closed,
        }
    }

    #[test]
    fn content_decides_and_ports_break_ties() {
        let hello = b"\x16\x03\x01\x00\x40";
        assert_eq!(
            detect(&sample(hello, b"", 5044, false)),
            Decision::Protocol("tls")
        );
        assert_eq!(
            detect(&sample(b"2W\0\0\0\x02", b"", 1, false)),
            Decision::Protocol("lumberjack")
        );
        // raw JSON on a Beats port: Lumberjack's decoder says what Logstash would say
        assert_eq!(
            detect(&sample(b"{\"message\":\"x\"}", b"", 5044, true)),
            Decision::Protocol("lumberjack")
        );
        assert_eq!(
            detect(&sample(b"{\"message\":\"x\"}", b"", 80, true)),
            Decision::Unknown
        );
        assert_eq!(detect(&sample(b"", b"", 80, false)), Decision::Wait);
        assert_eq!(detect(&sample(b"", b"", 80, true)), Decision::Unknown);
    }

    #[test]
    fn a_full_sample_decides() {
        let text = [b'a'; SAMPLE_LIMIT];
        assert_eq!(detect(&sample(&text, b"", 80, false)), Decision::Unknown);
    }

    #[test]
    fn the_earliest_frame_start_wins() {
        let window = b"2W\0\0\0\x012J\0\0\0\x01\0\0\0\x02{}";
        let ping = b"PING\0\0\0\0";
        let data = [&b"xx"[..], ping, window].concat();
        assert_eq!(find_start(&data), Some(("courier", 2)));
        assert_eq!(find_start(&data[3..]), Some(("lumberjack", 7)));
    }

    #[test]
    fn ports_are_sorted_and_unique() {
        let ports = well_known_ports();
        assert!(ports.windows(2).all(|w| w[0] < w[1]));
        assert!(ports.contains(&5044) && ports.contains(&9042) && ports.contains(&8080));
    }
}
