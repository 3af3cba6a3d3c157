//! Is this stream Lumberjack? Decided from content, whatever the port.
//!
//! A client side starting with `1W`/`2W`/`1D`/`2J`/`1C`/`2C` plus a sane first field is Lumberjack;
//! a server side made of `?A` frames confirms it. TLS bytes score 0 (TLS is reported by its own
//! detector). On the Beats ports, anything else is still claimed at a low score, so that the
//! decoder can say what Logstash would say ("Invalid version of beats protocol: 123" for raw JSON).

use super::framing::{is_version, plausible};
use crate::decoders::detect::Sample;

pub const PORTS: [u16; 2] = [5044, 5043];
const TLS_HANDSHAKE: u8 = 0x16;
/// Plus the registry's port bonus: enough to claim, beaten by any real match.
const WRONG_CLIENT_ON_BEATS_PORT: f64 = 0.3;
/// The largest frame a first header may announce and still count as evidence.
const DETECT_MAX_FRAME: usize = 1 << 30;
/// A mid-stream window start is judged against the decoder's default frame cap.
const MAX_FRAME: usize = 64 << 20;

fn client_type(b: u8) -> bool {
    matches!(b, b'W' | b'J' | b'D' | b'C')
}

pub fn detect(s: &Sample<'_>) -> Option<f64> {
    let (c2s, s2c) = (s.c2s, s.s2c);
    if c2s.first() == Some(&TLS_HANDSHAKE) || s2c.first() == Some(&TLS_HANDSHAKE) {
        return Some(0.0);
    }
    let acks = server_acks(s2c);
    if c2s.len() >= 2 && is_version(c2s[0]) && client_type(c2s[1]) {
        return match plausible(c2s, DETECT_MAX_FRAME) {
            None if acks => Some(0.95),
            None if s.closed => Some(0.6),
            None => None,
            Some(false) => Some(0.2),
            Some(true) => Some(if acks || s2c.is_empty() { 0.95 } else { 0.6 }),
        };
    }
    let server_speaks_other = s2c.len() >= 2 && !(is_version(s2c[0]) && s2c[1] == b'A');
    if c2s.len() < 2
        && !s.closed
        && c2s.first().is_none_or(|&b| is_version(b))
        && !server_speaks_other
    {
        return if acks { Some(0.6) } else { None };
    }
    if acks && c2s.is_empty() {
        return Some(0.6);
    }
    if !c2s.is_empty() && PORTS.contains(&s.server_port) {
        return Some(WRONG_CLIENT_ON_BEATS_PORT);
    }
    Some(0.0)
}

/// The server side holds at least one whole `?A` frame and only `?A` frames so far.
fn server_acks(s2c: &[u8]) -> bool {
    let mut frames = s2c.chunks_exact(6);
    frames.len() > 0 && frames.all(|f| is_version(f[0]) && f[1] == b'A')
}

/// The first window start in client bytes from the middle of a stream: a plausible `?W` header
/// directly followed by a plausible data frame (`?J`, `?C`, `?D`) of the same version, a 12-byte
/// signature that compressed or JSON bytes do not spell by chance.
pub fn find_start(data: &[u8]) -> Option<usize> {
    memchr::memchr_iter(b'W', data)
        .filter_map(|w| w.checked_sub(1))
        .find(|&pos| {
            let window = &data[pos..];
            let Some((_, next)) = window.split_at_checked(6) else {
                return false;
            };
            let version = window[0];
            is_version(version)
                && next.first() == Some(&version)
                && matches!(next.get(1), Some(b'J' | b'C' | b'D'))
                && plausible(window, MAX_FRAME) == Some(true)
                && plausible(next, MAX_FRAME) == Some(true)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample<'a>(c2s: &'a [u8], s2c: &'a [u8], port: u16, closed: bool) -> Sample<'a> {
        Sample {
            c2s,
            s2c,
            client_port: 40000,
            server_port: port,
            closed,
        }
    }

    #[test]
    fn a_window_and_its_acks() {
        let w = b"2W\0\0\0\x02";
        assert_eq!(detect(&sample(w, b"", 1, false)), Some(0.95));
        assert_eq!(detect(&sample(w, b"2A\0\0\0\x02", 1, false)), Some(0.95));
        assert_eq!(detect(&sample(w, b"HTTP/1.1 400", 1, false)), Some(0.6));
        assert_eq!(detect(&sample(b"2W\0\0", b"", 1, false)), None);
        assert_eq!(detect(&sample(b"2W\0\0", b"", 1, true)), Some(0.6));
        assert_eq!(
            detect(&sample(b"2W\xff\xff\xff\xff", b"", 1, true)),
            Some(0.2)
        );
        assert_eq!(detect(&sample(b"2", b"", 1, false)), None);
        assert_eq!(detect(&sample(b"", b"2A\0\0\0\x01", 1, false)), Some(0.6));
        assert_eq!(
            detect(&sample(b"\x16\x03\x01", b"", 5044, false)),
            Some(0.0)
        );
        assert_eq!(detect(&sample(b"{\"a\":1}", b"", 5044, false)), Some(0.3));
        assert_eq!(detect(&sample(b"{\"a\":1}", b"", 80, false)), Some(0.0));
    }

    #[test]
    fn a_window_start_after_garbage() {
        let window = b"2W\0\0\0\x012J\0\0\0\x01\0\0\0\x02{}";
        let data = [&b"xx2Wyyyy"[..], window].concat();
        assert_eq!(find_start(&data), Some(8));
        assert_eq!(find_start(&window[..10]), None);
        assert_eq!(find_start(b"no window here"), None);
    }
}
