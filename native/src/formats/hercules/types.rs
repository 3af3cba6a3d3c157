//! The one definition of Hercules wire constants, and the
//! reversible tag-name escaping of wirelog's own exports, undone when such events are decoded.

/// Type codes of protocol/Type.java (the .NET TagType uses the same numbers).
pub const CONTAINER: u8 = 0x01;
pub const BYTE: u8 = 0x02;
pub const SHORT: u8 = 0x03;
pub const INTEGER: u8 = 0x04;
pub const LONG: u8 = 0x05;
pub const FLAG: u8 = 0x06;
pub const FLOAT: u8 = 0x07;
pub const DOUBLE: u8 = 0x08;
pub const STRING: u8 = 0x09;
pub const UUID: u8 = 0x0A;
pub const NULL: u8 = 0x0B;
pub const VECTOR: u8 = 0x80;

pub fn is_type(t: u8) -> bool {
    matches!(t, CONTAINER..=NULL | VECTOR)
}

/// Size and name of the fixed-size numeric types (the name is the one used in findings).
pub fn fixed(t: u8) -> Option<(usize, &'static str)> {
    match t {
        SHORT => Some((2, "short")),
        INTEGER => Some((4, "integer")),
        LONG => Some((8, "long")),
        FLOAT => Some((4, "float")),
        DOUBLE => Some((8, "double")),
        _ => None,
    }
}

/// Bytes the smallest element of a non-fixed vector element type takes (Null takes none).
pub fn min_elem(t: u8) -> u64 {
    match t {
        CONTAINER => 2,
        BYTE | FLAG => 1,
        STRING => 4,
        UUID => 16,
        VECTOR => 5,
        _ => 0,
    }
}

pub const VERSION: u8 = 1;
pub const MAX_KEY_BYTES: usize = 255; // u8 key length
pub const MAX_TAGS: usize = 65535; // u16 container count
pub const MAX_DOTNET_TAGS: u16 = 32767; // the .NET reader reads the count as a signed Int16
pub const MAX_LENGTH: usize = (1 << 31) - 1; // string and vector lengths are signed i32
pub const GATE_MAX_EVENT: usize = 500_000; // Gate validation.max.event.size default
pub const MAX_DEPTH: usize = 64; // nothing documents a maximum, Java is bounded by its stack
pub const MIN_EVENT: usize = 1 + 8 + 16 + 2; // version, timestamp, uuid, empty container
pub const TICKS_PER_SECOND: i64 = 10_000_000; // 100-ns ticks since the Unix epoch
/// Vector<Null> costs no bytes per element: cap what is materialised.
#[cfg(not(fuzzing))]
pub const MAX_NULLS: u64 = 1 << 20;
/// Under the fuzzer, a lower cap: an input of a few bytes at the full cap renders five
/// megabytes of `null`s an event, through every check, and such inputs took the target from
/// ~2,800 to ~600 runs a second without reaching code the lower cap does not (the cap's own
/// checks run more often, not less).
#[cfg(fuzzing)]
pub const MAX_NULLS: u64 = 1 << 12;

/// Markers of wirelog's export mapping (names no escaping can produce).
pub const EMPTY_NAME: &str = "_x";
pub const ITEM_TAG: &[u8] = b"_xv";
pub const BIGINT_TAG: &[u8] = b"_xn";

/// `Message.version` is a static string: the event's version byte as text.
pub static VERSIONS: [&str; 256] = [
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
    "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31", "32",
    "33", "34", "35", "36", "37", "38", "39", "40", "41", "42", "43", "44", "45", "46", "47", "48",
    "49", "50", "51", "52", "53", "54", "55", "56", "57", "58", "59", "60", "61", "62", "63", "64",
    "65", "66", "67", "68", "69", "70", "71", "72", "73", "74", "75", "76", "77", "78", "79", "80",
    "81", "82", "83", "84", "85", "86", "87", "88", "89", "90", "91", "92", "93", "94", "95", "96",
    "97", "98", "99", "100", "101", "102", "103", "104", "105", "106", "107", "108", "109", "110",
    "111", "112", "113", "114", "115", "116", "117", "118", "119", "120", "121", "122", "123",
    "124", "125", "126", "127", "128", "129", "130", "131", "132", "133", "134", "135", "136",
    "137", "138", "139", "140", "141", "142", "143", "144", "145", "146", "147", "148", "149",
    "150", "151", "152", "153", "154", "155", "156", "157", "158", "159", "160", "161", "162",
    "163", "164", "165", "166", "167", "168", "169", "170", "171", "172", "173", "174", "175",
    "176", "177", "178", "179", "180", "181", "182", "183", "184", "185", "186", "187", "188",
    "189", "190", "191", "192", "193", "194", "195", "196", "197", "198", "199", "200", "201",
    "202", "203", "204", "205", "206", "207", "208", "209", "210", "211", "212", "213", "214",
    "215", "216", "217", "218", "219", "220", "221", "222", "223", "224", "225", "226", "227",
    "228", "229", "230", "231", "232", "233", "234", "235", "236", "237", "238", "239", "240",
    "241", "242", "243", "244", "245", "246", "247", "248", "249", "250", "251", "252", "253",
    "254", "255",
];

/// The README's naming convention: non-empty, at most 255 bytes of [A-Za-z0-9_.-].
pub fn is_tag_name(raw: &[u8]) -> bool {
    !raw.is_empty() && raw.len() <= MAX_KEY_BYTES && raw.iter().all(|&b| NAME_BYTE[b as usize])
}

/// The bytes of the naming convention, looked up: the reader checks every key of every event,
/// and four ranges compared a byte were a fifth of its walk over a container.
static NAME_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'-';
        b += 1;
    }
    table
};

/// Inverse of the exporter's `escape_name`: every `_x` + two lowercase hex digits is one byte; a
/// name no escaping could have produced (the bytes are not UTF-8) comes back unchanged.
pub fn unescape_name(name: &str) -> String {
    if name == EMPTY_NAME {
        return String::new();
    }
    if !name.contains("_x") {
        return name.to_owned();
    }
    let b = name.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut rest = b;
    while let Some((&c, tail)) = rest.split_first() {
        if let (b'_', [b'x', h, l, after @ ..]) = (c, tail) {
            if let (Some(h), Some(l)) = (lower_hex(*h), lower_hex(*l)) {
                out.push(h << 4 | l);
                rest = after;
                continue;
            }
        }
        out.push(c);
        rest = tail;
    }
    String::from_utf8(out).unwrap_or_else(|_| name.to_owned())
}

fn lower_hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' | b'a'..=b'f' => (c as char).to_digit(16).map(|d| d as u8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescape_undoes_the_export_escapes() {
        assert_eq!(unescape_name("_x"), "");
        assert_eq!(unescape_name("a_x20b"), "a b");
        assert_eq!(unescape_name("_xc3_xa9"), "\u{e9}");
        assert_eq!(unescape_name("_xff"), "_xff");
        assert_eq!(unescape_name("_xZZ"), "_xZZ");
        assert_eq!(unescape_name("plain"), "plain");
        assert!(is_tag_name(b"a.b-c_d") && !is_tag_name(b"") && !is_tag_name(b"a b"));
    }

    #[test]
    fn tag_names_are_letters_digits_and_three_marks() {
        // the edges of each range and their neighbours
        let named = b"AZaz09_.-";
        let not = b" !\"#$%&'()*+,/:;<=>?@[\\]^`{|}~\x00\x1f\x7f\x80\xc3\xff";
        assert!(named.iter().all(|&b| is_tag_name(&[b])));
        assert!(not.iter().all(|&b| !is_tag_name(&[b])), "{not:?}");
        assert!(is_tag_name(&[b'a'; 255]) && !is_tag_name(&[b'a'; 256]));
    }
}
