//! IPv4 and IPv6 (with extension headers): from the network header to the TCP segment, through
//! the defragmenter for fragments.
//!
//! The fixed IPv4 and IPv6 headers are sliced by etherparse (its checks come in the order the
//! findings need: too short, then version and header length). The IPv6 extension-header walk is
//! written here: etherparse's walk stops at Mobility/HIP/Shim6 headers and rejects a Hop-by-Hop
//! header that is not first, which the reader accepts.
//!
//! `cut` and `missing` count bytes the packet had on the wire but the capture lacks (snaplen).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "header lengths are u8/u16 fields scaled by 4 or 8 (at most 2 KiB) added to positions inside one packet; IPv6 payload lengths are u16"
)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::err::{ipv4, ipv6};
use etherparse::{Ipv4HeaderSlice, Ipv6HeaderSlice};

use super::bytes::{be16, be32};
use super::defrag::{Defragmenter, Fragment, Key};
use super::packet::{Packet, Verdict};
use super::tcp_header;

const TCP: u8 = 6;
const IPV6_FRAGMENT: u8 = 44;
const IPV6_AH: u8 = 51;

/// IPv6 extension headers whose length byte counts 8-octet units beyond the first 8 octets:
/// Hop-by-Hop, Routing, Destination Options, Mobility, HIP, Shim6.
fn is_ipv6_ext(nh: u8) -> bool {
    matches!(nh, 0 | 43 | 60 | 135 | 139 | 140)
}

/// An IPv4 packet: `ip` holds its captured bytes; `cut` bytes of the frame were not captured.
pub(super) fn ipv4(p: &mut Packet, defrag: &mut Defragmenter, ip: &[u8], cut: u64) -> Verdict {
    let header = match Ipv4HeaderSlice::from_slice(ip) {
        Ok(header) => header,
        Err(ipv4::HeaderSliceError::Len(_)) => return p.short_ip(cut),
        Err(ipv4::HeaderSliceError::Content(_)) => {
            let vihl = ip.first().copied().unwrap_or(0);
            let (version, ihl) = (vihl >> 4, (vihl & 15) * 4);
            return p.bad_ip(format_args!(
                "IPv4 header with version {version} and length {ihl}"
            ));
        }
    };
    let avail = ip.len() as u64;
    let ihl = u64::from(header.ihl()) * 4;
    let wire = avail + cut;
    let mut total = u64::from(header.total_len());
    if total == 0 {
        total = wire; // segmentation offload: the kernel saw a super-packet without a length
    }
    if total < ihl {
        return p.bad_ip(format_args!(
            "IPv4 total length {total} is shorter than its header"
        ));
    }
    if total > wire {
        p.ip_malformed(format_args!(
            "IPv4 total length {total} exceeds the {wire} bytes on the wire"
        ));
        total = wire;
    }
    if header.protocol().0 != TCP {
        return Verdict::NotTcp;
    }
    let (src, dst) = (header.source(), header.destination());
    let captured = ip
        .get(ihl as usize..total.min(avail) as usize)
        .unwrap_or_default();
    if !header.more_fragments() && header.fragments_offset().value() == 0 {
        let missing = total.saturating_sub(avail);
        return tcp_header::segment(p, captured, missing, v4(src), v4(dst));
    }
    let fragment = Fragment {
        key: Key::v4(src, dst, header.identification()),
        offset: u32::from(header.fragments_offset().value()) * 8,
        data: captured,
        length: total - ihl,
        more: header.more_fragments(),
        meta: None,
    };
    if let Some((datagram, _)) = defrag.add(p.sink, p.origin(), fragment) {
        tcp_header::segment(p, &datagram, 0, v4(src), v4(dst));
    }
    Verdict::Tcp
}

fn v4(addr: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(addr))
}

/// An IPv6 packet: `ip` holds its captured bytes; `cut` bytes of the frame were not captured.
pub(super) fn ipv6(p: &mut Packet, defrag: &mut Defragmenter, ip: &[u8], cut: u64) -> Verdict {
    let header = match Ipv6HeaderSlice::from_slice(ip) {
        Ok(header) => header,
        Err(ipv6::HeaderSliceError::Len(_)) => return p.short_ip(cut),
        Err(ipv6::HeaderSliceError::Content(_)) => {
            let version = ip.first().copied().unwrap_or(0) >> 4;
            return p.bad_ip(format_args!("IPv6 header with version {version}"));
        }
    };
    let avail = ip.len() as u64;
    let wire = avail + cut - 40; // avail >= 40: the header is there
    let mut plen = u64::from(header.payload_length());
    if plen == 0 {
        plen = wire; // jumbogram or segmentation offload: the payload is whatever is there
    }
    if plen > wire {
        p.ip_malformed(format_args!(
            "IPv6 payload length {plen} exceeds the {wire} bytes on the wire"
        ));
        plen = wire;
    }
    let stop = 40 + plen;
    let chain = Chain {
        src: header.source(),
        dst: header.destination(),
        missing: stop.saturating_sub(avail),
    };
    let payload = ip.get(40..stop.min(avail) as usize).unwrap_or_default();
    chain.walk(p, defrag, header.next_header().0, payload)
}

/// The part of an IPv6 packet after its fixed header.
struct Chain {
    src: [u8; 16],
    dst: [u8; 16],
    /// Bytes after the captured ones that the packet had on the wire.
    missing: u64,
}

impl Chain {
    /// Walks the extension headers from the start of `data` (the captured payload) to TCP.
    fn walk(
        mut self,
        p: &mut Packet,
        defrag: &mut Defragmenter,
        first: u8,
        data: &[u8],
    ) -> Verdict {
        let mut nh = first;
        let mut buf = data;
        let mut pos = 0usize;
        let mut datagram: Vec<u8>;
        loop {
            match nh {
                TCP => {
                    let (src, dst) = (v6(self.src), v6(self.dst));
                    let segment = buf.get(pos..).unwrap_or_default();
                    return tcp_header::segment(p, segment, self.missing, src, dst);
                }
                _ if is_ipv6_ext(nh) || nh == IPV6_AH => {
                    let Some(&[next, len, ..]) = buf.get(pos..pos.saturating_add(8)) else {
                        return p.short_ip(self.missing);
                    };
                    let size = if nh == IPV6_AH {
                        (usize::from(len) + 2) * 4
                    } else {
                        (usize::from(len) + 1) * 8
                    };
                    nh = next;
                    pos += size;
                    if pos > buf.len() {
                        let over = (pos - buf.len()) as u64;
                        return p.short_ip(if over <= self.missing {
                            self.missing
                        } else {
                            0
                        });
                    }
                }
                IPV6_FRAGMENT => {
                    let (Some(&next), Some(offflags), Some(ident)) =
                        (buf.get(pos), be16(buf, pos + 2), be32(buf, pos + 4))
                    else {
                        return p.short_ip(self.missing);
                    };
                    pos += 8;
                    if offflags & 0xFFF9 == 0 {
                        nh = next; // an atomic fragment: offset 0, no more fragments
                        continue;
                    }
                    if next != TCP && !is_ipv6_ext(next) && next != IPV6_AH {
                        return Verdict::NotTcp;
                    }
                    let data = buf.get(pos..).unwrap_or_default();
                    let fragment = Fragment {
                        key: Key::v6(self.src, self.dst, ident),
                        offset: u32::from(offflags & 0xFFF8),
                        data,
                        length: data.len() as u64 + self.missing,
                        more: offflags & 1 != 0,
                        meta: Some(next),
                    };
                    let Some((whole, meta)) = defrag.add(p.sink, p.origin(), fragment) else {
                        return Verdict::Tcp;
                    };
                    datagram = whole;
                    buf = &datagram;
                    pos = 0;
                    self.missing = 0;
                    nh = meta.unwrap_or(NO_NEXT_HEADER);
                }
                _ => return Verdict::NotTcp,
            }
        }
    }
}

/// "No next header": what a datagram without a recorded next header is treated as.
const NO_NEXT_HEADER: u8 = 59;

fn v6(addr: [u8; 16]) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(addr))
}

#[cfg(test)]
mod tests {
    use crate::capture::testkit::*;
    use crate::capture::SYN;
    use crate::model::{Severity, Value};

    const V6_SRC: &str = "2001:db8::1";
    const V6_DST: &str = "2001:db8::2";

    fn one(frame: &[u8], linktype: u32) -> Outcome {
        read(&pcap_lt(&[frame.to_vec()], linktype))
    }

    fn one_cut(frame: &[u8], keep: usize, linktype: u32) -> Outcome {
        let record = (T0_NS, frame[..keep].to_vec(), frame.len() as u32);
        read(&pcap_with(
            &[record],
            PcapOpts {
                linktype,
                ..PcapOpts::default()
            },
        ))
    }

    #[test]
    fn every_link_type_yields_the_segment() {
        for (name, linktype) in LINKTYPES {
            for v6 in [false, true] {
                if (name == "ipv6" && !v6) || (name == "ipv4" && v6) {
                    continue;
                }
                let (src, dst) = if v6 {
                    (V6_SRC, V6_DST)
                } else {
                    ("192.0.2.1", "198.51.100.7")
                };
                let mut tcp = Tcp::new(0xFFFF_FFF0, b"hello").addrs(src, dst);
                (tcp.flags, tcp.sport, tcp.dport, tcp.ack) = (0x12, 5044, 40001, 99);
                let out = one(&link(&tcp.ip(), name), linktype);
                assert!(out.findings.is_empty(), "{name} {v6}");
                assert_eq!(out.info.tcp_packets, 1);
                let want = Seg {
                    frame: 1,
                    ts: T0_NS / 1000 * 1000,
                    src: tcp.src,
                    sport: 5044,
                    dst: tcp.dst,
                    dport: 40001,
                    seq: 0xFFFF_FFF0,
                    ack: 99,
                    flags: 0x12,
                    payload: b"hello".to_vec(),
                    missing: 0,
                };
                assert_eq!(out.segs, [want], "{name} {v6}");
            }
        }
    }

    #[test]
    fn bsd_loopback_families_in_both_byte_orders() {
        for (linktype, family) in [(0, 2u32), (0, 24), (0, 28), (0, 30), (108, 2), (108, 30)] {
            for big in [false, true] {
                let tcp = if family == 2 {
                    Tcp::new(5, b"lo").addrs("127.0.0.1", "127.0.0.1")
                } else {
                    Tcp::new(5, b"lo").v6()
                };
                let head = if big {
                    family.to_be_bytes()
                } else {
                    family.to_le_bytes()
                };
                let out = one(&[&head[..], &tcp.ip()].concat(), linktype);
                assert_eq!(out.payloads(), [b"lo"]);
                assert!(out.findings.is_empty());
            }
        }
        let out = one(
            &[&7u32.to_le_bytes()[..], &Tcp::new(1, b"x").ip()].concat(),
            0,
        );
        assert!(out.segs.is_empty() && out.findings.is_empty());
        assert_eq!(out.info.non_tcp_packets, 1);
    }

    #[test]
    fn raw_link_with_libpcap_dlt_values() {
        for linktype in [12, 14, 101] {
            assert_eq!(
                one(&Tcp::new(3, b"raw").ip(), linktype).payloads(),
                [b"raw"]
            );
        }
    }

    #[test]
    fn vlan_stack_of_three_tags() {
        let tags = [0x88A8u16, 10, 0x9100, 20, 0x8100, 30, 0x0800]
            .map(u16::to_be_bytes)
            .concat();
        let frame = [&[2u8; 12][..], &tags, &Tcp::new(9, b"deep").ip()].concat();
        let out = one(&frame, 1);
        assert_eq!(out.payloads(), [b"deep"]);
        assert!(out.findings.is_empty());
    }

    #[test]
    fn ethernet_padding_is_trimmed_by_ip_total_length() {
        let mut tcp = Tcp::new(1, b"");
        tcp.flags = 0x10;
        let frame = [
            tcp.frame(),
            b"\xde\xad\xbe\xef\x00\x00\x11\x22\x33\x44".to_vec(),
        ]
        .concat();
        let out = one(&frame, 1);
        assert_eq!((out.segs[0].payload.len(), out.segs[0].missing), (0, 0));
        assert!(out.findings.is_empty());
    }

    #[test]
    fn ipv4_options_and_tcp_options() {
        let mut tcp = Tcp::new(42, b"opt");
        tcp.flags = SYN;
        tcp.options = vec![2, 4, 5, 0xB4, 3, 3, 7, 4, 2, 0, 0, 0];
        let ip = ipv4(
            6,
            [10, 1, 1, 1],
            [10, 1, 1, 2],
            1,
            0,
            &[1, 7, 7, 4, 1, 2, 3, 4],
            &tcp.segment(),
        );
        let out = one(&link(&ip, "ether"), 1);
        assert_eq!(
            (out.segs[0].seq, out.segs[0].flags, &out.segs[0].payload[..]),
            (42, SYN, &b"opt"[..])
        );
        assert!(out.findings.is_empty());
    }

    fn v6_with(chain: &[(u8, Vec<u8>)], tcp: &Tcp) -> Vec<u8> {
        // chain: (header type, header bytes without its next-header byte)
        let mut body = Vec::new();
        for (i, (_, bytes)) in chain.iter().enumerate() {
            let next = chain.get(i + 1).map_or(6, |(t, _)| *t);
            body.push(next);
            body.extend_from_slice(bytes);
        }
        body.extend(tcp.segment());
        let first = chain.first().map_or(6, |(t, _)| *t);
        link(&ipv6(first, v6addr(V6_SRC), v6addr(V6_DST), &body), "ether")
    }

    #[test]
    fn ipv6_extension_headers_are_walked() {
        let tcp = Tcp::new(77, b"v6ext").v6();
        let routing = [&[2u8, 0, 1, 0, 0, 0, 0][..], &v6addr("2001:db8::3")].concat();
        let ah = [&[4u8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0][..], &[0; 12]].concat();
        let chain = [
            (60u8, vec![0, 1, 4, 0, 0, 0, 0]),
            (0, vec![0, 1, 4, 0, 0, 0, 0]), // Hop-by-Hop not first: walked all the same
            (43, routing),
            (51, ah),
            (135, vec![0, 0, 0, 0, 0, 0, 0]), // Mobility
            (139, vec![0, 0, 0, 0, 0, 0, 0]), // HIP
            (140, vec![0, 0, 0, 0, 0, 0, 0]), // Shim6
        ];
        let out = one(&v6_with(&chain, &tcp), 1);
        assert_eq!(
            (out.segs[0].seq, &out.segs[0].payload[..]),
            (77, &b"v6ext"[..])
        );
        assert!(out.findings.is_empty());
    }

    #[test]
    fn ipv6_atomic_fragment_is_not_buffered() {
        let out = one(
            &v6_with(
                &[(44, vec![0, 0, 0, 0, 0, 0, 5])],
                &Tcp::new(8, b"atomic").v6(),
            ),
            1,
        );
        assert_eq!(out.payloads(), [b"atomic"]);
        assert!(out.findings.is_empty());
    }

    #[test]
    fn ipv6_extension_header_beyond_the_packet() {
        let tcp = Tcp::new(1, b"").v6();
        let frame = v6_with(&[(60, vec![200, 0, 0, 0, 0, 0, 0])], &tcp);
        let out = one(&frame, 1);
        assert_eq!(out.findings[0].message, "packet 1: IP header cut short");
        assert_eq!(out.info.non_tcp_packets, 1);
        // the same cut by the snaplen
        let big = v6_with(
            &[(60, vec![1, 0, 0, 0, 0, 0, 0])],
            &Tcp::new(1, &[7; 40]).v6(),
        );
        let out = one_cut(&big, 14 + 40 + 10, 1);
        assert_eq!(out.codes(), ["pcap.snaplen-truncated"]);
        assert!(out.findings[0]
            .message
            .ends_with("its IP header is missing"));
        // a fragment header cut short
        let out = one(
            &link(
                &ipv6(44, v6addr(V6_SRC), v6addr(V6_DST), &[6, 0, 0]),
                "ether",
            ),
            1,
        );
        assert_eq!(out.findings[0].message, "packet 1: IP header cut short");
    }

    #[test]
    fn non_tcp_packets_are_counted_not_yielded() {
        let (s, d) = ([10, 0, 0, 9], [10, 0, 0, 8]);
        let (s6, d6) = (v6addr(V6_SRC), v6addr(V6_DST));
        let frames = [
            link(&ipv4(17, s, d, 1, 0, &[], &[0; 11]), "ether"),
            link(
                &ipv4(1, s, d, 1, 0, &[], &[8, 0, 0, 0, 0, 0, 0, 0]),
                "ether",
            ),
            [&[2u8; 12][..], &[0x08, 0x06], &[0; 28]].concat(),
            link(&ipv6(17, s6, d6, &[0; 8]), "ether"),
            [&[2u8; 12][..], &[0x88, 0xCC], &[0; 40]].concat(),
            link(&ipv6(50, s6, d6, &[0; 24]), "ether"),
            link(&ipv6(59, s6, d6, &[]), "ether"),
            [&[2u8; 12][..], &[0x08, 0x00]].concat(),
            // fragments of a UDP datagram are not buffered
            link(&ipv4(17, s, d, 1, 0x2000, &[], &[0; 16]), "ether"),
            // an IPv6 fragment of something that is not TCP
            link(&ipv6(44, s6, d6, &[17, 0, 0, 1, 0, 0, 0, 1, 0, 0]), "ether"),
        ];
        for frame in frames {
            let out = one(&frame, 1);
            assert!(out.segs.is_empty());
            assert_eq!(
                (
                    out.info.packets,
                    out.info.tcp_packets,
                    out.info.non_tcp_packets
                ),
                (1, 0, 1)
            );
            assert!(out.findings.iter().all(|f| f.code == "ip.malformed"));
        }
    }

    #[test]
    fn unsupported_link_type_reported_once() {
        let frame = Tcp::new(1, b"x").ip();
        let out = read(&pcap_lt(&[frame.clone(), frame.clone(), frame], 147));
        assert!(out.segs.is_empty());
        assert_eq!(
            (out.info.non_tcp_packets, &out.info.link_types[..]),
            (3, &[147][..])
        );
        assert_eq!(out.codes(), ["pcap.unsupported-linktype"]);
        let f = &out.findings[0];
        assert_eq!(
            (f.frame, f.ts, f.severity),
            (Some(1), Some(T0_NS / 1000 * 1000), Severity::Warning)
        );
        assert_eq!(
            f.message,
            "link type 147 is not supported; its packets (first: 1) are counted, not decoded"
        );
        assert_eq!(field(f, "linktype"), Some(Value::from(147)));
    }

    #[test]
    fn snaplen_truncated_payload_reports_missing() {
        let full = Tcp::new(100, &[b'A'; 1000]).frame();
        let out = one_cut(&full, 200, 1);
        assert_eq!(
            (out.segs[0].payload.len(), out.segs[0].missing),
            (200 - 54, 1000 - (200 - 54))
        );
        assert_eq!(out.codes(), ["pcap.snaplen-truncated"]);
        assert_eq!(
            out.findings[0].message,
            "packet 1 was cut by the capture's snap length: 854 bytes of its TCP payload is missing"
        );
    }

    #[test]
    fn snaplen_cut_inside_headers() {
        let mut tcp = Tcp::new(1, &[b'x'; 50]);
        tcp.options = [2, 4, 5, 0xB4].repeat(3);
        let full = tcp.frame();
        // inside Ethernet+IP, inside TCP, inside TCP options
        for (keep, what) in [
            (20, "its IP header"),
            (40, "its TCP header"),
            (60, "its TCP options"),
        ] {
            let out = one_cut(&full, keep, 1);
            assert!(out.segs.is_empty());
            assert_eq!(out.codes(), ["pcap.snaplen-truncated"]);
            assert_eq!(
                out.findings[0].message,
                format!("packet 1 was cut by the capture's snap length: {what} is missing")
            );
        }
    }

    #[test]
    fn snaplen_findings_are_rate_limited() {
        let full = Tcp::new(100, &[b'B'; 500]).frame();
        let records: Vec<Rec> = (0..25)
            .map(|i| (T0_NS + i, full[..100].to_vec(), full.len() as u32))
            .collect();
        let out = read(&pcap_with(
            &records,
            PcapOpts {
                nano: true,
                ..PcapOpts::default()
            },
        ));
        assert_eq!(out.segs.len(), 25);
        assert!(out.segs.iter().all(|s| s.missing == 500 - 46));
        assert_eq!(out.codes(), ["pcap.snaplen-truncated"; 11]);
        assert_eq!(field(&out.findings[10], "count"), Some(Value::from(25)));
    }

    #[test]
    fn tso_zero_total_length_uses_captured_bytes() {
        let mut frame = Tcp::new(5, &[b'C'; 3000]).frame();
        frame[16..18].copy_from_slice(&[0, 0]);
        let out = one(&frame, 1);
        assert_eq!((out.segs[0].payload.len(), out.segs[0].missing), (3000, 0));
        assert!(out.findings.is_empty());
        // and counts the bytes the snaplen cut as missing
        let out = one_cut(&frame, 1000, 1);
        assert_eq!(out.segs[0].missing, 2054);
    }

    #[test]
    fn ipv6_zero_payload_length_is_whatever_is_there() {
        let mut frame = link(&Tcp::new(5, &[b'J'; 100]).v6().ip(), "ether");
        frame[18..20].copy_from_slice(&[0, 0]);
        let out = one(&frame, 1);
        assert_eq!(out.segs[0].payload.len(), 100);
        assert!(out.findings.is_empty());
    }

    #[test]
    fn malformed_headers_become_findings() {
        let cases: [(usize, &[u8], &str, &str); 6] = [
            (
                14,
                &[0x43],
                "ip.malformed",
                "packet 1: IPv4 header with version 4 and length 12",
            ),
            (
                14,
                &[0x55],
                "ip.malformed",
                "packet 1: IPv4 header with version 5 and length 20",
            ),
            (
                16,
                &[0, 10],
                "ip.malformed",
                "packet 1: IPv4 total length 10 is shorter than its header",
            ),
            (
                46,
                &[0x30],
                "tcp.malformed",
                "packet 1: TCP data offset 12 is shorter than the header",
            ),
            (
                46,
                &[0xF0],
                "tcp.malformed",
                "packet 1: TCP data offset 60 exceeds the segment",
            ),
            (
                16,
                &[0, 30],
                "tcp.malformed",
                "packet 1: TCP header of 10 bytes",
            ),
        ];
        for (at, bytes, code, message) in cases {
            let mut frame = Tcp::new(1, b"xyz").frame();
            frame[at..at + bytes.len()].copy_from_slice(bytes);
            let out = one(&frame, 1);
            assert!(out.segs.is_empty());
            assert_eq!(out.codes(), [code]);
            assert_eq!(
                (out.findings[0].frame, &out.findings[0].message[..]),
                (Some(1), message)
            );
            assert_eq!(out.info.packets, 1);
        }
        let mut frame = link(&Tcp::new(1, b"").v6().ip(), "ether");
        frame[14] = 0x50;
        assert_eq!(
            one(&frame, 1).findings[0].message,
            "packet 1: IPv6 header with version 5"
        );
        assert_eq!(
            one(&frame[..30], 1).findings[0].message,
            "packet 1: IP header cut short"
        );
    }

    #[test]
    fn total_length_beyond_the_wire_is_reported_and_clamped() {
        let mut frame = Tcp::new(1, b"xyz").frame();
        frame[16..18].copy_from_slice(&900u16.to_be_bytes());
        let out = one(&frame, 1);
        assert_eq!(
            (&out.segs[0].payload[..], out.segs[0].missing),
            (&b"xyz"[..], 0)
        );
        assert_eq!(out.codes(), ["ip.malformed"]);
        assert_eq!(
            out.findings[0].message,
            "packet 1: IPv4 total length 900 exceeds the 43 bytes on the wire"
        );
        let mut frame = link(&Tcp::new(1, b"xyz").v6().ip(), "ether");
        frame[18..20].copy_from_slice(&900u16.to_be_bytes());
        let out = one(&frame, 1);
        assert_eq!(out.payloads(), [b"xyz"]);
        assert_eq!(
            out.findings[0].message,
            "packet 1: IPv6 payload length 900 exceeds the 23 bytes on the wire"
        );
    }
}
