//! The capture reader: bytes in (any split), packets numbered and timed, TCP segments out.
//!
//! Sans-IO: the caller feeds what it read. Records are parsed straight from the fed bytes; only a
//! record cut by the end of a feed is copied, into `tail`, and completed from the next feeds, so
//! every byte is copied at most once and nothing consumed is kept. `need` (how much the first
//! pending record needs) comes from a length field only after that field passed its cap, and the
//! tail never grows beyond the bytes actually fed.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "frame numbers and packet and byte counts grow by one packet at a time (bounded by the input); times are widened to i128 before subtracting"
)]

use super::packet::{Packet, PacketParser};
use super::pcap::{self, Pcap};
use super::pcapng::{self, Pcapng};
use super::report::limited;
use super::route::{Route, Routes, Span};
use super::{CaptureInfo, Segment};
use crate::model::{Finding, FindingSink, Severity};

/// No pcap record or pcapng block is believed beyond this.
pub(super) const MAX_BLOCK: u32 = 256 << 20;
/// A tail buffer larger than this is released once empty rather than kept for reuse.
const KEEP_TAIL_CAPACITY: usize = 1 << 20;

/// What a format parser could not do with the bytes it was given.
#[derive(Debug, PartialEq)]
pub(super) enum Progress {
    /// The next record needs this many bytes in all (header or whole record).
    Need(usize),
    /// The capture is damaged here (what is wrong); reading stops.
    Corrupt(String),
}

#[derive(Debug)]
enum State {
    /// Waiting for the bytes that tell the format.
    Detect,
    Pcap(Pcap),
    Pcapng(Pcapng),
    /// Damaged: reading stopped, later bytes are ignored.
    Stopped,
    /// Unusable input: every call returns this error.
    Failed(String),
    /// Fed routed packets (`feed_routed`), not bytes of a format.
    Routed,
    Finished,
}

/// Reads one capture (pcap or pcapng): see the module docs of `capture`.
#[derive(Debug)]
pub struct CaptureReader {
    name: String,
    compression: Option<String>,
    state: State,
    tail: Vec<u8>,
    need: usize,
    /// File offset of the first byte not yet consumed (of `tail`, else of the next feed).
    position: u64,
    flow: Flow,
}

impl CaptureReader {
    /// `name`: the input's name for error messages; `compression`: e.g. Some("gzip") when the
    /// bytes were decompressed (error texts then say "after gzip decompression").
    pub fn new(name: &str, compression: Option<&str>) -> Self {
        CaptureReader {
            name: name.to_owned(),
            compression: compression.map(str::to_owned),
            state: State::Detect,
            tail: Vec::new(),
            need: 4,
            position: 0,
            flow: Flow::default(),
        }
    }

    /// Note where every later packet goes (capture/route.rs: `groups` groups of connections),
    /// until `take_routes`. The next bytes fed start at file offset `position`.
    pub fn route(&mut self, groups: u32, position: u64) {
        self.flow.routes = Some(Routes::new(groups));
        self.position = position;
    }

    /// The next bytes fed start at file offset `position` (after a damaged range was skipped: no
    /// record is cut there, so nothing is pending).
    pub fn set_position(&mut self, position: u64) {
        self.position = position;
    }

    /// Each group's routes since the last call (empty when not routing).
    pub fn take_routes(&mut self) -> Vec<Vec<u8>> {
        self.flow
            .routes
            .as_mut()
            .map(Routes::take)
            .unwrap_or_default()
    }

    /// One packet that another reader routed here (capture/route.rs), its data read from the file:
    /// parsed with the frame number, time and link type that reader gave it. A reader fed so reads
    /// no format (no file header, no sections) and takes no other bytes.
    pub fn feed_routed(
        &mut self,
        route: &Route,
        data: &[u8],
        sink: &mut FindingSink,
        on_segment: &mut dyn FnMut(&Segment, &mut FindingSink),
    ) {
        self.state = State::Routed;
        self.flow.frame = route.frame.saturating_sub(1);
        // its own time, never "backwards": the routing read made the packet layer's findings
        self.flow.last_ts = Some(route.ts);
        let mut h = Handler {
            flow: &mut self.flow,
            base: 0,
            sink,
            on_segment,
        };
        h.packet(Some(route.ts), Some(route.linktype), data, route.wirelen);
    }

    /// The packets of `span` (of `route::spans(routes)`), their data in `data`, the file's bytes
    /// of the span: each through `feed_routed`. Err for a route that is not there or a packet
    /// outside `data` (the file changed since it was routed).
    pub fn feed_span(
        &mut self,
        routes: &[u8],
        span: &Span,
        data: &[u8],
        sink: &mut FindingSink,
        on_segment: &mut dyn FnMut(&Segment, &mut FindingSink),
    ) -> Result<(), String> {
        let (first, last, at) = (span.first, span.last, span.lo);
        for index in first..last {
            let route = Route::at(routes, index).ok_or("a route past the routes' end")?;
            let packet = route
                .offset
                .checked_sub(at)
                .and_then(|from| usize::try_from(from).ok())
                .and_then(|from| data.get(from..)?.get(..route.len as usize))
                .ok_or("a routed packet outside the bytes read")?;
            self.feed_routed(&route, packet, sink, on_segment);
        }
        Ok(())
    }

    /// The TLS key logs that Decryption Secrets Blocks brought since the last call.
    pub fn take_secrets(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.flow.secrets)
    }

    pub fn info(&self) -> &CaptureInfo {
        &self.flow.info
    }

    /// Number the packets from `frame` (a split of a capture whose earlier packets others read).
    pub fn set_first_frame(&mut self, frame: u64) {
        self.flow.frame = frame.saturating_sub(1);
    }

    /// Feeds the next bytes of the input (any split). Parses every complete record, calls
    /// `on_segment` for each TCP segment in frame order and reports findings as they occur.
    /// Err only for an input that is not a usable capture (before any packet); a damaged capture
    /// stops with a finding instead, and later bytes are ignored.
    pub fn feed(
        &mut self,
        data: &[u8],
        sink: &mut FindingSink,
        on_segment: &mut dyn FnMut(&Segment, &mut FindingSink),
    ) -> Result<(), String> {
        if !self.running()? {
            return Ok(());
        }
        let mut data = data;
        while !self.tail.is_empty() {
            let want = self.need.saturating_sub(self.tail.len()).min(data.len());
            let (more, rest) = data.split_at(want);
            self.tail.extend_from_slice(more);
            data = rest;
            if self.tail.len() < self.need {
                return Ok(());
            }
            let tail = std::mem::take(&mut self.tail);
            let used = self.step(&tail, false, sink, on_segment)?;
            self.tail = tail;
            self.tail.drain(..used);
            if !self.running()? {
                self.tail = Vec::new();
                return Ok(());
            }
        }
        if self.tail.capacity() > KEEP_TAIL_CAPACITY {
            self.tail = Vec::new();
        }
        let used = self.step(data, false, sink, on_segment)?;
        if self.running()? {
            self.tail
                .extend_from_slice(data.get(used..).unwrap_or_default());
        }
        Ok(())
    }

    /// End of input; `read_error` says why reading stopped early, if it did. Reports a record cut
    /// in the middle and the IP datagrams never completed. Err for an empty input or one too
    /// short to tell its format. Does not call `sink.finish()`.
    pub fn finish(
        &mut self,
        read_error: Option<&str>,
        sink: &mut FindingSink,
        on_segment: &mut dyn FnMut(&Segment, &mut FindingSink),
    ) -> Result<(), String> {
        if matches!(self.state, State::Detect) {
            let tail = std::mem::take(&mut self.tail);
            if tail.is_empty() {
                let what = self.what();
                let message = match read_error {
                    Some(error) => format!("{}: cannot read {what}({error})", self.name),
                    None => format!("{}: empty input {what}(not a capture)", self.name)
                        .replace("  ", " "),
                };
                return Err(self.fail(message));
            }
            self.step(&tail, true, sink, on_segment)?;
        }
        if !self.running()? {
            if matches!(self.state, State::Finished) {
                return Ok(());
            }
        } else if !self.tail.is_empty() || read_error.is_some() {
            self.truncated(sink, read_error);
        }
        self.tail = Vec::new();
        self.state = State::Finished;
        self.flow.parser.finish(sink);
        Ok(())
    }

    /// Whether records are being read: false once stopped or finished, Err once failed.
    fn running(&self) -> Result<bool, String> {
        match &self.state {
            State::Failed(message) => Err(message.clone()),
            State::Stopped | State::Finished | State::Routed => Ok(false),
            State::Detect | State::Pcap(_) | State::Pcapng(_) => Ok(true),
        }
    }

    /// Parses what it can of `buf` (the start of the unread input); returns the bytes used and
    /// sets `need`. `at_end`: no more bytes will come (an unrecognised start is then an error).
    fn step(
        &mut self,
        buf: &[u8],
        at_end: bool,
        sink: &mut FindingSink,
        on_segment: &mut dyn FnMut(&Segment, &mut FindingSink),
    ) -> Result<usize, String> {
        let mut start = 0;
        if matches!(self.state, State::Detect) {
            match self.recognise(buf, at_end) {
                Ok(Some((state, header))) => {
                    self.state = state;
                    start = header;
                }
                Ok(None) => return Ok(0),
                Err(message) => return Err(self.fail(message)),
            }
        }
        let rest = buf.get(start..).unwrap_or_default();
        let mut h = Handler {
            flow: &mut self.flow,
            base: self.position + start as u64,
            sink,
            on_segment,
        };
        let (used, progress) = match &mut self.state {
            State::Pcap(pcap) => pcap.parse(rest, &mut h),
            State::Pcapng(pcapng) => pcapng.parse(rest, &mut h),
            _ => return Ok(buf.len()),
        };
        self.position += (start + used) as u64;
        match progress {
            Progress::Need(need) => self.need = need,
            Progress::Corrupt(what) => self.corrupt(sink, &what),
        }
        Ok(start + used)
    }

    /// The format, from the first bytes: Some((state, header bytes used)), or None (and `need`
    /// set) while more bytes are needed to tell; Err when the input is not a usable capture.
    fn recognise(&mut self, buf: &[u8], at_end: bool) -> Result<Option<(State, usize)>, String> {
        let Some(magic) = buf.get(..4) else {
            if at_end {
                return Err(self.not_a_capture(buf));
            }
            self.need = 4;
            return Ok(None);
        };
        if pcap::is_magic(magic) {
            self.flow.info.format = "pcap";
            let Some(header) = buf.get(..pcap::HEADER_LEN) else {
                if at_end {
                    return Err(format!(
                        "{}: truncated pcap file header ({} of 24 bytes)",
                        self.name,
                        buf.len()
                    ));
                }
                self.need = pcap::HEADER_LEN;
                return Ok(None);
            };
            let pcap = Pcap::new(header).ok_or_else(|| self.not_a_capture(buf))?;
            self.flow.info.link_types = vec![pcap.linktype()];
            return Ok(Some((State::Pcap(pcap), pcap::HEADER_LEN)));
        }
        if magic == pcapng::SHB_MAGIC {
            let Some(big) = buf.get(8..12).and_then(pcapng::byte_order) else {
                if buf.len() < 12 && !at_end {
                    self.need = 12;
                    return Ok(None);
                }
                return Err(format!(
                    "{}: damaged pcapng section header (bad byte-order magic)",
                    self.name
                ));
            };
            self.flow.info.format = "pcapng";
            return Ok(Some((State::Pcapng(Pcapng::new(big)), 0)));
        }
        Err(self.not_a_capture(buf))
    }

    /// "after gzip decompression " when the bytes were decompressed, else "".
    fn what(&self) -> String {
        match &self.compression {
            Some(kind) => format!("after {kind} decompression "),
            None => String::new(),
        }
    }

    fn not_a_capture(&self, buf: &[u8]) -> String {
        let head: Vec<String> = buf.iter().take(4).map(|b| format!("{b:02x}")).collect();
        format!(
            "{}: not a pcap or pcapng capture {}(starts with {})",
            self.name,
            self.what(),
            head.join(" ")
        )
    }

    /// The input is unusable: remember why (every later call says it again).
    fn fail(&mut self, message: String) -> String {
        self.flow.info.error = Some(message.clone());
        self.state = State::Failed(message.clone());
        self.tail = Vec::new();
        message
    }

    /// Reading ends early: keep everything before, say why once.
    fn stop(
        &mut self,
        sink: &mut FindingSink,
        code: &'static str,
        severity: Severity,
        message: String,
    ) {
        let frame = self.flow.frame + 1;
        self.flow.info.truncated = true;
        self.flow.info.error = Some(message.clone());
        sink.add(Finding::new(code, severity, message).at(Some(frame), None));
        self.state = State::Stopped;
    }

    fn corrupt(&mut self, sink: &mut FindingSink, what: &str) {
        let frame = self.flow.frame;
        let message =
            format!("capture damaged after packet {frame} ({what}); reading stopped there");
        self.stop(sink, "pcap.corrupt", Severity::Error, message);
    }

    fn truncated(&mut self, sink: &mut FindingSink, read_error: Option<&str>) {
        let frame = self.flow.frame + 1;
        let why = read_error.map(|e| format!(" ({e})")).unwrap_or_default();
        let message = format!(
            "capture ends in the middle of record {frame} ({} of {} bytes present){why}; the {} \
             packets before it were read",
            self.tail.len(),
            self.need,
            frame - 1
        );
        self.stop(sink, "pcap.truncated", Severity::Warning, message);
    }
}

/// Everything after the record layer: frame numbers, the clock, the counts, the packet parser.
#[derive(Debug, Default)]
struct Flow {
    info: CaptureInfo,
    frame: u64,
    /// The last timestamp a packet carried (Simple Packet Blocks carry none).
    last_ts: Option<i64>,
    parser: PacketParser,
    /// TLS key logs from pcapng Decryption Secrets Blocks, not yet taken (`take_secrets`).
    secrets: Vec<Vec<u8>>,
    /// Their bytes so far, against `MAX_SECRETS`.
    secret_bytes: usize,
    /// Where each packet goes, when a split is being routed (`CaptureReader::route`).
    routes: Option<Routes>,
}

/// Key log bytes a capture may carry (a line per connection: some 100,000 connections).
const MAX_SECRETS: usize = 16 << 20;

/// Where the format parsers hand their records.
pub(super) struct Handler<'a> {
    flow: &'a mut Flow,
    /// File offset of the bytes the format parser was given.
    base: u64,
    sink: &'a mut FindingSink,
    on_segment: &'a mut dyn FnMut(&Segment, &mut FindingSink),
}

impl Handler<'_> {
    /// The next packet's data starts at `at` of the bytes the format parser was given.
    pub fn data_at(&mut self, at: usize) {
        if let Some(routes) = &mut self.flow.routes {
            routes.data_at(self.base + at as u64);
        }
    }

    /// The next packet record (Wireshark numbers every one): `ts` None for a record without a
    /// timestamp (it gets the previous packet's), `linktype` None for a record that is not a
    /// packet of a described interface.
    pub fn packet(&mut self, ts: Option<i64>, linktype: Option<u32>, data: &[u8], wirelen: u32) {
        let flow = &mut *self.flow;
        flow.frame += 1;
        let frame = flow.frame;
        let info = &mut flow.info;
        info.packets = frame;
        info.bytes += data.len() as u64;
        let ts = match ts {
            None => flow.last_ts.unwrap_or(0),
            Some(ts) => {
                if let Some(last) = flow.last_ts.filter(|&last| ts < last) {
                    backwards(self.sink, frame, ts, last);
                }
                flow.last_ts = Some(ts);
                info.first_ts = Some(info.first_ts.map_or(ts, |first| first.min(ts)));
                info.last_ts = Some(info.last_ts.map_or(ts, |last| last.max(ts)));
                ts
            }
        };
        if let (Some(routes), Some(linktype)) = (&mut flow.routes, linktype) {
            routes.packet(frame, ts, linktype, data, wirelen);
        }
        let mut packet = Packet {
            frame,
            ts,
            sink: self.sink,
            on_segment: self.on_segment,
        };
        flow.parser.packet(&mut packet, linktype, data, wirelen);
        info.non_tcp_packets = flow.parser.non_tcp();
        info.tcp_packets = frame - info.non_tcp_packets;
    }

    /// The next packet record names interface `id`, which its section does not describe.
    pub fn unknown_interface(&mut self, id: u32, data: &[u8], wirelen: u32) {
        let frame = self.flow.frame + 1;
        limited(
            self.sink,
            "pcap.malformed-record",
            Severity::Warning,
            || {
                let message = format!(
                    "packet {frame} names interface {id}, which the section does not describe"
                );
                Finding::new("pcap.malformed-record", Severity::Warning, message)
                    .at(Some(frame), None)
                    .field("interface", id)
            },
        );
        self.packet(None, None, data, wirelen);
    }

    /// A Decryption Secrets Block's TLS key log (NSS key log lines).
    pub fn secrets(&mut self, text: &[u8]) {
        let flow = &mut *self.flow;
        flow.secret_bytes = flow.secret_bytes.saturating_add(text.len());
        if flow.secret_bytes > MAX_SECRETS {
            let message = format!(
                "a Decryption Secrets Block after frame {} takes the capture's key logs past {} MiB: ignored",
                flow.frame,
                MAX_SECRETS >> 20
            );
            limited(self.sink, "pcap.secrets-ignored", Severity::Warning, || {
                Finding::new("pcap.secrets-ignored", Severity::Warning, message)
                    .at(Some(flow.frame), None)
            });
        } else if !text.is_empty() {
            flow.secrets.push(text.to_vec());
        }
    }

    /// An interface of this link type was described.
    pub fn link_type(&mut self, linktype: u32) {
        let types = &mut self.flow.info.link_types;
        if let Err(at) = types.binary_search(&linktype) {
            types.insert(at, linktype);
        }
    }
}

fn backwards(sink: &mut FindingSink, frame: u64, ts: i64, last: i64) {
    limited(sink, "pcap.time-backwards", Severity::Info, || {
        let seconds = (i128::from(last) - i128::from(ts)) as f64 / 1e9;
        let message =
            format!("packet {frame} is timestamped {seconds:.6} s before the packet preceding it");
        Finding::new("pcap.time-backwards", Severity::Info, message)
            .at(Some(frame), Some(ts))
            .field("previous_ts", last)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::testkit::*;

    fn error_of(data: &[u8], compression: Option<&str>, read_error: Option<&str>) -> String {
        let mut reader = CaptureReader::new("x.txt", compression);
        let mut sink = FindingSink::default();
        let mut nothing = |_: &Segment, _: &mut FindingSink| panic!("no segment expected");
        let fed = reader.feed(data, &mut sink, &mut nothing);
        let err = fed
            .and_then(|()| reader.finish(read_error, &mut sink, &mut nothing))
            .unwrap_err();
        assert_eq!(reader.info().error.as_deref(), Some(err.as_str()));
        assert!(sink.out.is_empty());
        err
    }

    #[test]
    fn not_a_capture_is_one_line_error() {
        let cases: [(&[u8], &str); 6] = [
            (
                b"Hello, world\n",
                "x.txt: not a pcap or pcapng capture (starts with 48 65 6c 6c)",
            ),
            (b"", "x.txt: empty input (not a capture)"),
            (
                b"He",
                "x.txt: not a pcap or pcapng capture (starts with 48 65)",
            ),
            (
                b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00",
                "x.txt: truncated pcap file header (8 of 24 bytes)",
            ),
            (
                b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\x00\x00\x00\x00",
                "x.txt: damaged pcapng section header (bad byte-order magic)",
            ),
            (
                b"\x0a\x0d\x0d\x0a\x1c\x00",
                "x.txt: damaged pcapng section header (bad byte-order magic)",
            ),
        ];
        for (data, message) in cases {
            assert_eq!(error_of(data, None, None), message);
            let mut chunks = CaptureReader::new("x.txt", None);
            let mut sink = FindingSink::default();
            let mut nothing = |_: &Segment, _: &mut FindingSink| {};
            let mut result = Ok(());
            for byte in data.chunks(1) {
                result = result.and_then(|()| chunks.feed(byte, &mut sink, &mut nothing));
            }
            let result = result.and_then(|()| chunks.finish(None, &mut sink, &mut nothing));
            assert_eq!(result.unwrap_err(), message);
        }
        // the modified pcap format (0xa1b2cd34) is not read
        assert!(error_of(&[0x34, 0xcd, 0xb2, 0xa1, 0, 0], None, None)
            .contains("starts with 34 cd b2 a1"));
    }

    #[test]
    fn errors_after_decompression_say_so() {
        assert_eq!(
            error_of(b"this is just text", Some("gzip"), None),
            "x.txt: not a pcap or pcapng capture after gzip decompression (starts with 74 68 69 73)"
        );
        assert_eq!(
            error_of(b"", Some("zstd"), None),
            "x.txt: empty input after zstd decompression (not a capture)"
        );
        assert_eq!(
            error_of(
                b"",
                Some("gzip"),
                Some("BadGzipFile: Not a gzipped file (b'ga')")
            ),
            "x.txt: cannot read after gzip decompression (BadGzipFile: Not a gzipped file (b'ga'))"
        );
        assert_eq!(
            error_of(b"", None, Some("OSError: boom")),
            "x.txt: cannot read (OSError: boom)"
        );
    }

    #[test]
    fn unusable_input_stays_an_error() {
        let mut reader = CaptureReader::new("x", None);
        let mut sink = FindingSink::default();
        let mut nothing = |_: &Segment, _: &mut FindingSink| {};
        assert!(reader
            .feed(b"GET / HTTP/1.1", &mut sink, &mut nothing)
            .is_err());
        let again = reader.feed(&pcap(&[]), &mut sink, &mut nothing);
        assert_eq!(
            again.unwrap_err(),
            "x: not a pcap or pcapng capture (starts with 47 45 54 20)"
        );
        assert!(reader.finish(None, &mut sink, &mut nothing).is_err());
    }

    #[test]
    fn a_pcap_header_announces_the_format_before_it_is_complete() {
        let mut reader = CaptureReader::new("x", None);
        let mut sink = FindingSink::default();
        reader
            .feed(&[0xd4, 0xc3, 0xb2, 0xa1], &mut sink, &mut |_, _| {})
            .unwrap();
        assert_eq!(reader.info().format, "pcap");
        assert!(reader.finish(None, &mut sink, &mut |_, _| {}).is_err());
        assert_eq!(reader.info().format, "pcap");
    }

    #[test]
    fn after_a_stop_feeds_are_ignored_and_finish_runs_once() {
        let f = Tcp::new(1, b"a").frame();
        let mut data = pcap(std::slice::from_ref(&f));
        data.extend([0, 0, 0xFFFF_FFF0, 0].map(u32::to_le_bytes).concat());
        let mut reader = CaptureReader::new("x", None);
        let mut sink = FindingSink::default();
        let mut segs = 0;
        reader
            .feed(&data, &mut sink, &mut |_, _| segs += 1)
            .unwrap();
        reader
            .feed(&pcap(&[f])[24..], &mut sink, &mut |_, _| segs += 1)
            .unwrap();
        reader
            .finish(None, &mut sink, &mut |_, _| segs += 1)
            .unwrap();
        reader
            .finish(Some("late"), &mut sink, &mut |_, _| segs += 1)
            .unwrap();
        reader
            .feed(b"more", &mut sink, &mut |_, _| segs += 1)
            .unwrap();
        assert_eq!(segs, 1);
        assert_eq!(
            sink.out.iter().map(|f| f.code).collect::<Vec<_>>(),
            ["pcap.corrupt"]
        );
        assert_eq!(reader.info().packets, 1);
    }

    #[test]
    fn findings_come_as_they_occur() {
        let fs = [
            Tcp::new(1, b"a").frame(),
            Tcp::new(2, b"b").frame(),
            Tcp::new(3, b"c").frame(),
        ];
        let records = vec![
            (T0_NS, fs[0].clone(), 55),
            (T0_NS - 1000, fs[1].clone(), 55),
            (T0_NS + 5000, fs[2].clone(), 55),
        ];
        let data = pcap_with(
            &records,
            PcapOpts {
                nano: true,
                ..PcapOpts::default()
            },
        );
        let mut reader = CaptureReader::new("x", None);
        let mut sink = FindingSink::default();
        let mut seen = Vec::new();
        let record = |n: usize| 24 + n * (16 + 55);
        reader
            .feed(&data[..record(1)], &mut sink, &mut |s, _| {
                seen.push(s.frame)
            })
            .unwrap();
        assert!(sink.out.is_empty() && seen == [1]);
        reader
            .feed(&data[record(1)..record(2)], &mut sink, &mut |s, _| {
                seen.push(s.frame)
            })
            .unwrap();
        assert_eq!((sink.out.len(), &seen[..]), (1, &[1, 2][..]));
        assert_eq!(reader.info().packets, 2);
    }

    #[test]
    fn every_split_reads_the_same() {
        let pcapng = pcapng_sample();
        let mut frames: Vec<Vec<u8>> = (0..6)
            .map(|i| Tcp::new(i, &[i as u8; 100]).frame())
            .collect();
        frames.insert(2, [&[2u8; 12][..], &[0x08, 0x06], &[0; 28]].concat());
        let classic = pcap(&frames);
        for data in [pcapng, classic] {
            let whole = read_chunked(&data, 0, None);
            assert!(!whole.segs.is_empty() && whole.findings.is_empty());
            for chunk in [1, 2, 3, 5, 7, 11, 13, 64, 100, 1000] {
                assert_eq!(read_chunked(&data, chunk, None), whole, "chunk {chunk}");
            }
            // every cut point: the same packets before it, a truncation after
            for cut in 0..data.len() {
                let (a, b) = data.split_at(cut);
                let mut reader = CaptureReader::new("t", None);
                let mut sink = FindingSink::default();
                let mut segs = Vec::new();
                reader
                    .feed(a, &mut sink, &mut |s, _| segs.push(Seg::from(s)))
                    .unwrap();
                reader
                    .feed(b, &mut sink, &mut |s, _| segs.push(Seg::from(s)))
                    .unwrap();
                reader
                    .finish(None, &mut sink, &mut |s, _| segs.push(Seg::from(s)))
                    .unwrap();
                assert_eq!(segs, whole.segs, "cut {cut}");
                assert_eq!(reader.info(), &whole.info);
            }
        }
    }

    #[test]
    fn every_truncation_keeps_what_came_before() {
        let frames: Vec<Vec<u8>> = (0..6)
            .map(|i| Tcp::new(i, format!("payload{i:03}").as_bytes()).frame())
            .collect();
        let mut ng = [shb(false), idb1(1)].concat();
        for (i, f) in frames.iter().enumerate() {
            ng.extend(epb1(0, i as u64, f));
        }
        for data in [ng, pcap(&frames)] {
            for cut in 24..=data.len() {
                let out = read_chunked(&data[..cut], 0, None);
                let want: Vec<Vec<u8>> = (0..out.segs.len())
                    .map(|i| format!("payload{i:03}").into_bytes())
                    .collect();
                assert_eq!(out.payloads(), want);
                assert_eq!(out.info.truncated, out.codes().contains(&"pcap.truncated"));
                if cut == data.len() {
                    assert!(out.segs.len() == 6 && !out.info.truncated);
                }
            }
        }
    }

    #[test]
    fn a_record_announced_long_allocates_only_what_arrives() {
        let mut data = pcap_with(
            &[],
            PcapOpts {
                snaplen: 256 << 20,
                ..PcapOpts::default()
            },
        );
        data.extend([0, 0, 200 << 20, 0].map(u32::to_le_bytes).concat());
        data.extend([0; 100]);
        let mut reader = CaptureReader::new("x", None);
        let mut sink = FindingSink::default();
        for byte in data.chunks(1) {
            reader.feed(byte, &mut sink, &mut |_, _| {}).unwrap();
        }
        assert_eq!(reader.tail.len(), 116);
        assert!(reader.tail.capacity() < 4096, "{}", reader.tail.capacity());
    }

    #[test]
    fn the_tail_holds_at_most_one_record() {
        let frames: Vec<Vec<u8>> = (0..50).map(|i| Tcp::new(i, &[7; 300]).frame()).collect();
        let data = pcap(&frames);
        let mut reader = CaptureReader::new("x", None);
        let mut sink = FindingSink::default();
        let mut n = 0;
        for piece in data.chunks(1000) {
            reader.feed(piece, &mut sink, &mut |_, _| n += 1).unwrap();
            assert!(reader.tail.len() < 16 + frames[0].len());
        }
        assert_eq!(n, 50);
    }
}
