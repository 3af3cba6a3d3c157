//! Courier decoder (being ported from wirelog/decoders/courier/).

use super::{Chunk, Decoder, Gap, Shared as AllShared, StreamContext};
use crate::model::Record;

/// State shared by the courier connections of one capture.
#[derive(Debug, Default)]
pub struct Shared {}

pub struct CourierDecoder {
    _ctx: StreamContext,
}

impl CourierDecoder {
    pub fn new(ctx: StreamContext) -> Self {
        CourierDecoder { _ctx: ctx }
    }
}

impl Decoder for CourierDecoder {
    fn feed(&mut self, _chunk: &Chunk<'_>, _shared: &mut AllShared, _out: &mut Vec<Record>) {}
    fn gap(&mut self, _gap: &Gap, _shared: &mut AllShared, _out: &mut Vec<Record>) {}
    fn close(&mut self, _shared: &mut AllShared, _out: &mut Vec<Record>) {}
}
