//! One packet record in, at most one TCP segment out: link dispatch, the count of packets that
//! carry no TCP, and the packet-level findings (`ip.malformed`, `tcp.malformed`,
//! `pcap.snaplen-truncated`, `pcap.unsupported-linktype`).
//!
//! `non_tcp` counts packets that carry no TCP (other protocols, non-IP frames, unsupported link
//! types, IP headers too broken to tell). Fragments of TCP datagrams count as TCP packets, and so do
//! TCP packets with a broken TCP header.

use std::fmt::Display;

use super::defrag::{Defragmenter, Origin};
use super::link::{self, Ip, Link};
use super::report::limited;
use super::{ip, Segment};
use crate::model::{Finding, FindingSink, Severity};

/// Whether a packet counts as TCP (even when it yields no segment) or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Tcp,
    NotTcp,
}

/// The packet being parsed: its number and time for findings, where findings and segments go.
pub(super) struct Packet<'a> {
    pub frame: u64,
    pub ts: i64,
    pub sink: &'a mut FindingSink,
    pub on_segment: &'a mut dyn FnMut(&Segment, &mut FindingSink),
}

impl Packet<'_> {
    pub fn origin(&self) -> Origin {
        Origin {
            frame: self.frame,
            ts: self.ts,
        }
    }

    fn limited(&mut self, code: &'static str, message: impl FnOnce() -> String) {
        let (frame, ts) = (self.frame, self.ts);
        limited(self.sink, code, Severity::Warning, || {
            Finding::new(code, Severity::Warning, message()).at(Some(frame), Some(ts))
        });
    }

    pub fn ip_malformed(&mut self, what: impl Display) {
        let frame = self.frame;
        self.limited("ip.malformed", || format!("packet {frame}: {what}"));
    }

    pub fn tcp_malformed(&mut self, what: impl Display) {
        let frame = self.frame;
        self.limited("tcp.malformed", || format!("packet {frame}: {what}"));
    }

    pub fn snaplen(&mut self, what: impl Display) {
        let frame = self.frame;
        self.limited("pcap.snaplen-truncated", || {
            format!("packet {frame} was cut by the capture's snap length: {what} is missing")
        });
    }

    /// An IP header too broken to find the protocol in: reported, counted as not TCP.
    pub fn bad_ip(&mut self, what: impl Display) -> Verdict {
        self.ip_malformed(what);
        Verdict::NotTcp
    }

    /// An IP header that ends early: the snaplen's fault when bytes were cut, else malformed.
    pub fn short_ip(&mut self, cut: u64) -> Verdict {
        if cut > 0 {
            self.snaplen("its IP header");
        } else {
            self.ip_malformed("IP header cut short");
        }
        Verdict::NotTcp
    }
}

/// Parses packet records into TCP segments; keeps the fragments of unfinished IP datagrams.
#[derive(Debug, Default)]
pub(super) struct PacketParser {
    defrag: Defragmenter,
    non_tcp: u64,
    unsupported: Vec<u32>, // link types already reported, sorted
}

impl PacketParser {
    /// Packets so far that carried no TCP.
    pub fn non_tcp(&self) -> u64 {
        self.non_tcp
    }

    /// The TCP segment in `data` (`wirelen` bytes on the wire), if any, goes to `p.on_segment`.
    /// `linktype` is None for records that are not packets of a described interface.
    pub fn packet(&mut self, p: &mut Packet, linktype: Option<u32>, data: &[u8], wirelen: u32) {
        let verdict = match linktype.map(|lt| (lt, link::parse(lt, data))) {
            None | Some((_, Link::NotIp)) => Verdict::NotTcp,
            Some((lt, Link::Unsupported)) => {
                self.unsupported_link(p, lt);
                Verdict::NotTcp
            }
            Some((_, Link::Ip(version, at))) => {
                let cut = u64::from(wirelen).saturating_sub(data.len() as u64);
                let packet = data.get(at..).unwrap_or_default();
                match version {
                    Ip::V4 => ip::ipv4(p, &mut self.defrag, packet, cut),
                    Ip::V6 => ip::ipv6(p, &mut self.defrag, packet, cut),
                }
            }
        };
        if verdict == Verdict::NotTcp {
            self.non_tcp = self.non_tcp.saturating_add(1);
        }
    }

    fn unsupported_link(&mut self, p: &mut Packet, linktype: u32) {
        let Err(at) = self.unsupported.binary_search(&linktype) else {
            return;
        };
        self.unsupported.insert(at, linktype);
        let message = format!(
            "link type {linktype} is not supported; its packets (first: {}) are counted, not decoded",
            p.frame
        );
        p.sink.add(
            Finding::new("pcap.unsupported-linktype", Severity::Warning, message)
                .at(Some(p.frame), Some(p.ts))
                .field("linktype", linktype),
        );
    }

    /// End of capture: report the IP datagrams still incomplete.
    pub fn finish(&mut self, sink: &mut FindingSink) {
        self.defrag.finish(sink);
    }
}
