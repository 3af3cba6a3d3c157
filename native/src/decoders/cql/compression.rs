//! Body and frame decompression with hard output caps (LZ4 block, raw Snappy). Every declared size
//! is checked against the cap before anything is allocated, so a hostile length never makes us
//! inflate gigabytes. Pre-v5 LZ4 bodies carry a 4-byte big-endian length; v5 LZ4 frames carry it
//! in the frame header; Snappy has its own varint.

/// An LZ4 sequence turns one input byte into at most 255 output bytes: the most a block can inflate to.
fn lz4_bound(input: usize) -> usize {
    input.saturating_mul(255).saturating_add(64)
}

/// LZ4 block that must yield exactly `size` bytes (at most `cap`). The buffer is no larger than
/// the block could fill, so a small body declaring a large size allocates little.
pub fn lz4_block(data: &[u8], size: usize, cap: usize) -> Result<Vec<u8>, String> {
    if size > cap {
        return Err(format!(
            "declared LZ4 size {size} exceeds the cap of {cap} bytes"
        ));
    }
    let mut out = vec![0u8; size.min(lz4_bound(data.len()))];
    match lz4_flex::block::decompress_into(data, &mut out) {
        Ok(n) if n == size => Ok(out),
        Ok(n) => Err(format!("LZ4 block inflated to {n} bytes, declared {size}")),
        Err(_) => Err(format!(
            "LZ4 block corrupt or larger than the declared {size} bytes"
        )),
    }
}

/// A pre-v5 LZ4 body: big-endian length prefix + block.
pub fn lz4_body(body: &[u8], cap: usize) -> Result<Vec<u8>, String> {
    let Some((len, block)) = body.split_first_chunk::<4>() else {
        return Err("LZ4 body shorter than its 4-byte length prefix".to_owned());
    };
    lz4_block(block, u32::from_be_bytes(*len) as usize, cap)
}

/// The uncompressed length a raw Snappy buffer declares (its leading varint, at most 5 bytes).
fn snappy_length(body: &[u8]) -> Result<u64, String> {
    let mut size = 0u64;
    for (&b, shift) in body.iter().zip([0, 7, 14, 21, 28]) {
        size |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Ok(size);
        }
    }
    Err("Snappy length varint missing or longer than 5 bytes".to_owned())
}

/// A pre-v5 Snappy body.
pub fn snappy_body(body: &[u8], cap: usize) -> Result<Vec<u8>, String> {
    let size = snappy_length(body)?;
    if size > cap as u64 {
        return Err(format!(
            "declared Snappy size {size} exceeds the cap of {cap} bytes"
        ));
    }
    // A Snappy copy element of 2 bytes writes at most 64: a larger size is corrupt, and checking it
    // first spares allocating it.
    if size > (body.len() as u64).saturating_mul(32) {
        return Err(format!(
            "Snappy buffer corrupt: {size} bytes declared in a {}-byte buffer",
            body.len()
        ));
    }
    snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| format!("Snappy buffer corrupt: {e}"))
}
