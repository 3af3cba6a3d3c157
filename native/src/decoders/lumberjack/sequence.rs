//! Sequence-number checks, per connection.
//!
//! Two sender profiles exist and neither server checks continuity, so a validator must learn the
//! profile from the traffic: Beats-style senders restart at 1 in every window (go-lumber client,
//! lumberjack-client), others keep one counter across windows (pylogbeat, logstash-forwarder, v1
//! clients). The profile is decided by the first window that follows another one.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "sequence numbers are u32 widened to u64"
)]

use crate::model::{Severity, Value};

const WRAP: u64 = 1 << 32;
const SIGNED_LIMIT: u64 = 1 << 31;
pub const PER_WINDOW: &str = "per-window";
pub const CONTINUING: &str = "continuing";

#[derive(Debug, PartialEq)]
pub struct SeqIssue {
    pub code: &'static str,
    pub severity: Severity,
    pub text: String,
    pub fields: Vec<(&'static str, Value)>,
}

/// Feeds on every event's seq in arrival order and says what is wrong with it.
#[derive(Debug, Default)]
pub struct SequenceChecker {
    last: Option<u64>,
    window_start: bool,
    pub profile: Option<&'static str>,
    signed_reported: bool,
}

impl SequenceChecker {
    pub fn start_window(&mut self) {
        self.window_start = true;
    }

    /// After a capture gap the previous seq tells nothing about the next one.
    pub fn forget(&mut self) {
        self.last = None;
    }

    /// The issues of `seq`, appended to `issues` (nothing in the common case: it runs per event).
    pub fn check(&mut self, seq: u32, issues: &mut Vec<SeqIssue>) {
        let seq = u64::from(seq);
        let last = self.last.replace(seq);
        if let Some(last) = last {
            if seq == last + 1 && seq < SIGNED_LIMIT && !self.window_start {
                return;
            }
        }
        let starting = std::mem::take(&mut self.window_start);
        if seq >= SIGNED_LIMIT && !self.signed_reported {
            self.signed_reported = true;
            issues.push(SeqIssue {
                code: "lumberjack.seq-signed-overflow",
                severity: Severity::Warning,
                text: format!(
                    "seq {seq} is at or above 2^31: Logstash stores seqs as signed ints, and a \
                     batch made only of such seqs never gets its ACK"
                ),
                fields: vec![("seq", seq.into())],
            });
        }
        let Some(last) = last else {
            return;
        };
        let following = (last + 1) % WRAP;
        if starting {
            if let Some(issue) = self.window_first(seq, last, following) {
                issues.push(issue);
            }
        } else if let Some(issue) = within(seq, last, following) {
            issues.push(issue);
        }
    }

    fn window_first(&mut self, seq: u64, last: u64, following: u64) -> Option<SeqIssue> {
        if last == WRAP - 1 && (seq == 0 || seq == 1) {
            return Some(rollover(seq, last));
        }
        if self.profile.is_none() && seq != following && seq == 1 {
            return Some(self.decide(PER_WINDOW));
        }
        if self.profile.is_none() && seq == following {
            return Some(self.decide(CONTINUING));
        }
        let expected = if self.profile == Some(PER_WINDOW) {
            1
        } else {
            following
        };
        if seq == expected {
            return None;
        }
        let profile = self.profile;
        Some(SeqIssue {
            code: "lumberjack.seq-window-start",
            severity: Severity::Warning,
            text: format!(
                "window starts at seq {seq}; expected {expected} ({} profile, previous seq {last})",
                profile.unwrap_or(CONTINUING)
            ),
            fields: vec![
                ("seq", seq.into()),
                ("expected", expected.into()),
                ("previous", last.into()),
                ("profile", profile.map_or(Value::Null, Value::from)),
            ],
        })
    }

    fn decide(&mut self, profile: &'static str) -> SeqIssue {
        self.profile = Some(profile);
        let text = if profile == PER_WINDOW {
            "sequence numbers restart at 1 in every window (Beats / go-lumber / lumberjack-client \
             profile)"
        } else {
            "sequence numbers continue across windows (pylogbeat / logstash-forwarder / v1 profile)"
        };
        SeqIssue {
            code: "lumberjack.seq-profile",
            severity: Severity::Info,
            text: text.to_owned(),
            fields: vec![("profile", profile.into())],
        }
    }
}

fn rollover(seq: u64, last: u64) -> SeqIssue {
    SeqIssue {
        code: "lumberjack.seq-rollover",
        severity: Severity::Info,
        text: format!("sequence wrapped from {last} to {seq} (2^32 rollover)"),
        fields: vec![("seq", seq.into()), ("previous", last.into())],
    }
}

fn within(seq: u64, last: u64, following: u64) -> Option<SeqIssue> {
    if seq == following {
        return (seq == 0).then(|| rollover(seq, last));
    }
    if last == WRAP - 1 && seq == 1 {
        return Some(rollover(seq, last));
    }
    if seq == last {
        return Some(SeqIssue {
            code: "lumberjack.seq-duplicate",
            severity: Severity::Warning,
            text: format!("seq {seq} repeated"),
            fields: vec![("seq", seq.into())],
        });
    }
    if seq > following {
        let missing = seq - following;
        return Some(SeqIssue {
            code: "lumberjack.seq-gap",
            severity: Severity::Warning,
            text: format!("seq jumps from {last} to {seq}: {missing} missing"),
            fields: vec![
                ("seq", seq.into()),
                ("previous", last.into()),
                ("missing", missing.into()),
            ],
        });
    }
    Some(SeqIssue {
        code: "lumberjack.seq-non-monotonic",
        severity: Severity::Warning,
        text: format!("seq {seq} after {last} (goes backwards)"),
        fields: vec![("seq", seq.into()), ("previous", last.into())],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(seqs: &[(bool, u32)]) -> Vec<&'static str> {
        let mut c = SequenceChecker::default();
        let mut out = Vec::new();
        for &(window, seq) in seqs {
            if window {
                c.start_window();
            }
            c.check(seq, &mut out);
        }
        out.iter()
            .map(|i| i.code.trim_start_matches("lumberjack."))
            .collect()
    }

    #[test]
    fn within_a_window() {
        assert_eq!(codes(&[(true, 1), (false, 2), (false, 5)]), ["seq-gap"]);
        assert_eq!(codes(&[(true, 1), (false, 1)]), ["seq-duplicate"]);
        assert_eq!(codes(&[(true, 3), (false, 2)]), ["seq-non-monotonic"]);
        assert_eq!(
            codes(&[(true, u32::MAX), (false, 0)]),
            ["seq-signed-overflow", "seq-rollover"]
        );
    }

    #[test]
    fn profiles() {
        let beats = [(true, 1), (false, 2), (true, 1), (false, 2), (true, 7)];
        assert_eq!(codes(&beats), ["seq-profile", "seq-window-start"]);
        let cont = [(true, 1), (false, 2), (true, 3), (true, 1)];
        assert_eq!(codes(&cont), ["seq-profile", "seq-window-start"]);
    }
}
