//! Records as Arrow columns in the Parquet schema of docs/schema.md (wirelog/export/parquet.py
//! holds the same schema for pyarrow): typed common columns, then the event document and the
//! protocol fields as JSON text. Batches leave the core through the Arrow C stream interface.
//!
//! The capture time is two columns: `ts`, a UTC timestamp in microseconds (the Parquet form every
//! engine reads as it is: Spark rejects nanosecond Parquet timestamps), and `ts_ns`, the exact
//! nanoseconds since the epoch as an integer.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::model::json::DocText;
use crate::model::json::{self, Json};
use crate::model::{Delivery, Direction, Document, Message, Record, Stamp, Value};

/// The columns, in order (wirelog/export/parquet.py `SCHEMA`). Made once: each batch has it, and
/// making it again for each was a sixth of finishing one.
pub fn schema() -> SchemaRef {
    static SCHEMA: std::sync::OnceLock<SchemaRef> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(columns).clone()
}

fn columns() -> SchemaRef {
    let text = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    let int = |name: &str| Field::new(name, DataType::Int64, true);
    Arc::new(Schema::new(vec![
        text("record", false),
        text("capture", false),
        int("stream"),
        text("client", true),
        text("server", true),
        text("direction", true),
        int("frame"),
        int("offset"),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        int("ts_ns"),
        text("protocol", false),
        text("kind", true),
        text("version", true),
        int("length"),
        int("seq"),
        Field::new("acked", DataType::Boolean, true),
        text("event_id", true),
        text("delivery", true),
        text("message", true),
        text("code", true),
        text("severity", true),
        text("event", true),
        text("fields", true),
    ]))
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Protocol fields as one JSON object into `text` (cleared first), keys as the decoder named
/// them, then `tls` (its TLS stream's description, RecordOut::write_tls); false when there are
/// none (the column's null). The typed tables write their `fields` so too.
pub fn fields_text(
    text: &mut String,
    fields: &[(&'static str, impl Json)],
    tls: Option<&Value>,
) -> bool {
    text.clear();
    if fields.is_empty() && tls.is_none() {
        return false;
    }
    text.push('{');
    for (i, (name, v)) in fields.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        json::name(text, name);
        text.push(':');
        v.write_json(text);
    }
    if let Some(tls) = tls {
        if !fields.is_empty() {
            text.push(',');
        }
        text.push_str("\"tls\":");
        json::value(text, tls);
    }
    text.push('}');
    true
}

/// Rows appended one record at a time, finished into one batch.
pub struct Rows {
    record: StringBuilder,
    capture: StringBuilder,
    stream: Int64Builder,
    client: StringBuilder,
    server: StringBuilder,
    direction: StringBuilder,
    frame: Int64Builder,
    offset: Int64Builder,
    ts: TimestampMicrosecondBuilder,
    ts_ns: Int64Builder,
    protocol: StringBuilder,
    kind: StringBuilder,
    version: StringBuilder,
    length: Int64Builder,
    seq: Int64Builder,
    acked: BooleanBuilder,
    event_id: StringBuilder,
    delivery: StringBuilder,
    message: StringBuilder,
    code: StringBuilder,
    severity: StringBuilder,
    event: StringBuilder,
    fields: StringBuilder,
    text: String,
    len: usize,
}

impl Default for Rows {
    fn default() -> Self {
        Rows::sized(None)
    }
}

/// A quarter more than the last batch's: the next is likely about as big, and a builder that
/// outgrows its room is reallocated and copied whole (at exactly the last batch's size, every
/// batch a row or a byte longer did so: 2.6 % of converting bench_spark's capture to Parquet).
fn room(last: usize) -> usize {
    last.saturating_add(last / 4)
}

impl Rows {
    /// Builders with room for the rows and each text column's bytes of `last` (its batch not yet
    /// finished), or none: builders grown from nothing were reallocated and copied a dozen times a
    /// batch (4 % of a Parquet conversion for the three long text columns alone).
    fn sized(last: Option<&Rows>) -> Self {
        let n = last.map_or(0, |r| room(r.len));
        let text = |column: fn(&Rows) -> &StringBuilder| {
            let bytes = last.map_or(0, |r| room(column(r).values_slice().len()));
            StringBuilder::with_capacity(n, bytes)
        };
        let int = || Int64Builder::with_capacity(n);
        Rows {
            record: text(|r| &r.record),
            capture: text(|r| &r.capture),
            stream: int(),
            client: text(|r| &r.client),
            server: text(|r| &r.server),
            direction: text(|r| &r.direction),
            frame: int(),
            offset: int(),
            ts: TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC"),
            ts_ns: int(),
            protocol: text(|r| &r.protocol),
            kind: text(|r| &r.kind),
            version: text(|r| &r.version),
            length: int(),
            seq: int(),
            acked: BooleanBuilder::with_capacity(n),
            event_id: text(|r| &r.event_id),
            delivery: text(|r| &r.delivery),
            message: text(|r| &r.message),
            code: text(|r| &r.code),
            severity: text(|r| &r.severity),
            event: text(|r| &r.event),
            fields: text(|r| &r.fields),
            text: String::new(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Protocol fields as one JSON object (null when there are none), keys as the decoder named
    /// them, then `tls` (its TLS stream's description, RecordOut::write_tls).
    fn append_fields(&mut self, fields: &[(&'static str, impl Json)], tls: Option<&Value>) {
        if fields_text(&mut self.text, fields, tls) {
            self.fields.append_value(&self.text);
        } else {
            self.fields.append_null();
        }
    }

    pub fn push(&mut self, capture: &str, stamp: Option<&Stamp>, r: &Record, tls: Option<&Value>) {
        let f = match r {
            Record::Message(m) => {
                let seq = m.get("seq").and_then(Value::as_i64);
                let event = m.event.as_ref().map(Document::as_text);
                return self.push_message(capture, stamp, m, &m.fields, event, seq, tls);
            }
            Record::Finding(f) => f,
        };
        let whence = (f.direction, f.frame, f.offset, f.ts);
        self.whence(capture, stamp, f.stream, whence, f.protocol());
        self.record.append_value("finding");
        self.kind.append_null();
        self.version.append_null();
        self.length.append_null();
        self.seq.append_null();
        self.acked.append_null();
        self.event_id.append_null();
        self.delivery.append_null();
        self.message.append_value(&f.message);
        self.code.append_value(f.code);
        self.severity.append_value(f.severity.as_str());
        self.event.append_null();
        self.append_fields(&f.fields, tls);
        self.len = self.len.saturating_add(1);
    }

    /// The row of the message `m` with `fields`, `event` and `seq` (its own are not read): a
    /// record read in place from the held store (`held::pack::Parts`) is written so.
    #[allow(
        clippy::too_many_arguments,
        reason = "a message's parts, each read from elsewhere"
    )]
    pub fn push_message(
        &mut self,
        capture: &str,
        stamp: Option<&Stamp>,
        m: &Message,
        fields: &[(&'static str, impl Json)],
        event: Option<DocText<'_>>,
        seq: Option<i64>,
        tls: Option<&Value>,
    ) {
        self.whence(
            capture,
            stamp,
            None,
            (m.direction, m.frame, m.offset, m.ts),
            m.protocol,
        );
        self.record.append_value("message");
        self.kind.append_value(m.kind);
        self.version.append_option(m.version);
        self.length.append_value(i64_of(m.length));
        self.seq.append_option(seq);
        self.acked.append_option(m.acked);
        match &m.event_id {
            Some(id) => {
                self.text.clear();
                id.write(&mut self.text);
                self.event_id.append_value(&self.text);
            }
            None => self.event_id.append_null(),
        }
        self.delivery
            .append_option(m.delivery.map(Delivery::as_str));
        let text = event.and_then(|d| d.message_in(&mut self.text));
        self.message.append_option(text);
        self.code.append_null();
        self.severity.append_null();
        self.event.append_option(event.map(|d| d.text()));
        self.append_fields(fields, tls);
        self.len = self.len.saturating_add(1);
    }

    /// The columns every row has up to `protocol`: where the record is (`stream`: a finding's own,
    /// when no stream's `stamp` says it).
    fn whence(
        &mut self,
        capture: &str,
        stamp: Option<&Stamp>,
        stream: Option<u64>,
        (direction, frame, offset, ts): (Option<Direction>, Option<u64>, Option<u64>, Option<i64>),
        protocol: &str,
    ) {
        self.capture.append_value(capture);
        self.stream
            .append_option(stamp.map(|s| s.stream).or(stream).map(i64_of));
        self.client.append_option(stamp.map(|s| s.client.as_str()));
        self.server.append_option(stamp.map(|s| s.server.as_str()));
        self.direction.append_option(direction.map(|d| d.as_str()));
        self.frame.append_option(frame.map(i64_of));
        self.offset.append_option(offset.map(i64_of));
        // microseconds rounded toward the past (a time before 1970 too), as Spark truncates
        self.ts.append_option(ts.map(|ns| ns.div_euclid(1000)));
        self.ts_ns.append_option(ts);
        self.protocol.append_value(protocol);
    }

    /// The rows so far as one batch; the builders start over, sized after this batch.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let mut next = Rows::sized(Some(self));
        std::mem::swap(&mut next.text, &mut self.text);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.record.finish()),
            Arc::new(self.capture.finish()),
            Arc::new(self.stream.finish()),
            Arc::new(self.client.finish()),
            Arc::new(self.server.finish()),
            Arc::new(self.direction.finish()),
            Arc::new(self.frame.finish()),
            Arc::new(self.offset.finish()),
            Arc::new(self.ts.finish()),
            Arc::new(self.ts_ns.finish()),
            Arc::new(self.protocol.finish()),
            Arc::new(self.kind.finish()),
            Arc::new(self.version.finish()),
            Arc::new(self.length.finish()),
            Arc::new(self.seq.finish()),
            Arc::new(self.acked.finish()),
            Arc::new(self.event_id.finish()),
            Arc::new(self.delivery.finish()),
            Arc::new(self.message.finish()),
            Arc::new(self.code.finish()),
            Arc::new(self.severity.finish()),
            Arc::new(self.event.finish()),
            Arc::new(self.fields.finish()),
        ];
        *self = next;
        RecordBatch::try_new(schema(), columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Finding, Message, Severity};

    fn records() -> Vec<Record> {
        let mut event = Message::new("lumberjack", "event");
        (event.frame, event.ts, event.acked) = (Some(7), Some(-1_500), Some(true));
        event.set("seq", 3u64);
        event.event = Some(Document::canonical(r#"{"message":"hé","n":1}"#));
        let finding = Finding::new("test.finding", Severity::Warning, "a \"finding\"".into());
        vec![
            event.into(),
            finding.into(),
            Message::new("cql", "query").into(),
        ]
    }

    /// A batch after the first (builders started at the last one's size) is the batch fresh
    /// builders make of the same rows: same schema (the timestamp's zone), same values.
    #[test]
    fn later_batches_are_what_fresh_builders_make() {
        let stamp = Stamp {
            stream: 4,
            client: "10.0.0.1:4000".into(),
            server: "10.0.0.2:5044".into(),
        };
        let build = |rows: &mut Rows| {
            for (i, r) in records().iter().enumerate() {
                let tls = (i == 1).then(|| Value::from("TLS 1.3"));
                rows.push("a.pcap", (i != 2).then_some(&stamp), r, tls.as_ref());
            }
            rows.finish().expect("a batch")
        };
        let fresh = build(&mut Rows::default());
        let mut reused = Rows::default();
        for _ in 0..3 {
            assert_eq!(build(&mut reused), fresh);
        }
        assert_eq!(fresh.num_rows(), 3);
        assert_eq!(fresh.schema(), schema());
    }
}
