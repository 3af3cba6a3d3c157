//! Which records a command keeps: `--protocol`, `--stream`, `--kind`, `--events`, `--since/--until`
//! (docs/commands). A record matches `--protocol` by its own protocol or by its stream's, so
//! `--protocol cql` keeps the TCP gaps of CQL streams too; `--kind` and `--events` select messages;
//! `findings` (what `validate` reads) drops every message.

use std::collections::HashSet;

use crate::model::{Message, Record, Stamp};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    pub protocols: HashSet<String>,
    pub streams: HashSet<u64>,
    pub kinds: HashSet<String>,
    pub events: bool,
    /// ns since the epoch, inclusive.
    pub since: Option<i64>,
    /// ns since the epoch, exclusive.
    pub until: Option<i64>,
    /// Findings only.
    pub findings: bool,
}

impl Filter {
    pub fn active(&self) -> bool {
        !self.protocols.is_empty()
            || !self.streams.is_empty()
            || !self.kinds.is_empty()
            || self.events
            || self.since.is_some()
            || self.until.is_some()
            || self.findings
    }

    /// Whether `r` (of the stream `stamp`, whose protocol is `stream_protocol`) is kept.
    pub fn keeps(&self, r: &Record, stamp: Option<&Stamp>, stream_protocol: Option<&str>) -> bool {
        let f = match r {
            Record::Message(m) => {
                return self.keeps_message(m, m.event.is_some(), stamp, stream_protocol)
            }
            Record::Finding(f) => f,
        };
        self.keeps_protocol(f.protocol(), stream_protocol)
            && self.keeps_stream(stamp.map(|s| s.stream).or(f.stream))
            && self.kinds.is_empty()
            && !self.events
            && self.keeps_ts(f.ts)
    }

    /// `keeps` of the message `m`, `event`: whether it has an event (its own is not read: a
    /// record read in place from the held store has its event apart, `held::pack::Parts`).
    pub fn keeps_message(
        &self,
        m: &Message,
        event: bool,
        stamp: Option<&Stamp>,
        stream_protocol: Option<&str>,
    ) -> bool {
        self.keeps_protocol(m.protocol, stream_protocol)
            && self.keeps_stream(stamp.map(|s| s.stream))
            && !self.findings
            && (self.kinds.is_empty() || self.kinds.contains(m.kind))
            && (!self.events || event)
            && self.keeps_ts(m.ts)
    }

    fn keeps_protocol(&self, protocol: &str, stream_protocol: Option<&str>) -> bool {
        self.protocols.is_empty()
            || stream_protocol.is_some_and(|p| self.protocols.contains(p))
            || self.protocols.contains(protocol)
    }

    fn keeps_stream(&self, stream: Option<u64>) -> bool {
        self.streams.is_empty() || stream.is_some_and(|s| self.streams.contains(&s))
    }

    fn keeps_ts(&self, ts: Option<i64>) -> bool {
        match ts {
            Some(ts) => self.since.is_none_or(|s| ts >= s) && self.until.is_none_or(|u| ts < u),
            None => true,
        }
    }
}

impl Filter {
    /// Whether `wirelog report`'s timeline draws a reassembler event of `stream` (protocol
    /// `stream_protocol`) happening from `first` to `last`: a gap is a `tcp.gap` finding of that
    /// stream; bytes and the stream's end belong to the stream as its messages do, so `--kind` and
    /// `--events` keep them.
    pub fn keeps_tcp(
        &self,
        stream: u64,
        stream_protocol: Option<&str>,
        (first, last): (i64, i64),
        gap: bool,
    ) -> bool {
        let protocol = stream_protocol.is_some_and(|p| self.protocols.contains(p))
            || (gap && self.protocols.contains("tcp"));
        (self.protocols.is_empty() || protocol)
            && (self.streams.is_empty() || self.streams.contains(&stream))
            && !(gap && (!self.kinds.is_empty() || self.events))
            && self.since.is_none_or(|s| last >= s)
            && self.until.is_none_or(|u| first < u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Finding, Message, Severity};

    fn stamp(stream: u64) -> Stamp {
        Stamp {
            stream,
            ..Stamp::default()
        }
    }

    #[test]
    fn protocol_matches_the_record_or_its_stream() {
        let f = Filter {
            protocols: HashSet::from(["cql".to_owned()]),
            ..Filter::default()
        };
        let gap: Record = Finding::new("tcp.gap", Severity::Warning, String::new()).into();
        assert!(f.keeps(&gap, Some(&stamp(1)), Some("cql")));
        assert!(!f.keeps(&gap, Some(&stamp(1)), Some("lumberjack")));
        let m: Record = Message::new("cql", "query").into();
        assert!(f.keeps(&m, None, None));
    }

    #[test]
    fn kinds_and_events_keep_messages_only_and_time_bounds_spare_undated_records() {
        let f = Filter {
            events: true,
            since: Some(10),
            until: Some(20),
            ..Filter::default()
        };
        let mut m = Message::new("lumberjack", "event");
        m.event = Some(serde_json::json!({}).into());
        m.ts = Some(15);
        assert!(f.keeps(&m.clone().into(), None, None));
        m.ts = Some(20);
        assert!(!f.keeps(&m.clone().into(), None, None));
        m.ts = None;
        assert!(f.keeps(&m.clone().into(), None, None));
        m.event = None;
        assert!(!f.keeps(&m.into(), None, None));
        let finding: Record = Finding::new("tcp.gap", Severity::Info, String::new()).into();
        assert!(!f.keeps(&finding, None, None));
    }

    #[test]
    fn findings_only_drops_every_message() {
        let f = Filter {
            findings: true,
            ..Filter::default()
        };
        assert!(f.active());
        let mut event = Message::new("lumberjack", "event");
        event.event = Some(serde_json::json!({}).into());
        assert!(!f.keeps(&event.into(), None, None));
        assert!(!f.keeps(&Message::new("cql", "query").into(), None, None));
        let finding: Record = Finding::new("tcp.gap", Severity::Info, String::new()).into();
        assert!(f.keeps(&finding, None, None));
    }

    #[test]
    fn tcp_events_follow_their_stream_and_gaps_are_findings() {
        let by_stream = Filter {
            streams: HashSet::from([3]),
            since: Some(10),
            until: Some(20),
            ..Filter::default()
        };
        assert!(by_stream.keeps_tcp(3, None, (15, 15), false));
        assert!(!by_stream.keeps_tcp(4, None, (15, 15), true));
        assert!(!by_stream.keeps_tcp(3, None, (20, 20), false));
        assert!(by_stream.keeps_tcp(3, None, (5, 25), false)); // a stream spanning the window
        let by_protocol = Filter {
            protocols: HashSet::from(["cql".to_owned()]),
            ..Filter::default()
        };
        assert!(by_protocol.keeps_tcp(1, Some("cql"), (0, 0), false));
        assert!(!by_protocol.keeps_tcp(1, Some("lumberjack"), (0, 0), true));
        assert!(!by_protocol.keeps_tcp(1, None, (0, 0), false));
        let tcp = Filter {
            protocols: HashSet::from(["tcp".to_owned()]),
            ..Filter::default()
        };
        assert!(tcp.keeps_tcp(1, Some("lumberjack"), (0, 0), true));
        assert!(!tcp.keeps_tcp(1, Some("lumberjack"), (0, 0), false));
        let by_kind = Filter {
            kinds: HashSet::from(["window".to_owned()]),
            ..Filter::default()
        };
        assert!(by_kind.keeps_tcp(1, Some("lumberjack"), (0, 0), false));
        assert!(!by_kind.keeps_tcp(1, Some("lumberjack"), (0, 0), true));
    }
}
