//! One capture through the core: bytes in, the records out, in the order a consumer must see them
//! (a capture finding before the segment that follows it, each segment's reassembly output right
//! after it, the records a native decoder made of it in its place).

mod session;

pub use session::Session;

use crate::capture::{CaptureInfo, CaptureInput};
use crate::decoders::{Chunk, Gap};
use crate::model::{Finding, FindingSink};
use crate::records::out::Taken;
use crate::tcp::{Config, Event, Reassembler, StreamInfo};

/// The pipeline's output: what the TCP layer produced for Python (the bytes of streams Python
/// decodes, findings, stream ends) and, in their place, the records of the streams the core decodes.
pub enum Item {
    Tcp(Event),
    Records(Taken),
}

pub struct Pipeline {
    reader: CaptureInput,
    reasm: Reassembler,
    sink: FindingSink,
    events: Vec<Event>,
    items: Vec<Item>,
    pub session: Session,
    finished: bool,
    /// Test hook: panic when this frame's segment arrives (how the suite proves that a panic in
    /// the core becomes a finding and loses nothing before it).
    pub panic_at_frame: Option<u64>,
}

fn capture_findings(sink: &mut FindingSink, events: &mut Vec<Event>) {
    events.extend(sink.drain().into_iter().map(Event::Finding));
}

impl Pipeline {
    pub fn new(name: &str, compression: Option<&str>, cfg: Config, session: Session) -> Self {
        Pipeline {
            reader: CaptureInput::new(name, compression),
            reasm: Reassembler::new(cfg),
            sink: FindingSink::default(),
            events: Vec::new(),
            items: Vec::new(),
            session,
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
        self.route();
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
        self.end_decoding();
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
            self.end_decoding();
        }
    }

    fn end_decoding(&mut self) {
        self.route();
    }

    /// Give the reassembler's new output to the native decoders where a stream is theirs; what
    /// is left goes to Python, with the records made so far before it.
    fn route(&mut self) {
        for event in std::mem::take(&mut self.events) {
            let session = &mut self.session;
            match &event {
                Event::Chunk {
                    stream,
                    direction,
                    offset,
                    data,
                    frame,
                    ts,
                } => {
                    let chunk = Chunk {
                        direction: *direction,
                        offset: *offset,
                        data,
                        frame: Some(*frame),
                        ts: Some(*ts),
                    };
                    if session.chunk(*stream, &chunk) {
                        continue;
                    }
                }
                Event::Gap {
                    stream,
                    direction,
                    offset,
                    length,
                    frame,
                    ts,
                } => {
                    let gap = Gap {
                        direction: *direction,
                        offset: *offset,
                        length: *length,
                        frame: Some(*frame),
                        ts: Some(*ts),
                    };
                    if session.gap(*stream, &gap) {
                        continue;
                    }
                }
                Event::End(info) => {
                    session.end(info.stream, info.fin_c2s || info.fin_s2c || info.reset)
                }
                Event::Finding(_) => {}
            }
            self.flush_records();
            self.items.push(Item::Tcp(event));
        }
        self.flush_records();
    }

    fn flush_records(&mut self) {
        if let Some(taken) = self.session.out.take() {
            self.items.push(Item::Records(taken));
        }
    }

    /// The output produced since the last call.
    pub fn take_items(&mut self) -> Vec<Item> {
        std::mem::take(&mut self.items)
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
        self.items.push(Item::Tcp(Event::Finding(finding)));
    }
}
