//! zstd frames inflated as their bytes arrive, through libzstd's streaming decoder (the `zstd`
//! crate, the one arrow-rs uses): output in pieces of at most `PIECE` bytes (memory bounded
//! whatever the ratio), and a stream that stops inside a frame is reported as truncated.

use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

use super::inflate::Inflate;

const PIECE: usize = 256 << 10;

pub struct Unzstd {
    decoder: Decoder<'static>,
    piece: Vec<u8>,
    /// Inside a frame: more input is needed to finish it.
    in_frame: bool,
}

impl Unzstd {
    pub fn new() -> Result<Self, String> {
        let decoder = Decoder::new().map_err(|e| format!("ZstdError: {e}"))?;
        Ok(Unzstd {
            decoder,
            piece: vec![0; PIECE],
            in_frame: false,
        })
    }
}

impl Inflate for Unzstd {
    fn feed(&mut self, input: &[u8], out: &mut dyn FnMut(&[u8])) -> Result<(), String> {
        let mut source = InBuffer::around(input);
        loop {
            let (hint, made) = {
                let mut target = OutBuffer::around(&mut self.piece[..]);
                let hint = self
                    .decoder
                    .run(&mut source, &mut target)
                    // one text whatever libzstd's detail (it depends on where the input was split)
                    .map_err(|_| {
                        "ZstdError: zstd decompress error: invalid zstd data".to_owned()
                    })?;
                (hint, target.pos())
            };
            if made > 0 {
                out(&self.piece[..made]);
            }
            self.in_frame = hint != 0;
            if source.pos == input.len() && made < self.piece.len() {
                return Ok(());
            }
        }
    }

    fn finish(&self) -> Result<(), String> {
        if self.in_frame {
            return Err(
                "zstd: the compressed file is truncated (it ends inside a frame)".to_owned(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inflate_in(pieces: &[&[u8]]) -> (Vec<u8>, Result<(), String>) {
        let mut z = Unzstd::new().unwrap();
        let mut out = Vec::new();
        for p in pieces {
            if let Err(e) = z.feed(p, &mut |b| out.extend_from_slice(b)) {
                return (out, Err(e));
            }
        }
        let end = z.finish();
        (out, end)
    }

    #[test]
    fn frames_any_split_and_truncation() {
        let data: Vec<u8> = (0..600_000u32).map(|i| (i % 253) as u8).collect();
        let mut file = zstd::stream::encode_all(&data[..1000], 3).unwrap();
        file.extend(zstd::stream::encode_all(&data[1000..], 3).unwrap());
        for step in [1, 13, 4096, file.len()] {
            let pieces: Vec<&[u8]> = file.chunks(step).collect();
            assert_eq!(inflate_in(&pieces), (data.clone(), Ok(())), "step {step}");
        }
        let (out, end) = inflate_in(&[&file[..file.len() - 10]]);
        assert!(end.unwrap_err().contains("truncated"));
        assert!(out.len() < data.len() && data.starts_with(&out));
        let (_, end) = inflate_in(&[&file[..8]]);
        assert!(end.unwrap_err().contains("truncated"));
    }
}
