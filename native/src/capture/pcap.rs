//! Classic pcap: the 24-byte file header and the records after it (either byte order, µs or ns),
//! parsed with pcap-parser's nom-level functions on the reader's buffer.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "a record's captured length is a u32 checked against the cap before 16 is added; ts_sec (u32) * 10^9 + ts_usec (u32) * 1000 < 2^63"
)]

use pcap_parser::{parse_pcap_frame, parse_pcap_frame_be, parse_pcap_header};

use super::bytes::u32_in;
use super::reader::{Handler, Progress, MAX_BLOCK};

pub(super) const HEADER_LEN: usize = 24;
const RECORD_HEADER: usize = 16;
/// libpcap's largest snaplen; a record may exceed a smaller snaplen than the file header's.
pub(super) const MIN_RECORD_LIMIT: u32 = 262_144;

/// Whether `magic` (the first four bytes) is a classic pcap magic. The "modified" pcap magic
/// (0xa1b2cd34, 24-byte records) is not one: its records would be misread.
pub(super) fn is_magic(magic: &[u8]) -> bool {
    matches!(
        magic,
        [0xd4, 0xc3, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0xc3, 0xd4]
            | [0x4d, 0x3c, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0x3c, 0x4d]
    )
}

#[derive(Debug)]
pub(super) struct Pcap {
    big: bool,
    ns_per_fraction: i64,
    linktype: u32,
    /// The largest record believed: no record header may announce more.
    limit: u32,
}

impl Pcap {
    /// From the file header (whose magic `is_magic`).
    pub fn new(header: &[u8]) -> Option<Pcap> {
        let (_, header) = parse_pcap_header(header).ok()?;
        Some(Pcap {
            big: header.is_bigendian(),
            ns_per_fraction: if header.is_nanosecond_precision() {
                1
            } else {
                1000
            },
            // the upper 16 bits may carry FCS information
            linktype: header.network.0 as u32 & 0xFFFF,
            limit: MAX_BLOCK.min(header.snaplen.max(MIN_RECORD_LIMIT)),
        })
    }

    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// Hands every complete record in `buf` to `h`; returns the bytes used and what the next
    /// record needs (counted from the end of the used bytes).
    pub fn parse(&self, buf: &[u8], h: &mut Handler) -> (usize, Progress) {
        let mut pos = 0;
        loop {
            let rest = buf.get(pos..).unwrap_or_default();
            if rest.len() < RECORD_HEADER {
                return (pos, Progress::Need(RECORD_HEADER));
            }
            let incl = u32_in(rest, 8, self.big).unwrap_or(0);
            if incl > self.limit {
                let what = format!(
                    "a record of {incl} captured bytes, the limit is {}",
                    self.limit
                );
                return (pos, Progress::Corrupt(what));
            }
            let need = RECORD_HEADER + incl as usize;
            if rest.len() < need {
                return (pos, Progress::Need(need));
            }
            let parsed = if self.big {
                parse_pcap_frame_be(rest)
            } else {
                parse_pcap_frame(rest)
            };
            let Ok((after, record)) = parsed else {
                return (pos, Progress::Corrupt("an unreadable record".to_owned()));
            };
            let ts = i64::from(record.ts_sec) * 1_000_000_000
                + i64::from(record.ts_usec) * self.ns_per_fraction;
            h.data_at(pos + RECORD_HEADER);
            h.packet(Some(ts), Some(self.linktype), record.data, record.origlen);
            pos = buf.len() - after.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::capture::testkit::*;
    use crate::model::{Severity, Value};

    fn frames(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| Tcp::new(1000 + 10 * i as u32, format!("payload{i:03}").as_bytes()).frame())
            .collect()
    }

    #[test]
    fn byte_orders_and_resolutions() {
        let ts = [T0_NS, T0_NS + 1_001, T0_NS + 2_000_000_007];
        let fs = frames(3);
        for big in [false, true] {
            for nano in [false, true] {
                let records: Vec<Rec> = ts
                    .iter()
                    .zip(&fs)
                    .map(|(&t, f)| (t, f.clone(), f.len() as u32))
                    .collect();
                let out = read(&pcap_with(
                    &records,
                    PcapOpts {
                        big,
                        nano,
                        ..PcapOpts::default()
                    },
                ));
                let want: Vec<i64> = ts
                    .iter()
                    .map(|&t| if nano { t } else { t / 1000 * 1000 })
                    .collect();
                assert_eq!(out.segs.iter().map(|s| s.ts).collect::<Vec<_>>(), want);
                assert_eq!(out.frames(), [1, 2, 3]);
                assert_eq!(
                    out.segs.iter().map(|s| s.seq).collect::<Vec<_>>(),
                    [1000, 1010, 1020]
                );
                assert_eq!(
                    out.payloads(),
                    [b"payload000", b"payload001", b"payload002"]
                );
                let info = &out.info;
                assert_eq!(info.format, "pcap");
                assert_eq!(
                    (info.packets, info.tcp_packets, info.non_tcp_packets),
                    (3, 3, 0)
                );
                assert_eq!(
                    (info.first_ts, info.last_ts),
                    (Some(want[0]), Some(want[2]))
                );
                assert_eq!(info.link_types, [1]);
                assert_eq!(info.bytes, fs.iter().map(|f| f.len() as u64).sum::<u64>());
                assert!(out.findings.is_empty() && !info.truncated && out.error.is_none());
            }
        }
    }

    #[test]
    fn linktype_upper_bits_are_masked() {
        let out = read(&pcap_lt(&frames(1), 0x0123_0001));
        assert_eq!(out.info.link_types, [1]);
        assert_eq!(out.segs.len(), 1);
    }

    #[test]
    fn empty_pcap_is_not_an_error() {
        let out = read(&pcap(&[]));
        assert!(out.segs.is_empty() && out.findings.is_empty() && out.error.is_none());
        assert_eq!(
            (out.info.packets, out.info.first_ts, out.info.last_ts),
            (0, None, None)
        );
    }

    #[test]
    fn truncated_mid_record_keeps_earlier_packets() {
        let fs = frames(5);
        let data = pcap(&fs);
        let last = fs[4].len();
        // inside the data; inside the record header
        for (cut, have, need) in [
            (data.len() - 3, 13 + last, 16 + last),
            (data.len() - last - 8, 8, 16),
        ] {
            let out = read(&data[..cut]);
            assert_eq!(out.frames(), [1, 2, 3, 4]);
            assert!(out.info.truncated && out.info.packets == 4);
            assert_eq!(out.codes(), ["pcap.truncated"]);
            let f = &out.findings[0];
            assert_eq!(
                (f.frame, f.ts, f.severity),
                (Some(5), None, Severity::Warning)
            );
            let message = format!(
                "capture ends in the middle of record 5 ({have} of {need} bytes present); the 4 \
                 packets before it were read"
            );
            assert_eq!(f.message, message);
            assert_eq!(out.info.error.as_deref(), Some(message.as_str()));
        }
    }

    #[test]
    fn read_error_at_a_record_boundary_is_a_truncation() {
        let out = read_chunked(
            &pcap(&frames(2)),
            7,
            Some("EOFError: Compressed file ended"),
        );
        assert_eq!(out.frames(), [1, 2]);
        assert_eq!(
            out.findings[0].message,
            "capture ends in the middle of record 3 (0 of 16 bytes present) (EOFError: \
             Compressed file ended); the 2 packets before it were read"
        );
    }

    #[test]
    fn absurd_record_length_stops_without_allocating() {
        let fs = frames(3);
        let mut data = pcap(&fs);
        let second = 24 + 16 + fs[0].len();
        data[second + 8..second + 12].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        let out = read(&data);
        assert_eq!(out.frames(), [1]);
        assert_eq!(out.codes(), ["pcap.corrupt"]);
        let f = &out.findings[0];
        assert_eq!((f.severity, f.frame), (Severity::Error, Some(2)));
        assert_eq!(
            f.message,
            "capture damaged after packet 1 (a record of 4294967280 captured bytes, the limit is \
             262144); reading stopped there"
        );
        assert!(out.info.truncated && out.info.error.is_some());
    }

    #[test]
    fn the_limit_follows_a_large_snaplen_up_to_the_cap() {
        let big = vec![0u8; 300_000]; // an Ethernet frame of EtherType 0: not IP
        let out = read_chunked(
            &pcap_with(
                &recs(&[big]),
                PcapOpts {
                    snaplen: 400_000,
                    ..PcapOpts::default()
                },
            ),
            0,
            None,
        );
        assert!(out.findings.is_empty());
        assert_eq!((out.info.bytes, out.info.non_tcp_packets), (300_000, 1));
        let huge = pcap_with(
            &[],
            PcapOpts {
                snaplen: u32::MAX,
                ..PcapOpts::default()
            },
        );
        let record = [0, 0, (256u32 << 20) + 1, 0].map(u32::to_le_bytes).concat();
        let out = read(&[huge, record].concat());
        assert!(out.findings[0].message.contains("the limit is 268435456"));
    }

    #[test]
    fn length_within_cap_but_beyond_the_file_is_a_truncation() {
        let mut data = pcap_with(
            &recs(&[Tcp::new(1, b"ok").frame()]),
            PcapOpts {
                snaplen: 256 << 20,
                ..PcapOpts::default()
            },
        );
        data.extend([0, 0, 200u32 << 20, 0].map(u32::to_le_bytes).concat());
        data.extend([0; 40]);
        let out = read(&data);
        assert_eq!(out.payloads(), [b"ok"]);
        assert_eq!(out.codes(), ["pcap.truncated"]);
        assert!(out.info.truncated);
        assert!(out.findings[0]
            .message
            .contains("(56 of 209715216 bytes present)"));
    }

    #[test]
    fn records_crossing_feeds_are_carried_over_intact() {
        let big = Tcp::new(7, &(0..=255u8).cycle().take(2560).collect::<Vec<_>>()).frame();
        let mut fs = vec![big.clone()];
        fs.extend(frames(20));
        fs.push(big);
        let data = pcap(&fs);
        for chunk in [1, 3, 100, 1000] {
            let out = read_chunked(&data, chunk, None);
            assert_eq!(out.info.packets, 22);
            assert!(out.findings.is_empty());
            assert_eq!(out.segs[0].payload.len(), 2560);
            assert_eq!(out.segs[0].payload, out.segs[21].payload);
        }
    }

    #[test]
    fn time_backwards_reported_individually_then_summarised() {
        let fs = frames(30);
        let ts: Vec<i64> = (0..30)
            .map(|i| T0_NS + if i % 2 == 0 { i } else { i - 2 } * 1_000_000_000)
            .collect();
        let records: Vec<Rec> = ts
            .iter()
            .zip(&fs)
            .map(|(&t, f)| (t, f.clone(), f.len() as u32))
            .collect();
        let out = read(&pcap_with(
            &records,
            PcapOpts {
                nano: true,
                ..PcapOpts::default()
            },
        ));
        assert_eq!(out.segs.len(), 30);
        let back: Vec<_> = out
            .findings
            .iter()
            .filter(|f| f.code == "pcap.time-backwards")
            .collect();
        assert_eq!(back.len(), 11);
        let frames: Vec<_> = back[..10].iter().map(|f| f.frame.unwrap()).collect();
        assert_eq!(frames, [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]);
        assert!(back.iter().all(|f| f.severity == Severity::Info));
        assert_eq!(
            back[0].message,
            "packet 2 is timestamped 1.000000 s before the packet preceding it"
        );
        assert_eq!(
            (back[0].ts, field(back[0], "previous_ts")),
            (Some(ts[1]), Some(Value::from(ts[0])))
        );
        assert_eq!(
            (back[10].frame, field(back[10], "count")),
            (None, Some(Value::from(15)))
        );
        assert_eq!(
            back[10].message,
            "timestamps went backwards 15 times (only the first 10 are reported individually)"
        );
        assert_eq!(
            (out.info.first_ts, out.info.last_ts),
            (Some(T0_NS - 1_000_000_000), Some(T0_NS + 28_000_000_000))
        );
    }

    #[test]
    fn time_backwards_seconds_round_like_python() {
        // 7_812_500 ns = 0.0078125 s exactly: a tie, rounded to even like Python's format
        let fs = frames(2);
        let records = vec![
            (T0_NS, fs[0].clone(), 60),
            (T0_NS - 7_812_500, fs[1].clone(), 60),
        ];
        let out = read(&pcap_with(
            &records,
            PcapOpts {
                nano: true,
                ..PcapOpts::default()
            },
        ));
        assert_eq!(
            out.findings[0].message,
            "packet 2 is timestamped 0.007812 s before the packet preceding it"
        );
    }
}
