//! Where the records of a capture go, in the consumer's form: NDJSON text, Arrow rows, typed tables,
//! Hercules events or objects after the filter, and the report's timeline (the writers are records/
//! and report/; this chooses among them for the session).

use arrow_array::RecordBatch;
use arrow_schema::ArrowError;

use crate::held::pack::{Parts, Scalar};
use crate::model::{Record, Stamp, Value};
use crate::records::arrow::Rows;
use crate::records::filter::Filter;
use crate::records::hercules::{Encoder, Events, View};
use crate::records::json;
use crate::records::tables::Tables;
use crate::report::Timeline;
use crate::tcp::{Event, StreamInfo};

/// Records taken out of the core at once.
pub enum Taken {
    /// The lines and how many there are.
    Ndjson(String, usize),
    Batch(Result<RecordBatch, ArrowError>),
    /// A batch of every typed table (`--tables`), by name.
    Tables(Vec<(&'static str, Result<RecordBatch, ArrowError>)>),
    /// The messages as Hercules event bodies, for the output's `hercules::Writer`.
    Hercules(Events),
    /// The records themselves, for consumers that want one object per record (`inspect`, the API).
    Records(Vec<(Option<Stamp>, Record)>),
}

/// The form records leave the core in.
pub enum Form {
    Ndjson(String),
    Arrow(Box<Rows>),
    /// The typed tables of docs/schema.md (`convert --to parquet --tables`).
    Tables(Box<Tables>),
    /// Messages become Hercules events (findings are not exported: docs/hercules.md).
    Hercules(Box<Encoder>),
    Records(Vec<(Option<Stamp>, Record)>),
}

pub struct RecordOut {
    capture: String,
    filter: Filter,
    form: Form,
    written: usize,
    /// `wirelog report`'s aggregation: sees every record the filter keeps.
    pub timeline: Option<Box<Timeline>>,
}

impl RecordOut {
    pub fn new(capture: &str, filter: Filter, mut form: Form) -> Self {
        if let Form::Tables(t) = &mut form {
            capture.clone_into(&mut t.capture);
        }
        RecordOut {
            capture: capture.to_owned(),
            filter,
            form,
            written: 0,
            timeline: None,
        }
    }

    /// Whether its form reads events' messages where the canonicaliser noted them (the Arrow
    /// rows' `message` column: `Document::message_in`).
    pub fn reads_messages(&self) -> bool {
        matches!(self.form, Form::Arrow(_))
    }

    /// Write `r` (of the stream `stamp`, whose protocol is `stream_protocol`) if the filter keeps it.
    pub fn write(&mut self, r: Record, stamp: Option<&Stamp>, stream_protocol: Option<&str>) {
        self.write_tls(r, stamp, stream_protocol, None);
    }

    /// `write` for a record of a TLS stream: `tls` (the stream's description) is its last field.
    /// NDJSON and Arrow write it from here: a copy per record was most of what decrypted
    /// streams cost over plaintext ones (bench/bench_tls.py).
    pub fn write_tls(
        &mut self,
        mut r: Record,
        stamp: Option<&Stamp>,
        stream_protocol: Option<&str>,
        tls: Option<&Value>,
    ) {
        if !self.filter.keeps(&r, stamp, stream_protocol) {
            return;
        }
        // A TLS record of these forms comes back through `write` with its description set.
        let again = tls.is_some() && matches!(self.form, Form::Hercules(_) | Form::Records(_));
        if let (Some(t), false) = (&mut self.timeline, again) {
            t.record(&r, stamp);
        }
        match &mut self.form {
            Form::Ndjson(text) => json::record_line(text, &self.capture, stamp, &r, tls),
            Form::Arrow(rows) => rows.push(&self.capture, stamp, &r, tls),
            Form::Tables(tables) => tables.push(stamp, &r, tls),
            Form::Hercules(_) | Form::Records(_) if tls.is_some() => {
                let tls = tls.cloned().expect("checked");
                match &mut r {
                    Record::Message(m) => m.set("tls", tls),
                    Record::Finding(f) => f.fields.push(("tls", tls)),
                }
                return self.write(r, stamp, stream_protocol);
            }
            Form::Hercules(encoder) => {
                let Record::Message(m) = &r else { return };
                encoder.push(&View::message(&self.capture, stamp, m));
            }
            Form::Records(list) => list.push((stamp.cloned(), r)),
        }
        self.written = self.written.saturating_add(1);
    }

    /// `write_tls` of a message read in place from the held store, its head set: NDJSON text and
    /// Arrow rows are written from its parts when no timeline reads the records; the other forms
    /// and the timeline take it whole.
    pub fn write_parts(
        &mut self,
        p: &Parts<'_>,
        stamp: Option<&Stamp>,
        stream_protocol: Option<&str>,
        tls: Option<&Value>,
    ) {
        let m = &p.head;
        let whole =
            self.timeline.is_some() || !matches!(self.form, Form::Ndjson(_) | Form::Arrow(_));
        if whole {
            return self.write_tls(p.to_message().into(), stamp, stream_protocol, tls);
        }
        if !(self.filter).keeps_message(m, p.event.is_some(), stamp, stream_protocol) {
            return;
        }
        if let Form::Ndjson(text) = &mut self.form {
            json::message_parts_line(text, &self.capture, stamp, m, p.fields(), p.event, tls);
        } else if let Form::Arrow(rows) = &mut self.form {
            let seq = p.get("seq").and_then(Scalar::as_i64);
            rows.push_message(&self.capture, stamp, m, p.fields(), p.event, seq, tls);
        }
        self.written = self.written.saturating_add(1);
    }

    /// A reassembler event (bytes, gap, TCP finding, stream end) for `wirelog report`'s timeline,
    /// when the filter keeps what it belongs to (`stream_protocol`: its stream's).
    pub fn tcp_event(&mut self, e: &Event, stream_protocol: Option<&str>) {
        let Some(timeline) = &mut self.timeline else {
            return;
        };
        let f = &self.filter;
        let kept = !f.active()
            || match e {
                Event::Finding(x) => f.keeps(&Record::Finding(x.clone()), None, stream_protocol),
                Event::Chunk { stream, ts, .. } => {
                    f.keeps_tcp(*stream, stream_protocol, (*ts, *ts), false)
                }
                Event::Gap { stream, ts, .. } => {
                    f.keeps_tcp(*stream, stream_protocol, (*ts, *ts), true)
                }
                Event::End(info) => f.keeps_tcp(
                    info.stream,
                    stream_protocol,
                    (info.first_ts, info.last_ts),
                    false,
                ),
            };
        if kept {
            timeline.event(e);
        }
    }

    /// Whether the timeline (if any) is done with `stream`'s lane (`Timeline::settled`).
    pub fn settled(&self, stream: u64) -> bool {
        self.timeline.as_ref().is_none_or(|t| t.settled(stream))
    }

    /// A stream's end (its protocol and TLS details set): the typed tables' connections row,
    /// when the filter keeps the stream.
    pub fn stream_end(&mut self, info: &StreamInfo) {
        let Form::Tables(tables) = &mut self.form else {
            return;
        };
        let span = (info.first_ts, info.first_ts.max(info.last_ts));
        if !self.filter.active()
            || self
                .filter
                .keeps_tcp(info.stream, info.protocol, span, false)
        {
            tables.stream_end(info);
            self.written = self.written.saturating_add(1);
        }
    }

    /// The input's end: the typed tables' rows still waiting for an answer are written.
    pub fn end(&mut self) {
        if let Form::Tables(tables) = &mut self.form {
            tables.finish();
            self.written = self.written.max(tables.len());
        }
    }

    /// Records written since the last take.
    pub fn pending(&self) -> usize {
        self.written
    }

    /// The records written since the last take, None when there are none.
    pub fn take(&mut self) -> Option<Taken> {
        if self.written == 0 {
            return None;
        }
        let count = std::mem::take(&mut self.written);
        Some(match &mut self.form {
            // The next take is likely as big: growing a buffer by doubling copies it each time.
            Form::Ndjson(text) => {
                let next = String::with_capacity(text.len().saturating_add(text.len() / 4));
                Taken::Ndjson(std::mem::replace(text, next), count)
            }
            Form::Arrow(rows) => Taken::Batch(rows.finish()),
            Form::Tables(tables) => Taken::Tables(tables.take()),
            Form::Hercules(encoder) => Taken::Hercules(encoder.take()),
            Form::Records(list) => Taken::Records(std::mem::take(list)),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::held::pack::Back;
    use crate::held::spill::SpillStore;
    use crate::model::{Delivery, Direction, Document, EventId, Message};

    /// A Lumberjack event record as a decoder keeps it (`k` varies its facts and document).
    fn event(k: u64) -> Message {
        let mut m = Message::new("lumberjack", "event");
        m.direction = Some(Direction::C2S);
        m.offset = Some(k * 1_000);
        m.frame = (k % 3 != 0).then_some(k);
        m.ts = Some(1_764_654_000_000_000_000 + k as i64 * 7_000_000_000);
        m.length = 90 + k;
        m.version = Some("2");
        m.set("seq", k);
        m.set("window", if k % 2 == 0 { Value::Null } else { k.into() });
        m.set("ack_frame", Value::Null);
        m.set("ack_offset", Value::Null);
        m.set("compressed", k % 4 == 1);
        m.set("inflated_offset", k << 10);
        m.event = match k % 4 {
            0 => None,
            1 => Some(Document::canonical(r#"{"message":"plain","n":1}"#)),
            2 => Some(Document::canonical_noted(
                r#"{"a":1,"message":"h\u00e9"}"#,
                (18, 25),
            )),
            _ => Some(Document::canonical(r#"{"host":"x"}"#)),
        };
        m.acked = [None, Some(false), Some(true)][(k % 3) as usize];
        m.event_id = Some(EventId::First {
            stream: 3,
            frame: k,
            seq: k,
        });
        m.delivery = Some(Delivery::Unknown);
        m
    }

    fn filters() -> Vec<Filter> {
        let f = Filter::default;
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<HashSet<String>>();
        vec![
            f(),
            Filter {
                events: true,
                ..f()
            },
            Filter {
                kinds: set(&["event"]),
                ..f()
            },
            Filter {
                kinds: set(&["window"]),
                ..f()
            },
            Filter {
                protocols: set(&["cql"]),
                ..f()
            },
            Filter {
                protocols: set(&["lumberjack"]),
                ..f()
            },
            Filter {
                streams: [3].into(),
                ..f()
            },
            Filter {
                streams: [4].into(),
                ..f()
            },
            Filter {
                findings: true,
                ..f()
            },
            Filter {
                since: Some(1_764_654_020_000_000_000),
                ..f()
            },
            Filter {
                until: Some(1_764_654_020_000_000_000),
                ..f()
            },
        ]
    }

    fn forms() -> [fn() -> Form; 3] {
        [
            || Form::Ndjson(String::new()),
            || Form::Arrow(Box::default()),
            || Form::Records(Vec::new()),
        ]
    }

    /// What `out` has taken, comparable.
    fn taken(out: &mut RecordOut) -> String {
        match out.take() {
            None => String::new(),
            Some(Taken::Ndjson(text, n)) => format!("{n} {text}"),
            Some(Taken::Batch(batch)) => format!("{:?}", batch.expect("a batch")),
            Some(Taken::Records(list)) => format!("{list:?}"),
            Some(_) => unreachable!("not made here"),
        }
    }

    /// A record read in place from the held store and written from its parts is the line, row
    /// or record its message makes, whatever the filter, form and TLS description.
    #[test]
    fn a_record_written_from_its_parts_is_its_message_written() {
        let stamp = Stamp {
            stream: 3,
            client: "10.0.0.1:5000".into(),
            server: "10.0.0.2:5044".into(),
        };
        let tls = serde_json::json!({"version": "TLSv1.3", "sni": "logs"});
        let mut store = SpillStore::new(1 << 20);
        store.set_notes(true);
        for filter in filters() {
            for form in forms() {
                for tls in [None, Some(&tls)] {
                    let mut whole = RecordOut::new("c.pcap", filter.clone(), form());
                    let mut parts = RecordOut::new("c.pcap", filter.clone(), form());
                    for k in 0..12 {
                        let m = event(k);
                        let held = store.hold(&m);
                        // (the verdict's answer is not held: the session sets it)
                        let read = store.take_back(held, |back| match back {
                            Back::Parts(p) => {
                                (p.head.event_id, p.head.delivery) = (m.event_id, m.delivery);
                                parts.write_parts(p, Some(&stamp), Some("lumberjack"), tls);
                            }
                            Back::Whole(_) => panic!("its fields are scalars"),
                        });
                        assert!(read.is_some());
                        whole.write_tls(m.into(), Some(&stamp), Some("lumberjack"), tls);
                    }
                    let want = taken(&mut whole);
                    assert_eq!(taken(&mut parts), want, "{filter:?}");
                }
            }
        }
    }
}
