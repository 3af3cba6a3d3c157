//! Nonce sightings across the connections of one capture: resends versus reused nonces.
//!
//! A resend keeps the nonce and carries only the events not yet acknowledged, numbered from 1
//! again (reference/courier.md §3), so a legitimate resend's events are a suffix of the previous
//! sending. Anything else under the same nonce is a reused nonce; across connections that is
//! normal for the unseeded Go 2.0–2.6.3 clients, whose nonce sequence repeats on every run.
//!
//! The table is bounded (the Python one was not): past `MAX_NONCES` nonces or `MAX_DIGESTS`
//! event digests the oldest sightings are forgotten, so a later resend of one of those is taken
//! for a first sending.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::model::{Direction, Record, Severity};

use super::findings::{finding, At};

const MAX_NONCES: usize = 1 << 16;
/// As many events as Lumberjack's resend registry remembers at least (~8 MB of digests).
const MAX_DIGESTS: usize = 1 << 20;

/// One sending of a nonce.
#[derive(Debug)]
struct Sighting {
    stream: u64,
    at: At,
    count: u64,
    /// The payload's acknowledged count, kept current by its connection.
    acked: Arc<AtomicU64>,
    /// A content hash per event; None when too many to keep.
    digests: Option<Vec<u64>>,
    first_stream: u64,
}

/// State shared by the courier connections of one capture: the last sending of each nonce.
#[derive(Debug, Default)]
pub struct Shared {
    seen: HashMap<String, Sighting>,
    /// Nonces in the order first seen (eviction order).
    order: VecDeque<String>,
    digests: usize,
}

/// What `check` needs to know about this sending.
pub struct Sending<'a> {
    pub nonce: &'a str,
    pub stream: u64,
    pub at: At,
    pub count: u64,
    pub acked: Arc<AtomicU64>,
    pub digests: Option<Vec<u64>>,
    pub unseeded: bool,
}

/// Record this sending of its nonce and judge it against the previous one in the capture; a
/// resend returns where that previous sending was: (stream, frame).
pub fn check(
    shared: &mut Shared,
    s: Sending<'_>,
    out: &mut Vec<Record>,
) -> Option<(u64, Option<u64>)> {
    let size = s.digests.as_ref().map_or(0, Vec::len);
    let new = |first_stream| Sighting {
        stream: s.stream,
        at: s.at,
        count: s.count,
        acked: s.acked.clone(),
        digests: s.digests.clone(),
        first_stream,
    };
    let Some(prev) = shared.seen.get_mut(s.nonce) else {
        shared.digests += size;
        shared.seen.insert(s.nonce.to_owned(), new(s.stream));
        shared.order.push_back(s.nonce.to_owned());
        evict(shared);
        return None;
    };
    let replacement = new(prev.first_stream);
    let prev = std::mem::replace(prev, replacement);
    shared.digests = shared.digests + size - prev.digests.as_ref().map_or(0, Vec::len);
    let (nonce, count, old_count) = (s.nonce, s.count, prev.count);
    let place = if prev.stream != s.stream {
        format!("stream {}", prev.stream)
    } else {
        "this connection".to_owned()
    };
    if is_suffix(
        s.digests.as_deref(),
        prev.digests.as_deref(),
        count,
        old_count,
    ) {
        let acked = prev.acked.load(Ordering::Relaxed);
        let msg = format!(
            "payload {nonce} resent with {count} of its {old_count} events (previous sending in \
             {place}, {acked} acknowledged); event numbering restarts at 1"
        );
        let f = finding("courier.resend", msg, Some(Direction::C2S), s.at)
            .field("nonce", nonce)
            .field("events", count)
            .field("previous_events", old_count)
            .field("previous_acked", acked)
            .field("previous_stream", prev.stream)
            .field("previous_frame", prev.at.frame)
            .field("first_stream", prev.first_stream);
        out.push(f.into());
        evict(shared);
        return Some((prev.stream, prev.at.frame));
    } else {
        let normal = s.unseeded && prev.stream != s.stream;
        let why = if normal {
            " (normal for unseeded Go 2.0-2.6.3 clients, whose nonces repeat on every run)"
        } else {
            "; nonces must be unique per connection and should be globally unique"
        };
        let msg = format!(
            "nonce {nonce} reused for different content (previous sending in {place}){why}"
        );
        let mut f = finding("courier.nonce-reused", msg, Some(Direction::C2S), s.at)
            .field("nonce", nonce)
            .field("events", count)
            .field("previous_events", old_count)
            .field("previous_stream", prev.stream)
            .field("previous_frame", prev.at.frame);
        if normal {
            f.severity = Severity::Info;
        }
        out.push(f.into());
    }
    evict(shared);
    None
}

fn evict(shared: &mut Shared) {
    while shared.order.len() > MAX_NONCES || shared.digests > MAX_DIGESTS {
        let Some(old) = shared.order.pop_front() else {
            return;
        };
        if let Some(gone) = shared.seen.remove(&old) {
            shared.digests -= gone.digests.map_or(0, |d| d.len());
        }
    }
}

fn is_suffix(new: Option<&[u64]>, old: Option<&[u64]>, n: u64, m: u64) -> bool {
    if n > m {
        return false;
    }
    match (new, old) {
        (Some(new), Some(old)) => old.ends_with(new),
        _ => true, // too large to compare: judge by counts alone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoders::fingerprint::fingerprint;
    use crate::model::Record;

    fn send(shared: &mut Shared, stream: u64, events: &[&[u8]]) -> Vec<Record> {
        let mut out = Vec::new();
        let s = Sending {
            nonce: "00",
            stream,
            at: At::new(0, Some(stream + 1), None),
            count: events.len() as u64,
            acked: Arc::new(AtomicU64::new(1)),
            digests: Some(events.iter().map(|e| fingerprint(e)).collect()),
            unseeded: false,
        };
        check(shared, s, &mut out);
        out
    }

    #[test]
    fn suffix_is_a_resend_anything_else_a_reuse() {
        let mut sh = Shared::default();
        assert!(send(&mut sh, 0, &[b"a", b"b", b"c"]).is_empty());
        let r = send(&mut sh, 1, &[b"b", b"c"]);
        let Record::Finding(f) = &r[0] else { panic!() };
        assert_eq!(f.code, "courier.resend");
        assert!(f.message.contains(
            "resent with 2 of its 3 events (previous sending in stream 0, 1 acknowledged)"
        ));
        let r = send(&mut sh, 1, &[b"x", b"c"]);
        let Record::Finding(f) = &r[0] else { panic!() };
        assert_eq!(
            (f.code, f.severity),
            ("courier.nonce-reused", Severity::Warning)
        );
    }

    #[test]
    fn the_table_is_bounded() {
        let mut sh = Shared::default();
        for i in 0..MAX_NONCES + 10 {
            let mut out = Vec::new();
            let s = Sending {
                nonce: &format!("{i:032x}"),
                stream: 0,
                at: At::default(),
                count: 0,
                acked: Arc::default(),
                digests: None,
                unseeded: false,
            };
            check(&mut sh, s, &mut out);
        }
        assert_eq!(sh.seen.len(), MAX_NONCES);
    }
}
