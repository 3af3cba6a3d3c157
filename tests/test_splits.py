"""Byte-range splits of one capture (wirelog/engine/splits.py, native/src/capture/split.rs): every
packet is read by exactly one split, with the frame number and bytes a whole-file read gives, whatever
the split size, on real captures, on payloads crafted to look like record headers, and on pcapng with
its context blocks (interfaces, secrets) carried to later splits."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.pcap_helpers import T0_NS, damaged_pcap, dsb, epb, fast_pcap, idb, shb, tcp_frame, write_pcap
from wirelog import _core
from wirelog.engine.local import Options, run
from wirelog.engine.splits import (
    decode_group,
    group_options,
    hole_findings,
    opening_frames,
    plan,
    route_split,
    routed_segments,
    split_bytes,
)
from wirelog.model import Finding, Message

SHARED = Path(__file__).parents[2] / "shared" / "captures"
T0 = T0_NS // 10**9  # the writers' first timestamp: fake headers must look as recent


def segments(chunks, first_frame: int = 1) -> list[tuple]:
    """Every TCP segment a reader gives for these bytes, as plain tuples."""
    reader = _core.SegmentReader("split", None, first_frame)
    out = []
    for data in chunks:
        out += reader.feed(data)
    out += reader.finish()
    return [s for s in out if isinstance(s, tuple)]


def whole(path: Path) -> list[tuple]:
    return segments([path.read_bytes()])


def by_splits(path: Path, size: int) -> list[tuple]:
    out = []
    for split in plan(str(path), size):
        out += segments(split_bytes(str(path), split), split.first_frame)
    return out


def tempting_pcap(path: Path, n: int) -> Path:
    """Packets whose payloads spell chains of pcap record headers with plausible times."""
    fake = b"".join(struct.pack("<IIII", T0, 0, 4, 4) + b"xxxx" for _ in range(10))
    frames = [
        tcp_frame(1 + 100 * i, b"packet %05d " % i + fake, sport=40000, dport=5044, ack=1) for i in range(n)
    ]
    return write_pcap(path, frames)


@pytest.mark.parametrize("size", [64, 100, 333, 1000, 4096, 1 << 20])
def test_every_packet_once_on_crafted_payloads(tmp_path, size):
    path = tempting_pcap(tmp_path / "t.pcap", 80)
    assert by_splits(path, size) == whole(path)


def test_payloads_do_fool_the_heuristic_so_the_plan_has_to_repair(tmp_path):
    path = tempting_pcap(tmp_path / "t.pcap", 40)
    data = path.read_bytes()
    fooled = 0
    for lo in range(30, len(data), 7):
        scanner = _core.SplitScanner(data[:64], lo, len(data), False)
        scanner.feed(data[lo:], True)
        start = scanner.result()[0]
        if start is None:
            continue
        walk = _core.SplitScanner(data[:64], 24, start, True)
        walk.feed(data[24:], True)
        fooled += walk.result()[1] != start  # not a boundary a walk from the start crosses
    assert fooled > 0


@settings(max_examples=40, deadline=None)
@given(size=st.integers(40, 5000), n=st.integers(1, 60), payload=st.integers(1, 400))
def test_any_split_size_reads_every_packet_once(tmp_path_factory, size, n, payload):
    path = fast_pcap(tmp_path_factory.mktemp("s") / "f.pcap", n, payload=payload, connections=3)
    assert by_splits(path, size) == whole(path)


def test_pcapng_interfaces_and_secrets_reach_later_splits(tmp_path):
    frame = tcp_frame(1, b"hello", sport=40000, dport=5044, ack=1)
    dsb = struct.pack("<II", 10, 28) + struct.pack("<II", 0x544C534B, 8) + b"CLIENT_R" + struct.pack("<I", 28)
    body = shb() + idb(1, tsresol=9) + dsb
    body += b"".join(epb(0, (T0 + i) * 10**9, frame) for i in range(30))
    body += shb() + idb(1) + idb(1)  # a new section: two interfaces, microseconds
    body += b"".join(epb(1, (T0 + 40 + i) * 10**6, frame) for i in range(30))
    path = tmp_path / "t.pcapng"
    path.write_bytes(body)
    expected = whole(path)
    assert len(expected) == 60 and expected[-1][0] == 60
    for size in (50, 128, 200, 777):
        assert by_splits(path, size) == expected, size
    later = plan(str(path), 300)[-1]
    assert later.context.startswith(shb()) and later.context.count(idb(1)) == 2  # the second section's


def test_a_record_larger_than_a_split(tmp_path):
    frames = [tcp_frame(1, b"x" * 3000, sport=40000, dport=5044, ack=1)]
    frames += [tcp_frame(3001 + i, b"y", sport=40000, dport=5044, ack=1) for i in range(5)]
    path = write_pcap(tmp_path / "big.pcap", frames)
    splits = plan(str(path), 500)
    assert sum(s.frames for s in splits) == 6 and [s.first_frame for s in splits][:1] == [1]
    assert by_splits(path, 500) == whole(path)


def test_not_a_capture_is_a_clear_error(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"GET / HTTP/1.1\r\n\r\n" * 10)
    with pytest.raises(ValueError, match="not a pcap or pcapng capture"):
        plan(str(path), 64)


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/captures is not beside the repository")
def test_real_captures_split_anywhere():
    for path in sorted(SHARED.rglob("*.pcap*")):
        if path.suffix not in (".pcap", ".pcapng"):
            continue
        expected = whole(path)
        size = max(64, path.stat().st_size // 7)
        assert by_splits(path, size) == expected, path.name


def split_run(path: Path, size: int, opts: Options, groups: int = 3) -> list:
    """The split engine in one process: each split's records routed to groups of connections, the
    streams each group opens found by a reassembly-only pass over its records read back from the
    file, then each group decoded with the capture's stream ids, and the delivery verdict made from
    every group's numbers (what the Spark engine does with a shuffle of the routes between the
    stages)."""
    from wirelog.engine.spark_split import verdict_findings

    splits = plan(str(path), size)
    opts = group_options(opts, splits)
    routes: list[list[bytes]] = [[] for _ in range(groups)]
    for split in splits:
        for item in route_split(str(path), split, groups, str(path)):
            if isinstance(item, list):
                for group, blob in zip(routes, item, strict=True):
                    group.append(blob)

    def segments(group: int):
        return routed_segments(str(path), str(path), routes[group])

    ranks = _core.StreamRanks(
        [f for g in range(groups) for f in opening_frames(str(path), segments(g), opts)]
    )
    records, deliveries = [], []
    for g in range(groups):
        delivery: dict = {}
        for item in decode_group(str(path), segments(g), opts, ranks, delivery):
            if isinstance(item, Message | Finding) and item.stream is not None:
                records.append(item)
        deliveries.append(delivery)
    verdict = verdict_findings(str(path), deliveries)
    return records + [f for f in verdict if f.stream is not None]


def comparable(records) -> list[tuple]:
    return sorted(
        (r.stream, r.frame or 0, r.offset or 0, r.protocol, getattr(r, "kind", "") or "",
         getattr(r, "code", "") or "", str(getattr(r, "fields", "")), str(getattr(r, "event", "")))
        for r in records
    )  # fmt: skip


def local_run(path: Path, opts: Options) -> list:
    return [
        r for r in run([str(path)], (), opts) if isinstance(r, Message | Finding) and r.stream is not None
    ]


@pytest.mark.parametrize("size", [300, 5000, 1 << 20])
def test_split_engine_gives_the_local_engines_stream_records(size):
    path = Path(__file__).parents[1] / "examples" / "lumberjack-pylogbeat.pcap"
    opts = Options()
    assert comparable(split_run(path, size, opts)) == comparable(local_run(path, opts))


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/captures is not beside the repository")
def test_split_engine_on_real_cql_and_reassembly_captures():
    opts = Options()
    for sub in ("cql-packetbeat", "reassembly"):
        for path in sorted((SHARED / "public" / sub).glob("*.pcap")):
            size = max(200, path.stat().st_size // 5)
            assert comparable(split_run(path, size, opts)) == comparable(local_run(path, opts)), path.name


def test_a_service_on_a_port_between_its_clients_ports_is_one_group(tmp_path):
    """A service on an unlisted port, one client connection from a lower port and its resend from a
    higher one (a Log Courier receiver on a random port does this): both connections are in one
    group, so the split engine sees the resend and gives the local engine's verdict, also when the
    capture's packets are reordered or duplicated."""
    from scapy.all import TCP, rdpcap, wrpcap

    original = Path(__file__).parent / "data" / "lumberjack" / "pylogbeat-stalled-resend.pcap"
    packets = rdpcap(str(original))
    clients = sorted({p[TCP].sport for p in packets if p[TCP].dport == 5044})
    assert len(clients) == 2 and clients[0] < 40000 < clients[1]
    for p in packets:
        p[TCP].sport, p[TCP].dport = (40000 if x == 5044 else x for x in (p[TCP].sport, p[TCP].dport))
        del p[TCP].chksum
    path = tmp_path / "unlisted-port.pcap"
    wrpcap(str(path), packets)
    opts = Options()
    local = local_run(path, opts)
    assert {r.protocol for r in local if isinstance(r, Message)} == {"lumberjack"}

    def resent(records: list) -> int:
        return sum(1 for r in records if isinstance(r, Message) and r.fields.get("resend_of"))

    assert resent(local) == resent(local_run(original, opts)) > 0
    assert comparable(split_run(path, 1 << 20, opts)) == comparable(local)
    # and on copies with packets moved later or written twice: the same resends, in both engines
    from tests.impair import impaired_copy, impairments

    for label, order in impairments(len(packets)):
        copy = tmp_path / f"{label}.pcap"
        impaired_copy(path, copy, order)
        impaired = local_run(copy, opts)
        assert resent(impaired) == resent(local), label
        assert comparable(split_run(copy, 1 << 20, opts)) == comparable(impaired), label


TLS = Path(__file__).parents[1] / "native" / "src" / "decoders" / "tls" / "testdata"
BACK = {"src": "10.0.0.2", "dst": "10.0.0.1"}  # a server's packets


def test_a_key_log_embedded_anywhere_decrypts_every_flow(tmp_path):
    """A Decryption Secrets Block in the middle of the file, in a split of its own, reaches the
    flows' decoders: the TLS connection after it is decrypted as by the local engine."""
    frames = [tcp_frame(1 + 8 * i, b"plain %02d" % i, sport=40001, dport=9000, ack=1) for i in range(20)]
    frames += [
        tcp_frame(0, flags="S", sport=40002, dport=5044),
        tcp_frame(0, flags="SA", sport=5044, dport=40002, ack=1, **BACK),
    ]
    seq = {"c2s": 1, "s2c": 1}
    for line in (TLS / "tls13-aes128gcm.transcript").read_text().splitlines():
        way, hexed = line.split()
        data = bytes.fromhex(hexed)
        ports = {"sport": 40002, "dport": 5044} if way == "c2s" else {"sport": 5044, "dport": 40002, **BACK}
        frames.append(tcp_frame(seq[way], data, ack=1, **ports))
        seq[way] += len(data)
    packets = [epb(0, (T0 + i) * 10**9, f) for i, f in enumerate(frames)]
    keylog = (TLS / "tls13-aes128gcm.keylog").read_bytes()
    path = tmp_path / "tls.pcapng"
    path.write_bytes(
        shb() + idb(1, tsresol=9) + b"".join(packets[:20]) + dsb(keylog) + b"".join(packets[20:])
    )
    splits = plan(str(path), 600)
    assert not any(keylog in s.context for s in splits[:2]) and any(keylog in s.secrets for s in splits)
    local = local_run(path, Options())
    decrypted = [r for r in local if (r.fields or {}).get("tls", {}).get("decrypted")]
    assert decrypted, "the local engine decrypts with the embedded key log"
    assert comparable(split_run(path, 600, Options())) == comparable(local)


@pytest.mark.parametrize("size", [1500, 2000, 10_000, 1 << 20])
def test_a_damaged_region_is_skipped_with_a_finding_and_the_rest_is_read(tmp_path, size):
    path, lo, hi = damaged_pcap(tmp_path / "d.pcap")
    splits = plan(str(path), size)
    holes = [(a, b) for s in splits for a, b in zip(s.holes[::2], s.holes[1::2], strict=True)]
    assert holes and holes[0][0] <= hi and holes[-1][1] >= hi and holes[0][0] > lo - 300
    assert all(b == c for (_, b), (c, _) in itertools.pairwise(holes))  # one region
    findings = [f for s in splits for f in hole_findings(s)]
    assert [f.code for f in findings] == ["pcap.corrupt"] * len(holes)
    assert sum(f.fields["skipped"] for f in findings) == holes[-1][1] - holes[0][0] < 3300
    # every packet outside the region is read once, numbered on from the last one before it (a
    # packet whose bytes the damage begins in is no TCP segment)
    got = by_splits(path, size)
    frames = [s[0] for s in got]
    assert frames == sorted(set(frames)) and frames[-1] == sum(s.frames for s in splits)
    before = whole(path)  # the whole-file reader stops at the damage
    assert got[: len(before)] == before and len(got) > len(before) + 100


@pytest.mark.parametrize(
    "name",
    [
        "examples/lumberjack-pylogbeat.pcap",
        "tests/data/lumberjack/pylogbeat-stalled-resend.pcap",
        "tests/data/hercules/gate-session.pcap",
    ],
)
def test_split_engine_on_impaired_copies_gives_the_local_engines_records(name, tmp_path):
    """Packets moved later or written twice: each flow's packets reach the split engine's decoders
    in the order TCP proves, as in the local engine (whose answer on such copies is the original's:
    tests/test_impaired_copies.py)."""
    from tests.impair import impaired_copy, impairments, read_pcap

    path = Path(__file__).parents[1] / name
    opts = Options()
    for label, order in impairments(len(read_pcap(path)[1])):
        copy = tmp_path / f"{label}.pcap"
        impaired_copy(path, copy, order)
        size = max(300, copy.stat().st_size // 4)
        assert comparable(split_run(copy, size, opts)) == comparable(local_run(copy, opts)), label
