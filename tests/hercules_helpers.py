"""Hercules test material: the reference's hex vectors, hypothesis strategies for events of every
type and depth, a decoder driver, and a tiny Gate (HTTP server) for loopback sessions."""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lz4.block
from hypothesis import strategies as st

from bench.gen_capture import Connection, PcapWriter
from tests.core_decoders import CoreDecoder
from tests.hercules_codec import Event, Type, Variant, Vector, encode_batch
from wirelog.engine.protocols import StreamContext
from wirelog.model import Chunk, Direction, Finding, Message, Record

REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "hercules.md"

# ../shared/reference/hercules.md §4 (hex as printed there)
README_EVENT = (
    "010036462afd9ef8001120380063fd11e883e23a587d902000000204686f737409000000096c6f63616c686f73740974"
    "696d657374616d700500056d6ab2f64c00"
)
FORMATTER_EVENT = (
    "010036462afd9ef8005ef182398e6c4e19b222c87fd06b003d00040a537472696e6720746167090000000c537472696e"
    "672076616c7565084e756c6c207461670b0855756964207461670a5ef182398e6c4e19b222c87fd06b003d13436f6e74"
    "61696e657220617272617920746167800100000002000110536f6d6520696e74656765722074616704075a1a9f00010f"
    "4279746520766563746f7220746167800200000004deadbeef"
)
SCALARS_EVENT = (
    "0100000000000000010000000000000000000000000000000000070166060101670600016e800b000000030164083ff8"
    "00000000000002666c07be800000016202ff017303fffe"
)
# §1.3: a container holding `vector` = [[1,2],["x"]] (observed with Java 1.10.0)
MIXED_VECTORS = "000106766563746f72" "8080" "00000002" "04" "00000002" "00000001" "00000002" "09" "00000001" "00000001" "78"  # fmt: skip


def event_bytes(tags_hex: str, ticks: int = 15_276_799_200_000_000) -> bytes:
    """An event header (version 1, `ticks`, a fixed UUID) followed by a container given in hex."""
    return b"\x01" + ticks.to_bytes(8, "big", signed=True) + bytes(range(16)) + bytes.fromhex(tags_hex)


# --- hypothesis strategies producing values in the decoder's canonical form ---

_INVALID_UTF8 = st.binary(min_size=1, max_size=6).map(lambda b: b"\xff" + b)
KEYS = st.one_of(st.text(max_size=12), _INVALID_UTF8)
_SCALARS = {
    Type.BYTE: st.integers(0, 255),
    Type.SHORT: st.integers(-(2**15), 2**15 - 1),
    Type.INTEGER: st.integers(-(2**31), 2**31 - 1),
    Type.LONG: st.integers(-(2**63), 2**63 - 1),
    Type.FLAG: st.one_of(st.booleans(), st.integers(2, 255)),
    Type.FLOAT: st.floats(width=32, allow_nan=False),
    Type.DOUBLE: st.floats(allow_nan=False),
    Type.STRING: st.one_of(st.text(max_size=20), _INVALID_UTF8),
    Type.UUID: st.binary(min_size=16, max_size=16),
    Type.NULL: st.none(),
}


def containers(depth: int) -> st.SearchStrategy:
    return st.lists(st.tuples(KEYS, variants(depth)), max_size=4).map(tuple)


def vectors(depth: int) -> st.SearchStrategy:
    def items(t: Type) -> st.SearchStrategy:
        if t == Type.BYTE:
            return st.binary(max_size=8)
        if t == Type.CONTAINER:
            inner = containers(depth - 1) if depth > 0 else st.just(())
            return st.lists(inner, max_size=3).map(tuple)
        if t == Type.VECTOR:
            return st.lists(vectors(depth - 1), max_size=3).map(tuple) if depth > 0 else st.just(())
        return st.lists(_SCALARS[t], max_size=4).map(tuple)

    return st.sampled_from(list(Type)).flatmap(lambda t: items(t).map(lambda xs: Vector(t, xs)))


def variants(depth: int) -> st.SearchStrategy:
    scalar = st.sampled_from(list(_SCALARS)).flatmap(lambda t: _SCALARS[t].map(lambda v: Variant(t, v)))
    if depth <= 0:
        return scalar
    return st.one_of(
        scalar,
        containers(depth - 1).map(lambda c: Variant(Type.CONTAINER, c)),
        vectors(depth - 1).map(lambda v: Variant(Type.VECTOR, v)),
    )


EVENTS = st.builds(
    Event,
    version=st.just(1),
    timestamp=st.integers(-(2**63), 2**63 - 1),
    uuid=st.binary(min_size=16, max_size=16),
    tags=containers(3),
)


# --- driving the stream decoder ---


def decode_stream(c2s: bytes, s2c: bytes = b"", step: int = 0, show_secrets: bool = False) -> list[Record]:
    """Feed both directions (c2s first, in `step`-byte chunks if given) and close."""
    dec = CoreDecoder(
        "hercules", StreamContext(0, "10.0.0.1:40000", "10.0.0.2:6306", 40000, 6306, show_secrets)
    )
    out: list[Record] = []
    for direction, data in ((Direction.C2S, c2s), (Direction.S2C, s2c)):
        size = step or max(1, len(data))
        for i in range(0, len(data), size):
            out += dec.feed(Chunk(0, direction, i, data[i : i + size], frame=i // size + 1))
    return out + dec.close()


def messages(records: list[Record], kind: str | None = None) -> list[Message]:
    return [r for r in records if isinstance(r, Message) and (kind is None or r.kind == kind)]


def codes(records: list[Record]) -> list[str]:
    return [r.code for r in records if isinstance(r, Finding)]


# --- a tiny Gate for loopback sessions ---


class _Gate(http.server.BaseHTTPRequestHandler):
    """Answers like the Gate: 200 for a known stream, 404 for `missing`, 400 for `bad`; inflates lz4."""

    protocol_version = "HTTP/1.1"
    bodies: list[bytes]

    def do_POST(self) -> None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while (size := int(self.rfile.readline().strip(), 16)) > 0:
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "lz4":
            body = lz4.block.decompress(body, uncompressed_size=int(self.headers["Original-Content-Length"]))
        self.server.bodies.append(body)  # type: ignore[attr-defined]
        stream = self.path.partition("stream=")[2]
        status, text = {"bad": (400, b"Invalid event data"), "missing": (404, b"Cannot find stream")}.get(
            stream, (200, b"")
        )
        answer(self, status, text)

    def log_message(self, *args: object) -> None:
        pass


def answer(handler: http.server.BaseHTTPRequestHandler, status: int, text: bytes) -> None:
    """A Gate's plain-text answer to the request `handler` is serving."""
    handler.send_response(status)
    handler.send_header("Content-Type", "text/plain; charset=utf-8")
    handler.send_header("Content-Length", str(len(text)))
    handler.end_headers()
    handler.wfile.write(text)


@contextmanager
def gate() -> Iterator[http.server.ThreadingHTTPServer]:
    """A Gate on 127.0.0.1 (ephemeral port); `server.bodies` collects the request bodies."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Gate)
    server.bodies = []  # type: ignore[attr-defined]
    with serving(server):
        yield server


@contextmanager
def serving(server: http.server.ThreadingHTTPServer) -> Iterator[http.server.ThreadingHTTPServer]:
    """`server` answering on a thread of its own while the block runs, closed after it."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def gate_session(port: int) -> list[bytes]:
    """A keep-alive session: plain, lz4, chunked (sendAsync), and a batch the Gate rejects (400).

    Returns the (uncompressed) bodies sent.
    """
    event = bytes.fromhex(README_EVENT)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    sent = []
    for i, n in enumerate((1, 3, 2, 1)):
        body = n.to_bytes(4, "big") + event * n
        headers = {"Authorization": "Hercules apiKey loop-key", "Content-Type": "application/octet-stream"}
        stream = "bad" if i == 3 else f"s{i}"
        if i == 1:
            headers |= {"Content-Encoding": "lz4", "Original-Content-Length": str(len(body))}
            conn.request(
                "POST", f"/stream/send?stream={stream}", lz4.block.compress(body, store_size=False), headers
            )
        elif i == 2:
            chunks = iter([body[:50], body[50:]])
            conn.request("POST", f"/stream/sendAsync?stream={stream}", chunks, headers, encode_chunked=True)
        else:
            conn.request("POST", f"/stream/send?stream={stream}", body, headers)
        conn.getresponse().read()
        sent.append(body)
    conn.close()
    return sent


def record_gate_session(pcap: Path) -> tuple[list[bytes], list[bytes]]:
    """Run `gate_session` against `gate()` under tcpdump into `pcap`: (bodies sent, bodies received).

    Raises RuntimeError when tcpdump is missing or cannot capture. tests/data/hercules/gate-session.pcap
    was made by this function.
    """
    from capture_tools import tcpdump

    with gate() as server, tcpdump(pcap, server.server_address[1]):
        sent = gate_session(server.server_address[1])
    return sent, server.bodies


def pipelined_gate(path: Path, connections: int = 4, requests: int = 6, batch: int = 30) -> None:
    """Gate connections that send every request before the first answer (HTTP/1.1 pipelining):
    answered 200, 200, 503, 200, ... in order, the last connection never answered. A request waits
    while later ones are sent, so most wait held rather than kept (the newest two are kept)."""
    answers = [b"200 OK", b"200 OK", b"503 Service Unavailable"]
    n = 0
    with path.open("wb") as f:
        writer = PcapWriter(f)
        for c in range(connections):
            conn = Connection(writer, 0x0A020001 + c, 30000 + c, 0x0A010001, 6306)
            conn.handshake()
            for r in range(requests):
                events = []
                for _ in range(batch):
                    message = Variant(Type.STRING, f"event {n} of request {r}")
                    events.append(Event(1, 17_637_000_000_000_000 + n, n.to_bytes(16, "big"), (("message", message),)))  # fmt: skip
                    n += 1
                body = encode_batch(events)
                head = f"POST /stream/send?stream=logs HTTP/1.1\r\nHost: gate\r\nContent-Length: {len(body)}\r\n\r\n"
                conn.send(True, head.encode() + body)
            if c == connections - 1:
                continue  # the Gate never answers this one
            for r in range(requests):
                status = answers[r % len(answers)]
                conn.send(False, b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n")
