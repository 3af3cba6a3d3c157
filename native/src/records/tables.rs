//! The typed tables of `convert --to parquet --tables` (docs/schema.md, "Typed tables"): one Arrow
//! batch per table, filled straight from the records as the core makes them, so a table costs no
//! JSON parsing of protocol fields and no Python object per record.
//!
//! - `connections`: one row per TCP connection, from the reassembler's summary at its end, with
//!   the decoder's own tallies of the events it carried;
//! - `events`: one row per log event (Lumberjack, Log Courier, Hercules), the ECS core fields
//!   pulled from the document's text beside the whole document;
//! - `batches`: Lumberjack windows, Log Courier payloads and Gate requests, each paired with the
//!   time of its answer;
//! - `cql`: one row per CQL request, paired with its response;
//! - `findings`: the decoders' findings (TCP and capture findings are written by Python, which
//!   receives them as objects).
//!
//! Every schema is fixed: it never depends on the input, so the tables of any captures union.
//! Pairing state is bounded (`MAX_WAITING`): past it the oldest waiting row is written unpaired.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

use super::arrow::fields_text;
use crate::model::json::MemberPaths;
use crate::model::text::rfc3339_micros;
use crate::model::{Delivery, Direction, Document, Message, Record, Stamp, Value};
use crate::tcp::StreamInfo;

/// Rows that wait for their answer (a batch, a CQL request) and answers that wait for their
/// batch, each at most this many; past it the oldest is written, or forgotten, unpaired.
const MAX_WAITING: usize = 65_536;

/// A column's type: text, text never null, int64, a UTC timestamp in microseconds, boolean.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Name,
    Int,
    Time,
    Bool,
}

use Kind::{Bool, Int, Name, Text, Time};

/// `ts` and `ts_ns` of a record, then the columns named so in the table.
const FINDINGS: &[(&str, Kind)] = &[
    ("capture", Name),
    ("stream", Int),
    ("client", Text),
    ("server", Text),
    ("direction", Text),
    ("frame", Int),
    ("offset", Int),
    ("ts", Time),
    ("ts_ns", Int),
    ("protocol", Name),
    ("code", Name),
    ("severity", Name),
    ("message", Text),
    ("fields", Text),
];

/// `@timestamp` and the ECS core fields of an event document, in the order of their columns in
/// EVENTS, each a path of members (or the dotted name).
const ECS_PATHS: &[&[&str]] = &[
    &["@timestamp"],
    &["message"],
    &["host", "name"],
    &["log", "file", "path"],
    &["agent", "type"],
    &["agent", "name"],
    &["agent", "version"],
    &["event", "dataset"],
    &["service", "name"],
];

const EVENTS: &[(&str, Kind)] = &[
    ("capture", Name),
    ("stream", Int),
    ("client", Text),
    ("server", Text),
    ("frame", Int),
    ("offset", Int),
    ("ts", Time),
    ("ts_ns", Int),
    ("protocol", Name),
    ("version", Text),
    ("length", Int),
    ("seq", Int),
    ("batch", Text),
    ("event_id", Text),
    ("delivery", Text),
    ("acked", Bool),
    ("@timestamp", Time),
    ("message", Text),
    ("host.name", Text),
    ("log.file.path", Text),
    ("agent.type", Text),
    ("agent.name", Text),
    ("agent.version", Text),
    ("event.dataset", Text),
    ("service.name", Text),
    ("event", Text),
    ("fields", Text),
];

const BATCHES: &[(&str, Kind)] = &[
    ("capture", Name),
    ("stream", Int),
    ("client", Text),
    ("server", Text),
    ("protocol", Name),
    ("version", Text),
    ("kind", Name),
    ("batch", Text),
    ("frame", Int),
    ("offset", Int),
    ("ts", Time),
    ("ts_ns", Int),
    ("events", Int),
    ("acked_events", Int),
    ("answer_frame", Int),
    ("answer_ts", Time),
    ("answer_ts_ns", Int),
    ("latency_ns", Int),
    ("status", Int),
    ("outcome", Name),
];

const CQL: &[(&str, Kind)] = &[
    ("capture", Name),
    ("stream", Int),
    ("client", Text),
    ("server", Text),
    ("version", Text),
    ("event_id", Text),
    ("stream_id", Int),
    ("opcode", Name),
    ("query", Text),
    ("prepared_id", Text),
    ("keyspace", Text),
    ("consistency", Text),
    ("frame", Int),
    ("offset", Int),
    ("ts", Time),
    ("ts_ns", Int),
    ("response_opcode", Text),
    ("response_frame", Int),
    ("response_ts", Time),
    ("response_ts_ns", Int),
    ("latency_ns", Int),
    ("result_kind", Text),
    ("rows", Int),
    ("error_code", Int),
    ("error_message", Text),
    ("outcome", Name),
];

const CONNECTIONS: &[(&str, Kind)] = &[
    ("capture", Name),
    ("stream", Int),
    ("client", Name),
    ("server", Name),
    ("first_frame", Int),
    ("last_frame", Int),
    ("ts", Time),
    ("ts_ns", Int),
    ("last_ts", Time),
    ("last_ts_ns", Int),
    ("duration_ns", Int),
    ("packets_c2s", Int),
    ("packets_s2c", Int),
    ("bytes_c2s", Int),
    ("bytes_s2c", Int),
    ("missing_bytes", Int),
    ("gaps", Int),
    ("retransmissions", Int),
    ("out_of_order", Int),
    ("conflicts", Int),
    ("handshake", Bool),
    ("midstream", Bool),
    ("fin_c2s", Bool),
    ("fin_s2c", Bool),
    ("reset", Bool),
    ("state", Name),
    ("protocol", Name),
    ("version", Text),
    ("tls_version", Text),
    ("tls_cipher_suite", Text),
    ("tls_sni", Text),
    ("tls_alpn", Text),
    ("tls_decrypted", Bool),
    ("events_sent", Int),
    ("events_acked", Int),
    ("events_not_acked", Int),
    ("events_unknown", Int),
];

/// The tables in the order they are written, with their columns.
const TABLES: &[(&str, &[(&str, Kind)])] = &[
    ("connections", CONNECTIONS),
    ("events", EVENTS),
    ("batches", BATCHES),
    ("cql", CQL),
    ("findings", FINDINGS),
];

/// The Arrow schema of a table's columns.
fn schema_of(columns: &[(&str, Kind)]) -> SchemaRef {
    let fields = columns.iter().map(|&(name, kind)| {
        let t = match kind {
            Text | Name => DataType::Utf8,
            Int => DataType::Int64,
            Time => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            Bool => DataType::Boolean,
        };
        Field::new(name, t, kind != Name)
    });
    Arc::new(Schema::new(fields.collect::<Vec<_>>()))
}

enum Column {
    Text(StringBuilder),
    Int(Int64Builder),
    Time(TimestampMicrosecondBuilder),
    Bool(BooleanBuilder),
}

impl Column {
    fn new(kind: Kind) -> Self {
        match kind {
            Text | Name => Column::Text(StringBuilder::new()),
            Int => Column::Int(Int64Builder::new()),
            Time => Column::Time(TimestampMicrosecondBuilder::new().with_timezone("UTC")),
            Bool => Column::Bool(BooleanBuilder::new()),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Column::Text(b) => Arc::new(b.finish()),
            Column::Int(b) => Arc::new(b.finish()),
            Column::Time(b) => Arc::new(b.finish()),
            Column::Bool(b) => Arc::new(b.finish()),
        }
    }
}

/// One table's builders, filled a row at a time, column after column in schema order: each
/// `text`/`int`/`time`/`bool` call fills the next column (a column of another type gets a null,
/// which the tests' fixed schemas would show).
struct Table {
    schema: SchemaRef,
    columns: Vec<Column>,
    at: usize,
    len: usize,
}

impl Table {
    fn new(columns: &[(&str, Kind)]) -> Self {
        Table {
            schema: schema_of(columns),
            columns: columns.iter().map(|&(_, k)| Column::new(k)).collect(),
            at: 0,
            len: 0,
        }
    }

    fn next(&mut self) -> Option<&mut Column> {
        let column = self.columns.get_mut(self.at);
        self.at = self.at.saturating_add(1);
        column
    }

    fn text(&mut self, v: Option<&str>) -> &mut Self {
        match self.next() {
            Some(Column::Text(b)) => b.append_option(v),
            other => null(other),
        }
        self
    }

    fn int(&mut self, v: Option<i64>) -> &mut Self {
        match self.next() {
            Some(Column::Int(b)) => b.append_option(v),
            other => null(other),
        }
        self
    }

    fn uint(&mut self, v: Option<u64>) -> &mut Self {
        self.int(v.map(i64_of))
    }

    fn bool(&mut self, v: Option<bool>) -> &mut Self {
        match self.next() {
            Some(Column::Bool(b)) => b.append_option(v),
            other => null(other),
        }
        self
    }

    /// A timestamp in microseconds (`micros`).
    fn micros(&mut self, micros: Option<i64>) -> &mut Self {
        match self.next() {
            Some(Column::Time(b)) => b.append_option(micros),
            other => null(other),
        }
        self
    }

    /// A capture time as its two columns: microseconds toward the past (as Spark truncates),
    /// and the exact nanoseconds.
    fn time(&mut self, ns: Option<i64>) -> &mut Self {
        self.micros(ns.map(|ns| ns.div_euclid(1000))).int(ns)
    }

    fn end(&mut self) {
        debug_assert_eq!(self.at, self.columns.len(), "a row fills every column");
        while self.at < self.columns.len() {
            let column = self.next();
            null(column);
        }
        self.at = 0;
        self.len = self.len.saturating_add(1);
    }

    fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let columns: Vec<ArrayRef> = self.columns.iter_mut().map(Column::finish).collect();
        // Text columns start the next batch at this one's size, as the one-file rows do: grown
        // from nothing they are reallocated and copied many times a batch.
        for (builder, column) in self.columns.iter_mut().zip(&columns) {
            if let Column::Text(b) = builder {
                let bytes = column.to_data().buffers().get(1).map_or(0, |b| b.len());
                *b = StringBuilder::with_capacity(self.len, bytes);
            }
        }
        self.len = 0;
        RecordBatch::try_new(self.schema.clone(), columns)
    }
}

fn null(column: Option<&mut Column>) {
    debug_assert!(column.is_none(), "a value of another type than its column");
    match column {
        Some(Column::Text(b)) => b.append_null(),
        Some(Column::Int(b)) => b.append_null(),
        Some(Column::Time(b)) => b.append_null(),
        Some(Column::Bool(b)) => b.append_null(),
        None => {}
    }
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn int(m: &Message, name: &str) -> Option<i64> {
    m.get(name).and_then(Value::as_i64)
}

fn text<'a>(m: &'a Message, name: &str) -> Option<&'a str> {
    m.get(name).and_then(Value::as_str)
}

/// A Lumberjack window, Log Courier payload or Gate request whose answer is not yet written.
struct Batch {
    stamp: Option<Stamp>,
    protocol: &'static str,
    version: Option<&'static str>,
    kind: &'static str,
    batch: Option<String>,
    frame: Option<u64>,
    offset: Option<u64>,
    ts: Option<i64>,
    events: Option<i64>,
    acked_events: Option<i64>,
    answer_frame: Option<i64>,
    status: Option<i64>,
    outcome: &'static str,
}

/// A CQL request whose response is not yet written.
struct Request {
    stamp: Option<Stamp>,
    m: Message,
}

/// What the connections table learns of a stream before its end: its protocol version and the
/// decoder's tallies of its events (sent, acknowledged, not, unknown).
#[derive(Default)]
struct Connection {
    version: Option<&'static str>,
    events: Option<[i64; 4]>,
}

/// The five tables of one capture set's records.
pub struct Tables {
    /// The capture every row comes from (one Tables per capture, RecordOut's).
    pub capture: String,
    tables: Vec<Table>,
    /// Batches waiting for the time of their answer, by (stream, answer frame), oldest first.
    batches: HashMap<(u64, i64), Batch>,
    batch_order: VecDeque<(u64, i64)>,
    /// Answers (ACKs, ACKNs, Gate responses) waiting for their batch: (stream, frame) → ts.
    answers: HashMap<(u64, i64), Option<i64>>,
    answer_order: VecDeque<(u64, i64)>,
    /// CQL requests waiting for their response, by event id, oldest first.
    requests: HashMap<String, Request>,
    request_order: VecDeque<String>,
    /// Open streams' versions and event tallies, until their end.
    connections: HashMap<u64, Connection>,
    /// The ECS columns' member paths, found in one pass over a document.
    ecs_paths: MemberPaths,
    /// Buffers reused row after row: `fields`, an event id, a batch's name.
    text: String,
    id: String,
    batch: String,
}

impl Default for Tables {
    fn default() -> Self {
        Tables {
            capture: String::new(),
            tables: TABLES.iter().map(|(_, cols)| Table::new(cols)).collect(),
            batches: HashMap::new(),
            batch_order: VecDeque::new(),
            answers: HashMap::new(),
            answer_order: VecDeque::new(),
            requests: HashMap::new(),
            request_order: VecDeque::new(),
            connections: HashMap::new(),
            ecs_paths: MemberPaths::new(ECS_PATHS),
            text: String::new(),
            id: String::new(),
            batch: String::new(),
        }
    }
}

const CONNECTIONS_AT: usize = 0;
const EVENTS_AT: usize = 1;
const BATCHES_AT: usize = 2;
const CQL_AT: usize = 3;
const FINDINGS_AT: usize = 4;

/// The empty batches of every table: their names and fixed schemas.
pub fn empty() -> Vec<(&'static str, Result<RecordBatch, ArrowError>)> {
    let mut tables = Tables::default();
    tables.take()
}

impl Tables {
    /// Rows written since the last take, in all tables.
    pub fn len(&self) -> usize {
        self.tables.iter().map(|t| t.len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every table's rows so far (an empty batch for a table with none); the builders start over.
    pub fn take(&mut self) -> Vec<(&'static str, Result<RecordBatch, ArrowError>)> {
        TABLES
            .iter()
            .zip(&mut self.tables)
            .map(|((name, _), t)| (*name, t.finish()))
            .collect()
    }

    /// Rows still waiting for an answer, written unpaired: the input has ended.
    pub fn finish(&mut self) {
        while let Some(key) = self.batch_order.pop_front() {
            if let Some(b) = self.batches.remove(&key) {
                self.batch_row(b, None);
            }
        }
        while let Some(id) = self.request_order.pop_front() {
            if let Some(r) = self.requests.remove(&id) {
                self.cql_row(&r, None);
            }
        }
        self.answers.clear();
        self.answer_order.clear();
    }

    pub fn push(&mut self, stamp: Option<&Stamp>, r: &Record, tls: Option<&Value>) {
        match r {
            Record::Finding(f) => {
                let fields = fields_text(&mut self.text, &f.fields, tls).then_some(&*self.text);
                let t = &mut self.tables[FINDINGS_AT];
                t.text(Some(&self.capture))
                    .uint(stamp.map(|s| s.stream).or(f.stream))
                    .text(stamp.map(|s| s.client.as_str()))
                    .text(stamp.map(|s| s.server.as_str()))
                    .text(f.direction.map(|d| d.as_str()))
                    .uint(f.frame)
                    .uint(f.offset)
                    .time(f.ts)
                    .text(Some(f.protocol()))
                    .text(Some(f.code))
                    .text(Some(f.severity.as_str()))
                    .text(Some(&f.message))
                    .text(fields);
                t.end();
            }
            Record::Message(m) => self.message(stamp, m, tls),
        }
    }

    fn message(&mut self, stamp: Option<&Stamp>, m: &Message, tls: Option<&Value>) {
        // Events are skipped: a held event's record can come after its stream's end, and would
        // leave an entry that no end removes.
        if let (Some(s), false) = (stamp, m.kind == "event") {
            let c = self.connections.entry(s.stream).or_default();
            c.version = c.version.or(m.version);
            if m.kind == "connection" {
                let counts = ["events", "acked_events", "unacked_events", "unknown_events"];
                c.events = Some(counts.map(|n| int(m, n).unwrap_or(0)));
            } else if m.protocol == "hercules" && m.kind == "request" {
                // the Gate's connections have no summary record: the requests' events, by answer
                let n = int(m, "events").unwrap_or(0);
                let e = c.events.get_or_insert([0; 4]);
                let slot = match int(m, "status") {
                    Some(200..=299) => 1,
                    Some(_) => 2,
                    None => 3,
                };
                e[0] = e[0].saturating_add(n);
                e[slot] = e[slot].saturating_add(n);
            }
        }
        match (m.protocol, m.kind) {
            ("lumberjack" | "courier" | "hercules", "event") => self.event(stamp, m, tls),
            ("lumberjack", "window") | ("courier", "delivery") | ("hercules", "request") => {
                self.batch(stamp, m)
            }
            ("lumberjack", "ack") | ("courier", "ackn") | ("hercules", "response") => {
                self.answer(stamp, m)
            }
            ("cql", _) => self.cql(stamp, m),
            _ => {}
        }
    }

    fn event(&mut self, stamp: Option<&Stamp>, m: &Message, tls: Option<&Value>) {
        let Tables {
            tables,
            capture,
            text,
            id,
            batch,
            ecs_paths,
            ..
        } = self;
        let fields = fields_text(text, &m.fields, tls).then_some(&**text);
        id.clear();
        if let Some(e) = &m.event_id {
            e.write(id);
        }
        let batch = write_batch(batch, m).then_some(&**batch);
        let doc = m.event.as_ref();
        let document = doc.map(Document::text);
        let t = &mut tables[EVENTS_AT];
        t.text(Some(capture))
            .uint(stamp.map(|s| s.stream))
            .text(stamp.map(|s| s.client.as_str()))
            .text(stamp.map(|s| s.server.as_str()))
            .uint(m.frame)
            .uint(m.offset)
            .time(m.ts)
            .text(Some(m.protocol))
            .text(m.version)
            .uint(Some(m.length))
            .int(int(m, "seq"))
            .text(batch)
            .text(m.event_id.as_ref().map(|_| id.as_str()))
            .text(m.delivery.map(Delivery::as_str))
            .bool(m.acked);
        let mut ecs = [const { None }; ECS_PATHS.len()];
        if let Some(d) = doc {
            ecs_paths.read(d, &mut ecs);
        }
        let micros = ecs[0].as_deref().and_then(rfc3339_micros);
        t.micros(micros);
        for v in &ecs[1..] {
            t.text(v.as_deref());
        }
        t.text(document).text(fields);
        t.end();
    }

    fn batch(&mut self, stamp: Option<&Stamp>, m: &Message) {
        let (kind, events, acked_events, answer_frame, status, outcome) = match m.protocol {
            "lumberjack" => {
                let events = int(m, "received");
                let acked = int(m, "acked_events");
                let outcome = match (m.acked, acked) {
                    (Some(true), _) => "acknowledged",
                    (_, Some(n)) if n > 0 => "partial",
                    (Some(false), _) => "not_acknowledged",
                    _ => "unknown",
                };
                ("window", events, acked, int(m, "ack_frame"), None, outcome)
            }
            "courier" => {
                let acked = int(m, "acked_events");
                let complete = m.get("complete").and_then(Value::as_bool) == Some(true);
                let lost = m.get("acks_lost").and_then(Value::as_bool) == Some(true);
                let outcome = match acked {
                    _ if complete => "acknowledged",
                    Some(n) if n > 0 => "partial",
                    _ if lost => "unknown",
                    _ => "not_acknowledged",
                };
                let last_ack = m
                    .get("ack_frames")
                    .and_then(Value::as_array)
                    .and_then(|a| a.last())
                    .and_then(Value::as_i64);
                ("payload", int(m, "events"), acked, last_ack, None, outcome)
            }
            _ => {
                let status = int(m, "status");
                let outcome = match status {
                    Some(200..=299) => "accepted",
                    Some(_) => "rejected",
                    None => "unanswered",
                };
                let answer = int(m, "response_frame");
                let acked = status.map(|s| {
                    if (200..=299).contains(&s) {
                        int(m, "events").unwrap_or(0)
                    } else {
                        0
                    }
                });
                ("request", int(m, "events"), acked, answer, status, outcome)
            }
        };
        let b = Batch {
            stamp: stamp.cloned(),
            protocol: m.protocol,
            version: m.version,
            kind,
            batch: {
                let mut b = String::new();
                write_batch(&mut b, m).then_some(b)
            },
            frame: m.frame,
            offset: m.offset,
            ts: m.ts,
            events,
            acked_events,
            answer_frame,
            status,
            outcome,
        };
        let (Some(stream), Some(frame)) = (stamp.map(|s| s.stream), answer_frame) else {
            return self.batch_row(b, None);
        };
        let key = (stream, frame);
        if let Some(ts) = self.answers.remove(&key) {
            return self.batch_row(b, Some(ts));
        }
        if let Some(earlier) = self.batches.insert(key, b) {
            // two batches answered by one frame (a Courier resend's ACKN): the first goes out
            self.batch_row(earlier, None);
        } else {
            self.batch_order.push_back(key);
        }
        if self.batch_order.len() > MAX_WAITING {
            if let Some(oldest) = self.batch_order.pop_front() {
                if let Some(b) = self.batches.remove(&oldest) {
                    self.batch_row(b, None);
                }
            }
        }
    }

    /// An answer's time, for the batch it answers (written now, or when it comes).
    fn answer(&mut self, stamp: Option<&Stamp>, m: &Message) {
        let (Some(stream), Some(frame)) = (stamp.map(|s| s.stream), m.frame) else {
            return;
        };
        let key = (stream, i64_of(frame));
        if let Some(b) = self.batches.remove(&key) {
            return self.batch_row(b, Some(m.ts));
        }
        if self.answers.insert(key, m.ts).is_none() {
            self.answer_order.push_back(key);
        }
        if self.answer_order.len() > MAX_WAITING {
            if let Some(oldest) = self.answer_order.pop_front() {
                self.answers.remove(&oldest);
            }
        }
    }

    /// `answered`: the answer's capture time, when its record was seen.
    fn batch_row(&mut self, b: Batch, answered: Option<Option<i64>>) {
        let capture = self.capture.clone();
        let answer_ts = answered.flatten();
        let latency = answer_ts.zip(b.ts).map(|(a, s)| a.saturating_sub(s));
        let t = &mut self.tables[BATCHES_AT];
        t.text(Some(&capture))
            .uint(b.stamp.as_ref().map(|s| s.stream))
            .text(b.stamp.as_ref().map(|s| s.client.as_str()))
            .text(b.stamp.as_ref().map(|s| s.server.as_str()))
            .text(Some(b.protocol))
            .text(b.version)
            .text(Some(b.kind))
            .text(b.batch.as_deref())
            .uint(b.frame)
            .uint(b.offset)
            .time(b.ts)
            .int(b.events)
            .int(b.acked_events)
            .int(b.answer_frame)
            .time(answer_ts)
            .int(latency)
            .int(b.status)
            .text(Some(b.outcome));
        t.end();
    }

    fn cql(&mut self, stamp: Option<&Stamp>, m: &Message) {
        let Some(id) = &m.event_id else {
            return; // a server push, or a response to a request the capture missed
        };
        let mut key = String::new();
        id.write(&mut key);
        if m.direction == Some(Direction::C2S) {
            let r = Request {
                stamp: stamp.cloned(),
                m: m.clone(),
            };
            match m.delivery {
                // answered: its response comes next
                Some(Delivery::Answered | Delivery::Error) => {
                    if let Some(earlier) = self.requests.insert(key.clone(), r) {
                        self.cql_row(&earlier, None);
                    } else {
                        self.request_order.push_back(key);
                    }
                    if self.request_order.len() > MAX_WAITING {
                        if let Some(oldest) = self.request_order.pop_front() {
                            if let Some(r) = self.requests.remove(&oldest) {
                                self.cql_row(&r, None);
                            }
                        }
                    }
                }
                _ => self.cql_row(&r, None),
            }
        } else if let Some(r) = self.requests.remove(&key) {
            // its key stays in `request_order` until it reaches the front: O(1) a response
            self.cql_row(&r, Some(m));
        }
    }

    fn cql_row(&mut self, r: &Request, response: Option<&Message>) {
        let capture = self.capture.clone();
        let q = &r.m;
        let resp = |name: &str| response.and_then(|m| int(m, name));
        let latency = resp("latency_ns").or_else(|| {
            let (a, b) = (response.and_then(|m| m.ts)?, q.ts?);
            Some(a.saturating_sub(b))
        });
        let keyspace = text(q, "keyspace").or_else(|| response.and_then(|m| text(m, "keyspace")));
        let mut id = String::new();
        if let Some(e) = &q.event_id {
            e.write(&mut id);
        }
        let t = &mut self.tables[CQL_AT];
        t.text(Some(&capture))
            .uint(r.stamp.as_ref().map(|s| s.stream))
            .text(r.stamp.as_ref().map(|s| s.client.as_str()))
            .text(r.stamp.as_ref().map(|s| s.server.as_str()))
            .text(q.version)
            .text(Some(&id))
            .int(int(q, "stream_id"))
            .text(Some(text(q, "opcode").unwrap_or(q.kind)))
            .text(text(q, "query"))
            .text(text(q, "prepared_id"))
            .text(keyspace)
            .text(text(q, "consistency"))
            .uint(q.frame)
            .uint(q.offset)
            .time(q.ts)
            .text(response.map(|m| text(m, "opcode").unwrap_or(m.kind)))
            .uint(response.and_then(|m| m.frame))
            .time(response.and_then(|m| m.ts))
            .int(latency)
            .text(response.and_then(|m| text(m, "result_kind")))
            .int(resp("rows_count"))
            .int(resp("error_code"))
            .text(response.and_then(|m| text(m, "error_message")))
            .text(Some(q.delivery.map_or("unknown", Delivery::as_str)));
        t.end();
    }

    /// A stream's end: its connections row (`info` has its protocol and TLS details by now; its
    /// decoder's summary record, with the event tallies, came before).
    pub fn stream_end(&mut self, info: &StreamInfo) {
        let c = self.connections.remove(&info.stream).unwrap_or_default();
        let tls = info.tls.as_ref();
        let tls_text = |name: &str| -> Option<String> {
            match tls?.get(name)? {
                Value::String(s) => Some(s.clone()),
                Value::Array(items) => Some(
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                Value::Null => None,
                v => Some(v.to_string()),
            }
        };
        let [sent, acked, not_acked, unknown] = c.events.map_or([None; 4], |e| e.map(Some));
        let t = &mut self.tables[CONNECTIONS_AT];
        t.text(Some(&self.capture))
            .uint(Some(info.stream))
            .text(Some(&info.client))
            .text(Some(&info.server))
            .uint(Some(info.first_frame))
            .uint(Some(info.last_frame))
            .time(Some(info.first_ts))
            .time(Some(info.last_ts))
            .int(Some(info.last_ts.saturating_sub(info.first_ts)))
            .uint(Some(info.packets_c2s))
            .uint(Some(info.packets_s2c))
            .uint(Some(info.bytes_c2s))
            .uint(Some(info.bytes_s2c))
            .uint(Some(info.gap_bytes))
            .uint(Some(info.gaps))
            .uint(Some(info.retransmissions))
            .uint(Some(info.out_of_order))
            .uint(Some(info.conflicts))
            .bool(Some(info.handshake))
            .bool(Some(info.midstream))
            .bool(Some(info.fin_c2s))
            .bool(Some(info.fin_s2c))
            .bool(Some(info.reset))
            .text(Some(state(info)))
            .text(Some(info.protocol.unwrap_or("unknown")))
            .text(c.version)
            .text(tls_text("version").as_deref())
            .text(tls_text("cipher_suite").as_deref())
            .text(tls_text("sni").as_deref())
            .text(tls_text("alpn").as_deref())
            .bool(
                tls.and_then(|t| t.get("decrypted"))
                    .and_then(Value::as_bool),
            )
            .int(sent)
            .int(acked)
            .int(not_acked)
            .int(unknown);
        t.end();
    }
}

/// How a connection went, in the words of Zeek's `conn_state` where they fit: `S0` a SYN with no
/// answer, `REJ` a SYN answered by a reset, `S1` established and still open at the capture's
/// end, `SF` closed by both sides, `S2`/`S3` closed by the client/server only, `RST` reset after
/// its handshake, `OTH` picked up mid-stream (no handshake seen) and not reset.
fn state(info: &StreamInfo) -> &'static str {
    match info {
        i if i.midstream && i.reset => "RST",
        i if i.midstream => "OTH",
        i if !i.handshake && i.reset => "REJ",
        i if !i.handshake && i.packets_s2c == 0 => "S0",
        i if !i.handshake => "OTH",
        i if i.reset => "RST",
        i if i.fin_c2s && i.fin_s2c => "SF",
        i if i.fin_c2s => "S2",
        i if i.fin_s2c => "S3",
        _ => "S1",
    }
}

/// The batch an event or batch record belongs to, unique within its stream, into `out` (cleared
/// first): a Lumberjack window's number, a Log Courier payload's nonce, a Gate request's offset in
/// the client's bytes. False when it has none.
fn write_batch(out: &mut String, m: &Message) -> bool {
    use std::fmt::Write;
    out.clear();
    let number = match m.protocol {
        "lumberjack" => int(m, "window"),
        "courier" => {
            let nonce = text(m, "nonce");
            out.push_str(nonce.unwrap_or_default());
            return nonce.is_some();
        }
        "hercules" if m.kind == "request" => m.offset.map(i64_of),
        "hercules" => int(m, "request_offset"),
        _ => None,
    };
    number.is_some_and(|n| write!(out, "{n}").is_ok())
}
