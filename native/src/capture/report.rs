//! Reporting a repeatable (rate-limited) finding without building its message once the sink only
//! counts it: a capture can repeat the same problem in every packet.

use crate::model::{Finding, FindingSink, Severity};

/// Report one occurrence of a limited `code`; `finding` builds it when the sink keeps it.
pub(super) fn limited(
    sink: &mut FindingSink,
    code: &'static str,
    severity: Severity,
    finding: impl FnOnce() -> Finding,
) {
    if sink.keeps_individually(code) {
        sink.limited(finding());
    } else {
        sink.limited(Finding::new(code, severity, String::new()));
    }
}
