"""The values options take, each within a documented range (README, docs/commands/*.md).

A value outside its range is a usage error (status 2, one line), whether it comes from the command
line or from the environment (`WIRELOG_HELD_MEMORY`): the core takes 64-bit numbers, and a value it
cannot hold would otherwise end the run as an internal error. Protocol and kind names are checked
against the core's lists (engine/protocols.py), with a suggestion for a near miss.
"""

from __future__ import annotations

import difflib
import math
import re
from datetime import UTC, datetime

import click
from click.core import ParameterSource

from wirelog.engine import protocols

U64_MAX = (1 << 64) - 1
STREAM_ID = click.IntRange(0, U64_MAX)  # 0-based, like tshark's tcp.stream; u64 in the core
FRAME_NUMBER = click.IntRange(1, U64_MAX)  # 1-based, as Wireshark numbers packets
REORDER_WINDOW = click.IntRange(0, 1_000_000_000)  # packets (and at most 1 s of capture time)
# Timestamps are i64 nanoseconds since the epoch in the core (1677-09-21 .. 2262-04-11)
TIME_MIN_NS, TIME_MAX_NS = -(1 << 63), (1 << 63) - 1
SIZE_MAX = 1 << 50  # 1 PiB: more than any machine's memory, and than any capture a split is cut from


def _from(param: click.Parameter | None, ctx: click.Context | None) -> str:
    """` (from ENVVAR)` when the value came from the environment: the user did not type it."""
    if ctx is None or param is None or param.name is None or not isinstance(param, click.Option):
        return ""
    if ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT and param.envvar:
        return f" (from {param.envvar})"
    return ""


class ByteSize(click.ParamType):
    """A byte count as users write it: 134217728, 512k, 64m, 64MiB, 1g, 1GB (binary multiples:
    k = 1024, as `ls -h` and Spark's size settings mean them), from `min` to `max`."""

    name = "size"
    UNITS = "kmgt"  # each 1024 times the one before
    FORM = re.compile(r"(\d+)(?:([kmgt])(?:i?b)?|b)?", re.IGNORECASE)

    def __init__(self, *, min: int, max: int = SIZE_MAX) -> None:
        self.min, self.max = min, max

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):  # click may pass a value through twice (defaults, default_map)
            size = value
        else:
            m = self.FORM.fullmatch(str(value).strip())
            if m is None:
                self.fail(
                    f"{value!r}{_from(param, ctx)} is not a size: write bytes or k, m, g, t "
                    "(e.g. 134217728, 64m, 1g)",
                    param,
                    ctx,
                )
            size = int(m[1]) << (10 * (self.UNITS.index(m[2].lower()) + 1) if m[2] else 0)
        if size < self.min:
            self.fail(f"{value!r}{_from(param, ctx)} is less than {binary(self.min)}", param, ctx)
        if size > self.max:
            self.fail(f"{value!r}{_from(param, ctx)} is more than {binary(self.max)}", param, ctx)
        return size


def binary(size: int) -> str:
    """1048576 → '1 MiB': a limit in the unit users would write it in."""
    for unit, shift in (("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} bytes"


class FiniteRange(click.FloatRange):
    """A FloatRange that also refuses NaN (which no comparison with a bound catches)."""

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


def parse_time(value: str | None, name: str) -> int | None:
    """RFC 3339 / ISO 8601 (UTC if no zone) or epoch seconds → ns since the epoch, within the
    times the core holds (i64 ns: 1677-09-21 to 2262-04-11)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        ns = _iso_ns(value, name)
    else:
        if not math.isfinite(seconds):
            raise click.BadParameter(f"{value!r} is not a time", param_hint=name)
        ns = int(seconds * 1_000_000_000)
    if not TIME_MIN_NS <= ns <= TIME_MAX_NS:
        raise click.BadParameter(
            f"{value!r} is outside the times wirelog holds "
            "(1677-09-21T00:12:44Z to 2262-04-11T23:47:16Z, in RFC 3339 or epoch seconds)",
            param_hint=name,
        )
    return ns


def _iso_ns(value: str, name: str) -> int:
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither RFC 3339 nor epoch seconds", param_hint=name
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _near(value: str, known: list[str]) -> str:
    """` (did you mean X?)` for a near miss, else nothing."""
    close = difflib.get_close_matches(value.lower(), known, n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def check_protocols(_ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """`--protocol`: the names records carry (protocols.record_protocols())."""
    known = protocols.record_protocols()
    for value in values:
        if value not in known:
            raise click.BadParameter(
                f"{value!r} is not a protocol{_near(value, known)}; known: {', '.join(known)}",
                param=param,
            )
    return values


def check_kinds(_ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """`--kind`: the message kinds of some protocol (protocols.kinds())."""
    kinds = protocols.kinds()
    known = sorted({k for ks in kinds.values() for k in ks})
    for value in values:
        if value in known:
            continue
        what = (
            "findings are records of their own, which --kind drops (`wirelog validate` lists them)"
            if value in ("finding", "findings")
            else f"not a message kind{_near(value, known)}"
        )
        per_protocol = "; ".join(f"{name}: {', '.join(ks)}" for name, ks in kinds.items())
        raise click.BadParameter(
            f"{value!r}: {what}; the kinds are, per protocol, {per_protocol}", param=param
        )
    return values
