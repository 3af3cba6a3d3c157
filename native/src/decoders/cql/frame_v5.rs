//! CQL v5 frames ("segments", reference/cql.md §2-4): little-endian headers protected by a CRC24,
//! a payload, and a CRC32 trailer over the payload as transmitted. CRC frame = 3 header bytes +
//! CRC24 (6); LZ4 frame = 5 header bytes + CRC24 (8). An LZ4 frame with uncompressed length 0
//! carries its payload stored raw.

use crc::{Algorithm, Crc, Table, CRC_32_ISO_HDLC};

/// 17-bit length fields.
pub const MAX_PAYLOAD: usize = (1 << 17) - 1;
pub const CRC_HEADER: usize = 6;
pub const LZ4_HEADER: usize = 8;
pub const TRAILER: usize = 4;

/// Cassandra's CRC24 (Koopman's polynomial 0x974F0B, register init 0x875060, MSB-first, no final
/// XOR); the header bytes are fed in wire order.
const CRC24: Crc<u32> = Crc::<u32>::new(&Algorithm {
    width: 24,
    poly: 0x97_4F0B,
    init: 0x87_5060,
    refin: false,
    refout: false,
    xorout: 0,
    check: 0x4B_3F02,
    residue: 0,
});
/// Standard zlib CRC-32, "primed" by feeding these four bytes before the payload. Slice-by-16:
/// every byte of every v5 frame goes through it (the byte-at-a-time table was 5 % of a conversion).
const CRC32: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISO_HDLC);
const CRC32_PRIMER: [u8; 4] = [0xFA, 0x2D, 0x55, 0xCA];

pub fn crc24(data: &[u8]) -> u32 {
    CRC24.checksum(data)
}

pub fn crc32(payload: &[u8]) -> u32 {
    let mut d = CRC32.digest();
    d.update(&CRC32_PRIMER);
    d.update(payload);
    d.finalize()
}

pub fn header_size(lz4: bool) -> usize {
    if lz4 {
        LZ4_HEADER
    } else {
        CRC_HEADER
    }
}

/// A decoded frame header and its CRC24s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub lz4: bool,
    pub payload_length: usize,
    /// LZ4 frames only; 0 = stored raw (always 0 for CRC frames).
    pub uncompressed_length: usize,
    pub self_contained: bool,
    /// The unused high header bits, written as 0.
    pub padding: u8,
    pub stored_crc24: u32,
    pub computed_crc24: u32,
}

impl FrameHeader {
    pub fn size(&self) -> usize {
        header_size(self.lz4)
    }

    /// Bytes on the wire: header + payload + CRC32 trailer.
    #[allow(
        clippy::arithmetic_side_effects,
        reason = "a 17-bit payload length plus at most 12 bytes"
    )]
    pub fn total(&self) -> usize {
        self.size() + self.payload_length + TRAILER
    }

    pub fn crc_ok(&self) -> bool {
        self.stored_crc24 == self.computed_crc24
    }

    /// (stored, computed) CRC32 of the complete frame at the start of `frame`.
    pub fn trailer_crc32(&self, frame: &[u8]) -> (u32, u32) {
        let (payload, trailer) = frame[self.size()..].split_at(self.payload_length);
        let stored = u32::from_le_bytes(*trailer.first_chunk().expect("a complete frame"));
        (stored, crc32(payload))
    }
}

/// Decode the header at the start of `data` (None when it is shorter than the header).
pub fn parse_header(data: &[u8], lz4: bool) -> Option<FrameHeader> {
    let n = if lz4 { 5 } else { 3 };
    let (bits, crc) = data.get(..header_size(lz4))?.split_at(n);
    let mut le = [0u8; 8];
    le[..n].copy_from_slice(bits);
    let value = u64::from_le_bytes(le);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], 0]);
    let mask = MAX_PAYLOAD as u64;
    // the self-contained flag's bit, and the padding's above it
    let (uncompressed, sc_bit, padding_bit) = if lz4 {
        ((value >> 17) & mask, 34, 35)
    } else {
        (0, 17, 18)
    };
    Some(FrameHeader {
        lz4,
        payload_length: (value & mask) as usize,
        uncompressed_length: uncompressed as usize,
        self_contained: value >> sc_bit & 1 == 1,
        padding: (value >> padding_bit) as u8,
        stored_crc24: stored,
        computed_crc24: crc24(bits),
    })
}

/// The first offset >= `start` where a header of the given kind could begin: the padding bits
/// above the self-contained flag are written as 0, so its last header byte is small.
pub fn next_candidate(data: &[u8], start: usize, lz4: bool) -> Option<usize> {
    let (last, max) = if lz4 { (4, 0x07) } else { (2, 0x03) };
    data.get(start.checked_add(last)?..)?
        .iter()
        .position(|&b| b <= max)
        .and_then(|i| i.checked_add(start))
}

/// Header bytes including the CRC24.
#[cfg(any(test, fuzzing))]
pub fn encode_header(
    payload: usize,
    uncompressed: usize,
    self_contained: bool,
    lz4: bool,
) -> Vec<u8> {
    let sc = u64::from(self_contained);
    let (value, n) = if lz4 {
        (payload as u64 | (uncompressed as u64) << 17 | sc << 34, 5)
    } else {
        (payload as u64 | sc << 17, 3)
    };
    let mut out = value.to_le_bytes()[..n].to_vec();
    let c = crc24(&out);
    out.extend_from_slice(&c.to_le_bytes()[..3]);
    out
}

/// One frame holding `payload`; LZ4 frames store it raw unless compressing makes it smaller.
#[cfg(any(test, fuzzing))]
pub fn encode_frame(payload: &[u8], self_contained: bool, lz4: bool) -> Vec<u8> {
    let packed = if lz4 {
        lz4_flex::block::compress(payload)
    } else {
        Vec::new()
    };
    let (body, uncompressed) = if lz4 && packed.len() < payload.len() {
        (&packed[..], payload.len())
    } else {
        (payload, 0)
    };
    let mut out = encode_header(body.len(), uncompressed, self_contained, lz4);
    out.extend_from_slice(body);
    out.extend_from_slice(&crc32(body).to_le_bytes());
    out
}
