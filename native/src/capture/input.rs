//! One capture input as the core reads it: its bytes, inflated first when they are gzip or zstd,
//! into the capture reader. A damaged or cut compressed stream ends the input like a read error:
//! every packet before the damage is kept and the reader reports where it stopped, with the reason.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "the staging buffer is emptied once it holds CHUNK bytes, so it never holds more"
)]

use super::gzip::Gunzip;
use super::inflate::Inflate;
use super::zstd::Unzstd;
use super::{CaptureInfo, CaptureReader, Segment};
use crate::model::FindingSink;

/// Compressed bytes go to the decompressor this many at a time.
const CHUNK: usize = 64 << 10;

/// The compressions the core undoes itself (the caller tells which by the input's magic bytes).
pub const INFLATED: [&str; 2] = ["gzip", "zstd"];

pub struct CaptureInput {
    inflater: Option<Box<dyn Inflate + Send + Sync>>,
    /// Why decompression stopped, if it did (later bytes are ignored).
    damaged: Option<String>,
    /// The reader already refused the input (its error stays the same at the end).
    unusable: bool,
    /// Compressed bytes waiting to make up the next chunk.
    staged: Vec<u8>,
    reader: CaptureReader,
}

impl CaptureInput {
    /// `compression`: one of `INFLATED` when the input starts with its magic (the core inflates
    /// it); another name when the caller already decompressed the bytes (for messages).
    pub fn new(name: &str, compression: Option<&str>) -> Self {
        let (inflater, damaged): (Option<Box<dyn Inflate + Send + Sync>>, _) = match compression {
            Some("gzip") => (Some(Box::new(Gunzip::default())), None),
            Some("zstd") => match Unzstd::new() {
                Ok(z) => (Some(Box::new(z)), None),
                Err(why) => (None, Some(why)),
            },
            _ => (None, None),
        };
        CaptureInput {
            inflater,
            damaged,
            unusable: false,
            staged: Vec::new(),
            reader: CaptureReader::new(name, compression),
        }
    }

    pub fn info(&self) -> &CaptureInfo {
        self.reader.info()
    }

    /// See `CaptureReader::set_first_frame`.
    pub fn set_first_frame(&mut self, frame: u64) {
        self.reader.set_first_frame(frame);
    }

    /// The reader itself, for what only uncompressed inputs do: routing a split of a file and
    /// reading routed packets back (capture/route.rs), where offsets are the file's.
    pub fn reader(&mut self) -> &mut CaptureReader {
        &mut self.reader
    }

    /// See `CaptureReader::take_secrets`.
    pub fn take_secrets(&mut self) -> Vec<Vec<u8>> {
        self.reader.take_secrets()
    }

    /// See `CaptureReader::feed`. Compressed bytes go to the decompressor in fixed chunks whatever
    /// the reads were: where it notices damage, and what it inflated before, then never depend
    /// on how the input arrived (the same capture reads the same from a file or a pipe).
    pub fn feed(
        &mut self,
        data: &[u8],
        sink: &mut FindingSink,
        on_segment: &mut dyn FnMut(&Segment, &mut FindingSink),
    ) -> Result<(), String> {
        if self.inflater.is_none() {
            return self.reader.feed(data, sink, on_segment);
        }
        let mut data = data;
        while !data.is_empty() {
            let take = (CHUNK - self.staged.len()).min(data.len());
            self.staged.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.staged.len() == CHUNK {
                let chunk = std::mem::take(&mut self.staged);
                let result = self.inflate(&chunk, sink, on_segment);
                self.staged = chunk;
                self.staged.clear();
                result?;
            }
        }
        Ok(())
    }

    fn inflate(
        &mut self,
        chunk: &[u8],
        sink: &mut FindingSink,
        on_segment: &mut dyn FnMut(&Segment, &mut FindingSink),
    ) -> Result<(), String> {
        let Some(inflater) = self.inflater.as_mut().filter(|_| self.damaged.is_none()) else {
            return Ok(());
        };
        let reader = &mut self.reader;
        let mut result = Ok(());
        let inflated = inflater.feed(chunk, &mut |piece| {
            if result.is_ok() {
                result = reader.feed(piece, sink, on_segment);
            }
        });
        if let Err(why) = inflated {
            self.damaged = Some(why);
        }
        self.unusable |= result.is_err();
        result
    }

    /// See `CaptureReader::finish`; a compressed stream cut or damaged is the read error.
    pub fn finish(
        &mut self,
        read_error: Option<&str>,
        sink: &mut FindingSink,
        on_segment: &mut dyn FnMut(&Segment, &mut FindingSink),
    ) -> Result<(), String> {
        let staged = std::mem::take(&mut self.staged);
        if !staged.is_empty() {
            self.inflate(&staged, sink, on_segment)?;
        }
        let ended = self.inflater.as_ref().and_then(|i| i.finish().err());
        let why = self.damaged.clone().or(ended);
        let result = self
            .reader
            .finish(read_error.or(why.as_deref()), sink, on_segment);
        match (result, why) {
            // the capture is unusable because its compressed file is: say so
            (Err(message), Some(why)) if !self.unusable && !message.contains(&why) => {
                Err(format!("{message} ({why})"))
            }
            (result, _) => result,
        }
    }
}
