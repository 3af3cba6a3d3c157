//! The parts of a request target the Gate looks at, read as Python's `urlsplit` and `parse_qs`
//! read them (the Python decoder's `path` and `stream_name` fields).

/// (path, query) of a request target.
pub fn split(target: &str) -> (String, String) {
    // urlsplit drops leading C0 controls and spaces, and removes tabs and newlines anywhere.
    let url: String = target
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
        .collect();
    let mut rest = url.as_str();
    if let Some((scheme, after)) = rest.split_once(':') {
        if scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            rest = after;
        }
    }
    if let Some(after) = rest.strip_prefix("//") {
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        rest = &after[end..];
    }
    if let Some(i) = rest.find('#') {
        rest = &rest[..i];
    }
    match rest.split_once('?') {
        Some((path, query)) => (path.to_owned(), query.to_owned()),
        None => (rest.to_owned(), String::new()),
    }
}

/// The first value of `name` in a query string, as `parse_qs(query)[name][0]` (pairs without `=`
/// or with an empty value do not count).
pub fn query_value(query: &str, name: &str) -> Option<String> {
    for piece in query.split('&') {
        let Some((k, v)) = piece.split_once('=') else {
            continue;
        };
        if v.is_empty() {
            continue;
        }
        if unquote(&k.replace('+', " ")) == name {
            return Some(unquote(&v.replace('+', " ")));
        }
    }
    None
}

/// Python's `urllib.parse.unquote`: %XX escapes in ASCII runs become bytes, decoded as UTF-8 with
/// replacement; other characters stay.
fn unquote(s: &str) -> String {
    if !s.contains('%') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut run: Vec<u8> = Vec::new();
    let flush = |run: &mut Vec<u8>, out: &mut String| {
        if !run.is_empty() {
            out.push_str(&String::from_utf8_lossy(&percent(run)));
            run.clear();
        }
    };
    for c in s.chars() {
        if c.is_ascii() {
            run.push(c as u8);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

fn percent(b: &[u8]) -> Vec<u8> {
    let hex = |c: &u8| (*c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut rest = b;
    while let Some((&c, tail)) = rest.split_first() {
        if let (b'%', [h, l, after @ ..]) = (c, tail) {
            if let (Some(h), Some(l)) = (hex(h), hex(l)) {
                out.push((h << 4 | l) as u8); // two hex digits: below 256
                rest = after;
                continue;
            }
        }
        out.push(c);
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_like_urlsplit() {
        assert_eq!(
            split("/stream/send?stream=a&x=1#f"),
            ("/stream/send".into(), "stream=a&x=1".into())
        );
        assert_eq!(split("http://h:1/p?q"), ("/p".into(), "q".into()));
        assert_eq!(
            query_value("stream=&stream=b%20c+d", "stream").as_deref(),
            Some("b c d")
        );
        assert_eq!(query_value("stream", "stream"), None);
        assert_eq!(
            query_value("s%74ream=%ff", "stream").as_deref(),
            Some("\u{fffd}")
        );
    }
}
