//! One capture through the core: bytes in, the records of the TCP layer out, in the order a
//! consumer must see them (a capture finding before the segment that follows it, each segment's
//! reassembly output right after it).

use crate::capture::{CaptureInfo, CaptureInput};
use crate::model::{Finding, FindingSink};
use crate::tcp::{Config, Event, Reassembler, StreamInfo};

pub struct Pipeline {
    reader: CaptureInput,
    reasm: Reassembler,
    sink: FindingSink,
    events: Vec<Event>,
    finished: bool,
    /// Test hook: panic when this frame's segment arrives (how the suite proves that a panic in
    /// the core becomes a finding and loses nothing before it).
    pub panic_at_frame: Option<u64>,
}

fn capture_findings(sink: &mut FindingSink, events: &mut Vec<Event>) {
    events.extend(sink.drain().into_iter().map(Event::Finding));
}

impl Pipeline {
    pub fn new(name: &str, compression: Option<&str>, cfg: Config) -> Self {
        Pipeline {
            reader: CaptureInput::new(name, compression),
            reasm: Reassembler::new(cfg),
            sink: FindingSink::default(),
            events: Vec::new(),
            finished: false,
            panic_at_frame: None,
        }
    }

    /// The next bytes of the capture. Err: the input is not a usable capture (nothing was read).
    pub fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        let (reasm, events, panic_at) = (&mut self.reasm, &mut self.events, self.panic_at_frame);
        let result = self.reader.feed(data, &mut self.sink, &mut |seg, sink| {
            capture_findings(sink, events);
            assert!(
                panic_at != Some(seg.frame),
                "test panic at frame {}",
                seg.frame
            );
            reasm.segment(seg, events);
        });
        capture_findings(&mut self.sink, &mut self.events);
        result
    }

    /// End of the input (`read_error`: why reading stopped early). Flushes every connection.
    pub fn finish(&mut self, read_error: Option<&str>) -> Result<(), String> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        let (reasm, events) = (&mut self.reasm, &mut self.events);
        let result = self
            .reader
            .finish(read_error, &mut self.sink, &mut |seg, sink| {
                capture_findings(sink, events);
                reasm.segment(seg, events);
            });
        self.sink.finish();
        capture_findings(&mut self.sink, &mut self.events);
        self.reasm.finish(&mut self.events);
        result
    }

    /// End after a failure inside the core: the input is read no further, the connections are
    /// flushed (their bytes so far are kept).
    pub fn abandon(&mut self) {
        if !self.finished {
            self.finished = true;
            self.sink.finish();
            capture_findings(&mut self.sink, &mut self.events);
            self.reasm.finish(&mut self.events);
        }
    }

    /// The events produced since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    pub fn info(&self) -> &CaptureInfo {
        self.reader.info()
    }

    pub fn stream_info(&self, stream: u64) -> Option<&StreamInfo> {
        self.reasm.stream_info(stream)
    }

    pub fn mute(&mut self, stream: u64) {
        self.reasm.mute(stream);
    }

    /// Report a problem found outside the core's own parsing (e.g. a panic caught at the boundary).
    pub fn push_finding(&mut self, finding: Finding) {
        self.events.push(Event::Finding(finding));
    }
}
