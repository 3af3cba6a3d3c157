//! pcapng: sections (either byte order), interfaces with their link type, snap length and clock
//! (if_tsresol, if_tsoffset), the blocks that are packets (EPB, OPB, SPB) or that Wireshark
//! numbers as frames all the same (Systemd Journal Export, custom blocks), and the TLS key logs
//! of Decryption Secrets Blocks (`editcap --inject-secrets tls,FILE`).
//!
//! Written here rather than with pcap-parser's block parsers: those reject an EPB whose captured
//! length exceeds its block (clamped here), collect every block's options into a Vec (an
//! allocation per packet), and fail a block on a malformed option list (ignored here from the
//! first bad option on).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "block lengths are u32 checked (>= 12, 4-aligned, <= MAX_BLOCK, and per type >= the fixed part) before any subtraction; option positions stay inside a block; clock products are u128 of u64 * u64 and |offset| * 10^9 fits i128"
)]

use super::bytes::{array, u16_in, u32_in};
use super::reader::{Handler, Progress, MAX_BLOCK};

pub(super) const SHB_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];
const SHB: u32 = 0x0A0D_0D0A; // the same in either byte order
const IDB: u32 = 1;
const OPB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;
const NRB: u32 = 4;
const ISB: u32 = 5;
const JOURNAL: u32 = 9;
/// Decryption Secrets Block, and its secrets type for an NSS key log (`TLSK`).
const DSB: u32 = 0x0000_000A;
const TLS_KEY_LOG: u32 = 0x544C_534B;
const CUSTOM: u32 = 0x0000_0BAD;
const CUSTOM_NOCOPY: u32 = 0x4000_0BAD;
const OPT_END: u16 = 0;
const OPT_TSRESOL: u16 = 9;
const OPT_TSOFFSET: u16 = 14;
/// Interfaces kept per section (OPB numbers interfaces in 16 bits); later IDBs are not stored.
const MAX_INTERFACES: usize = 1 << 16;

/// Whether a block of this type and length is a frame (Wireshark numbers it; `block` reads it as
/// a packet record), for the split scanner that counts frames without reading them.
pub(super) fn is_frame_block(btype: u32, blen: usize) -> bool {
    match btype {
        EPB | OPB => blen >= 32,
        SPB => blen >= 16,
        JOURNAL | CUSTOM | CUSTOM_NOCOPY => true,
        _ => false,
    }
}

/// Blocks a reader of a later part of the file needs (sections, interfaces, decryption secrets).
pub(super) fn is_context_block(btype: u32) -> bool {
    matches!(btype, SHB | IDB | DSB)
}

/// Block types a split scanner accepts as a boundary: the ones pcapng defines in use.
pub(super) fn is_known_block(btype: u32) -> bool {
    matches!(
        btype,
        SHB | IDB | OPB | SPB | NRB | ISB | EPB | JOURNAL | DSB | CUSTOM | CUSTOM_NOCOPY
    )
}

/// The byte order a section's byte-order magic names: Some(true) for big-endian.
pub(super) fn byte_order(bom: &[u8]) -> Option<bool> {
    match bom {
        [0x4D, 0x3C, 0x2B, 0x1A] => Some(false),
        [0x1A, 0x2B, 0x3C, 0x4D] => Some(true),
        _ => None,
    }
}

/// An interface's clock: ns = (units * mul >> shift) / div + offset_ns (integer math only).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Clock {
    mul: u64,
    shift: u32,
    /// 0: the divisor exceeds any timestamp (a resolution finer than 10^-47 s).
    div: u128,
    offset_ns: i128,
}

impl Default for Clock {
    fn default() -> Self {
        // default resolution: microseconds
        Clock {
            mul: 1000,
            shift: 0,
            div: 1,
            offset_ns: 0,
        }
    }
}

impl Clock {
    /// if_tsresol: high bit clear = 10^-n seconds, set = 2^-n seconds.
    fn set_resolution(&mut self, code: u8) {
        let n = u32::from(code & 0x7F);
        (self.mul, self.shift, self.div) = if code & 0x80 != 0 {
            (1_000_000_000, n, 1)
        } else if n <= 9 {
            (10u64.pow(9 - n), 0, 1)
        } else {
            (1, 0, 10u128.checked_pow(n - 9).unwrap_or(0))
        };
    }

    /// Nanoseconds since the epoch for `units` of this clock, saturated to the i64 range.
    fn ns(&self, units: u64) -> i64 {
        let scaled = (u128::from(units) * u128::from(self.mul)) >> self.shift;
        let whole = match self.div {
            1 => scaled,
            0 => 0,
            div => scaled / div,
        };
        // whole < 2^94 and |offset_ns| < 2^94: the sum fits an i128
        let ns = i128::try_from(whole)
            .unwrap_or(i128::MAX)
            .saturating_add(self.offset_ns);
        i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
    }
}

#[derive(Clone, Copy, Debug)]
struct Interface {
    linktype: u32,
    snaplen: u32,
    clock: Clock,
}

#[derive(Debug)]
pub(super) struct Pcapng {
    big: bool,
    interfaces: Vec<Interface>, // of the current section
}

impl Pcapng {
    /// A capture whose first section header names this byte order.
    pub fn new(big: bool) -> Pcapng {
        Pcapng {
            big,
            interfaces: Vec::new(),
        }
    }

    /// Hands every complete block's packet (if any) to `h`; returns the bytes used and what the
    /// next block needs (counted from the end of the used bytes).
    pub fn parse(&mut self, buf: &[u8], h: &mut Handler) -> (usize, Progress) {
        let mut pos = 0;
        loop {
            let rest = buf.get(pos..).unwrap_or_default();
            let Some(head) = array::<12>(rest, 0) else {
                return (pos, Progress::Need(12));
            };
            let [t0, t1, t2, t3, l0, l1, l2, l3, m0, m1, m2, m3] = head;
            let btype = self.u32([t0, t1, t2, t3]);
            if btype == SHB {
                let Some(big) = byte_order(&[m0, m1, m2, m3]) else {
                    return (pos, Progress::Corrupt("bad byte-order magic".to_owned()));
                };
                self.big = big;
                self.interfaces.clear();
            }
            let blen = self.u32([l0, l1, l2, l3]);
            if blen < 12 || blen & 3 != 0 || blen > MAX_BLOCK {
                return (pos, Progress::Corrupt(format!("block length {blen}")));
            }
            let Some(block) = rest.get(..blen as usize) else {
                return (pos, Progress::Need(blen as usize));
            };
            if u32_in(block, block.len() - 4, self.big) != Some(blen) {
                let what = "block lengths at its start and end differ".to_owned();
                return (pos, Progress::Corrupt(what));
            }
            // where a packet's data starts: Enhanced and obsolete Packet Blocks have 28 bytes before
            // it, Simple ones 12, the others that carry frames (journal, custom) 8
            h.data_at(
                pos + if btype == SPB {
                    12
                } else if btype == EPB || btype == OPB {
                    28
                } else {
                    8
                },
            );
            self.block(btype, block, h);
            pos += block.len();
        }
    }

    fn u32(&self, bytes: [u8; 4]) -> u32 {
        if self.big {
            u32::from_be_bytes(bytes)
        } else {
            u32::from_le_bytes(bytes)
        }
    }

    /// One whole block (its length checked at both ends).
    fn block(&mut self, btype: u32, block: &[u8], h: &mut Handler) {
        let blen = block.len();
        match btype {
            EPB | OPB if blen >= 32 => {
                let word = |at: usize| u32_in(block, at, self.big).unwrap_or(0);
                let (mut id, incl, wirelen) = (word(8), word(20), word(24));
                let units = u64::from(word(12)) << 32 | u64::from(word(16));
                if btype == OPB {
                    // a 16-bit interface id (first in the file) followed by a 16-bit drop count
                    id = if self.big { id >> 16 } else { id & 0xFFFF };
                }
                let size = (incl as usize).min(blen - 32);
                let data = block.get(28..28 + size).unwrap_or_default();
                match self.interfaces.get(id as usize) {
                    Some(iface) => {
                        let ts = iface.clock.ns(units);
                        h.packet(Some(ts), Some(iface.linktype), data, wirelen);
                    }
                    None => h.unknown_interface(id, data, wirelen),
                }
            }
            SPB if blen >= 16 => {
                // no timestamp, interface 0, captured length implied
                let wirelen = u32_in(block, 8, self.big).unwrap_or(0);
                let mut size = (wirelen as usize).min(blen - 16);
                match self.interfaces.first() {
                    Some(iface) => {
                        if iface.snaplen != 0 {
                            size = size.min(iface.snaplen as usize);
                        }
                        let data = block.get(12..12 + size).unwrap_or_default();
                        h.packet(None, Some(iface.linktype), data, wirelen);
                    }
                    None => {
                        let data = block.get(12..12 + size).unwrap_or_default();
                        h.unknown_interface(0, data, wirelen);
                    }
                }
            }
            JOURNAL | CUSTOM | CUSTOM_NOCOPY => {
                let data = block.get(8..blen - 4).unwrap_or_default();
                h.packet(None, None, data, (blen - 12) as u32);
            }
            DSB if blen >= 20 => {
                let (kind, length) = (u32_in(block, 8, self.big), u32_in(block, 12, self.big));
                if kind == Some(TLS_KEY_LOG) {
                    let length = length.unwrap_or(0) as usize;
                    h.secrets(
                        block
                            .get(16..(16 + length).min(blen - 4))
                            .unwrap_or_default(),
                    );
                }
            }
            IDB if blen >= 20 => {
                let iface = self.interface(block);
                h.link_type(iface.linktype);
                if self.interfaces.len() < MAX_INTERFACES {
                    self.interfaces.push(iface);
                }
            }
            _ => {}
        }
    }

    /// An Interface Description Block's link type, snap length and clock options.
    fn interface(&self, block: &[u8]) -> Interface {
        let big = self.big;
        let mut iface = Interface {
            linktype: u16_in(block, 8, big).map_or(0, u32::from),
            snaplen: u32_in(block, 12, big).unwrap_or(0),
            clock: Clock::default(),
        };
        let stop = block.len() - 4;
        let mut opt = 16;
        while opt + 4 <= stop {
            let (Some(code), Some(length)) = (u16_in(block, opt, big), u16_in(block, opt + 2, big))
            else {
                break;
            };
            let (value, length) = (opt + 4, usize::from(length));
            if code == OPT_END || value + length > stop {
                break;
            }
            if code == OPT_TSRESOL && length >= 1 {
                if let Some(&resolution) = block.get(value) {
                    iface.clock.set_resolution(resolution);
                }
            } else if code == OPT_TSOFFSET && length >= 8 {
                if let Some(bytes) = array::<8>(block, value) {
                    let seconds = if big {
                        i64::from_be_bytes(bytes)
                    } else {
                        i64::from_le_bytes(bytes)
                    };
                    iface.clock.offset_ns = i128::from(seconds) * 1_000_000_000;
                }
            }
            opt = value + ((length + 3) & !3);
        }
        iface
    }
}

#[cfg(test)]
mod tests {
    use super::Clock;
    use crate::capture::testkit::*;
    use crate::model::Value;

    #[test]
    fn two_interfaces_link_types_and_resolutions() {
        let t = T0_NS;
        let raw = link(&Tcp::new(2, b"raw").ip(), "raw");
        let sll = link(&Tcp::new(4, b"sll").ip(), "sll");
        let data = [
            shb(false),
            idb1(1),
            idb(101, Some(9), 0, 0, false),
            idb(113, Some(0x80 | 30), 0, 0, false),
            epb1(0, ts_units(t, None, 0), &Tcp::new(1, b"eth").frame()),
            epb1(1, ts_units(t + 123_456_789, Some(9), 0), &raw),
            epb1(
                0,
                ts_units(t + 200_000_000, None, 0),
                &Tcp::new(3, b"eth2").frame(),
            ),
            epb1(2, ts_units(t + 3_500_000_000, Some(0x80 | 30), 0), &sll),
        ]
        .concat();
        let out = read(&data);
        assert!(out.findings.is_empty() && out.info.format == "pcapng");
        assert_eq!(out.payloads(), [&b"eth"[..], b"raw", b"eth2", b"sll"]);
        assert_eq!(out.info.link_types, [1, 101, 113]);
        assert_eq!(out.segs[0].ts, t / 1000 * 1000);
        assert_eq!(out.segs[1].ts, t + 123_456_789);
        assert_eq!(out.segs[2].ts, (t + 200_000_000) / 1000 * 1000);
        let units = ts_units(t + 3_500_000_000, Some(0x80 | 30), 0);
        assert_eq!(
            out.segs[3].ts,
            ((u128::from(units) * 1_000_000_000) >> 30) as i64
        );
        assert!((out.segs[3].ts - (t + 3_500_000_000)).abs() <= 1);
    }

    #[test]
    fn tsoffset_and_big_endian_second_section() {
        let v6 = Tcp::new(2, b"b").addrs("fe80::1", "fe80::2").ip();
        let data = [
            shb(false),
            idb1(1),
            epb1(0, ts_units(T0_NS, None, 0), &Tcp::new(1, b"a").frame()),
            shb(true),
            idb(229, Some(3), 1_800_000_000, 0, true),
            epb(0, 700_000_123, &v6, None, true),
        ]
        .concat();
        let out = read(&data);
        assert!(out.findings.is_empty());
        assert_eq!(out.payloads(), [b"a", b"b"]);
        assert_eq!(
            out.segs[1].ts,
            (1_800_000_000 + 700_000) * 1_000_000_000 + 123 * 1_000_000
        );
        assert_eq!(
            out.segs[1].src,
            "fe80::1".parse::<std::net::IpAddr>().unwrap()
        );
        assert_eq!(out.info.link_types, [1, 229]);
    }

    #[test]
    fn a_new_section_forgets_the_interfaces_of_the_last() {
        let data = [
            shb(false),
            idb1(1),
            shb(false),
            epb1(0, 0, &Tcp::new(1, b"x").frame()),
        ]
        .concat();
        let out = read(&data);
        assert_eq!(out.codes(), ["pcap.malformed-record"]);
        assert_eq!(out.info.link_types, [1]);
    }

    #[test]
    fn spb_opb_and_other_blocks() {
        let isb = [5u32, 20, 0, 0, 20].map(u32::to_le_bytes).concat();
        let data = [
            shb(false),
            idb1(1),
            epb1(0, ts_units(T0_NS, None, 0), &Tcp::new(1, b"epb").frame()),
            spb(&Tcp::new(2, b"spb").frame(), false),
            isb,
            opb(
                0,
                ts_units(T0_NS + 5_000_000, None, 0),
                &Tcp::new(3, b"opb").frame(),
                false,
            ),
        ]
        .concat();
        let out = read(&data);
        assert!(out.findings.is_empty());
        assert_eq!(out.frames(), [1, 2, 3]);
        assert_eq!(out.payloads(), [&b"epb"[..], b"spb", b"opb"]);
        assert_eq!(out.segs[1].ts, out.segs[0].ts); // an SPB has no timestamp: the previous one's
        assert_eq!(out.segs[2].ts, T0_NS / 1000 * 1000 + 5_000_000);
        assert_eq!(out.info.packets, 3);
    }

    #[test]
    fn opb_interface_id_in_either_byte_order() {
        for big in [false, true] {
            let data = [
                shb(big),
                idb(1, None, 0, 0, big),
                idb(101, None, 0, 0, big),
                opb(1, 1_000_000, &link(&Tcp::new(3, b"o").ip(), "raw"), big),
            ]
            .concat();
            let out = read(&data);
            assert_eq!(
                (out.payloads(), out.segs[0].ts),
                (vec![b"o".to_vec()], 1_000_000_000)
            );
        }
    }

    #[test]
    fn spb_snaplen_and_first_packet() {
        let frame = Tcp::new(5, b"0123456789").frame();
        let data = [
            shb(false),
            idb(1, None, 0, frame.len() as u32 - 4, false),
            spb(&frame, false),
        ]
        .concat();
        let out = read(&data);
        assert_eq!(
            (
                out.segs[0].ts,
                &out.segs[0].payload[..],
                out.segs[0].missing
            ),
            (0, &b"012345"[..], 4)
        );
        assert_eq!(out.codes(), ["pcap.snaplen-truncated"]);
        assert_eq!(
            out.findings[0].message,
            "packet 1 was cut by the capture's snap length: 4 bytes of its TCP payload is missing"
        );
        assert_eq!(out.info.first_ts, None);
    }

    #[test]
    fn unknown_interface_is_reported_and_counted() {
        let data = [
            shb(false),
            idb1(1),
            epb1(3, 0, &Tcp::new(1, b"x").frame()),
            epb1(0, 0, &Tcp::new(2, b"y").frame()),
        ]
        .concat();
        let out = read(&data);
        assert_eq!(out.frames(), [2]);
        assert_eq!(out.codes(), ["pcap.malformed-record"]);
        let f = &out.findings[0];
        assert_eq!((f.frame, f.ts), (Some(1), None));
        assert_eq!(
            f.message,
            "packet 1 names interface 3, which the section does not describe"
        );
        assert_eq!(field(f, "interface"), Some(Value::from(3)));
        assert_eq!((out.info.packets, out.info.non_tcp_packets), (2, 1));
    }

    #[test]
    fn spb_before_any_interface() {
        let out = read(&[shb(false), spb(&Tcp::new(1, b"x").frame(), false)].concat());
        assert!(out.segs.is_empty());
        assert_eq!(
            out.findings[0].message,
            "packet 1 names interface 0, which the section does not describe"
        );
    }

    #[test]
    fn absurd_block_length_stops() {
        let good = [shb(false), idb1(1), epb1(0, 0, &Tcp::new(1, b"ok").frame())].concat();
        let bad = [
            &6u32.to_le_bytes()[..],
            &0x7FFF_FFFCu32.to_le_bytes(),
            &[0; 64],
        ]
        .concat();
        let out = read(&[good, bad].concat());
        assert_eq!(out.payloads(), [b"ok"]);
        assert_eq!(out.codes(), ["pcap.corrupt"]);
        assert_eq!(
            out.findings[0].message,
            "capture damaged after packet 1 (block length 2147483644); reading stopped there"
        );
        assert_eq!(out.findings[0].frame, Some(2));
        assert!(out.info.truncated);
    }

    #[test]
    fn unaligned_or_short_block_lengths_stop() {
        for blen in [8u32, 13] {
            let bad = [&6u32.to_le_bytes()[..], &blen.to_le_bytes(), &[0; 16]].concat();
            let out = read(&[shb(false), bad].concat());
            assert_eq!(
                out.findings[0].message,
                format!(
                    "capture damaged after packet 0 (block length {blen}); reading stopped there"
                )
            );
        }
    }

    #[test]
    fn mismatched_trailing_length_stops() {
        let mut block = epb1(0, 0, &Tcp::new(2, b"no").frame());
        let n = block.len();
        block[n - 4..].copy_from_slice(&(n as u32 + 4).to_le_bytes());
        let data = [
            shb(false),
            idb1(1),
            epb1(0, 0, &Tcp::new(1, b"ok").frame()),
            block,
        ]
        .concat();
        let out = read(&data);
        assert_eq!(out.payloads(), [b"ok"]);
        assert_eq!(
            out.findings[0].message,
            "capture damaged after packet 1 (block lengths at its start and end differ); reading \
             stopped there"
        );
    }

    #[test]
    fn bad_byte_order_magic_in_a_later_section_stops() {
        let mut second = shb(false);
        second[8..12].copy_from_slice(b"XXXX");
        let out = read(&[shb(false), idb1(1), second].concat());
        assert_eq!(
            out.findings[0].message,
            "capture damaged after packet 0 (bad byte-order magic); reading stopped there"
        );
        assert_eq!(out.error, None);
    }

    #[test]
    fn truncated_mid_block() {
        let mut data = [shb(false), idb1(1)].concat();
        let last = epb1(0, 2, &Tcp::new(2, b"p").frame()).len();
        for i in 0..3 {
            data.extend(epb1(0, i, &Tcp::new(i as u32, b"p").frame()));
        }
        let out = read(&data[..data.len() - 10]);
        assert_eq!(out.frames(), [1, 2]);
        assert_eq!(out.codes(), ["pcap.truncated"]);
        assert_eq!((out.findings[0].frame, out.info.truncated), (Some(3), true));
        // cut inside the 12 bytes that tell a block's type, length and (for a section) byte order
        let out = read(&data[..data.len() - last + 10]);
        assert!(
            out.findings[0].message.contains("(10 of 12 bytes present)"),
            "{}",
            out.findings[0].message
        );
    }

    #[test]
    fn journal_and_custom_blocks_are_numbered_like_wireshark() {
        let journal = block(
            9,
            b"__REALTIME_TIMESTAMP=1700000000000000\nMESSAGE=hi\n",
            false,
        );
        let custom = block(
            0x0BAD,
            &[&32473u32.to_le_bytes()[..], b"abcd"].concat(),
            false,
        );
        let nocopy = block(
            0x4000_0BAD,
            &[&32473u32.to_le_bytes()[..], b"efgh"].concat(),
            false,
        );
        let dsb = block(
            10,
            &[
                &0x544C_534Bu32.to_le_bytes()[..],
                &4u32.to_le_bytes(),
                b"abcd",
            ]
            .concat(),
            false,
        );
        let isb = block(5, &[0; 12], false);
        let unknown = block(0x1234, b"zzzz", false);
        let short_epb = block(6, &[0; 16], false); // too short to be a packet: skipped
        let (a, b, c) = (
            Tcp::new(1, b"a").frame(),
            Tcp::new(2, b"b").frame(),
            Tcp::new(3, b"c").frame(),
        );
        let data = [
            shb(false),
            idb1(1),
            epb1(0, 1, &a),
            journal.clone(),
            epb1(0, 2, &b),
            dsb,
            custom.clone(),
            isb,
            unknown,
            short_epb,
            nocopy.clone(),
            epb1(0, 3, &c),
        ]
        .concat();
        let out = read(&data);
        let got: Vec<_> = out
            .segs
            .iter()
            .map(|s| (s.frame, s.payload.clone()))
            .collect();
        assert_eq!(
            got,
            [(1, b"a".to_vec()), (3, b"b".to_vec()), (6, b"c".to_vec())]
        );
        assert_eq!((out.info.packets, out.info.non_tcp_packets), (6, 3));
        assert!(out.findings.is_empty());
        let blocks = (journal.len() + custom.len() + nocopy.len() - 36) as u64;
        assert_eq!(
            out.info.bytes,
            (a.len() + b.len() + c.len()) as u64 + blocks
        );
    }

    #[test]
    fn length_within_cap_but_beyond_the_file_is_a_truncation() {
        let data = [
            shb(false),
            idb1(1),
            epb1(0, 0, &Tcp::new(1, b"ok").frame()),
            [6u32, 200 << 20].map(u32::to_le_bytes).concat(),
            vec![0; 80],
        ]
        .concat();
        let out = read(&data);
        assert_eq!(out.payloads(), [b"ok"]);
        assert_eq!(out.codes(), ["pcap.truncated"]);
    }

    #[test]
    fn decryption_secrets_blocks_give_their_key_log() {
        let lines = b"CLIENT_RANDOM 00 11\n";
        for big in [false, true] {
            let u32b = |v: u32| {
                if big {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                }
            };
            let dsb = |kind: u32, text: &[u8]| {
                let mut body = u32b(kind).to_vec();
                body.extend_from_slice(&u32b(text.len() as u32));
                body.extend_from_slice(text);
                body.resize((body.len() + 3) & !3, 0);
                block(0x0A, &body, big)
            };
            let mut cap = shb(big);
            cap.extend(dsb(0x544C_534B, lines));
            cap.extend(dsb(0x5353_4844, b"WireGuard keys are not TLS key logs"));
            cap.extend(idb(1, None, 0, 0, big));
            cap.extend(epb(0, 0, &Tcp::new(1, b"x").frame(), None, big));
            let out = read(&cap);
            assert_eq!(out.secrets, [lines.to_vec()]);
            assert_eq!(out.frames(), [1], "a secrets block is not a frame");
        }
    }

    #[test]
    fn sample_with_every_block_kind_reads_fully() {
        let out = read(&pcapng_sample());
        assert_eq!(out.payloads(), [&b"one"[..], b"two", b"three", b"four"]);
        assert!(out.findings.is_empty());
        assert_eq!(out.info.link_types, [1, 101, 113]);
    }

    #[test]
    fn timestamp_conversion_is_exact() {
        let unit_cases = [
            0u64,
            1,
            999,
            1_700_000_000_123_456,
            u64::from(u32::MAX) << 20,
            u64::MAX,
        ];
        for units in unit_cases {
            for resol in (0..=19u8)
                .chain(0x80..=0x80 + 63)
                .chain([0x7F, 0xFF, 38, 39, 47, 48])
            {
                for offset in [0i64, 1, -1, 1 << 40, -(1 << 40)] {
                    let mut clock = Clock::default();
                    clock.set_resolution(resol);
                    clock.offset_ns = i128::from(offset) * 1_000_000_000;
                    let n = u32::from(resol & 0x7F);
                    let scaled = u128::from(units) * 1_000_000_000;
                    let whole = if resol & 0x80 != 0 {
                        scaled >> n
                    } else {
                        10u128.checked_pow(n).map_or(0, |d| scaled / d)
                    };
                    let want = (whole as i128 + i128::from(offset) * 1_000_000_000)
                        .clamp(i128::from(i64::MIN), i128::from(i64::MAX));
                    assert_eq!(
                        i128::from(clock.ns(units)),
                        want,
                        "{units} {resol} {offset}"
                    );
                }
            }
        }
    }

    #[test]
    fn timestamps_saturate() {
        let data = [
            shb(false),
            idb(1, Some(0), i64::MAX, 0, false),
            epb1(0, u64::MAX, &Tcp::new(1, b"a").frame()),
        ]
        .concat();
        assert_eq!(read(&data).segs[0].ts, i64::MAX);
        let data = [
            shb(false),
            idb(1, None, i64::MIN, 0, false),
            epb1(0, 0, &Tcp::new(1, b"a").frame()),
        ]
        .concat();
        assert_eq!(read(&data).segs[0].ts, i64::MIN);
    }

    #[test]
    fn malformed_idb_options_keep_what_came_before() {
        // tsresol ns, then an option running past the block: the rest is ignored
        let mut body = [1u16, 0].map(u16::to_le_bytes).concat();
        body.extend(0u32.to_le_bytes());
        body.extend([9, 0, 1, 0, 9, 0, 0, 0]);
        body.extend([14, 0, 200, 0]);
        let data = [
            shb(false),
            block(1, &body, false),
            epb1(0, 5, &Tcp::new(1, b"a").frame()),
        ]
        .concat();
        assert_eq!(read(&data).segs[0].ts, 5);
    }

    #[test]
    fn epb_captured_length_is_clamped_to_its_block() {
        let frame = Tcp::new(1, b"abc").frame();
        let mut block = epb1(0, 0, &frame);
        block[20..24].copy_from_slice(&1000u32.to_le_bytes()); // caplen beyond the block
        let out = read(&[shb(false), idb1(1), block].concat());
        // the block's padding is taken as captured bytes; the IP length trims it
        assert_eq!(out.payloads(), [b"abc"]);
    }
}
