"""Text for people: what came from the wire or the capture, escaped; record values in human form.

Every string a capture can choose (event messages, tag keys, stream names, queries, host names,
file names, finding sentences that quote them) reaches the terminal through `clean`, as a
`rich.text.Text` (`literal`), never inside Rich markup: `[bold]` stays `[bold]`, an ESC byte is
shown as `\\x1b` and cannot restyle or clear the terminal, a NUL as `\\x00`. Bytes that were not
UTF-8 reach Python either replaced (U+FFFD, by the core) or as surrogate escapes, shown as `\\xff`.
A backslash from the wire is left as it is (Windows paths and regular expressions stay readable).

Values of records are shown as people read them (`human_fields`): absent fields (None, empty lists
and maps) are left out, booleans are yes/no, every duration is in ms with its unit (`latency_ns`,
`interval_s` and `*_ms` fields alike), every time in one format (RFC 3339 UTC with nanoseconds,
as `ts`), enums by their value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from enum import Enum
from typing import TYPE_CHECKING, Any

from wirelog.export.json import rfc3339

if TYPE_CHECKING:
    from rich.text import Text

# C0 controls (ESC, NUL, newline...), DEL, C1 controls (a lone 0x9b is a CSI on some terminals),
# lone surrogates (undecodable bytes), line/paragraph separators and the bidirectional overrides
# that reorder what a terminal shows ("Trojan Source").
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    code = ord(c)
    if c in _NAMED:
        return _NAMED[c]
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(value: object) -> str:
    """`value` as text with every control character, ESC, NUL and invalid byte shown escaped."""
    text = value if isinstance(value, str) else str(value)
    # Nearly every cell is printable text (a table of 200,000 streams has 2.8 million cells): one
    # C-speed test instead of a regex pass. Every character `_UNSAFE` matches is non-printable
    # (categories Cc, Cs, Cf, Zl, Zp), so a printable text has none.
    return text if text.isprintable() else _UNSAFE.sub(_escape, text)


def literal(value: object, style: str = "") -> Text:
    """Text that Rich prints as it is: escaped (`clean`), never read as markup."""
    from rich.text import Text  # imported here: `convert` and `validate` do not load rich

    return Text(clean(value), style=style)


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


def ms(value: float) -> str:
    """A duration in ms, its unit shown: a whole count as it is (`1002 ms`), a measured one to the
    µs (`0.371 ms`, `1.000 ms`), so that a column of them lines up."""
    if isinstance(value, int):
        return f"{value} ms"
    return f"{value:.3f} ms"


def when(ns: int | None) -> str | None:
    """The one time format of human output (that of `ts`: RFC 3339 UTC, nanoseconds)."""
    try:
        return rfc3339(ns)
    except (OverflowError, OSError, ValueError):  # outside the calendar: the number says more
        return None


# (protocol or None for any, field) → how its value reads: a unit conversion and the label
_DURATION_UNITS = {"_ns": 1e-6, "_us": 1e-3, "_ms": 1.0, "_s": 1e3}
_TIMES = {
    ("cql", "timestamp"): 1_000,  # the client's write time, µs since the epoch
    ("hercules", "timestamp"): 100,  # 100-ns ticks since the epoch (`time` says the same, 7 digits)
}
_REPLACED = {("hercules", "time")}  # shown from `timestamp`, in the one time format


def human_value(key: str, value: Any, protocol: str | None = None) -> tuple[str, str] | None:
    """(label, text) of one scalar field as people read it, or None when it is absent."""
    if value is None or (protocol, key) in _REPLACED:
        return None
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        return key, yes_no(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        scale = _TIMES.get((protocol, key)) if isinstance(value, int) else None
        if scale is not None:
            text = when(value * scale)
            if text is not None:
                return ("time" if protocol == "hercules" else key), text
        for suffix, factor in _DURATION_UNITS.items():
            if key.endswith(suffix) and len(key) > len(suffix):
                exact = isinstance(value, int) and factor >= 1  # whole seconds are whole ms
                return key[: -len(suffix)], ms(value * int(factor) if exact else value * factor)
        return key, f"{value:.3f}" if isinstance(value, float) else str(value)
    if isinstance(value, dict | list | tuple) and not value:
        return None
    text = clean(value)
    return key, text if text else '""'


def human_fields(fields: dict[str, Any], protocol: str | None = None) -> Iterator[tuple[str, str]]:
    """The scalar fields of a record as (label, text), absent ones left out (maps and lists are not
    scalars: callers show them as trees, or not at all)."""
    for key, value in fields.items():
        if isinstance(value, dict | list):
            continue
        shown = human_value(key, value, protocol)
        if shown is not None:
            yield shown


def label(key: str) -> str:
    """A summary key as words, its unit moved to the value: `ack_latency_ms_p50` → `ack latency p50`."""
    words = [w for w in key.split("_") if w not in ("ms", "ns", "s")]
    return " ".join(words)


def unit_of(key: str) -> str | None:
    """The unit a summary key names (`keepalive_max_interval_ms` → `ms`), or None."""
    return "ms" if "ms" in key.split("_") else None
