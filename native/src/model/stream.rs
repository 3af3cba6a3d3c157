//! A stream's bytes as reassembly hands them on: chunks of contiguous in-order bytes of one
//! direction, and gaps where the capture lacks some (the contract between tcp/, the session and
//! the decoders).

use super::Direction;

/// Contiguous in-order bytes of one direction, as carried by one frame (frame and time are None
/// for raw dumps).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Chunk<'a> {
    pub direction: Direction,
    pub offset: u64,
    pub data: &'a [u8],
    pub frame: Option<u64>,
    pub ts: Option<i64>,
}

/// A Chunk that owns its bytes (held while detection waits, or decrypted by the TLS layer).
#[derive(Clone, Debug, PartialEq)]
pub struct OwnedChunk {
    pub direction: Direction,
    pub offset: u64,
    pub data: Vec<u8>,
    pub frame: Option<u64>,
    pub ts: Option<i64>,
}

impl OwnedChunk {
    pub fn of(chunk: &Chunk<'_>) -> Self {
        OwnedChunk {
            direction: chunk.direction,
            offset: chunk.offset,
            data: chunk.data.to_vec(),
            frame: chunk.frame,
            ts: chunk.ts,
        }
    }

    pub fn borrow(&self) -> Chunk<'_> {
        Chunk {
            direction: self.direction,
            offset: self.offset,
            data: &self.data,
            frame: self.frame,
            ts: self.ts,
        }
    }

    /// The part from byte `at` on, with its stream offset.
    pub fn from(&self, at: usize) -> Self {
        OwnedChunk {
            offset: self.offset.saturating_add(at as u64),
            data: self.data[at..].to_vec(),
            ..self.clone()
        }
    }

    /// Stream offsets come from TCP (below 2^63) or, for raw dumps, from Python: they saturate.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.data.len() as u64)
    }
}

/// Bytes of one direction the capture does not have; the decoder resynchronises after them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gap {
    pub direction: Direction,
    pub offset: u64,
    pub length: u64,
    pub frame: Option<u64>,
    pub ts: Option<i64>,
}

impl Gap {
    /// Where the bytes resume (saturating, as `OwnedChunk::end`).
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.length)
    }
}
