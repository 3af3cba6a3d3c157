//! Link layers: where the IP header starts in a packet record, and which IP version it is.
//!
//! Ethernet's fixed header is sliced by etherparse; 802.1Q/802.1ad tag stacks, Linux SLL/SLL2, BSD
//! loopback and the raw-IP types are a few bytes each and written here (etherparse validates SLL's
//! packet and ARPHRD types, which would turn packets the reader accepts into errors).

use etherparse::Ethernet2HeaderSlice;

use super::bytes::be16;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;

/// IP version of a packet's network layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ip {
    V4,
    V6,
}

/// What the link layer of one packet holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Link {
    /// The link type has no parser.
    Unsupported,
    /// Too short for its link header, or a network layer that is not IP.
    NotIp,
    /// An IP packet starting at this offset of the record.
    Ip(Ip, usize),
}

/// The network layer of `data`, a record of link type `linktype` (pcap LINKTYPE_* values; 12 and
/// 14 are the DLT_RAW values libpcap maps to LINKTYPE_RAW).
pub(super) fn parse(linktype: u32, data: &[u8]) -> Link {
    match linktype {
        1 => ethernet(data),
        0 | 108 => bsd_loopback(data),
        12 | 14 | 101 => raw_ip(data),
        113 => linux_sll(data),
        228 => Link::Ip(Ip::V4, 0),
        229 => Link::Ip(Ip::V6, 0),
        276 => linux_sll2(data),
        _ => Link::Unsupported,
    }
}

fn ethernet(data: &[u8]) -> Link {
    match Ethernet2HeaderSlice::from_slice(data) {
        Ok(eth) => after_ethertype(data, eth.ether_type().0, etherparse::Ethernet2Header::LEN),
        Err(_) => Link::NotIp,
    }
}

/// Skips 802.1Q / 802.1ad / QinQ tags; `pos` is where the payload of `ethertype` starts.
fn after_ethertype(data: &[u8], mut ethertype: u16, mut pos: usize) -> Link {
    while matches!(ethertype, 0x8100 | 0x88A8 | 0x9100) {
        // a tag: 2 bytes of priority and VLAN id, then the next EtherType
        let Some((next, after)) = pos
            .checked_add(2)
            .and_then(|at| Some((be16(data, at)?, at.checked_add(2)?)))
        else {
            return Link::NotIp;
        };
        ethertype = next;
        pos = after;
    }
    match ethertype {
        ETHERTYPE_IPV4 => Link::Ip(Ip::V4, pos),
        ETHERTYPE_IPV6 => Link::Ip(Ip::V6, pos),
        _ => Link::NotIp,
    }
}

/// Linux cooked capture v1: the protocol type is at byte 14 of a 16-byte header.
fn linux_sll(data: &[u8]) -> Link {
    match be16(data, 14) {
        Some(ethertype) => after_ethertype(data, ethertype, 16),
        None => Link::NotIp,
    }
}

/// Linux cooked capture v2: the protocol type comes first in a 20-byte header.
fn linux_sll2(data: &[u8]) -> Link {
    if data.len() < 20 {
        return Link::NotIp;
    }
    match be16(data, 0) {
        Some(ethertype) => after_ethertype(data, ethertype, 20),
        None => Link::NotIp,
    }
}

/// DLT_NULL (host byte order) and DLT_LOOP (network order): either order is accepted. AF_INET is
/// 2 everywhere; AF_INET6 is 24 (NetBSD, OpenBSD), 28 (FreeBSD) or 30 (macOS).
fn bsd_loopback(data: &[u8]) -> Link {
    let Some(mut family) = super::bytes::u32_in(data, 0, false) else {
        return Link::NotIp;
    };
    if family > 0xFFFF {
        family = family.swap_bytes();
    }
    match family {
        2 => Link::Ip(Ip::V4, 4),
        24 | 28 | 30 => Link::Ip(Ip::V6, 4),
        _ => Link::NotIp,
    }
}

/// LINKTYPE_RAW: the version nibble tells IPv4 from IPv6.
fn raw_ip(data: &[u8]) -> Link {
    match data.first().map(|b| b >> 4) {
        Some(4) => Link::Ip(Ip::V4, 0),
        Some(6) => Link::Ip(Ip::V6, 0),
        _ => Link::NotIp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethernet_ipv4_and_ipv6() {
        let mut frame = vec![2u8; 12];
        frame.extend_from_slice(&[0x08, 0x00, 0x45]);
        assert_eq!(parse(1, &frame), Link::Ip(Ip::V4, 14));
        frame[12..14].copy_from_slice(&[0x86, 0xDD]);
        assert_eq!(parse(1, &frame), Link::Ip(Ip::V6, 14));
        assert_eq!(parse(1, &frame[..13]), Link::NotIp);
        frame[12..14].copy_from_slice(&[0x08, 0x06]); // ARP
        assert_eq!(parse(1, &frame), Link::NotIp);
    }

    #[test]
    fn vlan_tags_of_every_kind_are_skipped() {
        let mut frame = vec![2u8; 12];
        for tag in [0x88A8u16, 0x9100, 0x8100] {
            frame.extend_from_slice(&tag.to_be_bytes());
            frame.extend_from_slice(&[0, 10]);
        }
        frame.extend_from_slice(&[0x08, 0x00]);
        assert_eq!(parse(1, &frame), Link::Ip(Ip::V4, 26));
        // a tag cut short
        assert_eq!(parse(1, &frame[..17]), Link::NotIp);
        // a tag whose next EtherType is cut: only the TCI is there
        assert_eq!(parse(1, &frame[..25]), Link::NotIp);
    }

    #[test]
    fn linux_cooked_v1_and_v2() {
        let mut sll = vec![0u8; 16];
        sll[14..16].copy_from_slice(&[0x86, 0xDD]);
        assert_eq!(parse(113, &sll), Link::Ip(Ip::V6, 16));
        assert_eq!(parse(113, &sll[..15]), Link::NotIp);
        let mut sll2 = vec![0u8; 20];
        sll2[..2].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(parse(276, &sll2), Link::Ip(Ip::V4, 20));
        assert_eq!(parse(276, &sll2[..19]), Link::NotIp);
        sll2[..2].copy_from_slice(&[0x81, 0x00]); // a VLAN tag after the SLL2 header, cut
        assert_eq!(parse(276, &sll2), Link::NotIp);
    }

    #[test]
    fn bsd_loopback_either_byte_order() {
        for family in [2u32, 24, 28, 30] {
            let want = if family == 2 { Ip::V4 } else { Ip::V6 };
            for bytes in [family.to_le_bytes(), family.to_be_bytes()] {
                assert_eq!(parse(0, &bytes), Link::Ip(want, 4));
                assert_eq!(parse(108, &bytes), Link::Ip(want, 4));
            }
        }
        assert_eq!(parse(0, &7u32.to_le_bytes()), Link::NotIp);
        assert_eq!(parse(0, &[2, 0, 0]), Link::NotIp);
    }

    #[test]
    fn raw_ip_types() {
        for lt in [12, 14, 101] {
            assert_eq!(parse(lt, &[0x45]), Link::Ip(Ip::V4, 0));
            assert_eq!(parse(lt, &[0x60]), Link::Ip(Ip::V6, 0));
            assert_eq!(parse(lt, &[0x50]), Link::NotIp);
            assert_eq!(parse(lt, &[]), Link::NotIp);
        }
        assert_eq!(parse(228, &[]), Link::Ip(Ip::V4, 0));
        assert_eq!(parse(229, &[]), Link::Ip(Ip::V6, 0));
    }

    #[test]
    fn every_supported_type_has_a_parser_and_others_none() {
        for lt in [0, 1, 12, 14, 101, 108, 113, 228, 229, 276] {
            assert_ne!(parse(lt, &[0; 64]), Link::Unsupported, "{lt}");
        }
        for lt in [2, 105, 127, 147, 0x10001] {
            assert_eq!(parse(lt, &[0; 64]), Link::Unsupported, "{lt}");
        }
    }
}
