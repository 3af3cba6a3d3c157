//! The PyO3 module `wirelog._core`: the only code of the core that knows Python, one file per
//! concern (as polars and pydantic-core split theirs). This file: the module's contents, its
//! exception, and the panic boundary every call into the core goes through.
//!
//! Work runs with the GIL released and inside `catch_unwind`: a panic never crosses into Python.
//! It becomes an `internal.panic` finding (message and location; the Rust backtrace too when
//! `set_debug(True)`), every record before it is kept, and the capture stops there.
//!
//! Only arrow.rs (the Arrow C stream import), lines.rs (the buffer protocol) and memory.rs (the
//! global allocator) are allowed `unsafe` (the crate denies it): each block says why it is sound.

mod arrow;
mod buffer;
mod capture;
mod decoding;
mod hercules;
mod memory;
mod objects;
mod split;

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::capture::INFLATED;
use crate::decoders::detect as detection;
use crate::model::{Finding, Severity};

use arrow::{table_schemas, ArrowRecords};
use capture::{Pipeline, Reassembler, SegmentReader, StreamRanks};
use decoding::{delivery_findings, detect, detect_scores, find_start, Decoding, KeyLogs};
use hercules::{hercules_documents, HerculesEvents, HerculesWriter};
use memory::on_out_of_memory;
use split::{route_spans, SegmentBatches, SplitScanner};

create_exception!(
    wirelog._core,
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

/// Make this thread's LAST_PANIC before it is needed. Its first use registers its destructor with
/// glibc, which allocates: made during a panic from memory running out (PyO3's on a NULL object),
/// that registration failed and glibc aborted the process ("failed to register TLS destructor").
/// So every way into the core makes it first, while memory is likely still there (after the
/// first time, a check of a thread-local's state).
fn ready_for_panics() {
    LAST_PANIC.with(|_| ());
}

/// Record panics for the boundary to report instead of printing them to stderr.
fn install_hook() {
    ready_for_panics();
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
    ready_for_panics();
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
    m.add_class::<buffer::Buffer>()?;
    m.add_function(wrap_pyfunction!(table_schemas, m)?)?;
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
    m.add("NATIVE", crate::decoders::engine().collect::<Vec<_>>())?;
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
