//! Capture-level findings, collected the moment they occur and rate-limited where a capture can
//! repeat the same problem in every packet (a small snaplen would otherwise bury everything else).

use super::{Finding, Severity};

/// How many occurrences of a limited code are reported one by one before the summary.
pub const INDIVIDUAL_LIMIT: u64 = 10;

/// The rate-limited codes and the sentence of their end-of-capture summary (`{n}` = count).
const SUMMARIES: &[(&str, &str)] = &[
    ("pcap.time-backwards", "timestamps went backwards {n} times"),
    (
        "pcap.snaplen-truncated",
        "{n} TCP packets were cut short by the capture's snap length",
    ),
    ("pcap.malformed-record", "{n} packet records were malformed"),
    ("ip.malformed", "{n} packets had a malformed IP header"),
    (
        "ip.fragments-incomplete",
        "{n} fragmented IP datagrams were never completed",
    ),
    ("tcp.malformed", "{n} packets had a malformed TCP header"),
];

/// Findings in the order they occur; `limited` codes are reported individually up to the limit,
/// then `finish` adds one summary per code with the total in `fields["count"]`.
#[derive(Debug)]
pub struct FindingSink {
    pub out: Vec<Finding>,
    limit: u64,
    counts: Vec<(&'static str, u64, Severity)>,
    exceeded: Vec<&'static str>, // in the order each code passed the limit
}

impl Default for FindingSink {
    fn default() -> Self {
        Self::new(INDIVIDUAL_LIMIT)
    }
}

impl FindingSink {
    pub fn new(limit: u64) -> Self {
        FindingSink {
            out: Vec::new(),
            limit,
            counts: Vec::new(),
            exceeded: Vec::new(),
        }
    }

    /// Report one occurrence (always).
    pub fn add(&mut self, finding: Finding) {
        self.out.push(finding);
    }

    /// Report one occurrence of a repeatable problem (a code with a summary sentence).
    pub fn limited(&mut self, finding: Finding) {
        let code = finding.code;
        let n = match self.counts.iter_mut().find(|(c, _, _)| *c == code) {
            Some(entry) => {
                entry.1 = entry.1.saturating_add(1);
                entry.1
            }
            None => {
                self.counts.push((code, 1, finding.severity));
                1
            }
        };
        if n <= self.limit {
            self.out.push(finding);
        } else if n == self.limit.saturating_add(1) {
            self.exceeded.push(code);
        }
    }

    /// Whether the next `limited` occurrence of `code` is reported individually (a caller may skip
    /// building its message when not: a capture can repeat a limited problem in every packet).
    pub fn keeps_individually(&self, code: &str) -> bool {
        let n = self
            .counts
            .iter()
            .find(|(c, _, _)| *c == code)
            .map_or(0, |entry| entry.1);
        n < self.limit
    }

    /// Append one summary per limited code that exceeded the limit, in the order they exceeded it.
    pub fn finish(&mut self) {
        let counts = std::mem::take(&mut self.counts);
        for code in std::mem::take(&mut self.exceeded) {
            let Some(&(_, n, severity)) = counts.iter().find(|(c, _, _)| *c == code) else {
                continue;
            };
            let sentence = SUMMARIES
                .iter()
                .find(|(c, _)| *c == code)
                .map(|(_, s)| s.replace("{n}", &n.to_string()))
                .unwrap_or_else(|| format!("{code} occurred {n} times"));
            let text = format!(
                "{sentence} (only the first {} are reported individually)",
                self.limit
            );
            self.out
                .push(Finding::new(code, severity, text).field("count", n));
        }
    }

    /// Take the findings collected so far (the counts stay, for the summaries).
    pub fn drain(&mut self) -> Vec<Finding> {
        std::mem::take(&mut self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Value;

    #[test]
    fn limited_codes_summarise_past_the_limit() {
        let mut sink = FindingSink::new(2);
        for i in 0..5 {
            sink.limited(Finding::new(
                "ip.malformed",
                Severity::Warning,
                format!("p{i}"),
            ));
        }
        sink.add(Finding::new(
            "pcap.truncated",
            Severity::Warning,
            "t".into(),
        ));
        sink.finish();
        let codes: Vec<_> = sink.out.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(codes[..3], ["p0", "p1", "t"]);
        assert_eq!(
            sink.out[3].message,
            "5 packets had a malformed IP header (only the first 2 are reported individually)"
        );
        assert_eq!(sink.out[3].fields, vec![("count", Value::from(5))]);
    }

    #[test]
    fn keeps_individually_until_the_limit() {
        let mut sink = FindingSink::new(2);
        for _ in 0..2 {
            assert!(sink.keeps_individually("ip.malformed"));
            sink.limited(Finding::new("ip.malformed", Severity::Warning, "x".into()));
        }
        assert!(!sink.keeps_individually("ip.malformed"));
        assert!(sink.keeps_individually("tcp.malformed"));
    }

    #[test]
    fn under_the_limit_no_summary() {
        let mut sink = FindingSink::new(2);
        sink.limited(Finding::new("tcp.malformed", Severity::Warning, "x".into()));
        sink.finish();
        assert_eq!(sink.out.len(), 1);
    }
}
