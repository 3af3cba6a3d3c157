//! Arrow across the boundary: record batches handed to pyarrow through the Arrow C stream
//! interface (`ArrowRecords`), the typed tables' schemas, and batches taken from any object with
//! `__arrow_c_stream__` (`import_stream`, the `unsafe` of the capsule's pointer).
#![allow(unsafe_code)]

use std::ffi::CString;

use arrow_array::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use arrow_array::{RecordBatch, RecordBatchIterator};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

/// The typed tables' batches as a dict name → ArrowRecords, in the tables' order.
pub(super) fn tables_dict<'py>(
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
pub(super) fn table_schemas(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    tables_dict(py, crate::records::tables::empty())
}

/// One batch of records in the Parquet schema (docs/schema.md), handed to pyarrow without a copy.
#[pyclass(module = "wirelog._core")]
pub(super) struct ArrowRecords {
    pub(super) batch: Option<RecordBatch>,
}

#[pymethods]
impl ArrowRecords {
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

/// Arrow batches from an object with the Arrow PyCapsule stream interface (`__arrow_c_stream__`).
pub(super) fn import_stream(obj: &Bound<'_, PyAny>) -> PyResult<Vec<RecordBatch>> {
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
