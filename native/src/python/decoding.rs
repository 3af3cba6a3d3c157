//! Decoding in the core: a session's options (`session`, `KeyLogs`), raw dumps decoded
//! (`Decoding`), detection and the frame-start search, and the delivery verdict's findings.

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString};

use crate::decoders::detect::{self as detection, Decision, Sample};
use crate::decoders::tls::keylog::{self, KeyLog};
use crate::decoders::{Chunk, Gap, Limits, StreamContext};
use crate::model::{Direction, Finding};
use crate::pipeline::out::{Form, RecordOut};
use crate::pipeline::{Detection, Session};
use crate::records::filter::Filter;
use crate::report::{Timeline, DEFAULT_STALL_NS};

use super::objects::{taken, Model};
use super::{guarded, install_hook};

/// The streams of a raw dump set decoded in the core: the same decoding as a capture's, fed by
/// Python (`attach`, `decode`, `end_stream`, `finish_decoding`); records come back as NDJSON bytes or
/// ArrowRecords.
#[pyclass(module = "wirelog._core")]
pub(super) struct Decoding {
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
        let protocol = self.session.end_all(stream, closed).protocol;
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
        finished(
            py,
            &mut self.model,
            &self.capture,
            &mut self.session,
            findings,
        )
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
pub(super) fn report_json(session: &mut Session, top: usize) -> PyResult<Option<String>> {
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
        if let Some(t) = took(py, &mut self.model, &self.capture, &mut self.session)? {
            list.append(t)?;
        }
        self.session.take_unknown();
        Ok(list)
    }
}

/// One part of a session's end (`Session::finish`): whether it is done, and the records made.
pub(super) fn finished<'py>(
    py: Python<'py>,
    model: &mut Model,
    capture: &str,
    session: &mut Session,
    findings: bool,
) -> PyResult<(bool, Option<Bound<'py, PyAny>>)> {
    let done = session.finish(findings);
    Ok((done, took(py, model, capture, session)?))
}

/// The records written since the last take (see `taken`), None when there are none.
fn took<'py>(
    py: Python<'py>,
    model: &mut Model,
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
/// | "hercules"), `show_secrets`, `event_bytes` (Hercules events carry their bytes as captured),
/// `limits` (a dict of Limits fields), the record filter
/// (`protocols`, `streams`, `kinds`, `events`, `since`, `until`) and how protocols are chosen
/// (`decode_as`: a dict port → protocol, `forced`: one protocol for every stream).
pub(super) fn session(capture: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<Session> {
    let mut keylogs: Option<Py<KeyLogs>> = None;
    let (mut report, mut stall_ns, mut event_bytes) = (false, DEFAULT_STALL_NS, false);
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
            "event_bytes" => event_bytes = value.extract()?,
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
    session.event_bytes = event_bytes;
    if let Some(keylogs) = keylogs {
        let keylogs = keylogs.get();
        session.use_keylog(&keylogs.log, &keylogs.findings);
    }
    Ok(session)
}

/// The key logs of a run (`--tls-keylog`), read once, in pieces, and shared by the decoding
/// session of every capture (decoders/tls/keylog.rs): they cost their secrets, not their text.
#[pyclass(module = "wirelog._core", frozen)]
pub(super) struct KeyLogs {
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

/// The protocol detection chooses for a stream's first bytes: its name, None when no protocol
/// claims them, False when more bytes are needed (decoders/detect.rs).
#[pyfunction]
#[pyo3(signature = (c2s, s2c=None, client_port=0, server_port=0, closed=false))]
pub(super) fn detect<'py>(
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
pub(super) fn detect_scores(
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
pub(super) fn find_start(data: &[u8]) -> Option<(&'static str, usize)> {
    detection::find_start(data)
}

/// The delivery verdict's findings of its numbers per protocol (a JSON object like `delivery()`'s,
/// e.g. the sum of the flows a split capture was decoded in), as Finding objects.
#[pyfunction]
pub(super) fn delivery_findings<'py>(
    py: Python<'py>,
    results: &str,
) -> PyResult<Bound<'py, PyList>> {
    let results: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(results).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let model = Model::load(py)?;
    let list = PyList::empty(py);
    for f in crate::decoders::delivery::findings_of(&results) {
        list.append(model.finding(py, &f)?)?;
    }
    Ok(list)
}
