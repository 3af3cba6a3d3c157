//! The TCP header: ports, sequence numbers, flags and where the payload starts (sliced by
//! etherparse, whose checks come in the order the findings need).

use std::net::IpAddr;

use etherparse::err::tcp::{HeaderError, HeaderSliceError};
use etherparse::TcpHeaderSlice;

use super::packet::{Packet, Verdict};
use super::Segment;

/// The segment in `data` (the captured bytes from the TCP header on) goes to `p.on_segment`;
/// `missing` bytes after `data` were not captured. A TCP packet, whatever its header holds.
pub(super) fn segment(
    p: &mut Packet,
    data: &[u8],
    missing: u64,
    src: IpAddr,
    dst: IpAddr,
) -> Verdict {
    let header = match TcpHeaderSlice::from_slice(data) {
        Ok(header) => header,
        Err(HeaderSliceError::Content(HeaderError::DataOffsetTooSmall { data_offset })) => {
            let doff = u32::from(data_offset) * 4;
            p.tcp_malformed(format_args!(
                "TCP data offset {doff} is shorter than the header"
            ));
            return Verdict::Tcp;
        }
        Err(HeaderSliceError::Len(_)) => {
            short(p, data, missing);
            return Verdict::Tcp;
        }
    };
    if missing > 0 {
        p.snaplen(format_args!("{missing} bytes of its TCP payload"));
    }
    let flags = header.slice().get(13).copied().unwrap_or(0);
    let payload = data.get(header.slice().len()..).unwrap_or_default();
    (p.on_segment)(
        &Segment {
            frame: p.frame,
            ts: p.ts,
            src,
            sport: header.source_port(),
            dst,
            dport: header.destination_port(),
            seq: header.sequence_number(),
            ack: header.acknowledgment_number(),
            flags,
            payload,
            missing: u32::try_from(missing).unwrap_or(u32::MAX),
        },
        p.sink,
    );
    Verdict::Tcp
}

/// A TCP header that ends early: the snaplen's fault when its missing part was not captured.
fn short(p: &mut Packet, data: &[u8], missing: u64) {
    if data.len() < 20 {
        if missing > 0 {
            p.snaplen("its TCP header");
        } else {
            p.tcp_malformed(format_args!("TCP header of {} bytes", data.len()));
        }
        return;
    }
    let doff = u64::from(data.get(12).copied().unwrap_or(0) >> 4) * 4;
    if doff <= (data.len() as u64).saturating_add(missing) {
        p.snaplen("its TCP options");
    } else {
        p.tcp_malformed(format_args!("TCP data offset {doff} exceeds the segment"));
    }
}
