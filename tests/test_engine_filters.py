"""Record filters (`--protocol/--stream/--kind/--events/--since/--until`) against the rules in their docs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from wirelog.engine.filters import RecordFilter
from wirelog.model import Finding, Message, Severity

PROTOCOLS = ("cql", "lumberjack", "tcp")
KINDS = ("event", "window", "query")


@st.composite
def records(draw) -> Message | Finding:
    protocol = draw(st.sampled_from(PROTOCOLS))
    ts = draw(st.none() | st.integers(0, 20))
    if draw(st.booleans()):
        rec: Message | Finding = Message(protocol, draw(st.sampled_from(KINDS)), None, 0, 1, None, ts)
        rec.event = draw(st.none() | st.just({"m": 1}))
    else:
        rec = Finding(f"{protocol}.x", Severity.INFO, "x", protocol, None, 0, None, ts)
    rec.stream = draw(st.none() | st.integers(0, 3))
    return rec


def sets(values) -> st.SearchStrategy[frozenset]:
    return st.frozensets(st.sampled_from(values), max_size=2)


filters = st.builds(
    RecordFilter,
    protocols=sets(PROTOCOLS),
    streams=sets((0, 1, 2, 3)),
    kinds=sets(KINDS),
    events=st.booleans(),
    since=st.none() | st.integers(0, 20),
    until=st.none() | st.integers(0, 20),
    findings=st.booleans(),
)


def kept(f: RecordFilter, rec: Message | Finding, stream_protocol: str | None) -> bool:
    """The documented rules, record by record (engine/filters.py docstring, docs/cli)."""
    by_protocol = not f.protocols or rec.protocol in f.protocols or stream_protocol in f.protocols
    by_stream = not f.streams or rec.stream in f.streams
    message_only = bool(f.kinds or f.events)
    by_type = not message_only or (
        isinstance(rec, Message)
        and (not f.kinds or rec.kind in f.kinds)
        and (not f.events or rec.event is not None)
    )
    by_type = by_type and not (f.findings and isinstance(rec, Message))
    by_time = rec.ts is None or (
        (f.since is None or rec.ts >= f.since) and (f.until is None or rec.ts < f.until)
    )
    return by_protocol and by_stream and by_type and by_time


@settings(max_examples=300)
@given(filters, st.lists(records(), max_size=12), st.none() | st.sampled_from(PROTOCOLS))
def test_select_keeps_exactly_the_matching_records_in_order(f, recs, stream_protocol):
    assert f.select(recs, stream_protocol) == [r for r in recs if kept(f, r, stream_protocol)]


def test_stream_protocol_keeps_the_streams_tcp_findings():
    gap = Finding("tcp.gap", Severity.WARNING, "gap", "tcp")
    assert RecordFilter(protocols=frozenset({"cql"})).select([gap], "cql") == [gap]
    assert RecordFilter(protocols=frozenset({"cql"})).select([gap], "lumberjack") == []


def test_inactive_filter_keeps_everything():
    f = RecordFilter()
    assert not f.active and RecordFilter(events=True).active and RecordFilter(since=0).active
