//! The core's output: records written for Python, as NDJSON lines, Arrow rows, typed tables or Hercules events,
//! and the filter that chooses which records are written; TCP segments as Arrow rows for a shuffle
//! between tasks.

pub mod arrow;
pub mod filter;
pub mod hercules;
pub mod json;
pub mod segments;
pub mod tables;
