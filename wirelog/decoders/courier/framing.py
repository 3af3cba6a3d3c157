"""Log Courier framing: `type[4]` + `length` (u32 BE) + body, and the per-type length rules.

EVNT alone carries length 0xFFFFFFFF ("no length": the message ends where its zlib stream ends).
The rules here only judge a header; `decoder.py` acts on the verdict.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum

from wirelog.model import Direction

HEADER = 8
NONCE = 16
STREAMED = 0xFFFFFFFF
MAX_PACKET = 10 * 1024 * 1024  # Ruby server max_packet_size and Go receiver JDAT limit
CONTROL_MAX = 1024  # a longer body for a fixed-size type means the header is not to be trusted
HANDSHAKE_MAX = 32  # Go rejects a longer HELO/VERS; receivers zero-pad shorter ones

CLIENT_TYPES = frozenset({b"HELO", b"PING", b"JDAT", b"EVNT"})
SERVER_TYPES = frozenset({b"VERS", b"PONG", b"ACKN", b"????"})
TYPES = CLIENT_TYPES | SERVER_TYPES
KINDS = {
    b"HELO": "helo",
    b"VERS": "vers",
    b"PING": "ping",
    b"PONG": "pong",
    b"JDAT": "jdat",
    b"EVNT": "evnt",
    b"ACKN": "ackn",
    b"????": "unknown_reply",
}
_UNKNOWN_TYPE_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ?")
_TLS_CONTENT_TYPES = frozenset({20, 21, 22, 23})


def sender(mtype: bytes) -> Direction:
    """The side allowed to send `mtype` (a known type)."""
    return Direction.C2S if mtype in CLIENT_TYPES else Direction.S2C


class Action(Enum):
    """What to do with a header."""

    BODY = "body"  # read `length` bytes of body
    STREAM = "stream"  # EVNT: nonce then a zlib stream of unknown length
    UNKNOWN = "unknown"  # an unknown four-letter type with a sane length: skip its body
    TLS = "tls"  # a TLS record where a Courier header was expected
    DESYNC = "desync"  # not a trustworthy header


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Action
    problem: str | None = None  # finding code about the header, if any
    detail: str = ""  # why, for the finding's sentence


def parse_header(head: bytes) -> tuple[bytes, int]:
    """(type, length) from 8 header bytes."""
    return head[:4], struct.unpack_from(">I", head, 4)[0]


def looks_like_tls(head: bytes) -> bool:
    """A TLS record header (content type 20–23, major version 3)."""
    return len(head) >= 3 and head[0] in _TLS_CONTENT_TYPES and head[1] == 3 and head[2] <= 4


def judge(mtype: bytes, length: int, max_frame: int) -> Verdict:
    """How to treat a header with this type and length (`max_frame`: the decoder's frame cap)."""
    if mtype == b"EVNT":
        if length == STREAMED:
            return Verdict(Action.STREAM)
        return _payload_length(length, max_frame, "EVNT must carry length 0xFFFFFFFF (streamed)")
    if mtype == b"JDAT":
        if NONCE < length <= MAX_PACKET:
            return Verdict(Action.BODY)
        return _payload_length(length, max_frame, "")
    if mtype in TYPES:
        rule, ok = _control_rule(mtype, length)
        if ok:
            return Verdict(Action.BODY)
        code = "courier.nonzero-length" if rule == "0" else "courier.bad-length"
        action = Action.BODY if length <= CONTROL_MAX else Action.DESYNC
        return Verdict(action, code, f"{mtype.decode()} length must be {rule}, got {length}")
    if looks_like_tls(mtype):
        return Verdict(Action.TLS, "courier.tls-mismatch")
    if set(mtype) <= _UNKNOWN_TYPE_CHARS and length <= min(MAX_PACKET, max_frame):
        return Verdict(Action.UNKNOWN, "courier.unknown-type")
    return Verdict(Action.DESYNC, "courier.desync", f"{mtype.hex()} is not a Log Courier message type")


def _control_rule(mtype: bytes, length: int) -> tuple[str, bool]:
    if mtype == b"ACKN":
        return "20", length == NONCE + 4
    if mtype in (b"HELO", b"VERS"):
        return f"at most {HANDSHAKE_MAX}", length <= HANDSHAKE_MAX
    return "0", length == 0


def _payload_length(length: int, max_frame: int, why: str) -> Verdict:
    """JDAT (or a framed EVNT): the body needs a nonce and zlib data, and must fit the limits."""
    if length <= NONCE:
        action = Action.BODY if length <= CONTROL_MAX else Action.DESYNC
        return Verdict(
            action, "courier.bad-length", why or f"body of {length} bytes has no room for nonce + zlib"
        )
    if length > max_frame:
        return Verdict(
            Action.DESYNC,
            "courier.length-over-limit",
            f"length {length} exceeds the {max_frame}-byte frame cap",
        )
    if length > MAX_PACKET:
        return Verdict(
            Action.BODY,
            "courier.length-over-limit",
            f"length {length} exceeds the 10 MiB packet limit of both servers",
        )
    return Verdict(Action.BODY, "courier.bad-length" if why else None, why)


def plausible(head: bytes, max_frame: int) -> bool:
    """A strict check for resynchronising: a known type with exactly the length its rule wants."""
    mtype, length = parse_header(head)
    if mtype not in TYPES:
        return False
    v = judge(mtype, length, max_frame)
    return v.problem is None and v.action in (Action.BODY, Action.STREAM)


def find_header(data: bytes, max_frame: int) -> tuple[int | None, int]:
    """Next plausible header in `data`: (position or None, bytes that can be dropped for sure).

    JDAT/EVNT candidates must also show a zlib header byte (0x78) after the nonce, because the
    four letters alone occur inside event text. When a candidate is too short to judge, the
    search stops there so the caller waits for more bytes.
    """
    nxt = {t: data.find(t) for t in TYPES}  # next hit per type: each type's scan moves forward only
    start = 0
    while True:
        hits = [(i, t) for t, i in nxt.items() if i >= 0]
        if not hits:
            return None, max(start, len(data) - 3)
        i, t = min(hits)
        need = HEADER + NONCE + 1 if t in (b"JDAT", b"EVNT") else HEADER
        if len(data) - i < need:
            return None, i
        if plausible(data[i : i + HEADER], max_frame) and (need == HEADER or data[i + need - 1] == 0x78):
            return i, i
        start = i + 1
        nxt[t] = data.find(t, start)
