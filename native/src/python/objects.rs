//! The core's records as Python objects: the wirelog.model classes (Message, Finding, Chunk, Gap,
//! StreamInfo, EventCounts) made from records, JSON values as Python values, and a take of the
//! records in the consumer's form (`taken`).

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple};

use crate::model::{Direction, Finding, Message, Record, Severity, Stamp, Value};
use crate::pipeline::out::Taken;
use crate::tcp::{Event, StreamInfo};

use super::arrow::{tables_dict, ArrowRecords};
use super::buffer::Buffer;
use super::hercules::HerculesEvents;

/// Slowest CQL answers of a batch that a summary run keeps as objects (the summary lists five).
const SLOWEST: usize = 5;

/// What a summary run counts a message by: stream, protocol, version, acked (events), kind and
/// framing (CQL messages).
type CountKey = (
    Option<u64>,
    &'static str,
    Option<&'static str>,
    Option<bool>,
    Option<&'static str>,
    Option<String>,
);

/// Findings a summary run makes objects of, per code and input: the summary lists the first
/// frames (five) of each code and its first sentence; the others of the code are counted.
const FIRST_FINDINGS: u8 = 5;

/// What a summary run counts a finding by: stream, code, severity, protocol.
type FindingKey = (Option<u64>, &'static str, Severity, &'static str);

/// Count rows in first-seen order, with where each key's row is (a batch may hold the messages of
/// thousands of connections).
struct Rows<K>(Vec<(K, u64)>, foldhash::HashMap<K, usize>);

impl<K> Default for Rows<K> {
    fn default() -> Self {
        Rows(Vec::new(), foldhash::HashMap::default())
    }
}

impl<K: Clone + Eq + std::hash::Hash> Rows<K> {
    fn count(&mut self, key: K) {
        match self.1.get(&key) {
            Some(&row) => self.0[row].1 += 1,
            None => {
                self.1.insert(key.clone(), self.0.len());
                self.0.push((key, 1));
            }
        }
    }
}

fn message_key(stream: Option<u64>, m: &Message) -> CountKey {
    let framing = m.get("framing").and_then(Value::as_str).map(str::to_owned);
    (stream, m.protocol, m.version, None, Some(m.kind), framing)
}

/// The Python classes records become (wirelog.model), looked up once per object.
pub(super) struct Model {
    /// Event messages and findings counted, not made objects of (records="summary" or "report").
    count_events: bool,
    /// Findings of each code made objects of so far (with `count_events`; FIRST_FINDINGS at most).
    findings_shown: foldhash::HashMap<&'static str, u8>,
    event_counts: Py<PyAny>,
    message: Py<PyAny>,
    chunk: Py<PyAny>,
    gap: Py<PyAny>,
    finding: Py<PyAny>,
    stream_info: Py<PyAny>,
    c2s: Py<PyAny>,
    s2c: Py<PyAny>,
    info: Py<PyAny>,
    warning: Py<PyAny>,
    error: Py<PyAny>,
}

/// `wirelog.model.StreamInfo`'s fields in order: `Model::stream_info` passes them by position.
const STREAM_FIELDS: [&str; 29] = [
    "capture",
    "stream",
    "client",
    "server",
    "client_port",
    "server_port",
    "client_by",
    "first_ts",
    "last_ts",
    "first_frame",
    "last_frame",
    "packets_c2s",
    "packets_s2c",
    "bytes_c2s",
    "bytes_s2c",
    "gaps",
    "gap_bytes",
    "retransmissions",
    "out_of_order",
    "conflicts",
    "handshake",
    "midstream",
    "fin_c2s",
    "fin_s2c",
    "reset",
    "port_reuse",
    "protocol",
    "tls",
    "settled",
];

/// The StreamInfo class, once its fields are known to be STREAM_FIELDS in that order.
fn stream_info_class(model: &Bound<'_, PyModule>) -> PyResult<Py<PyAny>> {
    let class = model.getattr("StreamInfo")?;
    let fields: Vec<String> = class.getattr("__match_args__")?.extract()?;
    if fields != STREAM_FIELDS {
        return Err(PyTypeError::new_err(format!(
            "wirelog.model.StreamInfo's fields are {fields:?}; the core passes {STREAM_FIELDS:?}"
        )));
    }
    Ok(class.unbind())
}

impl Model {
    pub(super) fn load(py: Python<'_>) -> PyResult<Self> {
        let m = py.import("wirelog.model")?;
        let direction = m.getattr("Direction")?;
        let severity = m.getattr("Severity")?;
        Ok(Model {
            count_events: false,
            findings_shown: foldhash::HashMap::default(),
            event_counts: m.getattr("EventCounts")?.unbind(),
            message: m.getattr("Message")?.unbind(),
            chunk: m.getattr("Chunk")?.unbind(),
            gap: m.getattr("Gap")?.unbind(),
            finding: m.getattr("Finding")?.unbind(),
            stream_info: stream_info_class(&m)?,
            c2s: direction.getattr("C2S")?.unbind(),
            s2c: direction.getattr("S2C")?.unbind(),
            info: severity.getattr("INFO")?.unbind(),
            warning: severity.getattr("WARNING")?.unbind(),
            error: severity.getattr("ERROR")?.unbind(),
        })
    }

    /// With the decoding option records="summary", event messages are counted instead of made
    /// objects of: a summary only counts them, and making ~15 Python objects of each (the
    /// document's values, the message) was 90 % of `inspect`'s time.
    pub(super) fn summary(mut self, decoding: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        if let Some(records) = decoding
            .map(|d| d.get_item("records"))
            .transpose()?
            .flatten()
        {
            let records = records.extract::<String>()?;
            self.count_events = records == "summary" || records == "report";
        }
        Ok(self)
    }

    /// The records as objects; with `count_events`, the messages that carry an event document
    /// (and no TLS description, which a summary reads) as one EventCounts of rows (stream,
    /// protocol, version, acked, count) in first-seen order, placed where the first of them was.
    /// CQL messages are counted too, as its rows of (stream, protocol, version, kind, framing,
    /// count): a summary reads nothing else of them but the slowest answers, so the batch's five
    /// slowest stay objects (after the others; ties go to the earlier, as in the summary's heap).
    /// Findings past the first FIRST_FINDINGS of their code in the input are counted as its rows
    /// of (stream, code, severity, protocol, count): a summary reads only those of the findings
    /// decoders and the verdict make (one `stream.unknown-protocol` a connection of an unknown
    /// protocol: 200,000 objects at 200,000 connections).
    fn records<'py>(
        &mut self,
        py: Python<'py>,
        capture: &str,
        records: Vec<(Option<Stamp>, Record)>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let mut events = Rows::<CountKey>::default();
        let mut messages = Rows::<CountKey>::default();
        let mut findings = Rows::<FindingKey>::default();
        let mut slowest: Vec<(i64, usize, Option<Stamp>, Record)> = Vec::new();
        let mut place = None;
        for (i, (stamp, r)) in records.into_iter().enumerate() {
            let m = match &r {
                Record::Message(m) => m,
                Record::Finding(f) if self.count_events && !self.shows(f.code) => {
                    place.get_or_insert(list.len());
                    let stream = stamp.as_ref().map(|s| s.stream);
                    findings.count((stream, f.code, f.severity, f.protocol()));
                    continue;
                }
                Record::Finding(_) => {
                    list.append(self.record(py, capture, stamp.as_ref(), &r)?)?;
                    continue;
                }
            };
            let stream = stamp.as_ref().map(|s| s.stream);
            if !self.count_events || m.get("tls").is_some() {
                list.append(self.record(py, capture, stamp.as_ref(), &r)?)?;
            } else if m.kind == "event" && m.event.is_some() {
                place.get_or_insert(list.len());
                events.count((stream, m.protocol, m.version, m.acked, None, None));
            } else if m.protocol == "cql" {
                place.get_or_insert(list.len());
                let Some(latency) = m.get("latency_ns").and_then(Value::as_i64) else {
                    messages.count(message_key(stream, m));
                    continue;
                };
                if slowest.len() < SLOWEST {
                    slowest.push((latency, i, stamp, r));
                    continue;
                }
                // the fastest kept, the latest of equals: what the summary's heap would drop first
                let (at, worst) = slowest
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, (l, j, _, _))| (*l, std::cmp::Reverse(*j)))
                    .map(|(at, (l, _, _, _))| (at, *l))
                    .expect("SLOWEST > 0");
                let (_, _, stamp, dropped) = if latency > worst {
                    std::mem::replace(&mut slowest[at], (latency, i, stamp, r))
                } else {
                    (latency, i, stamp, r)
                };
                if let Record::Message(m) = &dropped {
                    messages.count(message_key(stamp.map(|s| s.stream), m));
                }
            } else {
                list.append(self.record(py, capture, stamp.as_ref(), &r)?)?;
            }
        }
        slowest.sort_by_key(|(_, i, _, _)| *i);
        for (_, _, stamp, r) in &slowest {
            list.append(self.record(py, capture, stamp.as_ref(), r)?)?;
        }
        if let Some(place) = place {
            let events: Vec<_> = events
                .0
                .into_iter()
                .map(|((stream, protocol, version, acked, _, _), n)| {
                    (stream, protocol, version, acked, n)
                })
                .collect();
            let messages: Vec<_> = messages
                .0
                .into_iter()
                .map(|((stream, protocol, version, _, kind, framing), n)| {
                    (stream, protocol, version, kind, framing, n)
                })
                .collect();
            let findings = findings
                .0
                .into_iter()
                .map(|((stream, code, severity, protocol), n)| {
                    (stream, code, self.severity(py, severity), protocol, n)
                })
                .collect::<Vec<_>>();
            let counts = self
                .event_counts
                .bind(py)
                .call1((capture, events, messages, findings))?;
            list.insert(place, counts)?;
        }
        Ok(list)
    }

    /// Whether a finding of `code` is made an object of in a summary run (one of its code's first
    /// in the input), noting it.
    fn shows(&mut self, code: &'static str) -> bool {
        let shown = self.findings_shown.entry(code).or_default();
        *shown < FIRST_FINDINGS && {
            *shown += 1;
            true
        }
    }

    fn severity<'py>(&self, py: Python<'py>, s: Severity) -> Bound<'py, PyAny> {
        match s {
            Severity::Info => self.info.bind(py).clone(),
            Severity::Warning => self.warning.bind(py).clone(),
            Severity::Error => self.error.bind(py).clone(),
        }
    }

    fn direction<'py>(&self, py: Python<'py>, d: Direction) -> Bound<'py, PyAny> {
        match d {
            Direction::C2S => self.c2s.bind(py).clone(),
            Direction::S2C => self.s2c.bind(py).clone(),
        }
    }

    pub(super) fn finding<'py>(&self, py: Python<'py>, f: &Finding) -> PyResult<Bound<'py, PyAny>> {
        let severity = self.severity(py, f.severity);
        let fields = PyDict::new(py);
        for (name, value) in &f.fields {
            fields.set_item(name, py_value(py, value)?)?;
        }
        self.finding.bind(py).call1((
            f.code,
            severity,
            &f.message,
            f.protocol(),
            f.direction.map(|d| self.direction(py, d)),
            f.offset,
            f.frame,
            f.ts,
            fields,
            f.stream,
        ))
    }

    /// A native record as a wirelog.model Message or Finding, stamped as the engine stamps records.
    fn record<'py>(
        &self,
        py: Python<'py>,
        capture: &str,
        stamp: Option<&Stamp>,
        r: &Record,
    ) -> PyResult<Bound<'py, PyAny>> {
        let obj = match r {
            Record::Finding(f) => self.finding(py, f)?,
            Record::Message(m) => {
                let fields = PyDict::new(py);
                for (name, value) in &m.fields {
                    fields.set_item(name, py_value(py, value)?)?;
                }
                let event = match &m.event {
                    Some(doc) => py_value(py, &doc.value())?,
                    None => py.None().into_bound(py),
                };
                let obj = self.message.bind(py).call1((
                    m.protocol,
                    m.kind,
                    m.direction.map(|d| self.direction(py, d)),
                    m.offset,
                    m.length,
                    m.frame,
                    m.ts,
                    m.version,
                    fields,
                    event,
                    m.acked,
                ))?;
                if let (Some(id), Some(delivery)) = (m.event_id, m.delivery) {
                    obj.setattr("event_id", id.text())?;
                    obj.setattr("delivery", delivery.as_str())?;
                }
                obj
            }
        };
        obj.setattr("capture", capture)?;
        if let Some(s) = stamp {
            obj.setattr("stream", s.stream)?;
            obj.setattr("client", &s.client)?;
            obj.setattr("server", &s.server)?;
        }
        Ok(obj)
    }

    pub(super) fn stream_info<'py>(
        &self,
        py: Python<'py>,
        capture: &str,
        s: &StreamInfo,
    ) -> PyResult<Bound<'py, PyAny>> {
        // Positional, in STREAM_FIELDS' order (checked against the class when the module loads):
        // no keyword dict of 29 entries to build and match a stream (200,000 at 200,000 short
        // connections, ~10 % of `inspect --all`'s time).
        let tls = s.tls.as_ref().map(|t| py_value(py, t)).transpose()?;
        let args = PyTuple::new(
            py,
            [
                capture.into_pyobject(py)?.into_any(),
                s.stream.into_pyobject(py)?.into_any(),
                s.client.as_str().into_pyobject(py)?.into_any(),
                s.server.as_str().into_pyobject(py)?.into_any(),
                s.client_port.into_pyobject(py)?.into_any(),
                s.server_port.into_pyobject(py)?.into_any(),
                s.client_by.into_pyobject(py)?.into_any(),
                s.first_ts.into_pyobject(py)?.into_any(),
                s.last_ts.into_pyobject(py)?.into_any(),
                s.first_frame.into_pyobject(py)?.into_any(),
                s.last_frame.into_pyobject(py)?.into_any(),
                s.packets_c2s.into_pyobject(py)?.into_any(),
                s.packets_s2c.into_pyobject(py)?.into_any(),
                s.bytes_c2s.into_pyobject(py)?.into_any(),
                s.bytes_s2c.into_pyobject(py)?.into_any(),
                s.gaps.into_pyobject(py)?.into_any(),
                s.gap_bytes.into_pyobject(py)?.into_any(),
                s.retransmissions.into_pyobject(py)?.into_any(),
                s.out_of_order.into_pyobject(py)?.into_any(),
                s.conflicts.into_pyobject(py)?.into_any(),
                PyBool::new(py, s.handshake).to_owned().into_any(),
                PyBool::new(py, s.midstream).to_owned().into_any(),
                PyBool::new(py, s.fin_c2s).to_owned().into_any(),
                PyBool::new(py, s.fin_s2c).to_owned().into_any(),
                PyBool::new(py, s.reset).to_owned().into_any(),
                PyBool::new(py, s.port_reuse).to_owned().into_any(),
                s.protocol.into_pyobject(py)?.into_any(),
                tls.unwrap_or_else(|| py.None().into_bound(py)),
                PyBool::new(py, s.settled).to_owned().into_any(),
            ],
        )?;
        self.stream_info.bind(py).call1(args)
    }

    pub(super) fn events<'py>(
        &self,
        py: Python<'py>,
        capture: &str,
        events: Vec<Event>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for event in events {
            list.append(self.event(py, capture, event)?)?;
        }
        Ok(list)
    }

    pub(super) fn event<'py>(
        &self,
        py: Python<'py>,
        capture: &str,
        event: Event,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(match event {
            Event::Chunk {
                stream,
                direction,
                offset,
                data,
                frame,
                ts,
            } => self.chunk.bind(py).call1((
                stream,
                self.direction(py, direction),
                offset,
                PyBytes::new(py, &data),
                frame,
                ts,
            ))?,
            Event::Gap {
                stream,
                direction,
                offset,
                length,
                frame,
                ts,
            } => self.gap.bind(py).call1((
                stream,
                self.direction(py, direction),
                offset,
                length,
                frame,
                ts,
            ))?,
            Event::Finding(f) => self.finding(py, &f)?,
            Event::End(info) => self.stream_info(py, capture, &info)?,
        })
    }
}

/// A JSON value as the Python object orjson would give for it.
pub(super) fn py_value<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(py_value(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let d = PyDict::new(py);
            for (k, item) in map {
                d.set_item(k, py_value(py, item)?)?;
            }
            d.into_any()
        }
    })
}

/// Records a native decoder made, as one Python object: NDJSON lines (a `Buffer`, with their count), an ArrowRecords (pyarrow
/// reads it through the Arrow C stream interface: `pa.RecordBatchReader.from_stream`), or a list
/// of wirelog.model Message and Finding objects, stamped and filtered.
pub(super) fn taken<'py>(
    py: Python<'py>,
    model: &mut Model,
    capture: &str,
    t: Taken,
) -> PyResult<Bound<'py, PyAny>> {
    match t {
        Taken::Ndjson(text, count) => Ok((Bound::new(py, Buffer::new(text.into_bytes()))?, count)
            .into_pyobject(py)?
            .into_any()),
        Taken::Batch(batch) => {
            let batch = batch.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            Ok(Bound::new(py, ArrowRecords { batch: Some(batch) })?.into_any())
        }
        Taken::Tables(tables) => Ok(tables_dict(py, tables)?.into_any()),
        Taken::Hercules(events) => Ok(Bound::new(py, HerculesEvents(Some(events)))?.into_any()),
        Taken::Records(records) => Ok(model.records(py, capture, records)?.into_any()),
    }
}
