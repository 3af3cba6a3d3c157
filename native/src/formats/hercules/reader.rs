//! Validating one Hercules event: a walk over the
//! bytes that checks every length against the bytes present and the event-size limit before
//! anything is read, and collects the problems that do not stop the parse (tag names, duplicate
//! keys, invalid UTF-8, ...). It builds nothing: the document is rendered by a second walk over
//! bytes this one proved sound (render.rs), so a batch costs O(one event) of memory.
//!
//! Events carry no length prefix and a value of an unknown type cannot be skipped, so a corrupt
//! value ends the parse (`Stop::Corrupt`); running out of bytes is `Stop::Truncated`, with the end
//! offset that could complete the event. Offsets are relative to the slice handed to `parse`.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one event (in memory); wire lengths are i32 checked non-negative, vector sizes multiply them by at most 16 in u64, and `need` compares every end with the bytes present and the event limit before it is used"
)]

use foldhash::HashMap;

use super::types::*;
use crate::model::pyrepr::str_repr;
use crate::model::{Severity, Value};

/// A finding-to-be: `offset` is relative to the start of the parsed bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub code: &'static str,
    pub severity: Severity,
    pub message: String,
    pub offset: usize,
    pub fields: Vec<(&'static str, Value)>,
}

/// Why an event could not be parsed.
#[derive(Clone, Debug, PartialEq)]
pub enum Stop {
    /// The bytes end inside the event; `needed` is the least end offset that could complete it.
    Truncated {
        needed: u64,
        offset: usize,
        path: String,
    },
    /// Nothing past `offset` can be located.
    Corrupt {
        code: &'static str,
        message: String,
        offset: usize,
        path: String,
    },
}

/// The header of an event that parsed, and its span.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Parsed {
    pub offset: usize,
    pub length: usize,
    pub version: u8,
    pub timestamp: i64,
    pub uuid: [u8; 16],
    pub tag_count: u16,
}

/// A plausible event time for resynchronisation: 2000-01-01T00:00Z .. 2100-01-01T00:00Z.
pub const PLAUSIBLE_TICKS: (i64, i64) = (
    946_684_800 * TICKS_PER_SECOND,
    4_102_444_800 * TICKS_PER_SECOND,
);
const NAME_CACHE_MAX: usize = 4096;
/// Keys of a container compared pairwise for repeats; bigger containers sort theirs.
const SMALL: usize = 32;

/// Parses events, remembering tag names across calls: a name that breaks the rules is reported
/// by the first event that parses with it, not by every event (a bounded cache, as in Python).
#[derive(Debug)]
pub struct EventParser {
    max_event: usize,
    /// Tag name that breaks the rules → whether it is still to be reported.
    names: HashMap<Vec<u8>, bool>,
    path: Vec<Part>,
    reported: Vec<(usize, usize)>,
    /// `Walk::keys`, kept for the next event.
    keys: Vec<(usize, usize)>,
}

#[derive(Clone, Copy, Debug)]
enum Part {
    Key(usize, usize),
    Index(usize),
}

impl EventParser {
    pub fn new(max_event: usize) -> Self {
        EventParser {
            max_event,
            names: HashMap::default(),
            path: Vec::new(),
            reported: Vec::new(),
            keys: Vec::new(),
        }
    }

    /// The event at `pos` of `data`; its problems are appended to `problems` (nothing is
    /// appended when it fails).
    pub fn parse(
        &mut self,
        data: &[u8],
        pos: usize,
        problems: &mut Vec<Problem>,
    ) -> Result<Parsed, Stop> {
        let before = problems.len();
        self.path.clear();
        self.reported.clear();
        self.keys.clear();
        let mut walk = Walk {
            data,
            end: data.len(),
            limit: pos.saturating_add(self.max_event),
            path: std::mem::take(&mut self.path),
            reported: std::mem::take(&mut self.reported),
            keys: std::mem::take(&mut self.keys),
            names: &mut self.names,
            problems,
            nulls: 0,
        };
        let result = walk.event(pos);
        let (path, reported) = (walk.path, walk.reported);
        self.keys = walk.keys;
        match result {
            Ok(parsed) => {
                for &(a, b) in &reported {
                    if let Some(report) = self.names.get_mut(&data[a..b]) {
                        *report = false;
                    }
                }
                event_problems(&parsed, problems);
                self.path = path;
                self.reported = reported;
                Ok(parsed)
            }
            Err(stop) => {
                problems.truncate(before);
                self.path = path;
                self.reported = reported;
                Err(stop)
            }
        }
    }

    /// Whether an event could start at `pos`: version 1 and a plausible timestamp (for resync).
    pub fn plausible_start(data: &[u8], pos: usize) -> bool {
        if data.len().saturating_sub(pos) < MIN_EVENT || data[pos] != VERSION {
            return false;
        }
        let ticks = be_i64(&data[pos + 1..pos + 9]);
        (PLAUSIBLE_TICKS.0..PLAUSIBLE_TICKS.1).contains(&ticks)
    }
}

pub fn be_i64(b: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    i64::from_be_bytes(a)
}

fn event_problems(ev: &Parsed, out: &mut Vec<Problem>) {
    if ev.version != VERSION {
        out.push(Problem {
            code: "hercules.version",
            severity: Severity::Warning,
            message: format!(
                "event version {} (only 1 exists; the Gate rejects the request with 400)",
                ev.version
            ),
            offset: ev.offset,
            fields: vec![("event_version", ev.version.into())],
        });
    }
    if !(PLAUSIBLE_TICKS.0..PLAUSIBLE_TICKS.1).contains(&ev.timestamp) {
        let why = if ev.timestamp < 0 {
            "negative: the Gate rejects it"
        } else {
            "outside 2000..2100"
        };
        out.push(Problem {
            code: "hercules.timestamp-range",
            severity: Severity::Warning,
            message: format!("event timestamp {} (100-ns ticks) is {why}", ev.timestamp),
            offset: ev.offset,
            fields: vec![("timestamp", ev.timestamp.into())],
        });
    }
    if ev.length > GATE_MAX_EVENT {
        out.push(Problem {
            code: "hercules.event-too-large",
            severity: Severity::Warning,
            message: format!(
                "event of {} bytes exceeds the Gate's default limit of {GATE_MAX_EVENT}",
                ev.length
            ),
            offset: ev.offset,
            fields: vec![("event_length", ev.length.into())],
        });
    }
}

/// A tag key as shown in paths and messages: UTF-8, or with replacement characters.
pub fn label(raw: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(raw)
}

/// Python's `"/".join(parts).replace("/[", "[")`.
fn hpath(data: &[u8], parts: &[Part]) -> String {
    let mut s = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            s.push('/');
        }
        match *p {
            Part::Key(a, b) => s.push_str(&label(&data[a..b])),
            Part::Index(n) => {
                s.push('[');
                s.push_str(&n.to_string());
                s.push(']');
            }
        }
    }
    if s.contains("/[") {
        s = s.replace("/[", "[");
    }
    s
}

struct Walk<'a, 'p> {
    data: &'a [u8],
    end: usize,
    limit: usize,
    path: Vec<Part>,
    reported: Vec<(usize, usize)>,
    /// Where the keys of the containers being read are (the first `SMALL` of each), innermost
    /// last: for the repeat check, with no second walk. One list for every level: an array per
    /// container was zeroed for each (512 bytes; 2 % of converting Gate traffic to JSON).
    keys: Vec<(usize, usize)>,
    names: &'p mut HashMap<Vec<u8>, bool>,
    problems: &'p mut Vec<Problem>,
    /// Nulls of the event's Null vectors so far: they cost no wire bytes, so without a cap per
    /// event a few bytes of nested vectors would render as gigabytes.
    nulls: u64,
}

impl<'a> Walk<'a, '_> {
    fn path(&self) -> String {
        hpath(self.data, &self.path)
    }

    fn corrupt(&self, code: &'static str, message: String, offset: usize) -> Stop {
        Stop::Corrupt {
            code,
            message,
            offset,
            path: self.path(),
        }
    }

    /// `pos + n`, when the bytes are there and within the event-size limit.
    fn need(&self, pos: usize, n: u64, what: &str) -> Result<usize, Stop> {
        let stop = pos as u64 + n;
        if stop > self.limit as u64 {
            return Err(self.corrupt(
                "hercules.absurd-length",
                format!("{what} of {n} bytes at offset {pos} runs past the event size limit"),
                pos,
            ));
        }
        if stop > self.end as u64 {
            return Err(Stop::Truncated {
                needed: stop,
                offset: pos,
                path: self.path(),
            });
        }
        Ok(stop as usize)
    }

    /// A signed i32 length at `pos`, rejecting negatives.
    fn length(&self, pos: usize, what: &str) -> Result<u64, Stop> {
        let stop = self.need(pos, 4, what)?;
        let n = i32::from_be_bytes([
            self.data[pos],
            self.data[pos + 1],
            self.data[pos + 2],
            self.data[stop - 1],
        ]);
        if n < 0 {
            return Err(self.corrupt(
                "hercules.negative-length",
                format!("{what} has negative length {n}"),
                pos,
            ));
        }
        Ok(n as u64)
    }

    fn problem(
        &mut self,
        code: &'static str,
        severity: Severity,
        message: String,
        offset: usize,
        extra: Option<(&'static str, Value)>,
    ) {
        let mut fields = vec![("path", Value::String(self.path()))];
        fields.extend(extra);
        self.problems.push(Problem {
            code,
            severity,
            message,
            offset,
            fields,
        });
    }

    fn event(&mut self, pos: usize) -> Result<Parsed, Stop> {
        self.need(pos, MIN_EVENT as u64, "event header")?;
        let d = &self.data[pos..pos + MIN_EVENT];
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&d[9..25]);
        let tag_count = u16::from_be_bytes([d[25], d[26]]);
        let (version, timestamp) = (d[0], be_i64(&d[1..9]));
        let stop = self.container(pos + 25, 1)?;
        Ok(Parsed {
            offset: pos,
            length: stop - pos,
            version,
            timestamp,
            uuid,
            tag_count,
        })
    }

    fn too_deep(&self, depth: usize, pos: usize) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(self.corrupt(
                "hercules.too-deep",
                format!("nesting deeper than {MAX_DEPTH} levels"),
                pos,
            ));
        }
        Ok(())
    }

    fn container(&mut self, pos: usize, depth: usize) -> Result<usize, Stop> {
        self.too_deep(depth, pos)?;
        let mut p = self.need(pos, 2, "container count")?;
        let count = u16::from_be_bytes([self.data[pos], self.data[pos + 1]]);
        if count > MAX_DOTNET_TAGS {
            self.problem(
                "hercules.dotnet-tag-count",
                Severity::Info,
                format!(
                    "container of {count} tags: the .NET reader reads the count as signed and fails"
                ),
                pos,
                Some(("count", count.into())),
            );
        }
        let bound = self.end.min(self.limit);
        let first = self.keys.len();
        for i in 0..count as usize {
            if p >= bound || p + self.data[p] as usize + 2 > bound {
                self.need(p, 1, "tag key length")?;
                let kstop = self.need(p + 1, self.data[p] as u64, "tag key")?;
                self.need(kstop, 1, "tag type")?;
            }
            let kstop = p + 1 + self.data[p] as usize;
            if i < SMALL {
                self.keys.push((p + 1, kstop));
            }
            let raw = &self.data[p + 1..kstop];
            self.path.push(Part::Key(p + 1, kstop));
            // A name within the rules is ASCII, so text: checking it costs less than looking it
            // up. Only names that break the rules are remembered, to be reported once.
            let report = !is_tag_name(raw)
                && match self.names.get(raw) {
                    Some(&r) => r,
                    None => {
                        if self.names.len() < NAME_CACHE_MAX {
                            self.names.insert(raw.to_vec(), true);
                        }
                        true
                    }
                };
            if report && !self.reported.iter().any(|&(a, b)| &self.data[a..b] == raw) {
                self.reported.push((p + 1, kstop));
                self.name_problem(p + 1, kstop, p);
            }
            let t = self.data[kstop];
            p = self.value(t, kstop + 1, depth)?;
            self.path.pop();
        }
        let data = self.data;
        let repeated = if usize::from(count) <= SMALL {
            let places = &self.keys[first..];
            let key = |i: usize| &data[places[i].0..places[i].1];
            (1..places.len())
                .any(|i| (0..i).any(|j| key(j) == key(i)))
                .then(|| (0..places.len()).map(key).collect())
        } else {
            Some(self.all_keys(pos + 2, count))
        };
        self.keys.truncate(first);
        if let Some(keys) = repeated {
            self.duplicates(keys, pos);
        }
        Ok(p)
    }

    /// The keys of a container of `count` tags whose first key is at `start`, found again by
    /// skipping its (already validated) values.
    fn all_keys(&self, start: usize, count: u16) -> Vec<&'a [u8]> {
        let mut keys = Vec::with_capacity(usize::from(count));
        let mut c = super::render::Cursor::new(self.data, start);
        for _ in 0..count {
            let Some(k) = c.key() else { break };
            keys.push(k);
            match c.u8() {
                Some(t) if c.skip(t).is_some() => {}
                _ => break,
            }
        }
        keys
    }

    /// A `hercules.duplicate-key` problem when keys repeat (Java keeps the last occurrence).
    fn duplicates(&mut self, keys: Vec<&[u8]>, pos: usize) {
        let mut sorted = keys;
        sorted.sort_unstable();
        let mut dups: Vec<String> = Vec::new();
        for w in sorted.windows(2) {
            if w[0] == w[1] {
                let name = key_str(w[0]);
                if dups.last() != Some(&name) {
                    dups.push(name);
                }
            }
        }
        if dups.is_empty() {
            return;
        }
        dups.sort_unstable();
        dups.dedup();
        let list: Vec<String> = dups.iter().map(|d| str_repr(d)).collect();
        let message = format!(
            "duplicate tag keys [{}]: Java keeps the last occurrence",
            list.join(", ")
        );
        let value = Value::Array(dups.into_iter().map(Value::String).collect());
        self.problem(
            "hercules.duplicate-key",
            Severity::Warning,
            message,
            pos,
            Some(("keys", value)),
        );
    }

    fn name_problem(&mut self, a: usize, b: usize, pos: usize) {
        let raw = &self.data[a..b];
        match std::str::from_utf8(raw) {
            Err(_) => {
                let hex = hex(raw);
                self.problem(
                    "hercules.invalid-utf8",
                    Severity::Warning,
                    format!("tag key {hex} is not valid UTF-8"),
                    pos,
                    Some(("raw", Value::String(hex))),
                );
            }
            Ok(key) => {
                let message = format!(
                    "tag key {} breaks the naming convention (non-empty, [a-zA-Z0-9_.-])",
                    str_repr(key)
                );
                let key = key.to_owned();
                self.problem(
                    "hercules.tag-name",
                    Severity::Info,
                    message,
                    pos,
                    Some(("key", Value::String(key))),
                );
            }
        }
    }

    fn value(&mut self, t: u8, pos: usize, depth: usize) -> Result<usize, Stop> {
        match t {
            CONTAINER => self.container(pos, depth + 1),
            STRING => {
                let n = self.length(pos, "string")?;
                self.string(pos + 4, n)
            }
            BYTE => self.need(pos, 1, "byte"),
            FLAG => {
                let p = self.need(pos, 1, "flag")?;
                self.flag(self.data[pos], pos);
                Ok(p)
            }
            UUID => self.need(pos, 16, "uuid"),
            NULL => Ok(pos),
            VECTOR => self.vector(pos, depth + 1),
            _ => match fixed(t) {
                Some((size, name)) => self.need(pos, size as u64, name),
                None => Err(self.unknown(t, pos - 1)),
            },
        }
    }

    fn unknown(&self, t: u8, pos: usize) -> Stop {
        self.corrupt(
            "hercules.unknown-type",
            format!(
                "unknown type code 0x{t:02x} at offset {pos}: values carry no size, so nothing after it can be decoded"
            ),
            pos,
        )
    }

    fn flag(&mut self, b: u8, pos: usize) {
        if b > 1 {
            self.problem(
                "hercules.flag-value",
                Severity::Info,
                format!("flag byte 0x{b:02x} is neither 0 nor 1 (Java reads it as true)"),
                pos,
                Some(("raw", b.into())),
            );
        }
    }

    fn string(&mut self, pos: usize, n: u64) -> Result<usize, Stop> {
        let stop = self.need(pos, n, "string")?;
        let raw = &self.data[pos..stop];
        if std::str::from_utf8(raw).is_err() {
            let h = hex(&raw[..raw.len().min(64)]);
            self.problem(
                "hercules.invalid-utf8",
                Severity::Warning,
                "string value is not valid UTF-8 (kept as raw bytes)".to_owned(),
                pos,
                Some(("raw", Value::String(h))),
            );
        }
        Ok(stop)
    }

    fn vector(&mut self, pos: usize, depth: usize) -> Result<usize, Stop> {
        self.too_deep(depth, pos)?;
        self.need(pos, 1, "vector element type")?;
        let elem = self.data[pos];
        if !is_type(elem) {
            return Err(self.unknown(elem, pos));
        }
        let n = self.length(pos + 1, "vector")?;
        let p = pos + 5;
        if let Some((size, _)) = fixed(elem) {
            return self.need(p, n * size as u64, "vector");
        }
        self.need(p, n * min_elem(elem), "vector")?;
        let n = n as usize;
        match elem {
            BYTE => Ok(p + n),
            FLAG => {
                for i in 0..n {
                    self.flag(self.data[p + i], p + i);
                }
                Ok(p + n)
            }
            UUID => Ok(p + 16 * n),
            NULL => {
                if n as u64 > MAX_NULLS {
                    return Err(self.corrupt(
                        "hercules.absurd-length",
                        format!("vector of {n} nulls (more than {MAX_NULLS})"),
                        pos,
                    ));
                }
                self.nulls += n as u64;
                if self.nulls > MAX_NULLS {
                    return Err(self.corrupt(
                        "hercules.absurd-length",
                        format!(
                            "vector of {n} nulls takes the event over {MAX_NULLS} nulls in all"
                        ),
                        pos,
                    ));
                }
                Ok(p)
            }
            _ => self.elements(elem, n, p, depth),
        }
    }

    fn elements(&mut self, elem: u8, n: usize, mut p: usize, depth: usize) -> Result<usize, Stop> {
        for i in 0..n {
            self.path.push(Part::Index(i));
            p = match elem {
                STRING => {
                    let size = self.length(p, "string")?;
                    self.string(p + 4, size)?
                }
                CONTAINER => self.container(p, depth + 1)?,
                _ => self.vector(p, depth + 1)?,
            };
            self.path.pop();
        }
        Ok(p)
    }
}

/// Python's `str(key)` of a key as kept: the text, or `b'...'` for a key that is not UTF-8.
fn key_str(raw: &[u8]) -> String {
    match std::str::from_utf8(raw) {
        Ok(s) => s.to_owned(),
        Err(_) => crate::model::pyrepr::bytes_repr(raw),
    }
}

pub use crate::model::text::hex;
