//! One capture input as the core reads it: its bytes, inflated first when they are gzip, into the
//! capture reader. A damaged gzip stream ends the input like a read error: every packet before the
//! damage is kept and the reader reports where it stopped, with the reason.

use super::gzip::Gunzip;
use super::{CaptureInfo, CaptureReader, Segment};
use crate::model::FindingSink;

pub struct CaptureInput {
    gunzip: Option<Gunzip>,
    /// Why decompression stopped, if it did (later bytes are ignored).
    damaged: Option<String>,
    reader: CaptureReader,
}

impl CaptureInput {
    /// `compression`: Some("gzip") when the input starts with the gzip magic (the core inflates
    /// it); another name when the caller already decompressed the bytes (for messages).
    pub fn new(name: &str, compression: Option<&str>) -> Self {
        CaptureInput {
            gunzip: (compression == Some("gzip")).then(Gunzip::default),
            damaged: None,
            reader: CaptureReader::new(name, compression),
        }
    }

    pub fn info(&self) -> &CaptureInfo {
        self.reader.info()
    }

    /// See `CaptureReader::feed`.
    pub fn feed(
        &mut self,
        data: &[u8],
        sink: &mut FindingSink,
        on_segment: &mut dyn FnMut(&Segment, &mut FindingSink),
    ) -> Result<(), String> {
        let Some(gunzip) = self.gunzip.as_mut() else {
            return self.reader.feed(data, sink, on_segment);
        };
        if self.damaged.is_some() {
            return Ok(());
        }
        let reader = &mut self.reader;
        let mut result = Ok(());
        let inflated = gunzip.feed(data, &mut |piece| {
            if result.is_ok() {
                result = reader.feed(piece, sink, on_segment);
            }
        });
        if let Err(why) = inflated {
            self.damaged = Some(why);
        }
        result
    }

    /// See `CaptureReader::finish`; a gzip stream cut or damaged is the read error.
    pub fn finish(
        &mut self,
        read_error: Option<&str>,
        sink: &mut FindingSink,
        on_segment: &mut dyn FnMut(&Segment, &mut FindingSink),
    ) -> Result<(), String> {
        let ended = self.gunzip.as_ref().and_then(|g| g.finish().err());
        let why = self.damaged.clone().or(ended);
        self.reader
            .finish(read_error.or(why.as_deref()), sink, on_segment)
    }
}
