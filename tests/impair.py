"""Impaired copies of real captures, as they come off real machines: packets written out of order
(multi-queue NICs, SPAN ports, merged files) or twice, timestamps moving with their packets.

Each copy remembers which original frame every packet of it is, so that its decoded records can be
compared with those of the original (`normalise`): the same messages, findings, `acked` flags and
delivery verdicts, up to frame numbers and stream ids (which follow the file's order by design).
"""

from __future__ import annotations

import json
import random
import re
import struct
from pathlib import Path
from typing import Any

from differential_helpers import ip_offset
from differential_helpers import read_pcap as read_records

# Record fields holding frame numbers (counts such as `frames`, `compressed_frames` are not).
FRAME_FIELDS = (
    "frame", "ack_frame", "request_frame", "response_frame", "first_frame", "last_frame",
    "previous_frame", "earlier_frame",
)  # fmt: skip
# Findings about the file itself, not about the traffic: an impaired copy has them by construction.
FILE_FINDINGS = ("pcap.time-backwards",)


def read_pcap(path: Path) -> tuple[bytes, list[bytes]]:
    """(file header, records with their 16-byte headers) of a classic pcap file."""
    pcap = read_records(path)
    return pcap.header, [h + d for h, d in pcap.records]


def write_pcap(path: Path, header: bytes, records: list[bytes]) -> None:
    path.write_bytes(header + b"".join(records))


def reorder(n: int, seed: int, fraction: float, max_move: int) -> list[int]:
    """An order of `n` packets in which about `fraction` of them are each moved 1..`max_move`
    places later: the original index of each packet of the copy."""
    rng = random.Random(seed)
    order = list(range(n))
    moved = sorted(rng.sample(range(n), max(1, round(n * fraction)))) if n > 1 else []
    for original in moved:
        at = order.index(original)
        order.insert(min(n - 1, at + rng.randint(1, max_move)), order.pop(at))
    return order


def duplicate(n: int, seed: int, fraction: float) -> list[int]:
    """About `fraction` of `n` packets written twice, the copy right after the original."""
    rng = random.Random(seed)
    twice = set(rng.sample(range(n), max(1, round(n * fraction))))
    return [i for i in range(n) for _ in range(2 if i in twice else 1)]


def drop(n: int, seed: int, fraction: float) -> list[int]:
    """About `fraction` of `n` packets missing from the capture (a loaded sniffer), at random."""
    rng = random.Random(seed)
    gone = set(rng.sample(range(n), max(1, round(n * fraction)))) if n > 1 else set()
    return [i for i in range(n) if i not in gone]


def drop_bursts(n: int, seed: int, bursts: int, longest: int) -> list[int]:
    """`bursts` runs of 1..`longest` consecutive packets missing (a ring buffer overrun)."""
    rng = random.Random(seed)
    gone: set[int] = set()
    for _ in range(bursts if n > 1 else 0):
        start = rng.randrange(n)
        gone.update(range(start, min(n, start + rng.randint(1, longest))))
    return [i for i in range(n) if i not in gone]


def losses(n: int) -> list[tuple[str, list[int]]]:
    """Copies of a capture of `n` packets that missed some (random 3 % and 10 %, bursts of up to
    5 and 20 packets; two seeds each): not the same records, but the same traffic seen less."""
    return [(f"drop-{p}%-seed{s}", drop(n, s, p / 100)) for p in (3, 10) for s in (1, 2)] + [
        (f"bursts-{b}x{k}-seed{s}", drop_bursts(n, s, b, k)) for b, k in ((3, 5), (2, 20)) for s in (1, 2)
    ]


def clock(header: bytes) -> tuple[str, bool]:
    """A classic pcap header's byte order and whether its timestamps are in nanoseconds."""
    return ("<" if header[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"), header[:4] in (
        b"\x4d\x3c\xb2\xa1",
        b"\xa1\xb2\x3c\x4d",
    )


def timestamps(header: bytes, records: list[bytes]) -> list[int]:
    """Each record's timestamp in ns."""
    endian, nano = clock(header)
    out = []
    for r in records:
        sec, frac = struct.unpack_from(endian + "II", r)
        out.append(sec * 10**9 + (frac if nano else frac * 1000))
    return out


def shifted(header: bytes, record: bytes, ns: int) -> bytes:
    """`record` with its timestamp moved by `ns`."""
    endian, nano = clock(header)
    (ts,) = timestamps(header, [record])
    ts += ns
    frac = ts % 10**9 if nano else (ts % 10**9) // 1000
    return struct.pack(endian + "II", ts // 10**9, frac) + record[8:]


def two_ended(src: Path, dst: Path, skew_ns: int, seed: int, drop: float = 0.03) -> dict[int, int]:
    """The capture as taken on both ends of its connections and merged by timestamp (mergecap):
    every packet twice, the far end's copy with its clock `skew_ns` off, each end missing about
    `drop` of the packets (different ones). Returns the copy's frame → the original frame."""
    header, records = read_pcap(src)
    ts = timestamps(header, records)
    rng = random.Random(seed)
    near = [(ts[i], 0, i, records[i]) for i in range(len(records)) if rng.random() >= drop]
    far = [
        (ts[i] + skew_ns, 1, i, shifted(header, records[i], skew_ns))
        for i in range(len(records))
        if rng.random() >= drop
    ]
    merged = sorted(near + far, key=lambda p: (p[0], p[1]))
    write_pcap(dst, header, [p[3] for p in merged])
    return {copy + 1: p[2] + 1 for copy, p in enumerate(merged)}


def impaired_copy(src: Path, dst: Path, order: list[int]) -> dict[int, int]:
    """Write the packets of `src` in `order` to `dst`: the copy's frame → the original frame."""
    header, records = read_pcap(src)
    write_pcap(dst, header, [records[i] for i in order])
    return {copy + 1: original + 1 for copy, original in enumerate(order)}


def normalise(
    records: list[dict[str, Any]],
    frames: dict[int, int] | None = None,
    timing: bool = True,
    resent: frozenset[int] = frozenset(),
) -> list[str]:
    """Messages and findings of a conversion as sorted canonical lines: frame numbers mapped back
    to the original's (in fields, nested objects and finding texts), stream ids replaced by the
    connection's endpoints, capture names dropped, file findings dropped. `timing=False` also drops
    times and durations (timestamps, `*_ms`, latencies, and finding texts, which quote them): a
    capture merged from two clocks keeps the verdicts, not the times. Records of (or answering) a
    frame in `resent`, which the capture itself sent twice, drop their times too: the copy first in
    the file is the one decoded ("first copy wins"), and the copies were sent at different times."""
    ends = {r["stream"]: (r["client"], r["server"]) for r in records if r.get("client") and "stream" in r}
    # a Lumberjack event_id names its first copy's place (stream, frame, seq) in this file: the
    # same place in the original names the same event
    first_copies = {
        r["event_id"]: [
            ends.get(r["stream"], r["stream"]),
            frames.get(r["frame"], r["frame"]) if frames else r["frame"],
            r.get("seq"),
        ]
        for r in records
        if r.get("event_id") and r["protocol"] == "lumberjack" and not r.get("resend_of")
    }

    def frame(value: Any) -> Any:
        if frames is None or not isinstance(value, int):
            return value
        return frames.get(value, value)

    def text(value: str) -> str:
        value = re.sub(r"\bframes? (\d+)", lambda m: m[0].split()[0] + f" {frame(int(m[1]))}", value)
        value = re.sub(r"\band (\d+)\)", lambda m: f"and {frame(int(m[1]))})", value)
        return re.sub(r"\bstream (\d+)", lambda m: f"stream {ends.get(int(m[1]), m[1])}", value)

    def clean(r: dict[str, Any], timing: bool = timing) -> dict[str, Any]:
        out = {}
        if timing and any(frame(r.get(key)) in resent for key in FRAME_FIELDS):
            timing = False
        for key, value in r.items():
            if key == "capture":
                continue
            if not timing and (key in ("ts", "message") or key.endswith("_ms") or "latency" in key):
                continue
            if key in FRAME_FIELDS:
                value = frame(value)
            elif key == "event_id":
                value = first_copies.get(value, value)
            elif key == "ack_frames" and isinstance(value, list):
                value = [frame(f) for f in value]
            elif key == "stream" and value is not None:
                value = ends.get(value, value)
            elif key == "message" and isinstance(value, str):
                value = text(value)
            elif isinstance(value, dict) and key != "event":
                value = clean(value, timing)
            out[key] = value
        return out

    return sorted(
        json.dumps(clean(r), sort_keys=True)
        for r in records
        if r["record"] in ("message", "finding") and r.get("code") not in FILE_FINDINGS
    )


# Impairments every real capture must survive: (name, the copy's order of original packets).
def impairments(n: int) -> list[tuple[str, list[int]]]:
    """Reorderings (5 % of packets moved up to 3 places, 10 % up to 8; three seeds each) and
    duplications (3 %, two seeds) of a capture of `n` packets."""
    return (
        [(f"reorder-5%-3-seed{s}", reorder(n, s, 0.05, 3)) for s in (1, 2, 3)]
        + [(f"reorder-10%-8-seed{s}", reorder(n, s, 0.10, 8)) for s in (1, 2, 3)]
        + [(f"duplicate-3%-seed{s}", duplicate(n, s, 0.03)) for s in (1, 2)]
    )


def convert_json(path: Path, *extra: str) -> list[dict[str, Any]]:
    """The records of `wirelog convert PATH --to json`."""
    from capture_tools import ndjson, run_cli  # imports the CLI

    code, out, err = run_cli("convert", str(path), "--to", "json", *extra)
    assert code in (0, 1), err
    return ndjson(out)


def canonical_frames(path: Path) -> dict[int, int]:
    """Frame → the first frame carrying the same TCP bytes (same endpoints, sequence number and
    payload): a capture's own retransmissions are the same message wherever the file puts them,
    and a copy that writes the retransmission first names it, as "first copy wins" says."""
    pcap = read_records(path)
    first: dict[bytes, int] = {}
    out = {}
    for frame, (_, data) in enumerate(pcap.records, 1):
        at = ip_offset(pcap.linktype, data)
        ip = data[at:] if at is not None else b""
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        tcp = ip[(ip[0] & 15) * 4 : struct.unpack_from(">H", ip, 2)[0]]
        if len(tcp) >= 20 and (payload := tcp[(tcp[12] >> 4) * 4 :]):
            out[frame] = first.setdefault(ip[12:20] + tcp[:8] + payload, frame)
    return out


def assert_same_when_impaired(pcap: Path, tmp: Path, *extra: str) -> list[dict[str, Any]]:
    """Every impaired copy of `pcap` decodes to the records of `pcap` itself (see `normalise`; frames
    up to the capture's own retransmissions, `canonical_frames`); returns those records so that a
    caller can check they are not vacuous."""
    records = convert_json(pcap, *extra)
    packets = read_pcap(pcap)[1]
    canon = canonical_frames(pcap)
    resent = frozenset(c for f, c in canon.items() if f != c)
    want = normalise(records, canon, resent=resent)
    for name, order in impairments(len(packets)):
        copy = tmp / f"{pcap.stem}.{name}.pcap"
        frames = impaired_copy(pcap, copy, order)
        got = normalise(
            convert_json(copy, *extra), {k: canon.get(v, v) for k, v in frames.items()}, resent=resent
        )
        missing, extra_lines = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        assert got == want, f"{pcap.name} {name}: lost {missing[:3]}, gained {extra_lines[:3]}"
    return records
