//! Capture reading: pcap/pcapng bytes in (fed in any pieces, sans-IO), TCP segments out.
//!
//! `CaptureReader::feed` parses every complete record in what it was given so far, walks the link,
//! IP (with defragmentation) and TCP headers, and hands each TCP segment to a callback. Findings go
//! to the caller's `FindingSink` as they occur.

mod bytes;
mod defrag;
mod gzip;
mod inflate;
mod input;
mod ip;
mod link;
mod packet;
mod pcap;
mod pcapng;
mod reader;
mod report;
pub mod route;
pub mod split;
mod tcp_header;
#[cfg(test)]
mod testkit;
mod zstd;

pub use input::{CaptureInput, INFLATED};
pub use reader::CaptureReader;

use std::net::IpAddr;

/// TCP flag bits.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// One TCP segment as captured. `payload` is what the capture holds; `missing` is how many payload
/// bytes the IP header announces beyond it (snaplen). A defragmented datagram carries the frame and
/// timestamp of the fragment that completed it.
#[derive(Clone, Debug)]
pub struct Segment<'a> {
    pub frame: u64,
    pub ts: i64,
    pub src: IpAddr,
    pub sport: u16,
    pub dst: IpAddr,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload: &'a [u8],
    pub missing: u32,
}

/// What one capture input held, for summaries (CaptureInfo in the record contract).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CaptureInfo {
    /// "pcap" or "pcapng" once recognised, else "".
    pub format: &'static str,
    pub packets: u64,
    pub tcp_packets: u64,
    pub non_tcp_packets: u64,
    /// Captured bytes of all packets.
    pub bytes: u64,
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    /// Sorted, distinct.
    pub link_types: Vec<u32>,
    pub truncated: bool,
    pub error: Option<String>,
}
