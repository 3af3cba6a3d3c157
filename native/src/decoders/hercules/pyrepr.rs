//! Python's `repr` of str and bytes, as the Python decoder quotes wire text inside finding
//! messages (`f"{key!r}"`): the quote choice, the escapes, and which characters print as they are.

use std::fmt::Write;

fn quote(has_single: bool, has_double: bool) -> char {
    if has_single && !has_double {
        '"'
    } else {
        '\''
    }
}

/// `repr(s)` of a Python str.
pub fn str_repr(s: &str) -> String {
    let q = quote(s.contains('\''), s.contains('"'));
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x7f || printable(c) => out.push(c),
            c => {
                let n = c as u32;
                let _ = match n {
                    0..=0xff => write!(out, "\\x{n:02x}"),
                    0x100..=0xffff => write!(out, "\\u{n:04x}"),
                    _ => write!(out, "\\U{n:08x}"),
                };
            }
        }
    }
    out.push(q);
    out
}

/// `repr(b)` of Python bytes.
pub fn bytes_repr(b: &[u8]) -> String {
    let q = quote(b.contains(&b'\''), b.contains(&b'"')) as u8;
    let mut out = String::with_capacity(b.len() + 3);
    out.push('b');
    out.push(q as char);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            c if c == q => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            c => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(q as char);
    out
}

/// Python's `str.isprintable` for non-ASCII characters: false for separators other than the
/// space, control, format, surrogate and private-use characters. Unassigned code points (which
/// Python also escapes) are not known here; they print as they are.
fn printable(c: char) -> bool {
    let n = c as u32;
    !matches!(n,
        0x80..=0xa0
        | 0xad
        | 0x600..=0x605
        | 0x61c
        | 0x6dd
        | 0x70f
        | 0x890..=0x891
        | 0x8e2
        | 0x1680
        | 0x180e
        | 0x2000..=0x200f
        | 0x2028..=0x202f
        | 0x205f..=0x2064
        | 0x2066..=0x206f
        | 0x3000
        | 0xd800..=0xf8ff
        | 0xfeff
        | 0xfff9..=0xfffb
        | 0xfffe..=0xffff
        | 0x110bd
        | 0x110cd
        | 0x13430..=0x1343f
        | 0x1bca0..=0x1bca3
        | 0x1d173..=0x1d17a
        | 0xe0001
        | 0xe0020..=0xe007f
        | 0xf0000..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reprs_match_python() {
        assert_eq!(str_repr("String tag"), "'String tag'");
        assert_eq!(str_repr("it's"), "\"it's\"");
        assert_eq!(str_repr("a'\"b"), "'a\\'\"b'");
        assert_eq!(
            str_repr("\u{0}\n\u{7f}\u{a0}\u{e9}\u{2028}"),
            "'\\x00\\n\\x7f\\xa0\u{e9}\\u2028'"
        );
        assert_eq!(bytes_repr(b"ab\xff'"), "b\"ab\\xff'\"");
        assert_eq!(bytes_repr(b"x\r\n"), "b'x\\r\\n'");
    }
}
