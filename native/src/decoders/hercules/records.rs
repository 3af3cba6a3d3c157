//! Records from decoded Hercules events and codec problems.
//!
//! An event record's `event` is the payload as a document; for events wirelog exported it is the
//! original document again and `fields.source` holds the record's origin. The `Reporter` turns
//! codec problems into findings: a tag name that breaks the convention is reported once per capture,
//! and any one code is reported individually only `REPEAT_LIMIT` times per stream, then summed up
//! in one finding at the end (a hostile body would otherwise give a finding per event).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one event (in memory) and finding counts"
)]

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::formats::hercules::reader::{Parsed, Problem};
use crate::formats::hercules::render::{exported, plain_text, Cursor, Renderer};
use crate::formats::hercules::types::{TICKS_PER_SECOND, VERSIONS};
use crate::model::json::Binary;
use crate::model::text::{civil, datetime, push_uuid, uuid as uuid_text};
use crate::model::{Direction, Document, Field, Finding, Message, Value, Written};

pub const PROTOCOL: &str = "hercules";
/// Findings of one code reported one by one per stream before the summary.
pub const REPEAT_LIMIT: u64 = 100;
/// Tag names remembered per capture for the once-per-capture rule.
const MAX_NAMES: usize = 10_000;

/// Where a record sits: (frame, ts) of the packet that carried it.
pub type Origin = (Option<u64>, Option<i64>);

/// 100-ns Unix ticks as ISO 8601 UTC with 7 fractional digits, None outside years 1..9999.
pub fn iso_time(ticks: i64) -> Option<String> {
    let mut out = String::with_capacity(28);
    push_iso_time(&mut out, ticks).then_some(out)
}

/// `iso_time(ticks)` appended to `out` (false, nothing written: outside years 1..9999).
fn push_iso_time(out: &mut String, ticks: i64) -> bool {
    let seconds = ticks.div_euclid(TICKS_PER_SECOND);
    let frac = ticks.rem_euclid(TICKS_PER_SECOND);
    const MIN: i64 = -62_135_596_800; // 0001-01-01T00:00:00Z
    const MAX: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    if !(MIN..=MAX).contains(&seconds) {
        return false;
    }
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    if y >= 1000 {
        datetime(out, days, secs, frac, 7); // (by hand: `format!` was 6 % of a Gate conversion)
        return true;
    }
    // Python's strftime("%Y") does not pad years below 1000.
    let _ = write!(
        out,
        "{y}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:07}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    true
}

/// An event's `time`, written from its ticks when the record is (no text is made per event that
/// only a tree-reading consumer would use).
#[derive(Debug)]
struct Time(i64);

impl Written for Time {
    fn write_json(&self, out: &mut String) {
        let at = out.len();
        out.push('"');
        if push_iso_time(out, self.0) {
            out.push('"');
        } else {
            out.truncate(at);
            out.push_str("null");
        }
    }

    fn value(&self) -> Value {
        iso_time(self.0).map_or(Value::Null, Value::String)
    }

    fn kept_cost(&self) -> Option<usize> {
        Some(28)
    }
}

/// An event's `uuid`, written from its 16 bytes as the canonical text.
#[derive(Debug)]
struct UuidText([u8; 16]);

impl Written for UuidText {
    fn write_json(&self, out: &mut String) {
        out.push('"');
        push_uuid(out, &self.0);
        out.push('"');
    }

    fn value(&self) -> Value {
        Value::String(uuid_text(&self.0))
    }

    fn kept_cost(&self) -> Option<usize> {
        Some(36)
    }
}

/// The `event` record of the event `ev` parsed from `data`; `offset` is where it starts in the
/// stream; `extra` fields follow its own (a Gate stream name is one `Shared` value for all the
/// events of a request); with `event_bytes`, it carries the event's bytes
/// (`StreamContext::event_bytes`).
pub fn event_message(
    data: &[u8],
    ev: &Parsed,
    (direction, offset, origin): (Direction, u64, Origin),
    extra: impl IntoIterator<Item = (&'static str, Field)>,
    event_bytes: bool,
) -> Message {
    let mut m = Message::new(PROTOCOL, "event");
    m.direction = Some(direction);
    m.offset = Some(offset);
    m.length = ev.length as u64;
    (m.frame, m.ts) = origin;
    m.version = Some(VERSIONS[ev.version as usize]);
    let extra = extra.into_iter();
    m.fields.reserve(5 + extra.size_hint().0);
    m.fields.push(("timestamp", ev.timestamp.into()));
    m.fields.push_written("time", Time(ev.timestamp));
    m.fields.push_written("uuid", UuidText(ev.uuid));
    m.fields.push(("tag_count", ev.tag_count.into()));
    let fields: &mut Vec<_> = &mut m.fields;
    fields.extend(extra);
    if event_bytes {
        use base64::Engine;
        let bytes = data
            .get(ev.offset..ev.offset + ev.length)
            .unwrap_or_default();
        let text = base64::engine::general_purpose::STANDARD.encode(bytes);
        m.fields.push(("bytes_base64", Value::String(text)));
    }
    let payload = ev.offset + 25;
    // An export has a `wirelog` container tag: where its bytes are nowhere, nothing is walked.
    let bytes = data.get(payload..ev.offset + ev.length).unwrap_or_default();
    let export =
        memchr::memmem::find(bytes, b"\x07wirelog\x01").and_then(|_| exported(data, payload));
    match export {
        None => {
            // kept as its bytes, the text rendered when first asked for (an export to Hercules
            // maps the bytes and never asks)
            let tags = data.get(payload..ev.offset + ev.length).unwrap_or_default();
            // Fuzzing and the tests hold the accepted bytes to rendering, and the text to the
            // tree it stands for.
            #[cfg(debug_assertions)]
            {
                let tree = Renderer { mapped: false }.tags(&mut Cursor::new(tags, 0));
                let tree = tree.map(|v| Document::from(v).to_string());
                let mut text = String::new();
                plain_text(tags, &mut text);
                assert_eq!(tree, Some(text));
            }
            m.event = Some(Document::binary(
                Binary::HerculesTags,
                tags.into(),
                plain_text,
            ));
        }
        Some(found) => {
            let mapped = Renderer { mapped: true };
            let at = |pos: usize| Cursor::new(data, pos);
            let mut source = found
                .wirelog
                .and_then(|pos| mapped.tags(&mut at(pos)))
                .unwrap_or(Value::Null);
            let fields = match found.fields {
                Some((t, pos)) => mapped.value(&mut at(pos), t).unwrap_or(Value::Null),
                None => Value::Object(Default::default()),
            };
            if let Value::Object(map) = &mut source {
                map.insert("fields".to_owned(), fields);
            }
            m.fields.push(("source", source));
            m.event = found
                .event
                .and_then(|(t, pos)| mapped.value(&mut at(pos), t))
                .filter(|v| !v.is_null())
                .map(Document::from);
        }
    }
    m
}

/// Turns codec problems into findings (see the module docstring).
#[derive(Debug, Default)]
pub struct Reporter {
    counts: Vec<(&'static str, u64, crate::model::Severity)>,
}

/// The tag names already reported in this capture (state shared by its connections).
#[derive(Debug, Default)]
pub struct TagNames(HashSet<String>);

impl Reporter {
    /// `p` as a finding at stream `offset`, or None for a name already reported or a code past
    /// its repeat limit. `extra` fields follow the problem's own.
    pub fn finding(
        &mut self,
        names: &mut TagNames,
        p: Problem,
        direction: Option<Direction>,
        offset: Option<u64>,
        origin: Origin,
        extra: Vec<(&'static str, Value)>,
    ) -> Option<Finding> {
        if p.code == "hercules.tag-name" {
            let key = p
                .fields
                .iter()
                .find(|(n, _)| *n == "key")
                .and_then(|(_, v)| v.as_str())
                .unwrap_or_default();
            if names.0.contains(key) {
                return None;
            }
            if names.0.len() < MAX_NAMES {
                names.0.insert(key.to_owned());
            }
        }
        if !self.count(p.code, p.severity) {
            return None;
        }
        let mut f = Finding::new(p.code, p.severity, p.message).at(origin.0, origin.1);
        f.direction = direction;
        f.offset = offset;
        f.fields = p.fields;
        for (name, value) in extra {
            match f.fields.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = value,
                None => f.fields.push((name, value)),
            }
        }
        Some(f)
    }

    /// Count one occurrence; whether it is reported individually.
    fn count(&mut self, code: &'static str, severity: crate::model::Severity) -> bool {
        match self.counts.iter_mut().find(|(c, _, _)| *c == code) {
            Some(entry) => {
                entry.1 += 1;
                entry.1 <= REPEAT_LIMIT
            }
            None => {
                self.counts.push((code, 1, severity));
                true
            }
        }
    }

    /// One summary per code that passed the limit, in the order the codes first occurred.
    pub fn summaries(&mut self, out: &mut Vec<crate::model::Record>) {
        for (code, n, severity) in std::mem::take(&mut self.counts) {
            if n > REPEAT_LIMIT {
                let text = format!(
                    "{code} occurred {n} times in this stream (only the first {REPEAT_LIMIT} are reported individually)"
                );
                out.push(Finding::new(code, severity, text).field("count", n).into());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_time_matches_python() {
        assert_eq!(
            iso_time(15_276_799_200_000_000).as_deref(),
            Some("2018-05-30T11:32:00.0000000Z")
        );
        assert_eq!(
            iso_time(-1).as_deref(),
            Some("1969-12-31T23:59:59.9999999Z")
        );
        assert_eq!(
            iso_time(-62_135_596_800 * TICKS_PER_SECOND).as_deref(),
            Some("1-01-01T00:00:00.0000000Z")
        );
        assert_eq!(iso_time(-62_135_596_800 * TICKS_PER_SECOND - 1), None);
        assert_eq!(
            iso_time(253_402_300_799 * TICKS_PER_SECOND + 9_999_999).as_deref(),
            Some("9999-12-31T23:59:59.9999999Z")
        );
        assert_eq!(iso_time(i64::MAX), None);
        assert_eq!(
            iso_time((-62_135_596_800 + 86_400 * 365 * 900) * TICKS_PER_SECOND + 5).as_deref(),
            Some("900-05-28T00:00:00.0000005Z")
        );
    }

    #[test]
    fn an_event_time_and_uuid_are_written_as_their_values_text() {
        let text = |w: &dyn Written| {
            let (mut written, mut tree) = (String::new(), String::new());
            w.write_json(&mut written);
            crate::model::json::value(&mut tree, &w.value());
            assert_eq!(written, tree);
            written
        };
        assert_eq!(text(&Time(-1)), "\"1969-12-31T23:59:59.9999999Z\"");
        assert_eq!(
            text(&Time(-62_135_596_800 * TICKS_PER_SECOND)),
            "\"1-01-01T00:00:00.0000000Z\""
        );
        assert_eq!(text(&Time(i64::MIN)), "null");
        let uuid = *b"\x01\x23\x45\x67\x89\xab\xcd\xef\x00\x11\x22\x33\x44\x55\x66\x77";
        assert_eq!(
            text(&UuidText(uuid)),
            "\"01234567-89ab-cdef-0011-223344556677\""
        );
    }
}
