//! Test builders: packets (IPv4/IPv6/TCP over every link type), pcap and pcapng files, fragments,
//! and a driver that feeds a capture to a `CaptureReader` in any split (like tests/pcap_helpers.py).

use std::net::IpAddr;

use super::{CaptureInfo, CaptureReader, Segment};
use crate::model::{Finding, FindingSink, Value};

pub const T0_NS: i64 = 1_700_000_000_123_456_789;
pub const PA: u8 = 0x18;

/// A TCP packet to build: addresses pick IPv4 or IPv6.
#[derive(Clone, Debug)]
pub struct Tcp {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub options: Vec<u8>,
    pub payload: Vec<u8>,
    pub ident: u16,
}

impl Tcp {
    pub fn new(seq: u32, payload: &[u8]) -> Tcp {
        Tcp {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            sport: 40000,
            dport: 5044,
            seq,
            ack: 0,
            flags: PA,
            options: Vec::new(),
            payload: payload.to_vec(),
            ident: 1,
        }
    }

    pub fn addrs(mut self, src: &str, dst: &str) -> Tcp {
        self.src = src.parse().unwrap();
        self.dst = dst.parse().unwrap();
        self
    }

    pub fn v6(self) -> Tcp {
        self.addrs("2001:db8::1", "2001:db8::2")
    }

    /// The TCP header and payload.
    pub fn segment(&self) -> Vec<u8> {
        let doff = (20 + self.options.len()) / 4;
        let mut out = Vec::new();
        out.extend_from_slice(&self.sport.to_be_bytes());
        out.extend_from_slice(&self.dport.to_be_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.ack.to_be_bytes());
        out.extend_from_slice(&[(doff as u8) << 4, self.flags, 0xFF, 0xFF, 0, 0, 0, 0]);
        out.extend_from_slice(&self.options);
        out.extend_from_slice(&self.payload);
        out
    }

    /// The IP packet (IPv4 or IPv6 header, then the segment).
    pub fn ip(&self) -> Vec<u8> {
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => ipv4(
                6,
                s.octets(),
                d.octets(),
                self.ident,
                0,
                &[],
                &self.segment(),
            ),
            (IpAddr::V6(s), IpAddr::V6(d)) => ipv6(6, s.octets(), d.octets(), &self.segment()),
            _ => panic!("mixed address families"),
        }
    }

    pub fn frame(&self) -> Vec<u8> {
        link(&self.ip(), "ether")
    }
}

/// An IPv4 packet: `frag` is the flags/fragment-offset field.
pub fn ipv4(
    proto: u8,
    src: [u8; 4],
    dst: [u8; 4],
    ident: u16,
    frag: u16,
    options: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let ihl = 20 + options.len();
    let total = (ihl + payload.len()) as u16;
    let mut out = vec![0x40 | (ihl / 4) as u8, 0];
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&ident.to_be_bytes());
    out.extend_from_slice(&frag.to_be_bytes());
    out.extend_from_slice(&[64, proto, 0, 0]);
    out.extend_from_slice(&src);
    out.extend_from_slice(&dst);
    out.extend_from_slice(options);
    out.extend_from_slice(payload);
    out
}

pub fn ipv6(next: u8, src: [u8; 16], dst: [u8; 16], payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x60, 0, 0, 0];
    out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    out.extend_from_slice(&[next, 64]);
    out.extend_from_slice(&src);
    out.extend_from_slice(&dst);
    out.extend_from_slice(payload);
    out
}

pub fn v6addr(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

/// LINKTYPE_* per link name understood by `link`.
pub const LINKTYPES: [(&str, u32); 11] = [
    ("ether", 1),
    ("vlan", 1),
    ("qinq", 1),
    ("null", 0),
    ("null-be", 0),
    ("loop", 108),
    ("raw", 101),
    ("ipv4", 228),
    ("ipv6", 229),
    ("sll", 113),
    ("sll2", 276),
];

/// Wraps an IP packet in the link layer named `kind`.
pub fn link(ip: &[u8], kind: &str) -> Vec<u8> {
    let v6 = ip.first().is_some_and(|b| b >> 4 == 6);
    let etype: [u8; 2] = if v6 { [0x86, 0xDD] } else { [0x08, 0x00] };
    let family: u32 = if v6 { 30 } else { 2 };
    let macs = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    let mut out = Vec::new();
    match kind {
        "ether" => out.extend_from_slice(&macs),
        "vlan" => out.extend_from_slice(&[&macs[..], &[0x81, 0x00, 0x01, 0x2C]].concat()),
        "qinq" => out
            .extend_from_slice(&[&macs[..], &[0x88, 0xA8, 0, 10, 0x81, 0x00, 0x01, 0x2C]].concat()),
        "null" => out.extend_from_slice(&family.to_le_bytes()),
        "null-be" | "loop" => out.extend_from_slice(&family.to_be_bytes()),
        "raw" | "ipv4" | "ipv6" => {}
        "sll" => out.extend_from_slice(&[0, 0, 0, 1, 0, 6, 2, 2, 2, 2, 2, 2, 0, 0]),
        "sll2" => {
            out.extend_from_slice(&etype);
            out.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 2, 2, 2, 2, 2, 2, 0, 0]);
            out.extend_from_slice(ip);
            return out;
        }
        _ => panic!("unknown link {kind}"),
    }
    if matches!(kind, "ether" | "vlan" | "qinq" | "sll") {
        out.extend_from_slice(&etype);
    }
    out.extend_from_slice(ip);
    out
}

/// One record to write: timestamp, captured bytes, length on the wire.
pub type Rec = (i64, Vec<u8>, u32);

/// Records 1 ms apart from T0_NS, each complete.
pub fn recs(frames: &[Vec<u8>]) -> Vec<Rec> {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| (T0_NS + i as i64 * 1_000_000, f.clone(), f.len() as u32))
        .collect()
}

#[derive(Clone, Copy)]
pub struct PcapOpts {
    pub linktype: u32,
    pub big: bool,
    pub nano: bool,
    pub snaplen: u32,
}

impl Default for PcapOpts {
    fn default() -> Self {
        PcapOpts {
            linktype: 1,
            big: false,
            nano: false,
            snaplen: 262_144,
        }
    }
}

fn u32b(v: u32, big: bool) -> [u8; 4] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

fn u16b(v: u16, big: bool) -> [u8; 2] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

/// A classic pcap file (version 2.4).
pub fn pcap_with(records: &[Rec], o: PcapOpts) -> Vec<u8> {
    let magic: u32 = if o.nano { 0xA1B2_3C4D } else { 0xA1B2_C3D4 };
    let mut out = Vec::new();
    out.extend_from_slice(&u32b(magic, o.big));
    out.extend_from_slice(&u16b(2, o.big));
    out.extend_from_slice(&u16b(4, o.big));
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&u32b(o.snaplen, o.big));
    out.extend_from_slice(&u32b(o.linktype, o.big));
    let div = if o.nano { 1 } else { 1000 };
    for (ts, data, wirelen) in records {
        let (sec, frac) = (ts.div_euclid(1_000_000_000), ts.rem_euclid(1_000_000_000));
        out.extend_from_slice(&u32b(sec as u32, o.big));
        out.extend_from_slice(&u32b((frac / div) as u32, o.big));
        out.extend_from_slice(&u32b(data.len() as u32, o.big));
        out.extend_from_slice(&u32b(*wirelen, o.big));
        out.extend_from_slice(data);
    }
    out
}

pub fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    pcap_with(&recs(frames), PcapOpts::default())
}

pub fn pcap_lt(frames: &[Vec<u8>], linktype: u32) -> Vec<u8> {
    pcap_with(
        &recs(frames),
        PcapOpts {
            linktype,
            ..PcapOpts::default()
        },
    )
}

/// A pcapng block with its body padded to 32 bits.
pub fn block(btype: u32, body: &[u8], big: bool) -> Vec<u8> {
    let mut body = body.to_vec();
    body.resize(body.len().div_ceil(4) * 4, 0);
    let len = body.len() as u32 + 12;
    [
        &u32b(btype, big)[..],
        &u32b(len, big),
        &body,
        &u32b(len, big),
    ]
    .concat()
}

fn option(code: u16, value: &[u8], big: bool) -> Vec<u8> {
    let mut out = [&u16b(code, big)[..], &u16b(value.len() as u16, big), value].concat();
    out.resize(out.len().div_ceil(4) * 4, 0);
    out
}

pub fn shb(big: bool) -> Vec<u8> {
    let body = [
        &u32b(0x1A2B_3C4D, big)[..],
        &u16b(1, big),
        &u16b(0, big),
        &[0xFF; 8],
    ]
    .concat();
    block(0x0A0D_0D0A, &body, big)
}

/// Interface Description Block; `tsresol` is the raw if_tsresol byte, `tsoffset` whole seconds.
pub fn idb(linktype: u16, tsresol: Option<u8>, tsoffset: i64, snaplen: u32, big: bool) -> Vec<u8> {
    let mut body = [&u16b(linktype, big)[..], &[0, 0], &u32b(snaplen, big)].concat();
    let mut opts = Vec::new();
    if let Some(r) = tsresol {
        opts.extend(option(9, &[r], big));
    }
    if tsoffset != 0 {
        let v = if big {
            tsoffset.to_be_bytes()
        } else {
            tsoffset.to_le_bytes()
        };
        opts.extend(option(14, &v, big));
    }
    if !opts.is_empty() {
        opts.extend_from_slice(&[0; 4]);
    }
    body.extend(opts);
    block(1, &body, big)
}

pub fn idb1(linktype: u16) -> Vec<u8> {
    idb(linktype, None, 0, 0, false)
}

/// Timestamp units for an interface (inverse of the reader's conversion).
pub fn ts_units(ts_ns: i64, tsresol: Option<u8>, tsoffset: i64) -> u64 {
    let ns = i128::from(ts_ns) - i128::from(tsoffset) * 1_000_000_000;
    let code = tsresol.unwrap_or(6);
    let n = u32::from(code & 0x7F);
    if code & 0x80 != 0 {
        ((ns << n) / 1_000_000_000) as u64
    } else {
        (ns * 10i128.pow(n) / 1_000_000_000) as u64
    }
}

pub fn epb(iface: u32, units: u64, data: &[u8], wirelen: Option<u32>, big: bool) -> Vec<u8> {
    let head = [
        u32b(iface, big),
        u32b((units >> 32) as u32, big),
        u32b(units as u32, big),
        u32b(data.len() as u32, big),
        u32b(wirelen.unwrap_or(data.len() as u32), big),
    ]
    .concat();
    block(6, &[&head[..], data].concat(), big)
}

pub fn epb1(iface: u32, units: u64, data: &[u8]) -> Vec<u8> {
    epb(iface, units, data, None, false)
}

pub fn opb(iface: u16, units: u64, data: &[u8], big: bool) -> Vec<u8> {
    let head = [
        &u16b(iface, big)[..],
        &u16b(0, big),
        &u32b((units >> 32) as u32, big),
        &u32b(units as u32, big),
        &u32b(data.len() as u32, big),
        &u32b(data.len() as u32, big),
    ]
    .concat();
    block(2, &[&head[..], data].concat(), big)
}

pub fn spb(data: &[u8], big: bool) -> Vec<u8> {
    block(3, &[&u32b(data.len() as u32, big)[..], data].concat(), big)
}

/// IPv4 fragments (Ethernet frames) of `tcp`'s IP packet, `size` payload bytes each (scapy's
/// `fragment`).
pub fn v4_fragments(tcp: &Tcp, size: usize) -> Vec<Vec<u8>> {
    let (IpAddr::V4(s), IpAddr::V4(d)) = (tcp.src, tcp.dst) else {
        panic!("IPv4 only")
    };
    let payload = tcp.segment();
    let chunks: Vec<&[u8]> = payload.chunks(size).collect();
    chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let more = if i + 1 < chunks.len() { 0x2000 } else { 0 };
            let frag = more | (i * size / 8) as u16;
            link(
                &ipv4(6, s.octets(), d.octets(), tcp.ident, frag, &[], chunk),
                "ether",
            )
        })
        .collect()
}

/// IPv6 fragments (Ethernet frames): `unfrag` extension bytes are repeated in each fragment
/// before the fragment header; `first` is the header after it; `part` the fragmentable part.
pub fn v6_fragments(
    src: &str,
    dst: &str,
    ident: u32,
    first: u8,
    part: &[u8],
    size: usize,
) -> Vec<Vec<u8>> {
    let chunks: Vec<&[u8]> = part.chunks(size).collect();
    chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let more = u16::from(i + 1 < chunks.len());
            let offflags = ((i * size) as u16) | more;
            let mut body = vec![first, 0];
            body.extend_from_slice(&offflags.to_be_bytes());
            body.extend_from_slice(&ident.to_be_bytes());
            body.extend_from_slice(chunk);
            link(&ipv6(44, v6addr(src), v6addr(dst), &body), "ether")
        })
        .collect()
}

/// A segment, owned.
#[derive(Clone, Debug, PartialEq)]
pub struct Seg {
    pub frame: u64,
    pub ts: i64,
    pub src: IpAddr,
    pub sport: u16,
    pub dst: IpAddr,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload: Vec<u8>,
    pub missing: u32,
}

impl From<&Segment<'_>> for Seg {
    fn from(s: &Segment) -> Seg {
        Seg {
            frame: s.frame,
            ts: s.ts,
            src: s.src,
            sport: s.sport,
            dst: s.dst,
            dport: s.dport,
            seq: s.seq,
            ack: s.ack,
            flags: s.flags,
            payload: s.payload.to_vec(),
            missing: s.missing,
        }
    }
}

/// What reading one capture gave.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub segs: Vec<Seg>,
    pub info: CaptureInfo,
    pub findings: Vec<Finding>,
    pub error: Option<String>,
    /// The TLS key logs of Decryption Secrets Blocks.
    pub secrets: Vec<Vec<u8>>,
}

impl Outcome {
    pub fn codes(&self) -> Vec<&'static str> {
        self.findings.iter().map(|f| f.code).collect()
    }

    pub fn payloads(&self) -> Vec<Vec<u8>> {
        self.segs.iter().map(|s| s.payload.clone()).collect()
    }

    pub fn frames(&self) -> Vec<u64> {
        self.segs.iter().map(|s| s.frame).collect()
    }
}

/// A finding's field.
pub fn field(f: &Finding, name: &str) -> Option<Value> {
    f.fields
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.clone())
}

/// Reads `data` fed in pieces of `chunk` bytes (0: all at once), then finishes, then the sink's
/// summaries.
pub fn read_chunked(data: &[u8], chunk: usize, read_error: Option<&str>) -> Outcome {
    let mut reader = CaptureReader::new("test.pcap", None);
    let mut sink = FindingSink::default();
    let mut segs = Vec::new();
    let mut on_segment = |s: &Segment, _: &mut FindingSink| segs.push(Seg::from(s));
    let mut error = None;
    let mut secrets = Vec::new();
    let pieces: Vec<&[u8]> = if chunk == 0 {
        vec![data]
    } else {
        data.chunks(chunk).collect()
    };
    for piece in pieces {
        if let Err(e) = reader.feed(piece, &mut sink, &mut on_segment) {
            error = Some(e);
            break;
        }
        secrets.extend(reader.take_secrets());
    }
    if error.is_none() {
        error = reader.finish(read_error, &mut sink, &mut on_segment).err();
    }
    secrets.extend(reader.take_secrets());
    sink.finish();
    Outcome {
        segs,
        info: reader.info().clone(),
        findings: sink.drain(),
        error,
        secrets,
    }
}

/// Reads `data` at once, and checks that feeding it byte by byte gives the same.
pub fn read(data: &[u8]) -> Outcome {
    let whole = read_chunked(data, 0, None);
    assert_eq!(
        read_chunked(data, 1, None),
        whole,
        "byte-by-byte feeding differs"
    );
    whole
}

/// A pcapng capture with two sections (both byte orders), EPB, SPB and OPB, three link types.
pub fn pcapng_sample() -> Vec<u8> {
    [
        shb(false),
        idb(1, Some(9), 0, 0, false),
        idb(113, Some(0x80 | 20), 0, 0, false),
        epb1(0, 5, &Tcp::new(1, b"one").frame()),
        spb(&Tcp::new(2, b"two").frame(), false),
        opb(1, 7, &link(&Tcp::new(3, b"three").ip(), "sll"), false),
        shb(true),
        idb(101, None, 0, 0, true),
        epb(0, 9, &link(&Tcp::new(4, b"four").ip(), "raw"), None, true),
    ]
    .concat()
}
