//! NDJSON written by the core, byte for byte what the Python writer (orjson) writes for the same
//! record: keys in the contract's order, no spaces, UTF-8 as is, the control characters escaped.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::model::json::{integer, name, string, value, Json};
use crate::model::text::datetime;
use crate::model::{Delivery, DocText, Finding, Message, Record, Stamp, Value};
use crate::tcp::StreamInfo;

/// Whether a protocol field may not take `name` (docs/records.md): such a field is written as
/// `<protocol>_<name>`, as the Python writer does. A finding's own keys are the first group, a
/// message also has the second. (A `match`: this runs for every field of every record.)
fn reserved(name: &str, message: bool) -> bool {
    matches!(
        name,
        "record"
            | "capture"
            | "stream"
            | "client"
            | "server"
            | "direction"
            | "frame"
            | "offset"
            | "ts"
            | "protocol"
            | "code"
            | "severity"
            | "message"
    ) || (message
        && matches!(
            name,
            "kind" | "version" | "length" | "event" | "acked" | "event_id" | "delivery"
        ))
}

fn opt_u64(out: &mut String, v: Option<u64>) {
    match v {
        Some(v) => integer(out, v),
        None => out.push_str("null"),
    }
}

fn opt_str(out: &mut String, v: Option<&str>) {
    match v {
        Some(v) => string(out, v),
        None => out.push_str("null"),
    }
}

/// A name of the core's (`json::name`), or null.
fn opt_name(out: &mut String, v: Option<&'static str>) {
    match v {
        Some(v) => name(out, v),
        None => out.push_str("null"),
    }
}

/// `{"record":...,"protocol":...` up to the protocol, the keys every record has.
#[allow(clippy::too_many_arguments)]
fn common(
    out: &mut String,
    record: &str,
    capture: &str,
    stamp: Option<&Stamp>,
    stream: Option<u64>,
    direction: Option<crate::model::Direction>,
    frame: Option<u64>,
    offset: Option<u64>,
    ts: Option<i64>,
    protocol: &'static str,
) {
    opening(out, record, capture, stamp, stream);
    whence(out, direction, frame, offset, ts, protocol);
}

/// `{"record":...,"capture":...,"server":...`: the record's kind and place.
#[inline(always)]
fn opening(
    out: &mut String,
    record: &str,
    capture: &str,
    stamp: Option<&Stamp>,
    stream: Option<u64>,
) {
    out.push_str("{\"record\":\"");
    out.push_str(record);
    out.push_str("\",");
    let ends = stamp.map(|s| (s.client.as_str(), s.server.as_str()));
    place(out, capture, stamp.map(|s| s.stream).or(stream), ends);
}

/// `,"direction":...,"protocol":...`: where in its stream a record is, and its protocol.
#[inline(always)]
fn whence(
    out: &mut String,
    direction: Option<crate::model::Direction>,
    frame: Option<u64>,
    offset: Option<u64>,
    ts: Option<i64>,
    protocol: &'static str,
) {
    out.push_str(",\"direction\":");
    opt_name(out, direction.map(|d| d.as_str()));
    out.push_str(",\"frame\":");
    opt_u64(out, frame);
    out.push_str(",\"offset\":");
    opt_u64(out, offset);
    out.push_str(",\"ts\":");
    match ts {
        Some(ts) => {
            out.push('"');
            rfc3339(out, ts);
            out.push('"');
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"protocol\":");
    name(out, protocol);
}

/// A message's keys from `direction` to `length`'s name (`,"direction":…,"version":"2","length":`):
/// the text the last message's were when they come from the same frame (a Lumberjack window's
/// hundreds of events, a Gate request's), written again only when one differs. Writing them a
/// name and a number at a time was ~3 % of converting a stalled python-sender capture. The text is
/// kept from a frame's second message on: most CQL frames are one message, and keeping each
/// one's text cost them a copy (+0.6 % of converting a CQL capture).
fn message_head(out: &mut String, m: &Message) {
    let key = HeadKey {
        direction: m.direction,
        frame: m.frame,
        offset: m.offset,
        ts: m.ts,
        protocol: addr(m.protocol),
        kind: addr(m.kind),
        version: m.version.map(addr),
    };
    LAST_HEAD.with_borrow_mut(|last| {
        if last.key != Some(key) {
            last.key = Some(key);
            last.kept = false;
            write_head(out, m);
            return;
        }
        if !last.kept {
            last.text.clear();
            write_head(&mut last.text, m);
            last.kept = true;
        }
        out.push_str(&last.text);
    });
}

fn write_head(out: &mut String, m: &Message) {
    whence(out, m.direction, m.frame, m.offset, m.ts, m.protocol);
    out.push_str(",\"kind\":");
    name(out, m.kind);
    out.push_str(",\"version\":");
    opt_name(out, m.version);
    out.push_str(",\"length\":");
}

/// What a message's head text is written from (`message_head`); its names by address (two names
/// alike at two addresses only write it again).
#[derive(Clone, Copy, PartialEq, Eq)]
struct HeadKey {
    direction: Option<crate::model::Direction>,
    frame: Option<u64>,
    offset: Option<u64>,
    ts: Option<i64>,
    protocol: (usize, usize),
    kind: (usize, usize),
    version: Option<(usize, usize)>,
}

fn addr(name: &'static str) -> (usize, usize) {
    (name.as_ptr() as usize, name.len())
}

/// The last message's head (`key`), and its text once a second message had it (`kept`).
#[derive(Default)]
struct LastHead {
    key: Option<HeadKey>,
    kept: bool,
    text: String,
}

thread_local! {
    static LAST_HEAD: std::cell::RefCell<LastHead> = std::cell::RefCell::default();
}

/// `"capture":…,"stream":…,"client":…,"server":…` of a record: the text the last record's were,
/// when they are the same (records come a stream's at a time, so nearly always), escaped again only
/// when they change (escaping the three strings was half of writing the common keys).
fn place(out: &mut String, capture: &str, stream: Option<u64>, ends: Option<(&str, &str)>) {
    LAST_PLACE.with_borrow_mut(|last| {
        let same = !last.text.is_empty() // nothing written yet
            && last.stream == stream
            && last.ends() == ends
            && last.capture == capture;
        if !same {
            // into the buffers the last place had: a capture whose streams interleave pays no
            // allocation per change
            let Place {
                capture: c,
                stream: s,
                ends: (on, (client, server)),
                text,
            } = last;
            c.clear();
            c.push_str(capture);
            *s = stream;
            *on = ends.is_some();
            client.clear();
            server.clear();
            if let Some((c, s)) = ends {
                client.push_str(c);
                server.push_str(s);
            }
            text.clear();
            text.push_str("\"capture\":");
            string(text, capture);
            text.push_str(",\"stream\":");
            opt_u64(text, stream);
            text.push_str(",\"client\":");
            opt_str(text, ends.map(|e| e.0));
            text.push_str(",\"server\":");
            opt_str(text, ends.map(|e| e.1));
        }
        out.push_str(&last.text);
    });
}

/// What `place` wrote last, and for which record place (`ends`: whether it had a client and
/// server, and them).
#[derive(Default)]
struct Place {
    capture: String,
    stream: Option<u64>,
    ends: (bool, (String, String)),
    text: String,
}

impl Place {
    fn ends(&self) -> Option<(&str, &str)> {
        let (on, (client, server)) = &self.ends;
        on.then_some((client.as_str(), server.as_str()))
    }
}

thread_local! {
    static LAST_PLACE: std::cell::RefCell<Place> = std::cell::RefCell::default();
}

/// Protocol fields after the common keys; one named like a reserved key gets a protocol prefix
/// (the reserved keys of a finding include the renamed ones already written, as in Python).
fn fields(out: &mut String, protocol: &str, fields: &[(&'static str, impl Json)], message: bool) {
    // A finding's renamed keys count as taken too (as in Python); a message's never collide.
    let live = !message;
    let mut renamed: Vec<String> = Vec::new();
    for &(field, ref v) in fields {
        out.push(',');
        let taken = reserved(field, message) || (live && renamed.iter().any(|r| r == field));
        if taken {
            let key = format!("{protocol}_{field}");
            string(out, &key);
            if live {
                renamed.push(key);
            }
        } else {
            name(out, field);
        }
        out.push(':');
        v.write_json(out);
    }
}

/// A TLS stream's description after a record's protocol fields (RecordOut::write_tls).
fn tls_field(out: &mut String, tls: Option<&Value>) {
    if let Some(tls) = tls {
        out.push_str(",\"tls\":");
        value(out, tls);
    }
}

/// The NDJSON line of a message (docs/records.md): common keys, protocol fields (`tls` last),
/// event, acked, event_id, delivery.
pub fn message_line(
    out: &mut String,
    capture: &str,
    stamp: Option<&Stamp>,
    m: &Message,
    tls: Option<&Value>,
) {
    let event = |out: &mut String| match &m.event {
        Some(doc) => doc.write_text(out),
        None => out.push_str("null"),
    };
    message_line_with(out, capture, stamp, m, &m.fields, event, tls);
}

/// `message_line` of the message `m` with `fields` and `event` (its own are not read): a record
/// read in place from the held store (`held::pack::Parts`) is written so.
pub fn message_parts_line(
    out: &mut String,
    capture: &str,
    stamp: Option<&Stamp>,
    m: &Message,
    fields: &[(&'static str, impl Json)],
    event: Option<DocText<'_>>,
    tls: Option<&Value>,
) {
    let event = |out: &mut String| match event {
        Some(doc) => out.push_str(doc.text()),
        None => out.push_str("null"),
    };
    message_line_with(out, capture, stamp, m, fields, event, tls);
}

/// The line of `m` with `fields`, its event written by `event`.
fn message_line_with(
    out: &mut String,
    capture: &str,
    stamp: Option<&Stamp>,
    m: &Message,
    fields: &[(&'static str, impl Json)],
    event: impl FnOnce(&mut String),
    tls: Option<&Value>,
) {
    opening(out, "message", capture, stamp, None);
    message_head(out, m);
    integer(out, m.length);
    self::fields(out, m.protocol, fields, true);
    tls_field(out, tls);
    out.push_str(",\"event\":");
    event(out);
    out.push_str(",\"acked\":");
    out.push_str(match m.acked {
        Some(true) => "true",
        Some(false) => "false",
        None => "null",
    });
    out.push_str(",\"event_id\":");
    match &m.event_id {
        Some(id) => {
            out.push('"');
            id.write(out);
            out.push('"');
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"delivery\":");
    opt_name(out, m.delivery.map(Delivery::as_str));
    out.push_str("}\n");
}

/// The NDJSON line of a finding: common keys, code, severity, message, fields (`tls` last).
pub fn finding_line(
    out: &mut String,
    capture: &str,
    stamp: Option<&Stamp>,
    f: &Finding,
    tls: Option<&Value>,
) {
    common(
        out,
        "finding",
        capture,
        stamp,
        f.stream,
        f.direction,
        f.frame,
        f.offset,
        f.ts,
        f.protocol(),
    );
    out.push_str(",\"code\":");
    string(out, f.code);
    let _ = write!(
        out,
        ",\"severity\":\"{}\",\"message\":",
        f.severity.as_str()
    );
    string(out, &f.message);
    fields(out, f.protocol(), &f.fields, false);
    tls_field(out, tls);
    out.push_str("}\n");
}

/// The NDJSON line of any record (`tls`: its TLS stream's description, RecordOut::write_tls).
pub fn record_line(
    out: &mut String,
    capture: &str,
    stamp: Option<&Stamp>,
    r: &Record,
    tls: Option<&Value>,
) {
    match r {
        Record::Message(m) => message_line(out, capture, stamp, m, tls),
        Record::Finding(f) => finding_line(out, capture, stamp, f, tls),
    }
}

/// Nanosecond RFC 3339 UTC text, e.g. `2026-11-21T04:41:22.700273042Z`.
pub fn rfc3339(out: &mut String, ts: i64) {
    LAST_TS.with_borrow_mut(|(last, text)| {
        if *last != Some(ts) {
            text.clear();
            let (sec, ns) = (ts.div_euclid(1_000_000_000), ts.rem_euclid(1_000_000_000));
            datetime(text, sec.div_euclid(86_400), sec.rem_euclid(86_400), ns, 9);
            *last = Some(ts);
        }
        out.push_str(text);
    });
}

thread_local! {
    /// The last time `rfc3339` wrote and its text: the records of one packet share its time (a
    /// Gate request's events, a Lumberjack C frame's hundreds), so most times are a copy.
    static LAST_TS: std::cell::RefCell<(Option<i64>, String)> =
        const { std::cell::RefCell::new((None, String::new())) };
}

/// The stream summary line of `wirelog streams --json` (docs/records.md, "Stream summaries").
pub fn stream_line(capture: &str, s: &StreamInfo) -> String {
    let mut o = String::with_capacity(512);
    o.push_str("{\"capture\":");
    string(&mut o, capture);
    let _ = write!(o, ",\"stream\":{},\"client\":", s.stream);
    string(&mut o, &s.client);
    o.push_str(",\"server\":");
    string(&mut o, &s.server);
    let _ = write!(
        o,
        ",\"client_port\":{},\"server_port\":{},\"client_by\":\"{}\",\"first_ts\":\"",
        s.client_port, s.server_port, s.client_by
    );
    rfc3339(&mut o, s.first_ts);
    o.push_str("\",\"last_ts\":\"");
    rfc3339(&mut o, s.last_ts);
    let _ = write!(
        o,
        "\",\"first_frame\":{},\"last_frame\":{},\"packets_c2s\":{},\"packets_s2c\":{},\
         \"bytes_c2s\":{},\"bytes_s2c\":{},\"gaps\":{},\"gap_bytes\":{},\"retransmissions\":{},\
         \"out_of_order\":{},\"conflicts\":{}",
        s.first_frame,
        s.last_frame,
        s.packets_c2s,
        s.packets_s2c,
        s.bytes_c2s,
        s.bytes_s2c,
        s.gaps,
        s.gap_bytes,
        s.retransmissions,
        s.out_of_order,
        s.conflicts
    );
    let flags = [
        ("handshake", s.handshake),
        ("midstream", s.midstream),
        ("fin_c2s", s.fin_c2s),
        ("fin_s2c", s.fin_s2c),
        ("reset", s.reset),
        ("port_reuse", s.port_reuse),
    ];
    for (name, on) in flags {
        let _ = write!(o, ",\"{name}\":{on}");
    }
    o.push_str(",\"protocol\":");
    match s.protocol {
        Some(p) => string(&mut o, p),
        None => o.push_str("null"),
    }
    o.push_str(",\"tls\":");
    match &s.tls {
        Some(tls) => o.push_str(&tls.to_string()),
        None => o.push_str("null"),
    }
    o.push_str(",\"flags\":[");
    let set: Vec<String> = flags
        .iter()
        .filter(|f| f.1)
        .map(|f| format!("\"{}\"", f.0))
        .collect();
    o.push_str(&set.join(","));
    o.push_str("]}\n");
    o
}

/// Stream summary lines in stream id order, whatever order the streams end in: a line waits only
/// while an older stream is still open.
#[derive(Debug, Default)]
pub struct StreamLines {
    next: u64,
    waiting: BTreeMap<u64, String>,
    ready: String,
}

impl StreamLines {
    pub fn push(&mut self, capture: &str, s: &StreamInfo) {
        self.waiting.insert(s.stream, stream_line(capture, s));
        while let Some(line) = self.waiting.remove(&self.next) {
            self.ready.push_str(&line);
            self.next = self.next.saturating_add(1);
        }
    }

    /// The lines ready so far.
    pub fn take(&mut self) -> String {
        std::mem::take(&mut self.ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_strings_as_the_python_writer_has_them() {
        let mut o = String::new();
        rfc3339(&mut o, 1_763_700_082_700_273_042);
        assert_eq!(o, "2025-11-21T04:41:22.700273042Z");
        o.clear();
        rfc3339(&mut o, -1);
        assert_eq!(o, "1969-12-31T23:59:59.999999999Z");
        o.clear();
        string(&mut o, "a\"b\\c\nd\u{1}é");
        assert_eq!(o, "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }

    /// Each line names its own capture, stream, client and server, whichever record came before
    /// it on the thread (the text of the last place is reused only when they are the same).
    #[test]
    fn each_line_has_its_own_place() {
        use crate::model::{Finding, Message, Severity};
        let stamp = |stream: u64, client: &str| Stamp {
            stream,
            client: client.into(),
            server: "10.0.0.2:5044".into(),
        };
        let (a, b, c) = (
            stamp(1, "10.0.0.1:1"),
            stamp(2, "10.0.0.1:1"),
            stamp(1, "\"q\""),
        );
        let mut finding = Finding::new("x.y", Severity::Info, "m".into());
        finding.stream = Some(9);
        let message: Record = Message::new("lumberjack", "event").into();
        let cases: [(&str, Option<&Stamp>, &Record); 9] = [
            ("", None, &message),
            ("", None, &message),
            ("a.pcap", Some(&a), &message),
            ("a.pcap", Some(&b), &message), // another stream only
            ("a.pcap", Some(&a), &message),
            ("a.pcap", Some(&c), &message), // another client only
            ("a.pcap", Some(&b), &message),
            ("b.pcap", Some(&b), &message), // another capture only
            ("b.pcap", None, &finding.into()),
        ];
        for (capture, stamp, r) in cases {
            let mut line = String::new();
            record_line(&mut line, capture, stamp, r, None);
            let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
            let stream = stamp.map(|s| s.stream).or(match r {
                Record::Finding(f) => f.stream,
                Record::Message(_) => None,
            });
            assert_eq!(v["capture"], capture);
            assert_eq!(v["stream"], serde_json::json!(stream));
            assert_eq!(v["client"], serde_json::json!(stamp.map(|s| &s.client)));
            assert_eq!(v["server"], serde_json::json!(stamp.map(|s| &s.server)));
        }
    }

    /// Each message line has its own frame, offset, time, kind and version, whichever message
    /// came before it on the thread: a frame's first message, its second (whose head text is then
    /// kept), its later ones and a finding between them.
    #[test]
    fn each_line_has_its_own_head() {
        use crate::model::{Direction, Finding, Message, Severity};
        let message = |frame: u64, kind: &'static str, version: Option<&'static str>| {
            let mut m = Message::new("lumberjack", kind);
            m.direction = Some(Direction::C2S);
            m.frame = Some(frame);
            m.offset = Some(frame * 10);
            m.ts = Some(1_763_700_082_700_273_042 + frame as i64);
            m.version = version;
            m
        };
        let finding: Record = Finding::new("x.y", Severity::Info, "m".into()).into();
        let cases = [
            (3, "event", Some("2")),
            (3, "event", Some("2")),
            (3, "event", Some("2")),
            (4, "event", Some("2")),
            (3, "event", Some("2")),
            (3, "window", Some("2")),
            (3, "window", Some("2")),
            (3, "window", None),
            (3, "window", None),
            (5, "event", Some("1")),
        ];
        for (i, &(frame, kind, version)) in cases.iter().enumerate() {
            if i == 6 {
                record_line(&mut String::new(), "a.pcap", None, &finding, None);
            }
            let mut line = String::new();
            record_line(
                &mut line,
                "a.pcap",
                None,
                &message(frame, kind, version).into(),
                None,
            );
            let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
            let ts = format!("2025-11-21T04:41:22.{}Z", 700_273_042 + frame);
            assert_eq!(v["frame"], frame, "line {i}");
            assert_eq!(v["offset"], frame * 10, "line {i}");
            assert_eq!(v["ts"], ts.as_str(), "line {i}");
            assert_eq!(v["kind"], kind, "line {i}");
            assert_eq!(v["version"], serde_json::json!(version), "line {i}");
            assert!(line.contains(",\"length\":0,"), "line {i}: {line}");
        }
    }

    #[test]
    fn lines_come_out_in_stream_order() {
        let mut lines = StreamLines::default();
        let info = |stream| StreamInfo {
            stream,
            client_by: "syn",
            ..StreamInfo::default()
        };
        lines.push("c", &info(1));
        assert_eq!(lines.take(), "");
        lines.push("c", &info(0));
        let out = lines.take();
        assert!(
            out.starts_with("{\"capture\":\"c\",\"stream\":0,")
                && out.contains("\n{\"capture\":\"c\",\"stream\":1,")
        );
    }
}
