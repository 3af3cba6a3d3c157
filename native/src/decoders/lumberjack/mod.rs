//! Lumberjack decoder (being ported from wirelog/decoders/lumberjack/).

use super::{Chunk, Decoder, Gap, Shared as AllShared, StreamContext};
use crate::model::Record;

/// State shared by the lumberjack connections of one capture.
#[derive(Debug, Default)]
pub struct Shared {}

pub struct LumberjackDecoder {
    _ctx: StreamContext,
}

impl LumberjackDecoder {
    pub fn new(ctx: StreamContext) -> Self {
        LumberjackDecoder { _ctx: ctx }
    }
}

impl Decoder for LumberjackDecoder {
    fn feed(&mut self, _chunk: &Chunk<'_>, _shared: &mut AllShared, _out: &mut Vec<Record>) {}
    fn gap(&mut self, _gap: &Gap, _shared: &mut AllShared, _out: &mut Vec<Record>) {}
    fn close(&mut self, _shared: &mut AllShared, _out: &mut Vec<Record>) {}
}
