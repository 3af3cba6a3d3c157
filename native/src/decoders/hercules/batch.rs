//! A gateway body (`Count:i32` + events, no separators) decoded event by event: each event goes to
//! the sink as soon as it parsed, so memory is O(one event) whatever the count claims. The parse
//! stops at the first event that cannot be parsed, as the Gate does, with one finding that says
//! which event it was and how many of the claimed ones are lost.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one body; `got` counts parsed events, which never pass the count (an i32) before the loop ends"
)]

use crate::formats::hercules::reader::{EventParser, Parsed, Problem, Stop};
use crate::model::Severity;

/// Where a batch's events and problems go, in the order they occur.
pub trait BatchSink {
    /// One parsed event; false ends the batch there (the sink's budget is spent).
    fn event(&mut self, body: &[u8], index: usize, ev: &Parsed) -> bool;
    fn problem(&mut self, p: Problem);
}

/// Decode a complete body; returns the count (None when there is no 4-byte count) and how many
/// events were decoded.
pub fn decode_batch(
    body: &[u8],
    parser: &mut EventParser,
    sink: &mut dyn BatchSink,
) -> (Option<i32>, usize) {
    if body.len() < 4 {
        let msg = format!(
            "batch of {} bytes has no 4-byte event count (the Gate answers 400)",
            body.len()
        );
        sink.problem(problem("hercules.batch-malformed", msg, 0, vec![]));
        return (None, 0);
    }
    let count = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    if count < 0 {
        let msg = format!("negative event count {count}");
        let fields = vec![("count", count.into())];
        sink.problem(problem("hercules.count-mismatch", msg, 0, fields));
        return (Some(count), 0);
    }
    let count = count as usize;
    let mut problems = Vec::new();
    let mut pos = 4;
    let mut got = 0;
    while got < count {
        if pos >= body.len() {
            let msg = format!(
                "count says {count} events but the body holds {got} (the Gate answers 400)"
            );
            let fields = vec![("count", count.into()), ("decoded", got.into())];
            sink.problem(problem("hercules.count-mismatch", msg, pos, fields));
            return (Some(count as i32), got);
        }
        match parser.parse(body, pos, &mut problems) {
            Ok(ev) => {
                if !sink.event(body, got, &ev) {
                    return (Some(count as i32), got);
                }
                for p in problems.drain(..) {
                    sink.problem(p);
                }
                pos += ev.length;
                got += 1;
            }
            Err(stop) => {
                let (code, text, offset, path) = match stop {
                    Stop::Truncated { offset, path, .. } => (
                        "hercules.truncated",
                        "event ends early".to_owned(),
                        offset,
                        path,
                    ),
                    Stop::Corrupt {
                        code,
                        message,
                        offset,
                        path,
                    } => (code, message, offset, path),
                };
                let lost = count - got;
                let msg = format!(
                    "event {got} of the batch: {text}; the remaining {lost} event(s) cannot be located"
                );
                let fields = vec![
                    ("path", path.into()),
                    ("event_index", got.into()),
                    ("events_lost", lost.into()),
                ];
                sink.problem(problem(code, msg, offset, fields));
                return (Some(count as i32), got);
            }
        }
    }
    if pos < body.len() {
        let n = body.len() - pos;
        let msg = format!("{n} bytes after the {count} events the count announced");
        sink.problem(Problem {
            severity: Severity::Warning,
            ..problem(
                "hercules.trailing-bytes",
                msg,
                pos,
                vec![("trailing", n.into())],
            )
        });
    }
    (Some(count as i32), got)
}

fn problem(
    code: &'static str,
    message: String,
    offset: usize,
    fields: Vec<(&'static str, crate::model::Value)>,
) -> Problem {
    Problem {
        code,
        severity: Severity::Error,
        message,
        offset,
        fields,
    }
}
