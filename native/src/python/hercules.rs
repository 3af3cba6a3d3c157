//! Hercules in the boundary: the export's events and writer (`HerculesEvents`, `HerculesWriter`,
//! docs/hercules.md), a Hercules file read as documents, the `bytes_base64` switch, and Python
//! values as JSON values for messages made in Python (`value_of`).

use std::borrow::Cow;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::model::{Document, Value};
use crate::records::hercules::{Encoder, Events, Fields, Note, View, Writer};

use super::arrow::import_stream;
use super::buffer::Buffer;
use super::guarded;
use super::objects::py_value;

/// The events of a Hercules file as a plain reader sees them (dicts of `version`, `timestamp`,
/// `uuid`, `tags`), up to the first that does not parse: the Java reader cross-check's side.
#[pyfunction]
pub(super) fn hercules_documents<'py>(
    py: Python<'py>,
    data: &[u8],
) -> PyResult<Bound<'py, PyList>> {
    let docs = py
        .detach(|| guarded(|| crate::decoders::hercules::documents(data, 1 << 30)))
        .map_err(|f| PyRuntimeError::new_err(f.message))?;
    let list = PyList::empty(py);
    for doc in docs {
        list.append(py_value(py, &doc)?)?;
    }
    Ok(list)
}

// --- The Hercules export (docs/hercules.md): events encoded by the core -----------------------

/// The messages a native decoder made, as Hercules event bodies for a `HerculesWriter`.
#[pyclass(module = "wirelog._core")]
pub(super) struct HerculesEvents(pub(super) Option<Events>);

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
pub(super) struct HerculesWriter {
    writer: Writer,
    /// For records that did not come from a decoding session (Python's, Arrow rows).
    encoder: Encoder,
    notes: Vec<Note>,
}

impl HerculesWriter {
    /// The events' bytes, lent to Python (`Buffer`: the output of a Gate capture is several
    /// times its size, and copying it into a `bytes` was 6 % of the conversion).
    fn finish<'py>(&mut self, py: Python<'py>, events: Events) -> PyResult<Bound<'py, Buffer>> {
        let (data, notes) = self.writer.finish(events);
        self.notes.extend(notes);
        Bound::new(py, Buffer::new(data))
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
    ) -> PyResult<Bound<'py, Buffer>> {
        let events = events
            .0
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("these events were already written"))?;
        self.finish(py, events)
    }

    /// A wirelog.model Message made in Python.
    fn write_message<'py>(
        &mut self,
        py: Python<'py>,
        m: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, Buffer>> {
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
        self.finish(py, events)
    }

    /// The message rows of an Arrow batch in the record schema (anything with
    /// `__arrow_c_stream__`: a pyarrow RecordBatch, Spark's Arrow batches).
    fn write_arrow<'py>(
        &mut self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, Buffer>> {
        for batch in import_stream(batch)? {
            self.encoder.push_rows(&batch);
        }
        let events = self.encoder.take();
        self.finish(py, events)
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
