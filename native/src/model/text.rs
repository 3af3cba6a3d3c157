//! Text forms of bytes and days that every layer writes: lowercase hex, RFC 4122 UUIDs, civil
//! dates and times (one implementation each, so records of every protocol agree).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "calendar arithmetic on days from i64 nanoseconds or 100-ns ticks (|days| < 2^38) and 4-digit years; positions in fixed buffers"
)]

use std::fmt::Write;

/// `b` as text when it is UTF-8: whole event documents and held strings are checked here. Past
/// `SIMD_UTF8` bytes with SIMD chosen at run time (simdutf8): std's check, a byte loop with a
/// word-at-a-time ASCII path, was 3.9 % of converting a python-sender capture (its ~200-byte
/// documents: ~330 instructions each, simdutf8 ~140). Below it std's: simdutf8 pads a short input
/// to a 64-byte block and pays for the whole block.
#[inline]
pub fn utf8(b: &[u8]) -> Option<&str> {
    if b.len() < SIMD_UTF8 {
        return std::str::from_utf8(b).ok();
    }
    simdutf8::basic::from_utf8(b).ok()
}

const SIMD_UTF8: usize = 64;

/// Lowercase hex, two digits a byte.
pub fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    push_hex(&mut s, b);
    s
}

/// `hex(b)` appended to `out` (writers that put it straight into a record's text).
pub fn push_hex(out: &mut String, b: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(b.len() * 2);
    for &c in b {
        out.push(char::from(DIGITS[usize::from(c >> 4)]));
        out.push(char::from(DIGITS[usize::from(c & 15)]));
    }
}

/// 16 bytes in wire (RFC 4122) order as the canonical UUID text; other lengths as plain hex.
pub fn uuid(b: &[u8]) -> String {
    let mut s = String::with_capacity(36);
    push_uuid(&mut s, b);
    s
}

/// `uuid(b)` appended to `out`, written digit by digit (inserting the dashes into the hex moved
/// it four times; this runs for every Hercules event).
pub fn push_uuid(out: &mut String, b: &[u8]) {
    let Ok(b) = <&[u8; 16]>::try_from(b) else {
        return push_hex(out, b);
    };
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = [b'-'; 36];
    let mut at = 0;
    for (i, &c) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            at += 1; // the dash before this byte's digits
        }
        text[at] = DIGITS[usize::from(c >> 4)];
        text[at + 1] = DIGITS[usize::from(c & 15)];
        at += 2;
    }
    out.push_str(std::str::from_utf8(&text).unwrap_or_default()); // ASCII: always text
}

/// Bytes from hex text (whitespace ignored, a pair that is not hex skipped): test vectors and the
/// hex ids records carry.
pub fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    digits
        .chunks_exact(2)
        .filter_map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
pub fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Microseconds since the epoch of an RFC 3339 time (`2026-11-21T04:41:22.700273042Z`,
/// `…+02:00`; a space for the `T`), digits past the microsecond truncated toward the past; None
/// for anything else (a 4-digit year, each field in its range).
pub fn rfc3339_micros(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |at: usize, n: usize| -> Option<i64> {
        let digits = b.get(at..at + n)?;
        digits.iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let sep = |at: usize, c: &[u8]| b.get(at).is_some_and(|x| c.contains(x));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut at = 19;
    let mut micros = 0i64;
    if sep(at, b".") {
        at += 1;
        let start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            if at - start < 6 {
                micros = micros * 10 + i64::from(b[at] - b'0');
            }
            at += 1;
        }
        if at == start {
            return None;
        }
        for _ in (at - start)..6 {
            micros *= 10;
        }
    }
    let offset = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(&c @ (b'+' | b'-')) if at + 6 == b.len() && sep(at + 3, b":") => {
            let (h, m) = (num(at + 1, 2)?, num(at + 4, 2)?);
            let minutes = h * 60 + m;
            if c == b'+' {
                minutes
            } else {
                -minutes
            }
        }
        _ => return None,
    };
    let day_number = days(year, month as u32, day as u32);
    let seconds = day_number * 86_400 + hour * 3600 + minute * 60 + second - offset * 60;
    Some(seconds * 1_000_000 + micros)
}

/// `YYYY-MM-DDTHH:MM:SS.F…FZ` of a day since 1970-01-01, a second of that day and a fraction of
/// `width` digits. Digits are written by hand: every record's `ts` goes through this, and the
/// formatting machinery of `write!` was a tenth of the NDJSON writer's time.
pub fn datetime(out: &mut String, days: i64, second: i64, fraction: i64, width: usize) {
    let (y, m, d) = civil(days);
    let fits = width <= 9 && (0..10i64.pow(width as u32)).contains(&fraction);
    if !(0..=9999).contains(&y) || !(0..86_400).contains(&second) || !fits {
        let (h, mi, s) = (second / 3600, second % 3600 / 60, second % 60);
        let _ = write!(
            out,
            "{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{fraction:0width$}Z"
        );
        return;
    }
    let mut b = [0u8; 30];
    digits(&mut b[0..4], y as u64);
    digits(&mut b[5..7], u64::from(m));
    digits(&mut b[8..10], u64::from(d));
    digits(&mut b[11..13], (second / 3600) as u64);
    digits(&mut b[14..16], (second % 3600 / 60) as u64);
    digits(&mut b[17..19], (second % 60) as u64);
    (b[4], b[7], b[10], b[13], b[16], b[19]) = (b'-', b'-', b'T', b':', b':', b'.');
    digits(&mut b[20..20 + width], fraction.unsigned_abs());
    b[20 + width] = b'Z';
    out.push_str(std::str::from_utf8(&b[..21 + width]).unwrap_or_default());
}

/// `v`'s last `buf.len()` decimal digits, zero-padded.
fn digits(buf: &mut [u8], mut v: u64) {
    for slot in buf.iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// (year, month, day) → days since 1970-01-01, proleptic Gregorian: the inverse of `civil`.
pub fn days(year: i64, month: u32, day: u32) -> i64 {
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Python's `str.strip()` (the characters `str.isspace` calls whitespace).
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_is_checked_alike_on_both_sides_of_the_simd_length() {
        // every length around SIMD_UTF8, text with a 2-, 3- and 4-byte character, and each with a
        // stray continuation byte, a cut character or an overlong form at its start, middle or end
        let text = "a\u{e9}\u{20ac}\u{1f600}".repeat(20);
        for len in 0..text.len() {
            let valid = &text.as_bytes()[..len];
            assert_eq!(utf8(valid), std::str::from_utf8(valid).ok(), "len {len}");
            for bad in [&[0x80u8][..], &[0xE2, 0x82], &[0xC0, 0xAF], &[0xFF]] {
                for at in [0, len / 2, len] {
                    let mut b = valid.to_vec();
                    b.splice(at..at, bad.iter().copied());
                    assert_eq!(
                        utf8(&b),
                        std::str::from_utf8(&b).ok(),
                        "len {len}, {bad:?} at {at}"
                    );
                }
            }
        }
        let mut long = text.into_bytes();
        assert!(utf8(&long).is_some());
        long.push(0x80);
        assert_eq!(utf8(&long), None);
    }

    #[test]
    fn rfc3339_to_microseconds() {
        let at = |s: &str| rfc3339_micros(s);
        assert_eq!(at("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            at("2026-11-21T04:41:22.700273042Z"),
            Some(1_795_236_082_700_273)
        );
        assert_eq!(
            at("2026-11-21T06:00:01.5+02:00"),
            Some(1_795_240_801_500_000 - 7_200_000_000)
        );
        assert_eq!(at("1969-12-31 23:59:59.999999z"), Some(-1));
        assert_eq!(at("2000-02-29T12:00:00-00:30"), Some(951_827_400_000_000));
        for bad in [
            "",
            "2026-11-21",
            "2026-13-01T00:00:00Z",
            "2026-11-21T00:00:00",
            "2026-11-21T00:00:00.Z",
            "2026-11-21T24:00:00Z",
            "2026-11-21T00:00:00Zx",
            "+026-11-21T00:00:00Z",
        ] {
            assert_eq!(at(bad), None, "{bad}");
        }
        for days in [-800_000i64, -1, 0, 1, 20_000, 2_932_896] {
            let (y, m, d) = civil(days);
            let text = format!("{y:04}-{m:02}-{d:02}T00:00:00Z");
            if (0..=9999).contains(&y) {
                assert_eq!(at(&text), Some(days * 86_400_000_000), "{text}");
            }
        }
    }

    #[test]
    fn hex_uuid_and_days() {
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
        assert_eq!(unhex("00ab ff\n01"), [0, 0xab, 0xff, 1]);
        let raw: Vec<u8> = (0u8..16).collect();
        assert_eq!(uuid(&raw), "00010203-0405-0607-0809-0a0b0c0d0e0f");
        assert_eq!(uuid(&raw[..3]), "000102");
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(-719_162), (1, 1, 1));
        assert_eq!(civil(20_513), (2026, 3, 1)); // after a leap-free February
        assert_eq!(civil(2_932_896), (9999, 12, 31));
        for d in [-719_162, -1, 0, 59, 20_513, 2_932_896] {
            let (y, m, day) = civil(d);
            assert_eq!(days(y, m, day), d);
        }
    }
}
