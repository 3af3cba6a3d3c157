//! What the core's decompressors share: fed compressed bytes, they hand on what they inflated in
//! bounded pieces, and say at the end whether the stream stopped in the middle.

pub trait Inflate {
    /// Inflate what `input` completes; each piece goes to `out`. Err: the stream is damaged here
    /// (what was inflated before the damage has been handed on).
    fn feed(&mut self, input: &[u8], out: &mut dyn FnMut(&[u8])) -> Result<(), String>;

    /// End of the compressed input: Err when it stopped inside a member or frame.
    fn finish(&self) -> Result<(), String>;
}
