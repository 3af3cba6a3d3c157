//! The first frame of a stream whose capture began inside a frame.
//!
//! Detection judges a stream by its first bytes. When the capture starts mid-stream (a rotated
//! file, a late tcpdump), those bytes are often the inside of a frame — the middle of a compressed
//! Lumberjack window — which no detector can place, and on a port no protocol owns the stream
//! would stay unknown. For such streams the session keeps searching the client's bytes, up to
//! HUNT_LIMIT, with every protocol's `find_start` signature, and starts that protocol's decoder at
//! the frame found.

use super::held::OwnedChunk;
use crate::decoders::detect;
use crate::model::Direction;

/// Bytes (both directions) looked at before the stream is declared unknown.
pub const HUNT_LIMIT: u64 = 8 << 20;
/// Bytes of the previous chunks searched again: a signature may straddle two packets.
const CARRY: usize = 64;

#[derive(Debug, Default)]
pub struct Hunt {
    /// The first client bytes seen (quoted if nothing is found).
    pub first: Option<OwnedChunk>,
    searched: u64,
    /// The last chunks searched, at least CARRY bytes when there are, contiguous with what comes
    /// next.
    recent: Vec<OwnedChunk>,
}

impl Hunt {
    pub fn exhausted(&self) -> bool {
        self.searched >= HUNT_LIMIT
    }

    /// Server bytes: not searched, but they count toward the limit.
    pub fn skip_bytes(&mut self, n: usize) {
        self.searched = self.searched.saturating_add(n as u64);
    }

    /// A gap: the client bytes before it are not contiguous with what comes next.
    pub fn skip_gap(&mut self, direction: Direction) {
        if direction == Direction::C2S {
            self.recent.clear();
        }
    }

    /// (protocol, the client bytes from its first frame on) once a start is found.
    pub fn feed(&mut self, chunk: OwnedChunk) -> Option<(&'static str, Vec<OwnedChunk>)> {
        if self.first.is_none() {
            self.first = Some(chunk.clone());
        }
        if self.recent.last().is_some_and(|r| r.end() != chunk.offset) {
            self.recent.clear();
        }
        let n = chunk.data.len();
        self.recent.push(chunk);
        let joined;
        let data: &[u8] = if self.recent.len() > 1 {
            joined = self
                .recent
                .iter()
                .flat_map(|c| c.data.iter().copied())
                .collect::<Vec<u8>>();
            &joined
        } else {
            &self.recent[0].data
        };
        if let Some((protocol, mut at)) = detect::find_start(data) {
            let recent = std::mem::take(&mut self.recent);
            // the chunk holding byte `at` of the joined bytes, and where in it
            let i = recent
                .iter()
                .position(|c| match at.checked_sub(c.data.len()) {
                    Some(past) => {
                        at = past;
                        false
                    }
                    None => true,
                })?;
            let mut rest = recent.into_iter().skip(i);
            let mut parts = vec![rest.next()?.from(at)];
            parts.extend(rest);
            return Some((protocol, parts));
        }
        self.searched = self.searched.saturating_add(n as u64);
        // the oldest chunk goes while the others still hold CARRY bytes
        let mut total: usize = self.recent.iter().map(|c| c.data.len()).sum();
        while let Some(others) = total
            .checked_sub(self.recent[0].data.len())
            .filter(|&others| others >= CARRY)
        {
            self.recent.remove(0);
            total = others;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(offset: u64, data: &[u8]) -> OwnedChunk {
        OwnedChunk {
            direction: Direction::C2S,
            offset,
            data: data.to_vec(),
            frame: Some(offset),
            ts: None,
        }
    }

    #[test]
    fn a_signature_straddling_two_chunks_is_found() {
        let window = b"2W\0\0\0\x012J\0\0\0\x01\0\0\0\x02{}";
        let mut hunt = Hunt::default();
        let head = [&b"zzzz2"[..], &window[..4]].concat();
        assert_eq!(hunt.feed(chunk(100, &head)), None);
        let (protocol, parts) = hunt.feed(chunk(109, &window[4..])).unwrap();
        assert_eq!(protocol, "lumberjack");
        assert_eq!(parts[0].offset, 105);
        assert_eq!(parts[0].data, &window[..4]);
        assert_eq!(parts[1].offset, 109);
        assert_eq!(hunt.first.unwrap().offset, 100);
    }

    #[test]
    fn a_gap_breaks_the_carry_and_the_limit_ends_the_search() {
        let window = b"2W\0\0\0\x012J\0\0\0\x01\0\0\0\x02{}";
        let mut hunt = Hunt::default();
        assert_eq!(hunt.feed(chunk(0, &window[..4])), None);
        hunt.skip_gap(Direction::C2S);
        assert_eq!(hunt.feed(chunk(10, &window[4..])), None);
        assert!(!hunt.exhausted());
        hunt.skip_bytes(HUNT_LIMIT as usize);
        assert!(hunt.exhausted());
    }
}
