//! The PyO3 module `wirelog._core`: the only file of the core that knows Python.
//!
//! Work runs with the GIL released and inside `catch_unwind`: a panic never crosses into Python.
//! It becomes an `internal.panic` finding (message and location; the Rust backtrace too when
//! `set_debug(True)`), every record before it is kept, and the capture stops there.
//!
//! The only module allowed `unsafe` (the crate denies it): each block says why it is sound.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::borrow::Cow;
use std::cell::RefCell;
use std::io::Write;
use std::net::IpAddr;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Once;

use std::ffi::CString;

use arrow_array::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use arrow_array::{RecordBatch, RecordBatchIterator};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyCapsule, PyDict, PyFloat, PyList, PyString, PyTuple};

use crate::capture::route;
use crate::capture::split::{Head, Scanner};
use crate::capture::{CaptureInfo, CaptureInput, Segment, INFLATED};
use crate::decoders::detect::{self as detection, Decision, Sample};
use crate::decoders::tls::keylog::{self, KeyLog};
use crate::decoders::{Chunk, Gap, Limits, StreamContext};
use crate::model::{
    Direction, Document, Finding, FindingSink, Message, Record, Severity, Stamp, Value,
};
use crate::pipeline::{Detection, Item, Pipeline as CorePipeline, Session};
use crate::records::filter::Filter;
use crate::records::hercules::{Encoder, Events, Fields, Note, View, Writer};
use crate::records::json::StreamLines;
use crate::records::out::{Form, RecordOut, Taken};
use crate::records::segments::{each_segment, SegmentRows};
use crate::report::{Timeline, DEFAULT_STALL_NS};
use crate::tcp::{Config, Event, Reassembler as CoreReassembler, StreamIds, StreamInfo};

create_exception!(
    _core,
    CaptureFormatError,
    PyValueError,
    "The input is not a usable capture."
);

static DEBUG: AtomicBool = AtomicBool::new(false);
/// Address space a backtrace may need to be symbolized (the DWARF of this module is read).
const BACKTRACE_ROOM: usize = 256 << 20;
static HOOK: Once = Once::new();

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Record panics for the boundary to report instead of printing them to stderr.
fn install_hook() {
    HOOK.call_once(|| {
        panic::set_hook(Box::new(|info| {
            let what = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let mut text = format!("{what}{at}");
            if DEBUG.load(Ordering::Relaxed) {
                // Symbolizing a backtrace allocates a lot while holding std's backtrace lock; an
                // allocation failure then waits for that lock forever (the process hangs instead of
                // aborting). So it is done only when there is room for it.
                if Vec::<u8>::new().try_reserve(BACKTRACE_ROOM).is_ok() {
                    text.push_str(&format!("\n{}", std::backtrace::Backtrace::force_capture()));
                } else {
                    text.push_str("\n(no backtrace: memory is too short to symbolize one)");
                }
            }
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(text));
        }));
    });
}

/// Run `f`, turning a panic into the finding that reports it.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, Box<Finding>> {
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(|_| {
        let text = LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| "panic".to_owned());
        let (first, trace) = text.split_once('\n').unwrap_or((&text, ""));
        let mut finding = Finding::new(
            "internal.panic",
            Severity::Error,
            format!(
                "wirelog's core failed on this input ({first}); the records before it are kept and \
                 the rest of this capture is not read (please report it with the capture)"
            ),
        );
        if !trace.is_empty() {
            finding = finding.field("backtrace", trace);
        }
        Box::new(finding)
    })
}

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

/// Count rows in first-seen order, with where each key's row is (a batch may hold the messages of
/// thousands of connections).
#[derive(Default)]
struct Rows(Vec<(CountKey, u64)>, foldhash::HashMap<CountKey, usize>);

impl Rows {
    fn count(&mut self, key: CountKey) {
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
struct Model {
    /// Event messages counted, not made objects of (records="summary").
    count_events: bool,
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

impl Model {
    fn load(py: Python<'_>) -> PyResult<Self> {
        let m = py.import("wirelog.model")?;
        let direction = m.getattr("Direction")?;
        let severity = m.getattr("Severity")?;
        Ok(Model {
            count_events: false,
            event_counts: m.getattr("EventCounts")?.unbind(),
            message: m.getattr("Message")?.unbind(),
            chunk: m.getattr("Chunk")?.unbind(),
            gap: m.getattr("Gap")?.unbind(),
            finding: m.getattr("Finding")?.unbind(),
            stream_info: m.getattr("StreamInfo")?.unbind(),
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
    fn summary(mut self, decoding: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
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
    fn records<'py>(
        &self,
        py: Python<'py>,
        capture: &str,
        records: Vec<(Option<Stamp>, Record)>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let mut events = Rows::default();
        let mut messages = Rows::default();
        let mut slowest: Vec<(i64, usize, Option<Stamp>, Record)> = Vec::new();
        let mut place = None;
        for (i, (stamp, r)) in records.into_iter().enumerate() {
            let Record::Message(m) = &r else {
                list.append(self.record(py, capture, stamp.as_ref(), &r)?)?;
                continue;
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
            let counts = self
                .event_counts
                .bind(py)
                .call1((capture, events, messages))?;
            list.insert(place, counts)?;
        }
        Ok(list)
    }

    fn direction<'py>(&self, py: Python<'py>, d: Direction) -> Bound<'py, PyAny> {
        match d {
            Direction::C2S => self.c2s.bind(py).clone(),
            Direction::S2C => self.s2c.bind(py).clone(),
        }
    }

    fn finding<'py>(&self, py: Python<'py>, f: &Finding) -> PyResult<Bound<'py, PyAny>> {
        let severity = match f.severity {
            Severity::Info => &self.info,
            Severity::Warning => &self.warning,
            Severity::Error => &self.error,
        };
        let fields = PyDict::new(py);
        for (name, value) in &f.fields {
            fields.set_item(name, py_value(py, value)?)?;
        }
        self.finding.bind(py).call1((
            f.code,
            severity.bind(py),
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

    fn stream_info<'py>(
        &self,
        py: Python<'py>,
        capture: &str,
        s: &StreamInfo,
    ) -> PyResult<Bound<'py, PyAny>> {
        // Keyword names interned: CPython matches an interned name to its parameter by pointer;
        // a fresh string is compared with each parameter name in turn (~350 string comparisons
        // per stream, a tenth of `inspect`'s time at 200,000 short connections).
        let kwargs = PyDict::new(py);
        kwargs.set_item(intern!(py, "capture"), capture)?;
        kwargs.set_item(intern!(py, "stream"), s.stream)?;
        kwargs.set_item(intern!(py, "client"), &s.client)?;
        kwargs.set_item(intern!(py, "server"), &s.server)?;
        kwargs.set_item(intern!(py, "client_port"), s.client_port)?;
        kwargs.set_item(intern!(py, "server_port"), s.server_port)?;
        kwargs.set_item(intern!(py, "client_by"), s.client_by)?;
        kwargs.set_item(intern!(py, "first_ts"), s.first_ts)?;
        kwargs.set_item(intern!(py, "last_ts"), s.last_ts)?;
        kwargs.set_item(intern!(py, "first_frame"), s.first_frame)?;
        kwargs.set_item(intern!(py, "last_frame"), s.last_frame)?;
        kwargs.set_item(intern!(py, "packets_c2s"), s.packets_c2s)?;
        kwargs.set_item(intern!(py, "packets_s2c"), s.packets_s2c)?;
        kwargs.set_item(intern!(py, "bytes_c2s"), s.bytes_c2s)?;
        kwargs.set_item(intern!(py, "bytes_s2c"), s.bytes_s2c)?;
        kwargs.set_item(intern!(py, "gaps"), s.gaps)?;
        kwargs.set_item(intern!(py, "gap_bytes"), s.gap_bytes)?;
        kwargs.set_item(intern!(py, "retransmissions"), s.retransmissions)?;
        kwargs.set_item(intern!(py, "out_of_order"), s.out_of_order)?;
        kwargs.set_item(intern!(py, "conflicts"), s.conflicts)?;
        kwargs.set_item(intern!(py, "handshake"), s.handshake)?;
        kwargs.set_item(intern!(py, "midstream"), s.midstream)?;
        kwargs.set_item(intern!(py, "fin_c2s"), s.fin_c2s)?;
        kwargs.set_item(intern!(py, "fin_s2c"), s.fin_s2c)?;
        kwargs.set_item(intern!(py, "reset"), s.reset)?;
        kwargs.set_item(intern!(py, "port_reuse"), s.port_reuse)?;
        kwargs.set_item(intern!(py, "protocol"), s.protocol)?;
        if let Some(tls) = &s.tls {
            kwargs.set_item(intern!(py, "tls"), py_value(py, tls)?)?;
        }
        self.stream_info.bind(py).call((), Some(&kwargs))
    }

    fn events<'py>(
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

    fn event<'py>(
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
fn py_value<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
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

/// Records a native decoder made, as one Python object: NDJSON bytes, an ArrowRecords (pyarrow
/// reads it through the Arrow C stream interface: `pa.RecordBatchReader.from_stream`), or a list
/// of wirelog.model Message and Finding objects, stamped and filtered.
fn taken<'py>(
    py: Python<'py>,
    model: &Model,
    capture: &str,
    t: Taken,
) -> PyResult<Bound<'py, PyAny>> {
    match t {
        Taken::Ndjson(text, count) => Ok((PyBytes::new(py, text.as_bytes()), count)
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

/// The typed tables' batches as a dict name → ArrowRecords, in the tables' order.
fn tables_dict<'py>(
    py: Python<'py>,
    tables: Vec<(&'static str, Result<RecordBatch, arrow_schema::ArrowError>)>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, batch) in tables {
        let batch = batch.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        d.set_item(name, Bound::new(py, ArrowRecords { batch: Some(batch) })?)?;
    }
    Ok(d)
}

/// The typed tables (`--tables`, docs/schema.md) with no rows: their names and fixed schemas.
#[pyfunction]
fn table_schemas(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    tables_dict(py, crate::records::tables::empty())
}

/// One batch of records in the Parquet schema (docs/schema.md), handed to pyarrow without a copy.
#[pyclass(module = "wirelog._core")]
struct ArrowRecords {
    batch: Option<RecordBatch>,
}

#[pymethods]
impl ArrowRecords {
    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.as_ref().map_or(0, RecordBatch::num_rows)
    }

    /// The Arrow PyCapsule interface: the batch as a one-batch stream (it can be taken once).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &mut self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema; // the schema is fixed: a consumer casts if it wants another
        let batch = self
            .batch
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("these records were already taken"))?;
        let schema = batch.schema();
        let reader = RecordBatchIterator::new([Ok(batch)], schema);
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        let name = CString::new("arrow_array_stream").unwrap_or_default();
        PyCapsule::new(py, stream, Some(name))
    }
}

fn ip_bytes<'py>(py: Python<'py>, ip: IpAddr) -> Bound<'py, PyBytes> {
    match ip {
        IpAddr::V4(a) => PyBytes::new(py, &a.octets()),
        IpAddr::V6(a) => PyBytes::new(py, &a.octets()),
    }
}

fn ip_from(bytes: &[u8]) -> PyResult<IpAddr> {
    match bytes.len() {
        4 => Ok(IpAddr::from(<[u8; 4]>::try_from(bytes).unwrap_or_default())),
        16 => Ok(IpAddr::from(
            <[u8; 16]>::try_from(bytes).unwrap_or_default(),
        )),
        n => Err(PyValueError::new_err(format!(
            "an IP address has 4 or 16 bytes, not {n}"
        ))),
    }
}

fn info_dict<'py>(py: Python<'py>, info: &CaptureInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("format", info.format)?;
    d.set_item("packets", info.packets)?;
    d.set_item("tcp_packets", info.tcp_packets)?;
    d.set_item("non_tcp_packets", info.non_tcp_packets)?;
    d.set_item("bytes", info.bytes)?;
    d.set_item("first_ts", info.first_ts)?;
    d.set_item("last_ts", info.last_ts)?;
    d.set_item("link_types", info.link_types.clone())?;
    d.set_item("truncated", info.truncated)?;
    d.set_item("error", info.error.clone())?;
    Ok(d)
}

/// The reassembler's Config from keyword options (those of `wirelog.engine.capture`); an unknown
/// name is a TypeError, as for any Python call.
fn config(options: Option<&Bound<'_, PyDict>>) -> PyResult<Config> {
    let mut cfg = Config::default();
    let Some(options) = options else {
        return Ok(cfg);
    };
    for (key, value) in options.iter() {
        let key: String = key.extract()?;
        match key.as_str() {
            "server_ports" => cfg.server_ports = value.extract()?,
            "overlap" => {
                let overlap: String = value.extract()?;
                if overlap != "first" && overlap != "last" {
                    return Err(PyValueError::new_err(format!(
                        "overlap policy must be one of ('first', 'last'), not {overlap:?}"
                    )));
                }
                cfg.last_wins = overlap == "last";
            }
            "emit_data" => cfg.emit_data = value.extract()?,
            "max_pending" => cfg.max_pending = value.extract()?,
            "max_segments" => cfg.max_segments = value.extract()?,
            "history" => cfg.history = value.extract()?,
            "idle_timeout" => cfg.idle_timeout_ns = (value.extract::<f64>()? * 1e9) as i64,
            "close_grace" => cfg.close_grace_ns = (value.extract::<f64>()? * 1e9) as i64,
            "max_connections" => cfg.max_connections = value.extract()?,
            "sweep_every" => cfg.sweep_every = value.extract()?,
            "reorder_packets" => cfg.reorder_packets = value.extract()?,
            "reorder_seconds" => cfg.reorder_ns = (value.extract::<f64>()? * 1e9) as i64,
            "reorder_bytes" => cfg.reorder_bytes = value.extract()?,
            "ids_by_frame" if value.extract::<bool>()? => cfg.ids = StreamIds::Frames,
            "ids_by_frame" => {}
            "stream_ranks" => {
                let ranks: PyRef<'_, StreamRanks> = value.extract()?;
                cfg.ids = StreamIds::Ranks(ranks.0.clone());
            }
            other => return Err(PyTypeError::new_err(format!("unexpected option {other:?}"))),
        }
    }
    Ok(cfg)
}

/// The frames that opened every stream of a capture (any order, repeats allowed), made once and
/// shared by the pipelines of its connections (`stream_ranks=`): a stream's id is its frame's rank.
#[pyclass(module = "wirelog._core", frozen)]
struct StreamRanks(std::sync::Arc<[u64]>);

#[pymethods]
impl StreamRanks {
    #[new]
    fn new(frames: Vec<u64>) -> Self {
        let mut frames = frames;
        frames.sort_unstable();
        frames.dedup();
        StreamRanks(frames.into())
    }
}

/// One capture through capture reading and TCP reassembly: `feed` bytes, get model records
/// (Chunk, Gap, Finding, StreamInfo) back in order.
#[pyclass(module = "wirelog._core")]
struct Pipeline {
    inner: CorePipeline,
    capture: String,
    model: Model,
    stopped: bool,
    /// With `stream_lines`: stream summaries become NDJSON here instead of StreamInfo objects.
    lines: Option<StreamLines>,
}

#[pymethods]
impl Pipeline {
    #[new]
    #[pyo3(signature = (capture, compression=None, panic_at_frame=None, stream_lines=false, decode=true, chunks=false, decoding=None, **options))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        capture: String,
        compression: Option<String>,
        panic_at_frame: Option<u64>,
        stream_lines: bool,
        decode: bool,
        chunks: bool,
        decoding: Option<&Bound<'_, PyDict>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        install_hook();
        let session = session(&capture, decoding)?;
        let mut inner = CorePipeline::new(
            &capture,
            compression.as_deref(),
            config(options)?,
            session,
            decode,
            chunks,
        );
        inner.panic_at_frame = panic_at_frame;
        Ok(Pipeline {
            inner,
            capture,
            model: Model::load(py)?.summary(decoding)?,
            stopped: false,
            lines: stream_lines.then(StreamLines::default),
        })
    }

    /// The next bytes of the capture; returns the records they completed.
    /// Raises CaptureFormatError when the input is not a usable capture.
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        if !self.stopped {
            let inner = &mut self.inner;
            let result = py.detach(|| guarded(|| inner.feed(data)));
            self.settle(result)?;
        }
        self.records(py)
    }

    /// The next records of the last call's input when it made more than one batch's worth (a
    /// stream's or the capture's end), None when all are out: call until None.
    fn more<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        if !self.inner.pending() {
            return Ok(None);
        }
        let inner = &mut self.inner;
        let result = py.detach(|| guarded(|| inner.more())).map(Ok);
        self.settle(result)?;
        self.records(py).map(Some)
    }

    /// TCP segments of this capture read by other tasks (`segments`: an Arrow C stream of batches
    /// in the segment schema, records/segments.rs), in frame order; returns the records they
    /// completed.
    fn feed_segments<'py>(
        &mut self,
        py: Python<'py>,
        segments: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let batches = import_stream(segments)?;
        if !self.stopped {
            let inner = &mut self.inner;
            let result = py.detach(|| {
                guarded(|| {
                    let mut failed = Ok(());
                    inner.segments(|f| {
                        for batch in &batches {
                            if let Err(e) = each_segment(batch, &mut *f) {
                                failed = Err(e.to_string());
                                return;
                            }
                        }
                    });
                    failed
                })
            });
            self.settle(result)?;
        }
        self.records(py)
    }

    /// End of input (`read_error`: why reading stopped early); returns the last records.
    #[pyo3(signature = (read_error=None))]
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        read_error: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let inner = &mut self.inner;
        let result = if self.stopped {
            py.detach(|| guarded(|| inner.abandon())).map(Ok)
        } else {
            py.detach(|| guarded(|| inner.finish(read_error)))
        };
        self.stopped = true;
        self.settle(result)?;
        self.records(py)
    }

    /// With `stream_lines`: the NDJSON summary lines of the streams finished so far, in stream
    /// id order (`wirelog streams --json` without a Python object per stream).
    fn take_stream_lines<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let text = self
            .lines
            .as_mut()
            .map(StreamLines::take)
            .unwrap_or_default();
        PyBytes::new(py, text.as_bytes())
    }

    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        info_dict(py, self.inner.info())
    }

    /// The StreamInfo of a live stream, or None.
    fn stream_info<'py>(
        &self,
        py: Python<'py>,
        stream: u64,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .stream_info(stream)
            .map(|s| self.model.stream_info(py, &self.capture, &s))
            .transpose()
    }

    /// Stop producing Chunks for a live stream (its protocol is unknown).
    fn mute(&mut self, stream: u64) {
        self.inner.mute(stream);
    }

    /// After the last records: the records still waiting for their fate, then (`findings`) the
    /// delivery verdict's findings, in parts: (done, records of this part).
    #[pyo3(signature = (findings=true))]
    fn finish_decoding<'py>(
        &mut self,
        py: Python<'py>,
        findings: bool,
    ) -> PyResult<(bool, Option<Bound<'py, PyAny>>)> {
        finished(
            py,
            &self.model,
            &self.capture,
            &mut self.inner.session,
            findings,
        )
    }

    /// The delivery verdict's numbers so far, per protocol (a JSON object).
    fn delivery(&self) -> String {
        self.inner.session.delivery()
    }

    /// With records="report", after the last records: the timeline (report/mod.rs) as JSON.
    fn report(&mut self, top: usize) -> PyResult<Option<String>> {
        report_json(&mut self.inner.session, top)
    }
}

/// The streams of a raw dump set decoded in the core: the same decoding as a capture's, fed by
/// Python (`attach`, `decode`, `end_stream`, `finish_decoding`); records come back as NDJSON bytes or
/// ArrowRecords.
#[pyclass(module = "wirelog._core")]
struct Decoding {
    session: Session,
    capture: String,
    model: Model,
}

#[pymethods]
impl Decoding {
    #[new]
    #[pyo3(signature = (capture, **decoding))]
    fn new(py: Python<'_>, capture: &str, decoding: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        install_hook();
        Ok(Decoding {
            session: session(capture, decoding)?,
            capture: capture.to_owned(),
            model: Model::load(py)?.summary(decoding)?,
        })
    }

    /// A stream whose protocol the core detects from its bytes (or the options force).
    /// `info`: its StreamInfo (or anything with its `stream`, `client`, `server`, `client_port`,
    /// `server_port` and `midstream`).
    fn open(&mut self, info: &Bound<'_, PyAny>) -> PyResult<()> {
        self.session.open(context_of(info)?);
        Ok(())
    }

    /// Decode a stream as `protocol` from now on, whatever its bytes; False when the core has no
    /// such decoder.
    fn attach(&mut self, protocol: &str, info: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.session.attach(protocol, context_of(info)?))
    }

    /// A Chunk or Gap of an open stream; returns the pipeline items it gave (its records).
    fn decode<'py>(
        &mut self,
        py: Python<'py>,
        item: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        decode_item(&mut self.session, item)?;
        self.items(py)
    }

    /// The end of a stream (`closed`: by FIN or RST): (its protocol, its last items).
    fn end_stream<'py>(
        &mut self,
        py: Python<'py>,
        stream: u64,
        closed: bool,
    ) -> PyResult<(Option<&'static str>, Bound<'py, PyList>)> {
        let (protocol, _) = self.session.end_all(stream, closed);
        Ok((protocol, self.items(py)?))
    }

    /// The end of the input: the records still waiting for their fate, then (`findings`) the
    /// delivery verdict's findings, in parts: (done, records of this part).
    #[pyo3(signature = (findings=true))]
    fn finish_decoding<'py>(
        &mut self,
        py: Python<'py>,
        findings: bool,
    ) -> PyResult<(bool, Option<Bound<'py, PyAny>>)> {
        finished(py, &self.model, &self.capture, &mut self.session, findings)
    }

    fn delivery(&self) -> String {
        self.session.delivery()
    }

    /// With records="report", after the last records: the timeline (report/mod.rs) as JSON.
    fn report(&mut self, top: usize) -> PyResult<Option<String>> {
        report_json(&mut self.session, top)
    }
}

/// None without a timeline; a panic while writing it is an error, not an abort.
fn report_json(session: &mut Session, top: usize) -> PyResult<Option<String>> {
    let Some(timeline) = session.out.timeline.as_mut() else {
        return Ok(None);
    };
    guarded(|| timeline.json(top))
        .map(Some)
        .map_err(|f| PyRuntimeError::new_err(f.message))
}

impl Decoding {
    /// The session's output so far: its records.
    fn items<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        if let Some(t) = took(py, &self.model, &self.capture, &mut self.session)? {
            list.append(t)?;
        }
        self.session.take_unknown();
        Ok(list)
    }
}

/// The records written since the last take (see `taken`), None when there are none.
/// One part of a session's end (`Session::finish`): whether it is done, and the records made.
fn finished<'py>(
    py: Python<'py>,
    model: &Model,
    capture: &str,
    session: &mut Session,
    findings: bool,
) -> PyResult<(bool, Option<Bound<'py, PyAny>>)> {
    let done = session.finish(findings);
    Ok((done, took(py, model, capture, session)?))
}

fn took<'py>(
    py: Python<'py>,
    model: &Model,
    capture: &str,
    session: &mut Session,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    session
        .out
        .take()
        .map(|t| taken(py, model, capture, t))
        .transpose()
}

fn context_of(info: &Bound<'_, PyAny>) -> PyResult<StreamContext> {
    Ok(StreamContext {
        stream: info.getattr("stream")?.extract()?,
        client: info.getattr("client")?.extract()?,
        server: info.getattr("server")?.extract()?,
        client_port: info.getattr("client_port")?.extract()?,
        server_port: info.getattr("server_port")?.extract()?,
        midstream: info.getattr("midstream")?.extract()?,
        ..StreamContext::default()
    })
}

fn direction_of(item: &Bound<'_, PyAny>) -> PyResult<Direction> {
    let d = item.getattr("direction")?;
    let text: String = match d.getattr("value") {
        Ok(v) => v.extract()?,
        Err(_) => d.extract()?,
    };
    match text.as_str() {
        "c2s" => Ok(Direction::C2S),
        "s2c" => Ok(Direction::S2C),
        other => Err(PyValueError::new_err(format!("not a direction: {other:?}"))),
    }
}

/// Feed a wirelog.model Chunk or Gap to its stream in the session.
fn decode_item(session: &mut Session, item: &Bound<'_, PyAny>) -> PyResult<()> {
    let stream: u64 = item.getattr("stream")?.extract()?;
    let direction = direction_of(item)?;
    let offset: u64 = item.getattr("offset")?.extract()?;
    let frame: Option<u64> = item.getattr("frame")?.extract()?;
    let ts: Option<i64> = item.getattr("ts")?.extract()?;
    if item.hasattr("data")? {
        let data: Vec<u8> = item.getattr("data")?.extract()?;
        session.chunk(
            stream,
            &Chunk {
                direction,
                offset,
                data: &data,
                frame,
                ts,
            },
        );
    } else {
        let length: u64 = item.getattr("length")?.extract()?;
        session.gap(
            stream,
            &Gap {
                direction,
                offset,
                length,
                frame,
                ts,
            },
        );
    }
    Ok(())
}

/// A Session from the `decoding` options of the engine: `records` ("objects" | "ndjson" | "arrow"
/// | "hercules"), `show_secrets`, `limits` (a dict of Limits fields), the record filter
/// (`protocols`, `streams`, `kinds`, `events`, `since`, `until`) and how protocols are chosen
/// (`decode_as`: a dict port → protocol, `forced`: one protocol for every stream).
fn session(capture: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<Session> {
    let mut keylogs: Option<Py<KeyLogs>> = None;
    let (mut report, mut stall_ns) = (false, DEFAULT_STALL_NS);
    let (mut form, mut show_secrets, mut limits, mut filter, mut detection) = (
        Form::Records(Vec::new()),
        false,
        Limits::default(),
        Filter::default(),
        Detection::default(),
    );
    for (key, value) in options
        .map(|o| o.iter().collect::<Vec<_>>())
        .unwrap_or_default()
    {
        let key: String = key.extract()?;
        match key.as_str() {
            "records" => {
                let name: String = value.extract()?;
                form = match name.as_str() {
                    "objects" | "summary" => Form::Records(Vec::new()),
                    // a summary's records, and the timeline `wirelog report` draws
                    "report" => {
                        report = true;
                        Form::Records(Vec::new())
                    }
                    "ndjson" => Form::Ndjson(String::new()),
                    "arrow" => Form::Arrow(Box::default()),
                    "tables" => Form::Tables(Box::default()),
                    "hercules" => Form::Hercules(Box::default()),
                    _ => {
                        return Err(PyValueError::new_err(format!(
                            "records must be 'objects', 'summary', 'report', 'ndjson', 'arrow', \
                         'tables' or 'hercules', not {name:?}"
                        )))
                    }
                };
            }
            "show_secrets" => show_secrets = value.extract()?,
            "stall_ns" => stall_ns = value.extract()?,
            "limits" => {
                let d = value.cast::<PyDict>()?;
                for (k, v) in d.iter() {
                    let k: String = k.extract()?;
                    match k.as_str() {
                        "max_frame" => limits.max_frame = v.extract()?,
                        "max_inflated" => limits.max_inflated = v.extract()?,
                        "max_depth" => limits.max_depth = v.extract()?,
                        "max_pending_events" => limits.max_pending_events = v.extract()?,
                        "held_memory" => limits.held_memory = v.extract()?,
                        "fate_horizon_ns" => limits.fate_horizon_ns = v.extract()?,
                        other => {
                            return Err(PyTypeError::new_err(format!("unexpected limit {other:?}")))
                        }
                    }
                }
            }
            "protocols" => filter.protocols = value.extract()?,
            "streams" => filter.streams = value.extract()?,
            "kinds" => filter.kinds = value.extract()?,
            "events" => filter.events = value.extract()?,
            "since" => filter.since = value.extract()?,
            "until" => filter.until = value.extract()?,
            "findings" => filter.findings = value.extract()?,
            "decode_as" => detection.decode_as = value.extract()?,
            "forced" => detection.forced = value.extract()?,
            "tls_keylogs" => keylogs = value.extract()?,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "unexpected decoding option {other:?}"
                )))
            }
        }
    }
    let mut out = RecordOut::new(capture, filter, form);
    out.timeline = report.then(|| Box::new(Timeline::new(stall_ns)));
    let mut session = Session::new(capture, out, show_secrets, limits);
    session.detection = detection;
    if let Some(keylogs) = keylogs {
        let keylogs = keylogs.get();
        session.use_keylog(&keylogs.log, &keylogs.findings);
    }
    Ok(session)
}

/// The key logs of a run (`--tls-keylog`), read once, in pieces, and shared by the decoding
/// session of every capture (decoders/tls/keylog.rs): they cost their secrets, not their text.
#[pyclass(module = "wirelog._core", frozen)]
struct KeyLogs {
    log: KeyLog,
    /// Their bad lines (per key log: the first `keylog::REPORTED`, then a summary).
    findings: Vec<Finding>,
}

#[pymethods]
impl KeyLogs {
    /// `logs`: (name, pieces) per key log, `pieces` an iterable of bytes objects of any size.
    #[new]
    fn new(logs: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (mut log, mut findings) = (KeyLog::default(), Vec::new());
        for item in logs.try_iter()? {
            let (name, pieces): (String, Bound<'_, PyAny>) = item?.extract()?;
            let mut reader = keylog::Reader::new(&name);
            for piece in pieces.try_iter()? {
                reader.feed(piece?.cast::<PyBytes>()?.as_bytes());
            }
            findings.extend(reader.finish(&mut log));
        }
        Ok(KeyLogs { log, findings })
    }

    /// Valid lines kept (one per client random and label).
    fn __len__(&self) -> usize {
        self.log.len()
    }
}

/// `(kind, direction, offset, bytes or gap length, frame, ts)`, see `decode_stream`.
type StreamItem<'py> = (
    String,
    String,
    u64,
    Bound<'py, PyAny>,
    Option<u64>,
    Option<i64>,
);

/// The protocol detection chooses for a stream's first bytes: its name, None when no protocol
/// claims them, False when more bytes are needed (decoders/detect.rs).
#[pyfunction]
#[pyo3(signature = (c2s, s2c=None, client_port=0, server_port=0, closed=false))]
fn detect<'py>(
    py: Python<'py>,
    c2s: &[u8],
    s2c: Option<&[u8]>,
    client_port: u16,
    server_port: u16,
    closed: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let sample = Sample {
        c2s,
        s2c: s2c.unwrap_or_default(),
        client_port,
        server_port,
        closed,
    };
    Ok(match detection::detect(&sample) {
        Decision::Wait => PyBool::new(py, false).to_owned().into_any(),
        Decision::Unknown => py.None().into_bound(py),
        Decision::Protocol(name) => PyString::new(py, name).into_any(),
    })
}

/// Each protocol's own confidence for a stream's first bytes (None: it wants more bytes).
#[pyfunction]
#[pyo3(signature = (c2s, s2c=None, client_port=0, server_port=0, closed=false))]
fn detect_scores(
    c2s: &[u8],
    s2c: Option<&[u8]>,
    client_port: u16,
    server_port: u16,
    closed: bool,
) -> Vec<(&'static str, Option<f64>)> {
    detection::scores(&Sample {
        c2s,
        s2c: s2c.unwrap_or_default(),
        client_port,
        server_port,
        closed,
    })
}

/// The earliest frame start any protocol recognises in client bytes from the middle of a stream:
/// (protocol, offset), or None.
#[pyfunction]
fn find_start(data: &[u8]) -> Option<(&'static str, usize)> {
    detection::find_start(data)
}

/// One stream decoded by a native decoder from Python-built items (the differential tests' and
/// the benchmarks' surface): `items` are `("data", direction, offset, bytes, frame, ts)` or
/// `("gap", direction, offset, length, frame, ts)`; the decoder is closed after the last one.
/// Returns the NDJSON of the records, stamped like the engine stamps them.
#[pyfunction]
#[pyo3(signature = (protocol, items, *, capture="", stream=0, client=String::new(), server=String::new(), client_port=0, server_port=0, midstream=false, show_secrets=false))]
#[allow(clippy::too_many_arguments)]
fn decode_stream<'py>(
    py: Python<'py>,
    protocol: &str,
    items: Vec<StreamItem<'py>>,
    capture: &str,
    stream: u64,
    client: String,
    server: String,
    client_port: u16,
    server_port: u16,
    midstream: bool,
    show_secrets: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    install_hook();
    let mut s = Session::new(
        capture,
        RecordOut::new(capture, Filter::default(), Form::Ndjson(String::new())),
        show_secrets,
        Limits::default(),
    );
    let ctx = StreamContext {
        stream,
        client,
        server,
        client_port,
        server_port,
        midstream,
        ..StreamContext::default()
    };
    if !s.attach(protocol, ctx) {
        return Err(PyValueError::new_err(format!(
            "the core has no {protocol} decoder"
        )));
    }
    for (kind, direction, offset, payload, frame, ts) in items {
        let direction = match direction.as_str() {
            "c2s" => Direction::C2S,
            "s2c" => Direction::S2C,
            other => return Err(PyValueError::new_err(format!("not a direction: {other:?}"))),
        };
        match kind.as_str() {
            "data" => {
                let data: Vec<u8> = payload.extract()?;
                s.chunk(
                    stream,
                    &Chunk {
                        direction,
                        offset,
                        data: &data,
                        frame,
                        ts,
                    },
                );
            }
            "gap" => {
                let length: u64 = payload.extract()?;
                s.gap(
                    stream,
                    &Gap {
                        direction,
                        offset,
                        length,
                        frame,
                        ts,
                    },
                );
            }
            other => {
                return Err(PyValueError::new_err(format!(
                    "not an item kind: {other:?}"
                )))
            }
        }
    }
    s.end_all(stream, true);
    let text = match s.out.take() {
        Some(Taken::Ndjson(text, _)) => text,
        _ => String::new(),
    };
    Ok(PyBytes::new(py, text.as_bytes()))
}

impl Pipeline {
    /// The records of the events produced so far (stream summaries go to `lines` when it is on);
    /// native decoders' records come as NDJSON bytes or ArrowRecords in their place.
    fn records<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for item in self.inner.take_items() {
            match item {
                Item::Tcp(Event::End(info)) if self.lines.is_some() => {
                    if let Some(lines) = self.lines.as_mut() {
                        lines.push(&self.capture, &info);
                    }
                }
                Item::Tcp(event) => list.append(self.model.event(py, &self.capture, event)?)?,
                Item::Records(t) => list.append(taken(py, &self.model, &self.capture, t)?)?,
            }
        }
        Ok(list)
    }

    fn settle(&mut self, result: Result<Result<(), String>, Box<Finding>>) -> PyResult<()> {
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => {
                self.stopped = true;
                Err(CaptureFormatError::new_err(message))
            }
            Err(mut finding) => {
                self.stopped = true;
                finding.frame = Some(self.inner.info().packets);
                self.inner.push_finding(*finding);
                Ok(())
            }
        }
    }
}

/// TCP reassembly alone, fed one segment at a time: the core's surface for tests of hand-built
/// segment sequences (the conversion path uses Pipeline).
#[pyclass(module = "wirelog._core")]
struct Reassembler {
    inner: CoreReassembler,
    capture: String,
    model: Model,
    events: Vec<Event>,
}

#[pymethods]
impl Reassembler {
    #[new]
    #[pyo3(signature = (capture, server_ports=Vec::new(), overlap="first", **options))]
    fn new(
        py: Python<'_>,
        capture: String,
        server_ports: Vec<u16>,
        overlap: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        install_hook();
        let options = match options {
            Some(o) => o.copy()?,
            None => PyDict::new(py),
        };
        options.set_item("server_ports", server_ports)?;
        options.set_item("overlap", overlap)?;
        Ok(Reassembler {
            inner: CoreReassembler::new(config(Some(&options))?),
            capture,
            model: Model::load(py)?,
            events: Vec::new(),
        })
    }

    #[pyo3(signature = (frame, ts, src, sport, dst, dport, seq, ack, flags, payload, missing=0))]
    #[allow(clippy::too_many_arguments)]
    fn segment(
        &mut self,
        frame: u64,
        ts: i64,
        src: &[u8],
        sport: u16,
        dst: &[u8],
        dport: u16,
        seq: u32,
        ack: u32,
        flags: u8,
        payload: &[u8],
        missing: u32,
    ) -> PyResult<()> {
        let seg = Segment {
            frame,
            ts,
            src: ip_from(src)?,
            sport,
            dst: ip_from(dst)?,
            dport,
            seq,
            ack,
            flags,
            payload,
            missing,
        };
        let (inner, events) = (&mut self.inner, &mut self.events);
        if let Err(finding) = guarded(|| inner.segment(&seg, events)) {
            self.events.push(Event::Finding(*finding));
        }
        Ok(())
    }

    fn finish(&mut self) {
        let (inner, events) = (&mut self.inner, &mut self.events);
        if let Err(finding) = guarded(|| inner.finish(events)) {
            self.events.push(Event::Finding(*finding));
        }
    }

    /// The records produced since the last call.
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.model
            .events(py, &self.capture, std::mem::take(&mut self.events))
    }
}

/// Capture reading alone: the TCP segments of a capture as tuples
/// `(frame, ts, src, sport, dst, dport, seq, ack, flags, payload, missing)` and its findings, in
/// order. The core's surface for tests and benchmarks of the capture layer.
#[pyclass(module = "wirelog._core")]
struct SegmentReader {
    inner: CaptureInput,
    sink: FindingSink,
    model: Model,
}

impl SegmentReader {
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        step: impl FnOnce(
            &mut CaptureInput,
            &mut FindingSink,
            &mut dyn FnMut(&Segment, &mut FindingSink),
        ) -> Result<(), String>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let mut failure = None;
        let model = &self.model;
        let result = guarded(|| {
            step(&mut self.inner, &mut self.sink, &mut |seg, sink| {
                let item = (|| -> PyResult<()> {
                    for f in sink.drain() {
                        list.append(model.finding(py, &f)?)?;
                    }
                    list.append((
                        seg.frame,
                        seg.ts,
                        ip_bytes(py, seg.src),
                        seg.sport,
                        ip_bytes(py, seg.dst),
                        seg.dport,
                        seg.seq,
                        seg.ack,
                        seg.flags,
                        PyBytes::new(py, seg.payload),
                        seg.missing,
                    ))
                })();
                if let Err(e) = item {
                    failure.get_or_insert(e);
                }
            })
        });
        if let Some(e) = failure {
            return Err(e);
        }
        match result {
            Ok(Err(message)) => return Err(CaptureFormatError::new_err(message)),
            Err(finding) => self.sink.add(*finding),
            Ok(Ok(())) => {}
        }
        for f in self.sink.drain() {
            list.append(model.finding(py, &f)?)?;
        }
        Ok(list)
    }
}

#[pymethods]
impl SegmentReader {
    /// `first_frame`: the number of the first packet (a split of a capture: its head and context
    /// blocks are fed first, then its records).
    #[new]
    #[pyo3(signature = (name, compression=None, first_frame=1))]
    fn new(
        py: Python<'_>,
        name: &str,
        compression: Option<&str>,
        first_frame: u64,
    ) -> PyResult<Self> {
        install_hook();
        let mut inner = CaptureInput::new(name, compression);
        inner.set_first_frame(first_frame);
        Ok(SegmentReader {
            inner,
            sink: FindingSink::default(),
            model: Model::load(py)?,
        })
    }

    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        self.run(py, |r, s, f| r.feed(data, s, f))
    }

    #[pyo3(signature = (read_error=None))]
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        read_error: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.run(py, |r, s, f| {
            let result = r.finish(read_error, s, f);
            s.finish();
            result
        })
    }

    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        info_dict(py, self.inner.info())
    }
}

/// The delivery verdict's findings of its numbers per protocol (a JSON object like `delivery()`'s,
/// e.g. the sum of the flows a split capture was decoded in), as Finding objects.
#[pyfunction]
fn delivery_findings<'py>(py: Python<'py>, results: &str) -> PyResult<Bound<'py, PyList>> {
    let results: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(results).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let model = Model::load(py)?;
    let list = PyList::empty(py);
    for f in crate::decoders::delivery::findings_of(&results) {
        list.append(model.finding(py, &f)?)?;
    }
    Ok(list)
}

/// Arrow batches from an object with the Arrow PyCapsule stream interface (`__arrow_c_stream__`).
fn import_stream(obj: &Bound<'_, PyAny>) -> PyResult<Vec<RecordBatch>> {
    let capsule = obj.call_method0("__arrow_c_stream__")?;
    let capsule = capsule.cast::<PyCapsule>()?;
    let pointer = capsule.pointer_checked(Some(c"arrow_array_stream"))?;
    // SAFETY: a capsule named "arrow_array_stream" holds an FFI_ArrowArrayStream (the Arrow
    // PyCapsule interface); from_raw moves it out and leaves a released stream for the capsule's
    // destructor.
    let reader = unsafe {
        ArrowArrayStreamReader::from_raw(pointer.as_ptr().cast::<FFI_ArrowArrayStream>())
    }
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A reader of one split of a capture for the split engine (docs/spark.md): fed its context, then
/// its bytes, it makes the capture findings (as objects) and, routing, where each group's packets
/// lie (capture/route.rs); fed a group's routed packets, their TCP segments as Arrow batches in
/// the segment schema (records/segments.rs).
#[pyclass(module = "wirelog._core")]
struct SegmentBatches {
    inner: CaptureInput,
    sink: FindingSink,
    rows: SegmentRows,
    model: Model,
}

impl SegmentBatches {
    /// Runs one reading step over the fed bytes: the findings it made (segments are not kept: a
    /// routing read only notes where packets lie, and a split's context holds none).
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        step: impl FnOnce(
                &mut CaptureInput,
                &mut FindingSink,
                &mut dyn FnMut(&Segment, &mut FindingSink),
            ) -> Result<(), String>
            + Send,
    ) -> PyResult<Bound<'py, PyList>> {
        let (inner, sink) = (&mut self.inner, &mut self.sink);
        let result = py.detach(|| guarded(|| step(inner, sink, &mut |_, _| {})));
        match result {
            Ok(Err(message)) => return Err(CaptureFormatError::new_err(message)),
            Err(finding) => self.sink.add(*finding),
            Ok(Ok(())) => {}
        }
        let findings = PyList::empty(py);
        for f in self.sink.drain() {
            findings.append(self.model.finding(py, &f)?)?;
        }
        Ok(findings)
    }
}

#[pymethods]
impl SegmentBatches {
    #[new]
    #[pyo3(signature = (name, first_frame=1))]
    fn new(py: Python<'_>, name: &str, first_frame: u64) -> PyResult<Self> {
        install_hook();
        let mut inner = CaptureInput::new(name, None);
        inner.set_first_frame(first_frame);
        Ok(SegmentBatches {
            inner,
            sink: FindingSink::default(),
            rows: SegmentRows::default(),
            model: Model::load(py)?,
        })
    }

    /// From now on note where every packet goes (`groups` groups of connections: capture/
    /// route.rs); the next bytes fed start at file offset `position`.
    fn route(&mut self, groups: u32, position: u64) {
        self.inner.reader().route(groups, position);
    }

    /// The next bytes fed start at file offset `position` (after a skipped damaged range).
    fn set_position(&mut self, position: u64) {
        self.inner.reader().set_position(position);
    }

    /// Each group's routes gathered since the last call: a list of `groups` byte strings.
    fn take_routes<'py>(&mut self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        let routes = self.inner.reader().take_routes();
        routes.iter().map(|r| PyBytes::new(py, r)).collect()
    }

    /// The packets of `routes[first..last]` (capture/route.rs), read from `data`, the file's bytes
    /// from offset `at` on (a span of `route_spans`); returns the segments they hold, or None. The
    /// packet layer's findings are dropped: the reader that routed the packets made them.
    fn feed_routed<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
        at: u64,
        routes: &[u8],
        first: usize,
        last: usize,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let (inner, sink, rows) = (&mut self.inner, &mut self.sink, &mut self.rows);
        let result = py.detach(|| {
            guarded(|| {
                let hi = at.saturating_add(data.len() as u64);
                let span = route::Span {
                    lo: at,
                    hi,
                    first,
                    last,
                };
                let on_segment = &mut |seg: &Segment, _: &mut FindingSink| rows.push(seg);
                inner
                    .reader()
                    .feed_span(routes, &span, data, sink, on_segment)
            })
        });
        drop(self.sink.drain());
        match result {
            Ok(Err(message)) => return Err(CaptureFormatError::new_err(message)),
            Err(finding) => return Err(PyRuntimeError::new_err(finding.message)),
            Ok(Ok(())) => {}
        }
        if self.rows.is_empty() {
            return Ok(None);
        }
        let batch = self
            .rows
            .finish()
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok(Some(
            Bound::new(py, ArrowRecords { batch: Some(batch) })?.into_any(),
        ))
    }

    /// The next bytes of the split; returns the findings they made.
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        self.run(py, |r, s, f| r.feed(data, s, f))
    }

    /// The end of the split; returns the last findings.
    #[pyo3(signature = (read_error=None))]
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        read_error: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.run(py, |r, s, f| {
            let result = r.finish(read_error, s, f);
            s.finish();
            result
        })
    }

    /// The TLS key logs of the Decryption Secrets Blocks read so far (each once).
    fn secrets<'py>(&mut self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        let logs = self.inner.take_secrets();
        logs.iter().map(|text| PyBytes::new(py, text)).collect()
    }
}

/// The byte ranges to read for `routes` (capture/route.rs): (lo, hi, first, last) each, the routes
/// `first..last` lying in the file's bytes `[lo, hi)`.
#[pyfunction]
fn route_spans(routes: &[u8]) -> Vec<(u64, u64, usize, usize)> {
    route::spans(routes)
        .into_iter()
        .map(|s| (s.lo, s.hi, s.first, s.last))
        .collect()
}

/// One split of an uncompressed capture (capture/split.rs): finds its first record boundary at or
/// after `start` (or trusts `start`), walks the record headers fed to it, and tells where the next
/// split begins, how many frames it holds and the pcapng context blocks it crossed.
#[pyclass(module = "wirelog._core")]
struct SplitScanner {
    inner: Scanner,
}

#[pymethods]
impl SplitScanner {
    /// `prefix`: the file's first bytes (at least 40); the scanner is then fed the file's bytes
    /// from `max(start, first record)` on.
    #[new]
    fn new(prefix: &[u8], start: u64, end: u64, trusted: bool) -> PyResult<Self> {
        let head = Head::parse(prefix).map_err(PyValueError::new_err)?;
        Ok(SplitScanner {
            inner: Scanner::new(&head, start, end, trusted),
        })
    }

    /// (first record offset, the bytes a reader of any split is fed first) of a capture.
    #[staticmethod]
    fn head<'py>(py: Python<'py>, prefix: &[u8]) -> PyResult<(u64, Bound<'py, PyBytes>)> {
        let head = Head::parse(prefix).map_err(PyValueError::new_err)?;
        Ok((head.first, PyBytes::new(py, &head.bytes)))
    }

    /// The next bytes (contiguous with the previous); `eof`: they end the file. True when the
    /// scan needs no more.
    fn feed(&mut self, py: Python<'_>, data: &[u8], eof: bool) -> PyResult<bool> {
        let inner = &mut self.inner;
        py.detach(|| guarded(|| inner.feed(data, eof)))
            .map_err(|f| PyRuntimeError::new_err(f.message))?;
        Ok(self.inner.done())
    }

    /// `(start, next, frames, context, holes)`: the first boundary (None: no record starts in the
    /// split), the next split's first boundary, the frames in between, and the context blocks
    /// `[(offset, bytes)]` since the last section header, damaged ranges skipped `[(from, to)]`.
    #[allow(clippy::type_complexity)]
    fn result<'py>(
        &self,
        py: Python<'py>,
    ) -> (
        Option<u64>,
        u64,
        u64,
        Vec<(u64, Bound<'py, PyBytes>)>,
        Vec<(u64, u64)>,
    ) {
        let s = self.inner.result();
        let context = s
            .context
            .iter()
            .map(|(at, b)| (*at, PyBytes::new(py, b)))
            .collect();
        (s.start, s.next, s.frames, context, s.holes.clone())
    }
}

/// The events of a Hercules file as a plain reader sees them (dicts of `version`, `timestamp`,
/// `uuid`, `tags`), up to the first that does not parse: the Java reader cross-check's side.
#[pyfunction]
fn hercules_documents<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
    let docs = py
        .detach(|| guarded(|| crate::decoders::hercules::documents(data, 1 << 30)))
        .map_err(|f| PyRuntimeError::new_err(f.message))?;
    let list = PyList::empty(py);
    for doc in docs {
        list.append(py_value(py, &doc)?)?;
    }
    Ok(list)
}

/// Hercules event records of every later decoding carry `bytes_base64`, the event's bytes as
/// captured, or stop carrying it (`wirelog replay` sends those bytes to a Gate).
#[pyfunction]
fn hercules_event_bytes(on: bool) {
    crate::decoders::hercules::keep_event_bytes(on);
}

// --- The Hercules export (docs/hercules.md): events encoded by the core -----------------------

/// The messages a native decoder made, as Hercules event bodies for a `HerculesWriter`.
#[pyclass(module = "wirelog._core")]
struct HerculesEvents(Option<Events>);

#[pymethods]
impl HerculesEvents {
    fn __len__(&self) -> usize {
        self.0.as_ref().map_or(0, Events::len)
    }
}

/// One Hercules output (`convert --to hercules`, a Spark task's part file): event ids and the
/// time of untimed records follow the output's order, renamed keys are reported once. Each
/// `write*` returns the bytes to append; `take_notes` the mapping notes since the last call, as
/// (sentence, NDJSON finding line) pairs.
#[pyclass(module = "wirelog._core")]
#[derive(Default)]
struct HerculesWriter {
    writer: Writer,
    /// For records that did not come from a decoding session (Python's, Arrow rows).
    encoder: Encoder,
    notes: Vec<Note>,
}

impl HerculesWriter {
    fn finish<'py>(&mut self, py: Python<'py>, events: Events) -> Bound<'py, PyBytes> {
        let (data, notes) = self.writer.finish(events);
        self.notes.extend(notes);
        PyBytes::new(py, &data)
    }
}

#[pymethods]
impl HerculesWriter {
    #[new]
    fn new() -> Self {
        HerculesWriter::default()
    }

    /// The events a decoding session with `records="hercules"` gave (they can be written once).
    fn write<'py>(
        &mut self,
        py: Python<'py>,
        events: &mut HerculesEvents,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let events = events
            .0
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("these events were already written"))?;
        Ok(self.finish(py, events))
    }

    /// A wirelog.model Message made in Python.
    fn write_message<'py>(
        &mut self,
        py: Python<'py>,
        m: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let text = |name: &str| -> PyResult<Option<String>> { m.getattr(name)?.extract() };
        let int = |name: &str| -> PyResult<Option<i128>> { m.getattr(name)?.extract() };
        let direction = m.getattr("direction")?;
        let direction: Option<String> = if direction.is_none() {
            None
        } else {
            Some(direction.getattr("value")?.extract()?)
        };
        let fields = match value_of(&m.getattr("fields")?)? {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let event = Document::from(value_of(&m.getattr("event")?)?);
        let (capture, client, server) = (text("capture")?, text("client")?, text("server")?);
        let (protocol, kind, version) = (text("protocol")?, text("kind")?, text("version")?);
        let (event_id, delivery) = (text("event_id")?, text("delivery")?);
        self.encoder.push(&View {
            capture: capture.as_deref().unwrap_or(""),
            stream: m.getattr("stream")?.extract()?,
            client: client.as_deref(),
            server: server.as_deref(),
            protocol: protocol.as_deref().unwrap_or(""),
            kind: kind.as_deref().unwrap_or(""),
            direction: direction.as_deref(),
            offset: int("offset")?,
            length: int("length")?,
            frame: int("frame")?,
            ts: m.getattr("ts")?.extract()?,
            version: version.as_deref(),
            acked: m.getattr("acked")?.extract()?,
            event_id: event_id.map(Cow::Owned),
            delivery: delivery.as_deref(),
            fields: Fields::Object(&fields),
            event: Some(&event),
        });
        let events = self.encoder.take();
        Ok(self.finish(py, events))
    }

    /// The message rows of an Arrow batch in the record schema (anything with
    /// `__arrow_c_stream__`: a pyarrow RecordBatch, Spark's Arrow batches).
    fn write_arrow<'py>(
        &mut self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        for batch in import_stream(batch)? {
            self.encoder.push_rows(&batch);
        }
        let events = self.encoder.take();
        Ok(self.finish(py, events))
    }

    /// The mapping notes since the last call: (sentence, NDJSON finding line).
    fn take_notes<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for note in self.notes.drain(..) {
            list.append((note.message(), PyBytes::new(py, note.line().as_bytes())))?;
        }
        Ok(list)
    }
}

/// A JSON-compatible Python value (a Message's fields or event) as a JSON value; integers beyond
/// 64 bits become floats (the core's numbers hold 64 bits), anything else its `str`.
fn value_of(v: &Bound<'_, PyAny>) -> PyResult<Value> {
    Ok(if v.is_none() {
        Value::Null
    } else if let Ok(b) = v.cast::<PyBool>() {
        Value::Bool(b.is_true())
    } else if let Ok(s) = v.cast::<PyString>() {
        Value::String(s.to_str()?.to_owned())
    } else if let Ok(i) = v.extract::<i64>() {
        Value::from(i)
    } else if let Ok(u) = v.extract::<u64>() {
        Value::from(u)
    } else if let Ok(f) = v.extract::<f64>() {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    } else if let Ok(d) = v.cast::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (k, item) in d.iter() {
            map.insert(k.str()?.to_str()?.to_owned(), value_of(&item)?);
        }
        Value::Object(map)
    } else if v.cast::<PyList>().is_ok() || v.cast::<PyTuple>().is_ok() {
        let items = v.try_iter()?;
        Value::Array(items.map(|x| value_of(&x?)).collect::<PyResult<_>>()?)
    } else {
        Value::String(v.str()?.to_str()?.to_owned())
    })
}

/// A refused allocation ends the process with one line, not Rust's two (more with RUST_BACKTRACE)
/// and SIGABRT with a core dump, once the CLI has said which line and status
/// (`on_out_of_memory`): nothing is lost by ending there (an abort loses as much; the output's
/// temporary file has no name). Without it (--debug, the library used from Python), Rust's own
/// handler runs, backtrace included.
struct Allocator;

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// What `refused` prints: the line's text before the size that failed and after it (no size
/// when None), and the exit status.
struct OutOfMemory {
    before: Vec<u8>,
    after: Option<Vec<u8>>,
    status: i32,
}

/// Null, or an `OutOfMemory` leaked by `on_out_of_memory` (never freed: the allocator may read it
/// from any thread at any time).
static OUT_OF_MEMORY: AtomicPtr<OutOfMemory> = AtomicPtr::new(std::ptr::null_mut());

/// Print the line and end the process, when one is set; else return (Rust's handler follows).
/// Allocates nothing: stderr is unbuffered and the size is written from the stack.
fn refused(size: usize) {
    let line = OUT_OF_MEMORY.load(Ordering::Acquire);
    // SAFETY: a non-null pointer was made by Box::into_raw in `on_out_of_memory` and is never
    // freed, so it is valid for the rest of the process.
    let Some(line) = (unsafe { line.as_ref() }) else {
        return;
    };
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(&line.before);
    if let Some(after) = &line.after {
        let mut digits = [0u8; 20]; // u64::MAX has 20
        let mut at = digits.len();
        let mut n = size;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let _ = err.write_all(&digits[at..]);
        let _ = err.write_all(after);
    }
    let _ = err.write_all(b"\n");
    std::process::exit(line.status);
}

fn checked(p: *mut u8, size: usize) -> *mut u8 {
    if p.is_null() {
        refused(size);
    }
    p
}

// SAFETY: every method forwards to System with the caller's arguments, so System's guarantees
// are the allocator's; only a null result is looked at.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds GlobalAlloc::alloc's contract, which is System's.
        checked(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for alloc.
        checked(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds GlobalAlloc::realloc's contract: `ptr` came from this
        // allocator, that is from System, with `layout`.
        checked(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from System, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// From now on, memory the machine refuses to the core prints `line` (`{size}` in it becomes the
/// size that failed) and ends the process with `status`; None: Rust's own handler again.
#[pyfunction]
#[pyo3(signature = (line, status=4))]
fn on_out_of_memory(line: Option<&str>, status: i32) {
    let new = line.map_or(std::ptr::null_mut(), |line| {
        let (before, after) = match line.split_once("{size}") {
            Some((before, after)) => (before, Some(after.as_bytes().to_vec())),
            None => (line, None),
        };
        Box::into_raw(Box::new(OutOfMemory {
            before: before.as_bytes().to_vec(),
            after,
            status,
        }))
    });
    OUT_OF_MEMORY.store(new, Ordering::Release); // the old one is leaked: it may be in use
}

/// With debug on, an internal.panic finding carries the Rust backtrace (`wirelog --debug`).
#[pyfunction]
fn set_debug(on: bool) {
    DEBUG.store(on, Ordering::Relaxed);
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Pipeline>()?;
    m.add_class::<Decoding>()?;
    m.add_class::<KeyLogs>()?;
    m.add_class::<ArrowRecords>()?;
    m.add_function(wrap_pyfunction!(table_schemas, m)?)?;
    m.add_function(wrap_pyfunction!(decode_stream, m)?)?;
    m.add_function(wrap_pyfunction!(detect, m)?)?;
    m.add_function(wrap_pyfunction!(detect_scores, m)?)?;
    m.add_function(wrap_pyfunction!(find_start, m)?)?;
    let protocols: Vec<(&str, Vec<u16>)> = detection::PROTOCOLS
        .iter()
        .map(|p| (p.name, p.ports.to_vec()))
        .collect();
    m.add("PROTOCOLS", protocols)?;
    let kinds: Vec<(&str, Vec<&str>)> = detection::PROTOCOLS
        .iter()
        .map(|p| (p.name, p.kinds.to_vec()))
        .collect();
    m.add("KINDS", kinds)?;
    m.add("WELL_KNOWN_PORTS", detection::well_known_ports())?;
    m.add("HUNT_LIMIT", crate::pipeline::HUNT_LIMIT)?;
    m.add("NATIVE", crate::decoders::ENGINE.to_vec())?;
    m.add_class::<Reassembler>()?;
    m.add_class::<SegmentReader>()?;
    m.add_class::<SplitScanner>()?;
    m.add_class::<SegmentBatches>()?;
    m.add_function(wrap_pyfunction!(route_spans, m)?)?;
    m.add_function(wrap_pyfunction!(delivery_findings, m)?)?;
    m.add_class::<StreamRanks>()?;
    m.add_function(wrap_pyfunction!(set_debug, m)?)?;
    m.add_function(wrap_pyfunction!(on_out_of_memory, m)?)?;
    m.add_function(wrap_pyfunction!(hercules_documents, m)?)?;
    m.add_function(wrap_pyfunction!(hercules_event_bytes, m)?)?;
    m.add_class::<HerculesEvents>()?;
    m.add_class::<HerculesWriter>()?;
    m.add(
        "CaptureFormatError",
        m.py().get_type::<CaptureFormatError>(),
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("INFLATED", INFLATED.to_vec())?;
    Ok(())
}
