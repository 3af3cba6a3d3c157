//! The decoding side of one capture (or raw dump set): the streams decoded in the core, the state
//! their connections share, the delivery verdict, and where their records go.
//!
//! The Python engine still chooses each stream's protocol; when it is one the core decodes, it
//! `attach`es the stream here and the stream's bytes never become Python objects again.

use std::collections::{HashMap, HashSet};
use std::panic::{self, AssertUnwindSafe};

use crate::decoders::{
    self, delivery::Verdict, Chunk, Decoder, Gap, Limits, Shared, StreamContext,
};
use crate::model::{Finding, Record, Severity, Stamp};
use crate::records::out::RecordOut;

struct Native {
    decoder: Box<dyn Decoder>,
    protocol: &'static str,
    stamp: Stamp,
}

pub struct Session {
    capture: String,
    /// Given to every decoder (`--show-secrets`, limits).
    pub show_secrets: bool,
    pub limits: Limits,
    streams: HashMap<u64, Native>,
    /// Streams whose decoder failed: their bytes are dropped until they end.
    failed: HashSet<u64>,
    shared: Shared,
    verdict: Verdict,
    pub out: RecordOut,
    scratch: Vec<Record>,
}

impl Session {
    pub fn new(capture: &str, out: RecordOut, show_secrets: bool, limits: Limits) -> Self {
        Session {
            capture: capture.to_owned(),
            show_secrets,
            limits,
            streams: HashMap::new(),
            failed: HashSet::new(),
            shared: Shared::default(),
            verdict: Verdict::default(),
            out,
            scratch: Vec::new(),
        }
    }

    /// Decode `ctx.stream` as `protocol` from now on; false when the core has no such decoder.
    /// The context's secrets and limits are the session's.
    pub fn attach(&mut self, protocol: &str, mut ctx: StreamContext) -> bool {
        ctx.show_secrets = self.show_secrets;
        ctx.limits = self.limits.clone();
        let stamp = Stamp {
            stream: ctx.stream,
            client: ctx.client.clone(),
            server: ctx.server.clone(),
        };
        let Some((protocol, decoder)) = decoders::native(protocol, ctx) else {
            return false;
        };
        self.streams.insert(
            stamp.stream,
            Native {
                decoder,
                protocol,
                stamp,
            },
        );
        true
    }

    /// Bytes of a native stream (false: the stream is not decoded here).
    pub fn chunk(&mut self, stream: u64, chunk: &Chunk<'_>) -> bool {
        self.step(stream, |d, shared, out| d.feed(chunk, shared, out))
    }

    pub fn gap(&mut self, stream: u64, gap: &Gap) -> bool {
        self.step(stream, |d, shared, out| d.gap(gap, shared, out))
    }

    /// The end of a stream (`closed`: by FIN or RST): a native stream's decoder is closed, and the
    /// delivery verdict learns whether missing ACKs could still have come.
    pub fn end(&mut self, stream: u64, closed: bool) {
        self.step(stream, |d, shared, out| d.close(shared, out));
        self.streams.remove(&stream);
        self.failed.remove(&stream);
        self.verdict.stream_ended(stream, closed);
    }

    /// One decoder call. A panic in a decoder ends the decoding of its stream, never the capture:
    /// it becomes an `internal.panic` finding after the records made before it.
    fn step(
        &mut self,
        stream: u64,
        f: impl FnOnce(&mut dyn Decoder, &mut Shared, &mut Vec<Record>),
    ) -> bool {
        let Some(native) = self.streams.get_mut(&stream) else {
            return self.failed.contains(&stream);
        };
        let records = &mut self.scratch;
        let (decoder, shared) = (native.decoder.as_mut(), &mut self.shared);
        let failed = panic::catch_unwind(AssertUnwindSafe(|| f(decoder, shared, records))).err();
        if let Some(payload) = &failed {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            let mut finding = Finding::new(
                "internal.panic",
                Severity::Error,
                format!(
                    "the {} decoder failed ({what}); the rest of this stream is not decoded \
                     (please report it with the capture)",
                    native.protocol
                ),
            );
            let last = records.last().map(|r| match r {
                Record::Message(m) => (m.direction, m.frame, m.ts),
                Record::Finding(f) => (f.direction, f.frame, f.ts),
            });
            if let Some((direction, frame, ts)) = last {
                finding.direction = direction;
                finding = finding.at(frame, ts);
            }
            records.push(finding.into());
        }
        self.verdict.add(stream, records);
        for r in records.drain(..) {
            self.out
                .write(r, Some(&native.stamp), Some(native.protocol));
        }
        if failed.is_some() {
            self.streams.remove(&stream);
            self.failed.insert(stream);
        }
        true
    }

    /// The end of the capture: the delivery verdict's findings are written.
    pub fn finish(&mut self) {
        for f in self.verdict.findings(&self.capture) {
            self.out.write(f.into(), None, None);
        }
    }

    /// The delivery numbers per protocol (JSON object text), for `inspect`.
    pub fn delivery(&self) -> String {
        serde_json::Value::Object(self.verdict.results(&self.capture)).to_string()
    }
}
