//! One capture through the core (`Pipeline`: capture reading, reassembly, decoding), and the
//! capture reader and reassembler alone (`SegmentReader`, `Reassembler`); the reassembler's
//! options (`config`, `StreamRanks`) and a capture's numbers (`info_dict`).

use std::net::IpAddr;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::capture::{CaptureInfo, CaptureInput, Segment};
use crate::model::{Finding, FindingSink};
use crate::pipeline::{Item, Pipeline as CorePipeline};
use crate::records::json::StreamLines;
use crate::records::segments::each_segment;
use crate::tcp::{Config, Event, Reassembler as CoreReassembler, StreamIds};

use super::arrow::import_stream;
use super::decoding::{finished, report_json, session};
use super::objects::{taken, Model};
use super::{guarded, install_hook, CaptureFormatError};

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
            "close_grace" => cfg.close_grace_ns = (value.extract::<f64>()? * 1e9) as i64,
            "max_connections" => cfg.max_connections = value.extract()?,
            "sweep_every" => cfg.sweep_every = value.extract()?,
            "reorder_packets" => cfg.reorder_packets = value.extract()?,
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
pub(super) struct StreamRanks(std::sync::Arc<[u64]>);

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
pub(super) struct Pipeline {
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
            &mut self.model,
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
                Item::Records(t) => list.append(taken(py, &mut self.model, &self.capture, t)?)?,
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
pub(super) struct Reassembler {
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
pub(super) struct SegmentReader {
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
