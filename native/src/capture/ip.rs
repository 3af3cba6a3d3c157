//! IPv4 and IPv6 (with extension headers): from the network header to the TCP segment, through
//! the defragmenter for fragments.
//!
//! The fixed IPv4 and IPv6 headers are sliced by etherparse (its checks come in the order the
//! findings need: too short, then version and header length). The IPv6 extension-header walk is
//! written here: etherparse's walk stops at Mobility/HIP/Shim6 headers and rejects a Hop-by-Hop
//! header that is not first, which the reader accepts.
//!
//! `cut` and `missing` count bytes the packet had on the wire but the capture lacks (snaplen).

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
