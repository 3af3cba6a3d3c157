//! Stream bytes the session keeps while a stream's protocol is undecided, or hands on to Python:
//! owned copies of the reassembler's Chunk and Gap (their frame and time are None for raw dumps).

use crate::decoders::{Chunk, Gap};
use crate::model::Direction;

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
            offset: self.offset + at as u64,
            data: self.data[at..].to_vec(),
            ..self.clone()
        }
    }

    pub fn end(&self) -> u64 {
        self.offset + self.data.len() as u64
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Held {
    Chunk(OwnedChunk),
    Gap(Gap),
}
