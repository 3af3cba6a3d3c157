//! The CQL finding catalogue (every code this decoder emits with its default severity, as
//! docs/protocols/cql.md lists them) and one constructor.

use crate::model::{Direction, Finding, Severity};

/// Where a record sits: stream offset, frame and capture time of the byte it starts at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct At {
    pub offset: u64,
    pub frame: Option<u64>,
    pub ts: Option<i64>,
}

/// The default severity of a code; an unknown code is a bug caught by the tests.
pub fn severity(code: &str) -> Severity {
    use Severity::*;
    match code {
        "cql.unanswered-request" | "cql.v5-beta" => Info,
        "cql.frame-kind-mismatch"
        | "cql.unframed-envelope"
        | "cql.resync"
        | "cql.truncated"
        | "cql.trailing-bytes"
        | "cql.response-without-request"
        | "cql.stream-id-reused"
        | "cql.version-changed" => Warning,
        "cql.crc24-mismatch"
        | "cql.crc32-mismatch"
        | "cql.decompression-failed"
        | "cql.envelope-overrun"
        | "cql.envelope-too-large"
        | "cql.unknown-version"
        | "cql.unknown-opcode"
        | "cql.wrong-direction"
        | "cql.bad-flags"
        | "cql.malformed-body" => Error,
        _ => {
            debug_assert!(false, "unknown cql finding code {code}");
            Error
        }
    }
}

/// A CQL finding at `at` with the code's default severity; add fields with `.field()`.
pub fn finding(code: &'static str, message: String, d: Direction, at: At) -> Finding {
    let mut f = Finding::new(code, severity(code), message).at(at.frame, at.ts);
    f.direction = Some(d);
    f.offset = Some(at.offset);
    f
}
