//! The split engine's side of a capture (docs/spark.md): split boundaries (`SplitScanner`), a
//! split read and routed (`SegmentBatches`, `route_spans`), its TCP segments as Arrow batches.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::capture::route;
use crate::capture::split::{Head, Scanner};
use crate::capture::{CaptureInput, Segment};
use crate::model::FindingSink;
use crate::records::segments::SegmentRows;

use super::arrow::ArrowRecords;
use super::objects::Model;
use super::{guarded, install_hook, CaptureFormatError};

/// A reader of one split of a capture for the split engine (docs/spark.md): fed its context, then
/// its bytes, it makes the capture findings (as objects) and, routing, where each group's packets
/// lie (capture/route.rs); fed a group's routed packets, their TCP segments as Arrow batches in
/// the segment schema (records/segments.rs).
#[pyclass(module = "wirelog._core")]
pub(super) struct SegmentBatches {
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
pub(super) fn route_spans(routes: &[u8]) -> Vec<(u64, u64, usize, usize)> {
    route::spans(routes)
        .into_iter()
        .map(|s| (s.lo, s.hi, s.first, s.last))
        .collect()
}

/// One split of an uncompressed capture (capture/split.rs): finds its first record boundary at or
/// after `start` (or trusts `start`), walks the record headers fed to it, and tells where the next
/// split begins, how many frames it holds and the pcapng context blocks it crossed.
#[pyclass(module = "wirelog._core")]
pub(super) struct SplitScanner {
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
