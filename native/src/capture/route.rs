//! Routes: which packets of a capture each group of connections needs, so that a task decoding a
//! group reads them from the file itself instead of receiving their bytes through a shuffle
//! (docs/spark.md, "One huge capture").
//!
//! A packet goes to the group of its two IP hosts (`group`): every packet of a TCP connection,
//! fragments of its datagrams included, carries the same pair, so a connection never spans groups,
//! and neither do the connections a client opens again to the same server. Packets without IP
//! hosts go nowhere: they carry no TCP, and their findings are made by the task that routes them.
//!
//! A route is ROUTE bytes, little-endian, everything the packet parser needs besides the bytes:
//! where the packet's data lies in the file (u64) and how long it is (u32), its frame number (u64),
//! its timestamp (i64: what the routing read gave it, which a Simple Packet Block takes from the
//! packet before it), its link type (u32) and its length on the wire (u32). So a group's reader
//! needs none of the file's format: no pcap header, no pcapng sections or interfaces, whose blocks
//! would otherwise have to reach every group.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "file offsets and lengths of records the reader accepted (each at most MAX_BLOCK); span sizes are bounded by MAX_SPAN plus one record"
)]

use super::bytes::u32_in;
use super::link::{self, Ip};

/// Bytes of one route.
pub const ROUTE: usize = 36;
/// A span read at once gathers packets at most this far apart...
const MAX_GAP: u64 = 64 << 10;
/// ...into at most this many bytes (or one packet, when larger).
const MAX_SPAN: u64 = 4 << 20;

/// One packet a group needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// File offset of the packet's data (past its record or block header).
    pub offset: u64,
    pub len: u32,
    pub frame: u64,
    pub ts: i64,
    pub linktype: u32,
    pub wirelen: u32,
}

impl Route {
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.frame.to_le_bytes());
        out.extend_from_slice(&self.ts.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.linktype.to_le_bytes());
        out.extend_from_slice(&self.wirelen.to_le_bytes());
    }

    /// The `index`th route of `routes` (None past the end).
    pub fn at(routes: &[u8], index: usize) -> Option<Route> {
        let r = routes.get(index.checked_mul(ROUTE)?..)?.get(..ROUTE)?;
        let long = |at: usize| r.get(at..at + 8).and_then(|b| b.try_into().ok());
        Some(Route {
            offset: u64::from_le_bytes(long(0)?),
            frame: u64::from_le_bytes(long(8)?),
            ts: i64::from_le_bytes(long(16)?),
            len: u32_in(r, 24, false)?,
            linktype: u32_in(r, 28, false)?,
            wirelen: u32_in(r, 32, false)?,
        })
    }
}

/// The group of a packet record of link type `linktype`: a hash of its two IP addresses (in a
/// fixed order) modulo `groups`; None when it has no IP header.
pub fn group(linktype: u32, data: &[u8], groups: u32) -> Option<u32> {
    let (first, len) = match link::parse(linktype, data) {
        link::Link::Ip(Ip::V4, at) if data.get(at).is_some_and(|b| b >> 4 == 4) => (at + 12, 4),
        link::Link::Ip(Ip::V6, at) if data.get(at).is_some_and(|b| b >> 4 == 6) => (at + 8, 16),
        _ => return None,
    };
    let a = data.get(first..first + len)?;
    let b = data.get(first + len..first + 2 * len)?;
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    // FNV-1a: the same on every executor and in every run (std's hasher promises neither)
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in lo.iter().chain(hi) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    Some((hash % u64::from(groups.max(1))) as u32)
}

/// The routes of every group, gathered while a split is read.
#[derive(Debug)]
pub struct Routes {
    groups: Vec<Vec<u8>>,
    /// File offset of the data of the packet being read.
    data_at: u64,
}

impl Routes {
    pub fn new(groups: u32) -> Self {
        Routes {
            groups: vec![Vec::new(); groups.max(1) as usize],
            data_at: 0,
        }
    }

    /// The next packet's data starts at file offset `offset`.
    pub fn data_at(&mut self, offset: u64) {
        self.data_at = offset;
    }

    /// The packet whose data `data_at` told: its route goes to its group (none without IP hosts).
    pub fn packet(&mut self, frame: u64, ts: i64, linktype: u32, data: &[u8], wirelen: u32) {
        let groups = self.groups.len() as u32;
        let Some(out) = group(linktype, data, groups).and_then(|g| self.groups.get_mut(g as usize))
        else {
            return;
        };
        let route = Route {
            offset: self.data_at,
            len: data.len() as u32,
            frame,
            ts,
            linktype,
            wirelen,
        };
        route.write(out);
    }

    /// Every group's routes so far (one byte string per group, in frame order), emptied.
    pub fn take(&mut self) -> Vec<Vec<u8>> {
        self.groups.iter_mut().map(std::mem::take).collect()
    }
}

/// A byte range of the file to read at once: `[lo, hi)`, holding the packets of routes `first..last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub lo: u64,
    pub hi: u64,
    pub first: usize,
    pub last: usize,
}

/// The spans that cover `routes` (in frame order): packets close together are read in one piece,
/// so that a group of a few packets in a thousand does not cost a read per packet, nor one of every
/// other packet a read of the whole file in tiny pieces.
pub fn spans(routes: &[u8]) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    let mut index = 0;
    while let Some(r) = Route::at(routes, index) {
        let end = r.offset.saturating_add(u64::from(r.len)); // (any bytes from Python)
        match out.last_mut() {
            Some(s) if r.offset >= s.hi && r.offset - s.hi <= MAX_GAP && end - s.lo <= MAX_SPAN => {
                s.hi = end;
                s.last = index + 1;
            }
            _ => out.push(Span {
                lo: r.offset,
                hi: end,
                first: index,
                last: index + 1,
            }),
        }
        index += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::testkit::*;
    use crate::capture::{CaptureReader, Segment};
    use crate::model::FindingSink;
    use std::net::IpAddr;

    /// Each group's routes for `data` read in pieces of `chunk` bytes (0: at once), after `head`
    /// (bytes the routes do not cover: a pcap file header).
    fn route_all(data: &[u8], head: usize, chunk: usize, groups: u32) -> (Vec<Vec<u8>>, usize) {
        let mut reader = CaptureReader::new("t", None);
        let mut sink = FindingSink::default();
        let mut none = |_: &Segment, _: &mut FindingSink| {};
        reader.feed(&data[..head], &mut sink, &mut none).unwrap();
        reader.route(groups, head as u64);
        let rest = &data[head..];
        let pieces: Vec<&[u8]> = if chunk == 0 {
            vec![rest]
        } else {
            rest.chunks(chunk).collect()
        };
        let mut out = vec![Vec::new(); groups as usize];
        for piece in pieces {
            reader.feed(piece, &mut sink, &mut none).unwrap();
            for (all, more) in out.iter_mut().zip(reader.take_routes()) {
                all.extend(more);
            }
        }
        reader.finish(None, &mut sink, &mut none).unwrap();
        sink.finish();
        (out, sink.drain().len())
    }

    /// The segments of one group's packets, read back from `data` as a task of the split engine
    /// reads them from the file: its routes only, nothing of the format.
    fn read_back(data: &[u8], routes: &[u8]) -> Vec<Seg> {
        let mut reader = CaptureReader::new("t", None);
        let mut sink = FindingSink::default();
        let mut segs = Vec::new();
        let mut keep = |s: &Segment, _: &mut FindingSink| segs.push(Seg::from(s));
        for span in spans(routes) {
            let bytes = &data[span.lo as usize..span.hi as usize];
            reader
                .feed_span(routes, &span, bytes, &mut sink, &mut keep)
                .unwrap();
        }
        reader.finish(None, &mut sink, &mut keep).unwrap();
        segs
    }

    fn hosts(s: &Seg) -> (IpAddr, IpAddr) {
        (s.src.min(s.dst), s.src.max(s.dst))
    }

    /// Every segment of a whole-file read is read back by exactly one group, with its frame number
    /// and time, and a pair of hosts never spans two groups.
    fn check(data: &[u8], head: usize) {
        let whole = read(data).segs;
        assert!(!whole.is_empty());
        for groups in [1, 2, 5] {
            let (routes, findings) = route_all(data, head, 0, groups);
            assert_eq!(
                findings,
                read(data).findings.len(),
                "the routing read's findings"
            );
            for chunk in [1, 7, 100] {
                assert_eq!(
                    route_all(data, head, chunk, groups).0,
                    routes,
                    "chunk {chunk}"
                );
                // the file header read while routing: the same places
                assert_eq!(route_all(data, 0, chunk, groups).0, routes, "{chunk}");
            }
            let mut back: Vec<Seg> = Vec::new();
            let mut owner = std::collections::HashMap::new();
            for (g, mine) in routes.iter().enumerate() {
                for seg in read_back(data, mine) {
                    assert_eq!(*owner.entry(hosts(&seg)).or_insert(g), g, "{seg:?}");
                    back.push(seg);
                }
            }
            back.sort_by_key(|s| s.frame);
            assert_eq!(back, whole, "{groups} groups");
        }
    }

    #[test]
    fn routed_packets_read_back_give_every_segment_once_pcap() {
        let mut frames = Vec::new();
        for i in 0..30u32 {
            let a = format!("10.0.{}.{}", i % 3, 1 + i % 7);
            frames.push(Tcp::new(i * 10, &[b'x'; 40]).addrs(&a, "10.9.9.9").frame());
            frames.push(Tcp::new(i * 10, b"back").addrs("10.9.9.9", &a).frame());
        }
        frames.extend(v4_fragments(
            &Tcp::new(7, &[b'f'; 300]).addrs("10.5.5.5", "10.9.9.9"),
            64,
        ));
        frames.push(Tcp::new(9, b"v6").v6().frame());
        frames.push(b"not ip at all".to_vec());
        check(&pcap(&frames), 24);
    }

    #[test]
    fn routed_packets_read_back_give_every_segment_once_pcapng() {
        // sections in both byte orders, EPB/SPB/OPB, interfaces of several link types
        let sample = pcapng_sample();
        // a Simple Packet Block takes its time from the packet before it, of other hosts
        let pair = |i: u32| {
            Tcp::new(i, b"p")
                .addrs(&format!("10.1.0.{i}"), "10.2.0.1")
                .frame()
        };
        let mut timed = vec![shb(false), idb(1, Some(9), 0, 0, false)];
        for i in 1..=12u32 {
            timed.push(epb1(0, 1000 * u64::from(i), &pair(i)));
            timed.push(spb(&pair(i % 2 + 20), false));
        }
        check(&[sample.clone(), sample, timed.concat()].concat(), 0);
    }

    fn route(offset: u64, len: u32) -> Route {
        Route {
            offset,
            len,
            frame: offset,
            ts: -1,
            linktype: 1,
            wirelen: len,
        }
    }

    fn routes(list: &[Route]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in list {
            r.write(&mut out);
        }
        out
    }

    #[test]
    fn a_route_reads_back_as_written() {
        let r = Route {
            offset: u64::MAX - 3,
            len: 300,
            frame: 7,
            ts: -5,
            linktype: 276,
            wirelen: 1 << 31,
        };
        let bytes = routes(&[route(1, 2), r]);
        assert_eq!(bytes.len(), 2 * ROUTE);
        assert_eq!(Route::at(&bytes, 1), Some(r));
        assert_eq!(Route::at(&bytes, 2), None);
        assert_eq!(Route::at(&bytes[..ROUTE + 5], 1), None);
    }

    #[test]
    fn spans_gather_close_records_and_stop_at_gaps_and_size() {
        let list = [
            route(100, 50),
            route(160, 50),                        // 10 bytes after: same span
            route(210 + MAX_GAP + 1, 10),          // too far
            route(210 + MAX_GAP + 11, 10),         // adjacent
            route(1 << 30, (MAX_SPAN + 1) as u32), // larger than a span: alone
            route((1 << 30) + MAX_SPAN + 1, 1),
        ];
        let got = spans(&routes(&list));
        let bounds: Vec<(u64, u64, usize, usize)> =
            got.iter().map(|s| (s.lo, s.hi, s.first, s.last)).collect();
        assert_eq!(
            bounds,
            vec![
                (100, 210, 0, 2),
                (210 + MAX_GAP + 1, 210 + MAX_GAP + 21, 2, 4),
                (1 << 30, (1 << 30) + MAX_SPAN + 1, 4, 5),
                ((1 << 30) + MAX_SPAN + 1, (1 << 30) + MAX_SPAN + 2, 5, 6),
            ]
        );
    }

    #[test]
    fn both_directions_share_a_group_and_non_ip_has_none() {
        let v4 = |src: [u8; 4], dst: [u8; 4]| {
            let mut ip = vec![0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0];
            ip.extend(src);
            ip.extend(dst);
            ip
        };
        let there = group(101, &v4([10, 0, 0, 1], [10, 0, 0, 2]), 1000);
        let back = group(101, &v4([10, 0, 0, 2], [10, 0, 0, 1]), 1000);
        assert!(there.is_some());
        assert_eq!(there, back);
        let others: Vec<Option<u32>> = (3..40)
            .map(|h| group(101, &v4([10, 0, 0, 1], [10, 0, 0, h]), 1000))
            .collect();
        assert!(others.iter().any(|g| *g != there)); // the hosts, not a constant, choose
        assert_eq!(group(101, b"\x60short", 8), None);
        assert_eq!(group(1, &[0u8; 14], 8), None); // Ethernet carrying no IP
        assert_eq!(group(101, &v4([1, 2, 3, 4], [5, 6, 7, 8]), 0), Some(0));
    }
}
