//! Why Python's `json.loads` refuses an event document, in its words. The Python decoder quoted
//! that text in `json_error` and `courier.invalid-json`; serde_json does the parsing, and this
//! module only runs on documents serde_json refused, re-reading them as CPython's scanner
//! (Modules/_json.c) does to find the same message and position (counted in characters).
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one in-memory document plus constants, after checks that the characters are there; nesting depth is bounded by the parser's limit"
)]

/// Python's deepest nesting is its recursion limit (1000) less the caller's frames.
const MAX_DEPTH: usize = 990;

/// The first line of Python's error for `json.loads(raw)`, or for a document Python accepts
/// but that is not an object, `a JSON <type>, not an object`. Documents both accept but serde
/// refused (NaN, Infinity, nesting deeper than serde's 128) get serde's reason.
pub fn error(raw: &[u8]) -> String {
    let s = match decode(raw) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mut p = Scanner { s: &s, depth: 0 };
    let start = p.ws(0);
    let result = match p.value(start) {
        Err(Stop::Value(i)) => Err(("Expecting value", i)),
        Err(Stop::Error(msg, i)) => Err((msg, i)),
        Err(Stop::Recursion(what)) => {
            return format!(
            "maximum recursion depth exceeded while decoding a JSON {what} from a unicode string"
        )
        }
        Ok((end, ty)) => {
            let end = p.ws(end);
            if end != s.len() {
                Err(("Extra data", end))
            } else {
                Ok(ty)
            }
        }
    };
    match result {
        Err((msg, pos)) => {
            let before = &s[..pos];
            let line = before.iter().filter(|&&c| c == '\n').count() + 1;
            let col = match before.iter().rposition(|&c| c == '\n') {
                Some(nl) => pos - nl,
                None => pos + 1,
            };
            format!("{msg}: line {line} column {col} (char {pos})")
        }
        Ok("dict") => match serde_json::from_slice::<serde_json::Value>(raw) {
            Err(e) => e.to_string(),
            Ok(_) => "not an object".to_owned(),
        },
        Ok(ty) => format!("a JSON {ty}, not an object"),
    }
}

/// `bytes.decode(json.detect_encoding(b), "surrogatepass")` for the UTF-8 cases, with the
/// UnicodeDecodeError text; UTF-16/32 documents are beyond this module (reported as no value).
/// An encoded surrogate (ED A0..BF xx) passes as one character, as surrogatepass lets it.
fn decode(raw: &[u8]) -> Result<Vec<char>, String> {
    let bom = raw.starts_with(b"\xef\xbb\xbf");
    let wide = raw.starts_with(b"\xff\xfe")
        || raw.starts_with(b"\xfe\xff")
        || (raw.len() >= 4 && (raw[0] == 0 || raw[1] == 0))
        || (raw.len() == 2 && (raw[0] == 0 || raw[1] == 0));
    if wide && !bom {
        return Err("Expecting value: line 1 column 1 (char 0)".to_owned());
    }
    let skip = if bom { 3 } else { 0 };
    let mut out = Vec::with_capacity(raw.len());
    let mut b = &raw[skip..];
    loop {
        match std::str::from_utf8(b) {
            Ok(s) => {
                out.extend(s.chars());
                return Ok(out);
            }
            Err(e) => {
                let at = e.valid_up_to();
                out.extend(std::str::from_utf8(&b[..at]).unwrap_or_default().chars());
                let rest = &b[at..];
                if rest.len() >= 3
                    && rest[0] == 0xed
                    && (0xa0..0xc0).contains(&rest[1])
                    && (0x80..0xc0).contains(&rest[2])
                {
                    out.push('\u{fffd}');
                    b = &rest[3..];
                    continue;
                }
                let first = rest[0];
                let (n, reason) = match e.error_len() {
                    None => (rest.len(), "unexpected end of data"),
                    Some(_) if (0x80..0xc2).contains(&first) || first >= 0xf5 => {
                        (1, "invalid start byte")
                    }
                    Some(n) => (n, "invalid continuation byte"),
                };
                let offset = raw.len() - rest.len();
                return Err(if n == 1 {
                    format!("'utf-8' codec can't decode byte 0x{first:02x} in position {offset}: {reason}")
                } else {
                    let last = offset + n - 1;
                    format!(
                        "'utf-8' codec can't decode bytes in position {offset}-{last}: {reason}"
                    )
                });
            }
        }
    }
}

enum Stop {
    /// StopIteration: "Expecting value" at this position.
    Value(usize),
    Error(&'static str, usize),
    Recursion(&'static str),
}

struct Scanner<'a> {
    s: &'a [char],
    depth: usize,
}

type Scan = Result<(usize, &'static str), Stop>;

impl Scanner<'_> {
    fn at(&self, i: usize) -> Option<char> {
        self.s.get(i).copied()
    }

    fn ws(&self, mut i: usize) -> usize {
        while matches!(self.at(i), Some(' ' | '\t' | '\n' | '\r')) {
            i += 1;
        }
        i
    }

    fn word(&self, i: usize, w: &str) -> bool {
        let n = w.chars().count();
        i + n <= self.s.len() && self.s[i..i + n].iter().copied().eq(w.chars())
    }

    /// scan_once: a value at `i` → (end, Python type name).
    fn value(&mut self, i: usize) -> Scan {
        let Some(c) = self.at(i) else {
            return Err(Stop::Value(i));
        };
        match c {
            '"' => return self.string(i + 1).map(|e| (e, "str")),
            '{' => return self.nested(i + 1, '}', "object"),
            '[' => return self.nested(i + 1, ']', "array"),
            'n' if self.word(i, "null") => return Ok((i + 4, "NoneType")),
            't' if self.word(i, "true") => return Ok((i + 4, "bool")),
            'f' if self.word(i, "false") => return Ok((i + 5, "bool")),
            'N' if self.word(i, "NaN") => return Ok((i + 3, "float")),
            'I' if self.word(i, "Infinity") => return Ok((i + 8, "float")),
            '-' if self.word(i, "-Infinity") => return Ok((i + 9, "float")),
            _ => {}
        }
        self.number(i)
    }

    fn number(&self, start: usize) -> Scan {
        let digit = |i: usize| matches!(self.at(i), Some('0'..='9'));
        let mut i = start;
        if self.at(i) == Some('-') {
            i += 1;
        }
        match self.at(i) {
            Some('1'..='9') => {
                i += 1;
                while digit(i) {
                    i += 1;
                }
            }
            Some('0') => i += 1,
            _ => return Err(Stop::Value(start)),
        }
        let mut ty = "int";
        if self.at(i) == Some('.') && digit(i + 1) {
            ty = "float";
            i += 2;
            while digit(i) {
                i += 1;
            }
        }
        if matches!(self.at(i), Some('e' | 'E')) && i + 1 < self.s.len() {
            let e = i;
            i += 1;
            if matches!(self.at(i), Some('-' | '+')) && i + 1 < self.s.len() {
                i += 1;
            }
            while digit(i) {
                i += 1;
            }
            if digit(i - 1) {
                ty = "float";
            } else {
                i = e;
            }
        }
        Ok((i, ty))
    }

    /// scanstring: `i` is just after the opening quote; returns the end after the closing one.
    fn string(&self, mut i: usize) -> Result<usize, Stop> {
        let begin = i - 1;
        let len = self.s.len();
        loop {
            let mut next = i;
            let mut c = '\0';
            while next < len {
                c = self.s[next];
                if c == '"' || c == '\\' {
                    break;
                }
                if (c as u32) <= 0x1f {
                    return Err(Stop::Error("Invalid control character at", next));
                }
                next += 1;
            }
            if next >= len {
                return Err(Stop::Error("Unterminated string starting at", begin));
            }
            next += 1;
            if c == '"' {
                return Ok(next);
            }
            if next == len {
                return Err(Stop::Error("Unterminated string starting at", begin));
            }
            let e = self.s[next];
            if e != 'u' {
                i = next + 1;
                if !matches!(e, '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') {
                    return Err(Stop::Error("Invalid \\escape", i - 2));
                }
                continue;
            }
            next += 1;
            let end = next + 4;
            if end >= len {
                return Err(Stop::Error("Invalid \\uXXXX escape", next - 1));
            }
            let hex4 = |from: usize| -> Option<u32> {
                self.s[from..from + 4]
                    .iter()
                    .try_fold(0u32, |acc, d| d.to_digit(16).map(|v| acc << 4 | v))
            };
            let Some(cp) = hex4(next) else {
                return Err(Stop::Error("Invalid \\uXXXX escape", end - 5));
            };
            i = end;
            if (0xd800..0xdc00).contains(&cp)
                && end + 6 < len
                && self.s[end] == '\\'
                && self.s[end + 1] == 'u'
            {
                let Some(low) = hex4(end + 2) else {
                    return Err(Stop::Error("Invalid \\uXXXX escape", end + 1));
                };
                if (0xdc00..0xe000).contains(&low) {
                    i = end + 6;
                }
            }
        }
    }

    /// An object (after `{`) or an array (after `[`).
    fn nested(&mut self, i: usize, close: char, what: &'static str) -> Scan {
        if self.depth >= MAX_DEPTH {
            return Err(Stop::Recursion(what));
        }
        self.depth += 1;
        let r = if close == '}' {
            self.object(i)
        } else {
            self.array(i)
        };
        self.depth -= 1;
        r.map(|end| (end, if close == '}' { "dict" } else { "list" }))
    }

    fn object(&mut self, i: usize) -> Result<usize, Stop> {
        let mut i = self.ws(i);
        if self.at(i) == Some('}') {
            return Ok(i + 1);
        }
        loop {
            if self.at(i) != Some('"') {
                return Err(Stop::Error(
                    "Expecting property name enclosed in double quotes",
                    i,
                ));
            }
            let end = self.string(i + 1)?;
            i = self.ws(end);
            if self.at(i) != Some(':') {
                return Err(Stop::Error("Expecting ':' delimiter", i));
            }
            i = self.ws(i + 1);
            let end = self.value(i)?.0;
            i = self.ws(end);
            match self.at(i) {
                Some('}') => return Ok(i + 1),
                Some(',') => i = self.ws(i + 1),
                _ => return Err(Stop::Error("Expecting ',' delimiter", i)),
            }
        }
    }

    fn array(&mut self, i: usize) -> Result<usize, Stop> {
        let mut i = self.ws(i);
        if self.at(i) == Some(']') {
            return Ok(i + 1);
        }
        loop {
            let end = self.value(i)?.0;
            i = self.ws(end);
            match self.at(i) {
                Some(']') => return Ok(i + 1),
                Some(',') => i = self.ws(i + 1),
                _ => return Err(Stop::Error("Expecting ',' delimiter", i)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::error;

    #[test]
    fn python_json_messages() {
        // Each expectation is CPython 3.11's json.loads(raw) error text.
        let cases: &[(&[u8], &str)] = &[
            (b"not json", "Expecting value: line 1 column 1 (char 0)"),
            (
                b"{\"a\":1,}",
                "Expecting property name enclosed in double quotes: line 1 column 8 (char 7)",
            ),
            (b"[1,2,]", "Expecting value: line 1 column 6 (char 5)"),
            (b"[1,2]", "a JSON list, not an object"),
            (b"[1,2,", "Expecting value: line 1 column 6 (char 5)"),
            (
                b"{\"a\" 1}",
                "Expecting ':' delimiter: line 1 column 6 (char 5)",
            ),
            (
                b"\xff",
                "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte",
            ),
            (
                b"\xe4\xbd",
                "'utf-8' codec can't decode bytes in position 0-1: unexpected end of data",
            ),
            (
                b"{\"a\":\"\x01\"}",
                "Invalid control character at: line 1 column 7 (char 6)",
            ),
            (b"\"\\q\"", "Invalid \\escape: line 1 column 2 (char 1)"),
            (b"{}x", "Extra data: line 1 column 3 (char 2)"),
            (
                b"\"abc",
                "Unterminated string starting at: line 1 column 1 (char 0)",
            ),
            (
                b"[1 2]",
                "Expecting ',' delimiter: line 1 column 4 (char 3)",
            ),
            (
                b"{1:2}",
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
            (b"", "Expecting value: line 1 column 1 (char 0)"),
            (
                b"\n\n  {",
                "Expecting property name enclosed in double quotes: line 3 column 4 (char 5)",
            ),
            (
                b"\"\\u12\"",
                "Invalid \\uXXXX escape: line 1 column 3 (char 2)",
            ),
            (
                b"\"\\u12x4\"",
                "Invalid \\uXXXX escape: line 1 column 3 (char 2)",
            ),
            (
                b"\"\\ud800\\u12x4\"",
                "Invalid \\uXXXX escape: line 1 column 9 (char 8)",
            ),
            (b"\xed\xa0\x80", "Expecting value: line 1 column 1 (char 0)"),
            (
                b"\xe4\xbdx",
                "'utf-8' codec can't decode bytes in position 0-1: invalid continuation byte",
            ),
            (
                b"\xf0\x80",
                "'utf-8' codec can't decode byte 0xf0 in position 0: invalid continuation byte",
            ),
            (b"1e", "Extra data: line 1 column 2 (char 1)"),
            (
                "[\"é\" x".as_bytes(),
                "Expecting ',' delimiter: line 1 column 6 (char 5)",
            ),
            (b"NaN", "a JSON float, not an object"),
            (b"1e5", "a JSON float, not an object"),
            (b"-", "Expecting value: line 1 column 1 (char 0)"),
        ];
        for (raw, want) in cases {
            assert_eq!(error(raw), *want, "{:?}", String::from_utf8_lossy(raw));
        }
    }
}
