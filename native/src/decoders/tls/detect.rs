//! Content detection of TLS: a plausible record header in either direction.

use crate::decoders::detect::Sample;

const TLS_HANDSHAKE: u8 = 22;

/// Whether `data` starts with a plausible TLS record header (5 bytes needed).
pub fn tls_record(data: &[u8]) -> bool {
    data.get(..5)
        .is_some_and(|h| super::record::plausible(h, None))
}

pub fn detect(s: &Sample<'_>) -> Option<f64> {
    for data in [s.c2s, s.s2c] {
        if data.len() >= 5 && tls_record(data) {
            return Some(if data[0] == TLS_HANDSHAKE { 0.95 } else { 0.6 });
        }
    }
    if s.c2s.len() < 5 && s.s2c.len() < 5 && !s.closed {
        return None;
    }
    Some(0.0)
}
