//! TCP reassembly: segments in, per-direction ordered byte chunks and explicit gaps out.
//!
//! Per connection and direction we keep the next stream offset to deliver and, only when segments
//! arrive out of order, a sorted map of pending pieces. Sequence numbers are unwrapped into
//! unbounded offsets (32-bit modular arithmetic, so a stream may cross 2^32). Bytes seen twice:
//! `first` (default, like Wireshark and Zeek) keeps the first copy; `last` keeps the latest, holding
//! in-order bytes until the peer acknowledges them. A copy whose bytes differ is a
//! `tcp.overlap-conflict` finding naming both frames. Missing bytes are never zero-filled: they
//! become a `Gap` and a `tcp.gap` finding.
//!
//! An ACK proves that bytes existed on the wire, not that the capture lacks them: captures from
//! multi-queue NICs, SPAN ports and merged files put segments after the ACK that covers them. So a
//! hole the peer acknowledged waits a reorder window (`reorder_packets` capture packets or
//! `reorder_ns` of capture time, `reorder_bytes` bytes held) before it is declared a gap; a late segment that arrives within it
//! fills the hole. Both directions reach the consumer in the order the ACKs prove (causal.rs), so a
//! decoder sees a request before the response that answers it whatever the file's order.

mod causal;
#[cfg(any(test, fuzzing))]
pub mod fuzz;
mod graves;
mod half;
mod reassembler;
mod seq;
#[cfg(test)]
mod tests;

pub use reassembler::Reassembler;

use crate::model::{Direction, Finding, Value};

/// What one connection was, as the reassembler saw it (StreamInfo in the record contract).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamInfo {
    pub stream: u64,
    pub client: String,
    pub server: String,
    pub client_port: u16,
    pub server_port: u16,
    /// How the client side was chosen: syn | port | first.
    pub client_by: &'static str,
    pub first_ts: i64,
    pub last_ts: i64,
    pub first_frame: u64,
    pub last_frame: u64,
    pub packets_c2s: u64,
    pub packets_s2c: u64,
    pub bytes_c2s: u64,
    pub bytes_s2c: u64,
    pub gaps: u64,
    pub gap_bytes: u64,
    pub retransmissions: u64,
    pub out_of_order: u64,
    pub conflicts: u64,
    pub handshake: bool,
    pub midstream: bool,
    pub fin_c2s: bool,
    pub fin_s2c: bool,
    pub reset: bool,
    pub port_reuse: bool,
    /// The protocol decided for the stream (`unknown` when none was), set by the decoding side.
    pub protocol: Option<&'static str>,
    /// A TLS stream's `version`, `cipher_suite`, `sni`, `alpn` and `decrypted`, set by the
    /// decoding side (or, for `streams`, by reading the handshake alone: pipeline/hellos.rs).
    pub tls: Option<Value>,
    /// Nothing of the stream comes after this summary in the run (no event of it waits for its
    /// fate, no lane of the report's timeline may still change): a consumer may fold it now. Set
    /// by the decoding side; not part of the record.
    pub settled: bool,
}

/// The reassembler's output, in the order a consumer must see it.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Contiguous in-order bytes of one direction, as carried by one frame.
    Chunk {
        stream: u64,
        direction: Direction,
        offset: u64,
        data: Vec<u8>,
        frame: u64,
        ts: i64,
    },
    /// Bytes the capture does not have; the consumer must resynchronise. `frame`/`ts` are those of
    /// the packet that revealed the gap.
    Gap {
        stream: u64,
        direction: Direction,
        offset: u64,
        length: u64,
        frame: u64,
        ts: i64,
    },
    Finding(Finding),
    /// A connection is finished (closed and flushed, evicted, or the capture ended).
    End(Box<StreamInfo>),
}

impl Event {
    /// A Chunk event as the decoders' view of it, with its stream.
    pub fn as_chunk(&self) -> Option<(u64, crate::model::Chunk<'_>)> {
        match self {
            Event::Chunk {
                stream,
                direction,
                offset,
                data,
                frame,
                ts,
            } => Some((
                *stream,
                crate::model::Chunk {
                    direction: *direction,
                    offset: *offset,
                    data,
                    frame: Some(*frame),
                    ts: Some(*ts),
                },
            )),
            _ => None,
        }
    }

    /// A Gap event as the decoders' view of it, with its stream.
    pub fn as_gap(&self) -> Option<(u64, crate::model::Gap)> {
        match self {
            Event::Gap {
                stream,
                direction,
                offset,
                length,
                frame,
                ts,
            } => Some((
                *stream,
                crate::model::Gap {
                    direction: *direction,
                    offset: *offset,
                    length: *length,
                    frame: Some(*frame),
                    ts: Some(*ts),
                },
            )),
            _ => None,
        }
    }
}

/// The server's port of a connection between `a_port` and `b_port`, told by the ports alone: the one
/// among the well-known server `ports` (the protocols' and --decode-as ones), else the one below
/// 1024 against one above; None when the ports do not tell (both or neither qualify).
pub fn server_port(a_port: u16, b_port: u16, ports: &[u16]) -> Option<u16> {
    if ports.contains(&a_port) != ports.contains(&b_port) {
        Some(if ports.contains(&a_port) {
            a_port
        } else {
            b_port
        })
    } else if (a_port < 1024) != (b_port < 1024) {
        Some(a_port.min(b_port))
    } else {
        None
    }
}

/// Limits and policy. Every bound here keeps memory finite whatever the capture holds.
#[derive(Clone, Debug)]
pub struct Config {
    /// Well-known server ports (the protocols' and --decode-as ones): decide the client side.
    pub server_ports: Vec<u16>,
    /// `--overlap last`: the latest copy of bytes sent twice wins.
    pub last_wins: bool,
    /// Produce Chunk events (false: only account, for stream summaries).
    pub emit_data: bool,
    /// Bytes pending out of order per direction before delivering over the holes.
    pub max_pending: usize,
    /// Segments pending per direction (bounds the cost of each insertion too).
    pub max_segments: usize,
    /// Delivered bytes kept per direction to compare retransmissions against.
    pub history: usize,
    pub idle_timeout_ns: i64,
    /// How long (capture time) a closed connection stays for late packets before it is finished.
    pub close_grace_ns: i64,
    pub max_connections: usize,
    pub sweep_every: u32,
    /// Capture packets an acknowledged hole waits for its late segment before it becomes a gap.
    pub reorder_packets: u64,
    /// ... or capture time (a slow live capture should not wait thousands of packets).
    pub reorder_ns: i64,
    /// Bytes held (both directions of the connection) while a hole waits, before it becomes a gap.
    pub reorder_bytes: usize,
    /// How streams are numbered (a task decoding some of a capture's connections cannot count).
    pub ids: StreamIds,
}

/// A stream's id.
#[derive(Clone, Debug, Default)]
pub enum StreamIds {
    /// The next number, in the order streams open (the whole capture in one pipeline).
    #[default]
    Counter,
    /// The frame that opened it (unique in its capture): a first pass over some of a capture's
    /// connections tells which frames open streams.
    Frames,
    /// The rank of the frame that opened it among the opening frames of every stream of the
    /// capture (sorted, found by a `Frames` pass): the ids `Counter` gives the whole capture.
    Ranks(std::sync::Arc<[u64]>),
}

impl StreamIds {
    /// The id of a stream opened at `frame`. A frame `Ranks` does not list (its pass saw another
    /// capture) gets an id past every rank, unique as its frame is.
    fn of_frame(&self, frame: u64) -> Option<u64> {
        match self {
            StreamIds::Counter => None,
            StreamIds::Frames => Some(frame),
            StreamIds::Ranks(frames) => Some(match frames.binary_search(&frame) {
                Ok(rank) => rank as u64,
                Err(_) => (frames.len() as u64).saturating_add(frame),
            }),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            server_ports: Vec::new(),
            last_wins: false,
            emit_data: true,
            max_pending: 4 << 20,
            max_segments: 4096,
            history: 32 << 10,
            idle_timeout_ns: 600_000_000_000,
            close_grace_ns: 5_000_000_000,
            max_connections: 50_000,
            sweep_every: 8192,
            reorder_packets: 2048,
            reorder_ns: 1_000_000_000,
            reorder_bytes: 2 << 20,
            ids: StreamIds::Counter,
        }
    }
}
