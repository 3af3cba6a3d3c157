//! One capture through the core: bytes in, the records out, in the order a consumer must see them
//! (a capture finding before the segment that follows it, each segment's reassembly output right
//! after it, the records a native decoder made of it in its place).

mod fates;
mod held;
mod hellos;
mod hunt;
pub mod out;
mod session;

use hellos::Hellos;
pub use hunt::HUNT_LIMIT;
pub use session::{Detection, Session};

use crate::capture::{CaptureInfo, CaptureInput, Segment};
use crate::decoders::StreamContext;
use crate::model::{Finding, FindingSink};
use crate::tcp::{Config, Event, Reassembler, StreamInfo};
use out::Taken;

/// The pipeline's output: what the TCP layer produced for Python (findings, stream ends, and the
/// bytes in chunks mode) and the records of the streams the core decodes.
pub enum Item {
    Tcp(Event),
    Records(Taken),
}

/// What a decoder may know of a stream, from its reassembler summary.
pub fn context(info: &StreamInfo) -> StreamContext {
    StreamContext {
        stream: info.stream,
        client: info.client.clone(),
        server: info.server.clone(),
        client_port: info.client_port,
        server_port: info.server_port,
        midstream: info.midstream,
        ..StreamContext::default()
    }
}

/// Records one call gives Python at most (about, a stream's end may pass it): the rest of the
/// reassembler's output waits for `more`. Without it a stream's end (every held event of it) and
/// the capture's end (every connection's) came out as one batch as large as the capture's output.
const STEP_RECORDS: usize = 16_384;

pub struct Pipeline {
    reader: CaptureInput,
    reasm: Reassembler,
    sink: FindingSink,
    events: Vec<Event>,
    items: Vec<Item>,
    /// Records in `items`.
    item_records: usize,
    pub session: Session,
    /// Streams are decoded (false: reassembly only, `wirelog streams`).
    decode: bool,
    /// Without decoding: the TLS streams' handshakes, read for their summaries.
    hellos: Hellos,
    /// Python also sees every Chunk and Gap (`streams --dump`, `inspect --frame`).
    chunks: bool,
    finished: bool,
    /// Fed segments read elsewhere (`segments`), not capture bytes: there is no reader to finish.
    read_elsewhere: bool,
    /// Test hook: panic when this frame's segment arrives (how the suite proves that a panic in
    /// the core becomes a finding and loses nothing before it).
    pub panic_at_frame: Option<u64>,
}

fn capture_findings(sink: &mut FindingSink, events: &mut Vec<Event>) {
    events.extend(sink.drain().into_iter().map(Event::Finding));
}

impl Pipeline {
    /// `decode`: streams are decoded; `chunks`: Python also sees every stream's bytes.
    pub fn new(
        name: &str,
        compression: Option<&str>,
        cfg: Config,
        session: Session,
        decode: bool,
        chunks: bool,
    ) -> Self {
        Pipeline {
            decode,
            chunks,
            hellos: Hellos::default(),
            reader: CaptureInput::new(name, compression),
            reasm: Reassembler::new(cfg),
            sink: FindingSink::default(),
            events: Vec::new(),
            items: Vec::new(),
            item_records: 0,
            session,
            finished: false,
            read_elsewhere: false,
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
        self.secrets();
        self.route();
        result
    }

    /// Segments of a capture read elsewhere (a split read by another task), in frame order.
    pub fn segments(&mut self, each: impl FnOnce(&mut dyn FnMut(&Segment<'_>))) {
        self.read_elsewhere = true;
        let (reasm, events) = (&mut self.reasm, &mut self.events);
        each(&mut |seg| reasm.segment(seg, events));
        self.route();
    }

    /// Key logs the capture carries (pcapng Decryption Secrets Blocks) go to the TLS streams.
    fn secrets(&mut self) {
        for text in self.reader.take_secrets() {
            let text = String::from_utf8_lossy(&text);
            self.session
                .add_keylog("the capture's Decryption Secrets Block", &text);
        }
    }

    /// End of the input (`read_error`: why reading stopped early). Flushes every connection.
    pub fn finish(&mut self, read_error: Option<&str>) -> Result<(), String> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        if self.read_elsewhere {
            self.abandon_reading();
            return Ok(());
        }
        let (reasm, events) = (&mut self.reasm, &mut self.events);
        let result = self
            .reader
            .finish(read_error, &mut self.sink, &mut |seg, sink| {
                capture_findings(sink, events);
                reasm.segment(seg, events);
            });
        self.sink.finish();
        capture_findings(&mut self.sink, &mut self.events);
        self.secrets();
        self.reasm.finish(&mut self.events);
        self.end_decoding();
        result
    }

    /// End after a failure inside the core: the input is read no further, the connections are
    /// flushed (their bytes so far are kept).
    pub fn abandon(&mut self) {
        if !self.finished {
            self.finished = true;
            self.abandon_reading();
        }
    }

    fn abandon_reading(&mut self) {
        self.sink.finish();
        capture_findings(&mut self.sink, &mut self.events);
        self.reasm.finish(&mut self.events);
        self.end_decoding();
    }

    fn end_decoding(&mut self) {
        self.route();
    }

    /// Give the reassembler's new output to the session (detection, the native decoders); what
    /// Python must see goes to the items, with the records made so far before it.
    fn route(&mut self) {
        let mut events = std::mem::take(&mut self.events).into_iter();
        // Bytes a stream flushes when it ends come before its End, after the reassembler forgot it.
        let ending: Vec<StreamContext> = events
            .as_slice()
            .iter()
            .filter_map(|e| match e {
                Event::End(info) => Some(context(info)),
                _ => None,
            })
            .collect();
        // a stream's end whose held records go out in parts (`Session::end`): again, first
        let mut again = None;
        for mut event in events.by_ref() {
            if !self.decode {
                self.summarise(event);
                continue;
            }
            if self.chunks && matches!(event, Event::Chunk { .. } | Event::Gap { .. }) {
                self.flush_records();
                self.items.push(Item::Tcp(event.clone()));
            }
            if let Some((stream, chunk)) = event.as_chunk() {
                self.open(stream, &ending);
                self.session.chunk(stream, &chunk);
            } else if let Some((stream, gap)) = event.as_gap() {
                self.open(stream, &ending);
                self.session.gap(stream, &gap);
            }
            if let Event::End(info) = &mut event {
                let closed = info.fin_c2s || info.fin_s2c || info.reset;
                let Some(ended) = self.session.end(info.stream, closed) else {
                    again = Some(event);
                    break;
                };
                (info.protocol, info.tls, info.settled) =
                    (ended.protocol, ended.tls, ended.settled);
                self.session.out.stream_end(info);
            }
            if self.session.out.timeline.is_some() {
                // `wirelog report` only: the stream's protocol, for the filter
                let protocol = match &event {
                    Event::End(info) => info.protocol,
                    Event::Chunk { stream, .. } | Event::Gap { stream, .. } => {
                        self.session.protocol(*stream)
                    }
                    Event::Finding(f) => f.stream.and_then(|s| self.session.protocol(s)),
                };
                self.session.out.tcp_event(&event, protocol);
            }
            match &mut event {
                Event::Chunk { .. } | Event::Gap { .. } => {}
                Event::End(info) => {
                    // a lane still waiting on an answer, or with stalls, may change at the end
                    info.settled &= self.session.out.settled(info.stream);
                    self.mute_unknown();
                    self.flush_records();
                    self.items.push(Item::Tcp(event));
                }
                Event::Finding(_) => {
                    self.flush_records();
                    self.items.push(Item::Tcp(event));
                }
            }
            self.mute_unknown();
            if self.item_records.saturating_add(self.session.out.pending()) >= STEP_RECORDS {
                break;
            }
        }
        // what is left comes before anything the next bytes make
        self.events = again.into_iter().chain(events).collect();
        self.flush_records();
    }

    /// Whether output waits (then `more` gives the next part of it).
    pub fn pending(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next part of the output that waits.
    pub fn more(&mut self) {
        self.route();
    }

    /// Reassembly only: every event goes to Python (the bytes only in chunks mode), TLS streams'
    /// first bytes to their handshake reading, and a stream's summary carries what it found.
    fn summarise(&mut self, mut event: Event) {
        if let Some((stream, chunk)) = event.as_chunk() {
            let keylog = self.session.keylog();
            if self.hellos.chunk(stream, &chunk, keylog) && !self.chunks {
                self.reasm.mute(stream);
            }
            if !self.chunks {
                return;
            }
        } else if let Some((stream, gap)) = event.as_gap() {
            self.hellos.gap(stream, &gap);
        }
        if let Event::End(info) = &mut event {
            info.tls = self.hellos.end(info.stream);
            info.settled = true; // nothing is decoded: nothing of it comes later
        }
        self.items.push(Item::Tcp(event));
    }

    /// Tell the session of a stream before its first bytes (its info is the reassembler's, or
    /// for bytes flushed at its end, that of the End event that follows them).
    fn open(&mut self, stream: u64, ending: &[StreamContext]) {
        if self.session.knows(stream) {
            return;
        }
        let ctx = match self.reasm.stream_info(stream) {
            Some(info) => Some(context(info)),
            None => ending.iter().find(|c| c.stream == stream).cloned(),
        };
        if let Some(ctx) = ctx {
            self.session.open(ctx);
        }
    }

    /// Streams of no known protocol are muted (unless Python shows every stream's bytes). Records
    /// are taken only before something else is pushed (one batch for many events).
    fn mute_unknown(&mut self) {
        for stream in self.session.take_unknown() {
            if !self.chunks {
                self.reasm.mute(stream);
            }
        }
    }

    fn flush_records(&mut self) {
        self.item_records = self.item_records.saturating_add(self.session.out.pending());
        if let Some(taken) = self.session.out.take() {
            self.items.push(Item::Records(taken));
        }
    }

    /// The output produced since the last call.
    pub fn take_items(&mut self) -> Vec<Item> {
        self.item_records = 0;
        std::mem::take(&mut self.items)
    }

    pub fn info(&self) -> &CaptureInfo {
        self.reader.info()
    }

    /// A live stream's summary so far, with its protocol once decided.
    pub fn stream_info(&self, stream: u64) -> Option<StreamInfo> {
        let mut info = self.reasm.stream_info(stream)?.clone();
        info.protocol = self.session.protocol(stream);
        Some(info)
    }

    pub fn mute(&mut self, stream: u64) {
        self.reasm.mute(stream);
    }

    /// Report a problem found outside the core's own parsing (e.g. a panic caught at the boundary).
    pub fn push_finding(&mut self, finding: Finding) {
        self.items.push(Item::Tcp(Event::Finding(finding)));
    }
}
