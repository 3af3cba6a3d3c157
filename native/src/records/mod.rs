//! The core's output: records written for Python (NDJSON now; Arrow batches as the decoders move in).

pub mod json;
