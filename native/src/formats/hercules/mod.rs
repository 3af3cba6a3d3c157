//! The Hercules event binary (protocol/Type.java, EventBuilder): its constants and the escaping of
//! wirelog's own tag names (`types`), the validating walk over an event's bytes (`reader`), the
//! rendering of its values as JSON (`render`) and the codec as values (`tree`). The Gate decoder
//! (decoders/hercules/) and the Hercules export (records/hercules.rs) both use it.

pub mod reader;
pub mod render;
pub mod tree;
pub mod types;
