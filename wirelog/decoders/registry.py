"""Which protocols exist, and how a stream's protocol is chosen.

Content decides; ports only break ties and help when content is ambiguous. `--decode-as PORT=PROTO`
overrides everything. A protocol module adds itself by being listed in `_SPECS` below.
"""

from __future__ import annotations

from wirelog.decoders import courier, cql, hercules, lumberjack, tls
from wirelog.decoders.base import ProtocolSpec, Sample

# CQL comes last: when nothing else is certain it scans the sample for a mid-stream v5 frame header
# (hundreds of CRC24 checks), which a stream another detector is certain of never needs.
_SPECS: tuple[ProtocolSpec, ...] = (tls.SPEC, lumberjack.SPEC, courier.SPEC, hercules.SPEC, cql.SPEC)
_FINDERS = tuple(s for s in _SPECS if s.find_start is not None)

PORT_BONUS = 0.25  # added to the content score when the server port is one the protocol uses
THRESHOLD = 0.5  # minimum score to claim a stream
CERTAIN = 0.9  # a score this high decides at once, even while other detectors want more bytes
SAMPLE_LIMIT = 512  # bytes per direction after which detection must decide


def specs() -> tuple[ProtocolSpec, ...]:
    """Every known protocol, in a fixed order (ties go to the earlier one)."""
    return _SPECS


def spec(name: str) -> ProtocolSpec:
    """The protocol called `name`; raises KeyError with the known names otherwise."""
    for s in _SPECS:
        if s.name == name:
            return s
    raise KeyError(f"unknown protocol {name!r} (known: {', '.join(names())})")


def port_protocol(item: str) -> tuple[int, str]:
    """`5044=lumberjack` → (5044, 'lumberjack'), the `--decode-as` syntax of every front end.

    Raises ValueError with a one-line reason (ASCII digits only: `²` passes str.isdigit, not int()).
    """
    port, sep, proto = (part.strip() for part in item.partition("="))
    if not sep or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise ValueError(f"{item!r} is not PORT=PROTOCOL")
    try:
        return int(port), spec(proto).name
    except KeyError as e:
        raise ValueError(e.args[0]) from None


def start_finders() -> tuple[ProtocolSpec, ...]:
    """The protocols that can find a frame start in the middle of a stream (ProtocolSpec.find_start)."""
    return _FINDERS


def names() -> list[str]:
    return [s.name for s in _SPECS]


# Server ports of log pipelines besides the decoders' own: syslog/Logstash inputs, Elasticsearch,
# HTTP proxies in front of gateways. Used only to tell client from server when no SYN was seen.
PIPELINE_PORTS = frozenset({5000, 5140, 6514, 8080, 8443, 9200, 9300})


def well_known_ports() -> frozenset[int]:
    """Server ports used to infer the client side of SYN-less streams (documented in docs/records.md)."""
    return PIPELINE_PORTS.union(*(s.ports for s in _SPECS))


def detect(sample: Sample) -> ProtocolSpec | bool | None:
    """The protocol of a stream from its first bytes.

    Returns the chosen spec, None when no protocol claims the stream, or False when the decision
    must wait for more bytes (never once `sample.closed` or both directions hold SAMPLE_LIMIT bytes).
    """
    must_decide = sample.closed or (len(sample.c2s) >= SAMPLE_LIMIT or len(sample.s2c) >= SAMPLE_LIMIT)
    best: ProtocolSpec | None = None
    best_score = 0.0
    undecided = False
    for s in _SPECS:
        score = s.detect(sample)
        if score is None:
            undecided = True
            continue
        if score >= CERTAIN:  # content alone is conclusive: later (costlier) detectors are not asked
            return s
        if score > 0 and sample.server_port in s.ports:
            score += PORT_BONUS
        if score > best_score:
            best, best_score = s, score
    if undecided and not must_decide and best_score < CERTAIN:
        return False
    return best if best_score >= THRESHOLD else None
