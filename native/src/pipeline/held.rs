//! Stream bytes the session keeps while a stream's protocol is undecided: owned copies of the
//! reassembler's Chunk and Gap (their frame and time are None for raw dumps).

use crate::decoders::Gap;
pub use crate::decoders::OwnedChunk;

#[derive(Clone, Debug, PartialEq)]
pub enum Held {
    Chunk(OwnedChunk),
    Gap(Gap),
}
