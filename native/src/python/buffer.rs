//! Output the core wrote (NDJSON lines, Hercules events), handed to Python without a copy
//! (`Buffer`): a read-only buffer that `file.write`, `bytes()` and `memoryview()` read in place.
//! Copying every batch of lines into a `bytes` was 6 % of an acknowledged Lumberjack conversion's
//! CPU, and of a Gate capture's `--to hercules`. The `unsafe` is the buffer
//! protocol's C call.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

/// Bytes of output (whole NDJSON lines, whole Hercules events), immutable once made.
#[pyclass(frozen, module = "wirelog._core")]
pub(super) struct Buffer(Vec<u8>);

impl Buffer {
    pub(super) fn new(bytes: Vec<u8>) -> Self {
        Buffer(bytes)
    }
}

#[pymethods]
impl Buffer {
    /// The buffer protocol: a read-only view of the bytes, which keeps this object alive.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let bytes = &slf.get().0;
        let len = ffi::Py_ssize_t::try_from(bytes.len())
            .map_err(|_| PyBufferError::new_err("output too long for a buffer"))?;
        // SAFETY: `view` is the Py_buffer Python passed to this slot. The pointer and length
        // describe `bytes`, which never changes or moves: the class is frozen (no method mutates
        // it) and FillInfo makes the view hold a reference to `slf`, so the bytes outlive every
        // view. Read-only (1): a request for a writable buffer fails with BufferError, set by
        // FillInfo (returned as that error).
        let done = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                bytes.as_ptr().cast::<c_void>().cast_mut(),
                len,
                1,
                flags,
            )
        };
        if done == 0 {
            Ok(())
        } else {
            Err(PyErr::fetch(slf.py()))
        }
    }

    fn __len__(&self) -> usize {
        self.0.len()
    }
}
