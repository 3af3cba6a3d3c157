"""The real cassandra-driver against a real Apache Cassandra (tests/cassandra_server.py), captured on lo.

For each protocol setup (v4, v4 + LZ4, v5 CRC frames, v5 LZ4 frames) one driver session runs a workload:
a failed and a good PasswordAuthenticator login, DDL while the control connection is registered for
events, prepared statements over every CQL type, paging, the three batch types, tracing, warnings and
server errors (syntax, invalid, already exists, unauthorized, unprepared, unavailable, read failure,
read timeout). For TOPOLOGY_CHANGE/STATUS_CHANGE events a second node (127.0.0.2) joins and leaves while
a v5 session is connected (on the newest Cassandra only).
The driver's own Connection is instrumented to record every message it sends and the response it
decodes; `wirelog convert --to json` of the capture must show each of them, field by field, with bound
values and rows typed exactly as the driver typed them.
"""

from __future__ import annotations

import copy
import datetime
import math
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from cassandra import ConsistencyLevel, ReadFailure, ReadTimeout
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable, Session
from cassandra.connection import Connection, ProtocolHandler
from cassandra.cqltypes import UserType
from cassandra.policies import FallthroughRetryPolicy, RoundRobinPolicy
from cassandra.protocol import (
    AuthenticateMessage,
    AuthResponseMessage,
    AuthSuccessMessage,
    BatchMessage,
    ErrorMessage,
    EventMessage,
    ExecuteMessage,
    OptionsMessage,
    PrepareMessage,
    QueryMessage,
    ReadyMessage,
    RegisterMessage,
    ResultMessage,
    StartupMessage,
    SupportedMessage,
)
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType, SimpleStatement
from cassandra.util import Date, Duration, Time

from tests.capture_tools import ndjson, run_cli, tcpdump
from tests.cassandra_server import (  # noqa: F401 - cassandra_server is a fixture
    PASSWORD,
    REPO,
    USER,
    VERSIONS,
    CassandraServer,
    cassandra_server,
    start,
    stop,
)

# name -> (protocol version, compression)
CONFIGS: dict[str, tuple[int, str | bool]] = {
    "v4": (4, False),
    "v4-lz4": (4, "lz4"),
    "v5-crc": (5, False),
    "v5-lz4": (5, "lz4"),
}
CL = ConsistencyLevel.value_to_name
OPCODES = {
    StartupMessage: "startup",
    OptionsMessage: "options",
    RegisterMessage: "register",
    AuthResponseMessage: "auth_response",
    QueryMessage: "query",
    PrepareMessage: "prepare",
    ExecuteMessage: "execute",
    BatchMessage: "batch",
}
RESULT_KINDS = {1: "void", 2: "rows", 3: "set_keyspace", 4: "prepared", 5: "schema_change"}

# ---- recording what the driver sends and receives ----------------------------------------------------


@dataclass
class Exchange:
    """One request the driver sent and the response it decoded (None if none came)."""

    port: int  # the client's local port: which connection
    server_port: int
    stream: int
    request: Any
    response: Any = None
    connection: Any = None  # the driver's Connection, to tell a pending request from an abandoned one


@dataclass
class Transcript:
    exchanges: list[Exchange] = field(default_factory=list)
    events: list[tuple[int, int, EventMessage]] = field(default_factory=list)  # (port, server port, event)


@contextmanager
def recording() -> Iterator[Transcript]:
    """Wrap the driver's Connection.send_msg/handle_pushed: every request, its decoded response, events."""
    transcript = Transcript()
    send_msg, handle_pushed = Connection.send_msg, Connection.handle_pushed

    def send(conn: Connection, msg: Any, request_id: int, cb: Callable, **kw: Any) -> int:
        # a copy: the driver re-sends the same QueryMessage for the next page with a new paging_state
        ex = Exchange(
            conn._socket.getsockname()[1], conn.endpoint.port, request_id, copy.copy(msg), connection=conn
        )
        transcript.exchanges.append(ex)
        decoder = kw.pop("decoder", ProtocolHandler.decode_message)

        def decode(*args: Any) -> Any:
            ex.response = decoder(*args)
            return ex.response

        return send_msg(conn, msg, request_id, cb, decoder=decode, **kw)

    def pushed(conn: Connection, response: EventMessage) -> None:
        transcript.events.append((conn._socket.getsockname()[1], conn.endpoint.port, response))
        handle_pushed(conn, response)

    with (
        mock.patch.object(Connection, "send_msg", send),
        mock.patch.object(Connection, "handle_pushed", pushed),
    ):
        yield transcript


# ---- the workload --------------------------------------------------------------------------------------

EVERY_COLUMNS = {
    "k": "int",
    "a": "ascii",
    "b": "bigint",
    "bl": "blob",
    "bo": "boolean",
    "d": "decimal",
    "db": "double",
    "f": "float",
    "i": "inet",
    "s": "smallint",
    "ti": "tinyint",
    "t": "text",
    "ts": "timestamp",
    "u": "uuid",
    "tu": "timeuuid",
    "vi": "varint",
    "dt": "date",
    "tm": "time",
    "du": "duration",
    "l": "list<int>",
    "st": "set<text>",
    "m": "map<text, int>",
    "mi": "map<int, text>",
    "tp": "tuple<int, text, double>",
    "ad": "frozen<address>",
    "nest": "map<text, frozen<list<int>>>",
}
U = uuid.UUID("2f1e6b5c-1d2e-4f3a-9b8c-7d6e5f4a3b2c")
TU = uuid.UUID("e3b4f1a0-2a3b-11ef-8000-0800200c9a66")
NOON = Time(45_296_000_000_789)  # 12:34:56.000000789
ROWS: list[tuple] = [
    # every column set, ordinary values
    (1, "ascii", 2**62, b"\x00\x01\xff", True, Decimal("3.14159"), 2.5, 1.5, "127.0.0.1", -32768, -128,
     "h\u00e9llo \u2603", datetime.datetime(2024, 2, 29, 12, 34, 56, 789000), U, TU, 2**70 + 1,
     Date(datetime.date(2024, 2, 29)), NOON, Duration(1, 2, 3), [1, 2, 3], ["a", "b"], {"x": 1, "y": -1},
     {1: "one", 2: "two"}, (7, "seven", 7.5), ("rue de Rivoli", 75001, ["fr", "paris"]),
     {"p": [1, 2], "q": [3]}),
    # edges: extremes, non-finite floats, IPv6, before the epoch, negative duration, empty collections
    (2, "", -(2**63), b"", False, Decimal("-1E+3"), math.nan, -math.inf, "::1", 32767, 127, "",
     datetime.datetime(1969, 12, 31, 23, 59, 59, 999000), U, TU, -(2**64), Date(datetime.date(1, 1, 1)),
     Time(0), Duration(-1, -2, -3), [], set(), {}, {-5: ""}, (None, "x", None), ("", None, None),
     {"e": []}),
    # nulls and unset values (v4+: "leave unchanged")
    (3, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None,
     None, None, None, None, None, None, None, UNSET_VALUE, UNSET_VALUE),
]  # fmt: skip
TOMBSTONES = 60  # over tombstone_failure_threshold (50) in cassandra_server.YAML
SLOW_ROWS = 400  # x ROW_DELAY_MS (5 ms a row) = 2 s, over read_request_timeout (1 s)


@dataclass
class Workload:
    keyspace: str
    role: str
    pages: int = 0  # RESULT pages of the paged SELECT


def _profile() -> dict:
    # no retries: each server error reaches the driver (and the capture) exactly once
    return {
        EXEC_PROFILE_DEFAULT: ExecutionProfile(
            load_balancing_policy=RoundRobinPolicy(),
            retry_policy=FallthroughRetryPolicy(),
            request_timeout=60,
        )
    }


def _cluster(server: CassandraServer, version: int, compression: str | bool, user: str, password: str,
             **kw: Any) -> Cluster:  # fmt: skip
    return Cluster(
        [server.host],
        port=server.port,
        protocol_version=version,
        compression=compression,
        auth_provider=PlainTextAuthProvider(user, password),
        execution_profiles=_profile(),
        connect_timeout=20,
        control_connection_timeout=20,
        **kw,
    )


def _fails(run: Callable[[], Any]) -> None:
    """Run a statement the server must reject (the error is checked in the capture, not here)."""
    with pytest.raises(Exception):  # noqa: B017 - the driver raises many types; the capture decides
        run()


def workload(server: CassandraServer, name: str, version: int, compression: str | bool) -> Workload:
    ks = "wl_" + name.replace("-", "_")
    w = Workload(ks, f"reader_{ks}")
    bad = _cluster(server, version, compression, USER, "wrong-password", schema_metadata_enabled=False)
    with pytest.raises(NoHostAvailable):
        bad.connect()
    bad.shutdown()

    cluster = _cluster(server, version, compression, USER, PASSWORD)
    session = cluster.connect()
    try:
        rf1 = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        session.execute(f"CREATE KEYSPACE {ks} WITH replication = {rf1}")
        session.execute(f"CREATE TYPE {ks}.address (street text, zip int, tags frozen<set<text>>)")
        cols = ", ".join(f"{c} {t}" for c, t in EVERY_COLUMNS.items() if c != "k")
        session.execute(f"CREATE TABLE {ks}.every (k int PRIMARY KEY, {cols})")
        session.execute(f"ALTER TABLE {ks}.every ADD note text")
        session.execute(f"CREATE TABLE {ks}.pages (p int, c int, v text, PRIMARY KEY (p, c))")
        session.execute(f"CREATE TABLE {ks}.counts (k text PRIMARY KEY, n counter)")
        session.execute(f"CREATE TABLE {ks}.tomb (p int, c int, PRIMARY KEY (p, c))")
        session.execute(f"CREATE TABLE {ks}.slow (p int, c int, PRIMARY KEY (p, c))")
        session.set_keyspace(ks)

        insert = session.prepare(f"INSERT INTO every ({', '.join(EVERY_COLUMNS)}) VALUES ({', '.join('?' * len(EVERY_COLUMNS))})")  # fmt: skip
        for row in ROWS:
            session.execute(insert, row)
        by_key = session.prepare("SELECT * FROM every WHERE k = ?")
        for k in (1, 2, 3, 4):
            session.execute(by_key, (k,))
        session.execute("SELECT * FROM every")
        session.execute("SELECT k, t FROM every WHERE k = 1", trace=True)
        if version >= 5:  # the per-query keyspace of v5
            session.execute(SimpleStatement("SELECT c FROM pages WHERE p = 0", keyspace=ks))

        page_insert = session.prepare("INSERT INTO pages (p, c, v) VALUES (?, ?, ?)")
        logged = BatchStatement(BatchType.LOGGED)
        for c in range(9):
            logged.add(page_insert, (0, c, f"row {c}"))
        logged.add(SimpleStatement("INSERT INTO pages (p, c, v) VALUES (0, 9, 'row 9')"))
        session.execute(logged)
        bump = session.prepare("UPDATE counts SET n = n + ? WHERE k = ?")
        counter = BatchStatement(BatchType.COUNTER)
        counter.add(bump, (5, "a"))
        counter.add(bump, (-2, "b"))
        counter.add(SimpleStatement("UPDATE counts SET n = n + 1 WHERE k = 'a'"))
        session.execute(counter)
        session.execute("SELECT * FROM counts")
        delete = session.prepare("DELETE FROM tomb WHERE p = 0 AND c = ?")
        unlogged = BatchStatement(BatchType.UNLOGGED)  # one partition: a warning about its size only
        for c in range(TOMBSTONES):
            unlogged.add(delete, (c,))
        session.execute(unlogged)
        slow = BatchStatement(BatchType.UNLOGGED)
        slow_insert = session.prepare("INSERT INTO slow (p, c) VALUES (0, ?)")
        for c in range(SLOW_ROWS):
            slow.add(slow_insert, (c,))
        session.execute(slow)

        paged = session.execute(SimpleStatement("SELECT * FROM pages WHERE p = 0", fetch_size=3))
        assert [r.c for r in paged] == list(range(10))
        w.pages = 4
        by_page = session.prepare("SELECT c, v FROM pages WHERE p = ?")
        by_page.fetch_size = 4
        assert len(list(session.execute(by_page, (0,)))) == 10

        # server errors
        _fails(lambda: session.execute("SELEC * FROM every"))
        _fails(lambda: session.execute("SELECT * FROM every WHERE nope = 1"))
        _fails(lambda: session.execute("CREATE TABLE pages (p int PRIMARY KEY)"))
        _fails(lambda: session.execute("SELECT * FROM tomb WHERE p = 0"))  # READ_FAILURE: tombstones
        _read_timeout(session)
        rf3 = "{'class': 'SimpleStrategy', 'replication_factor': 3}"
        session.execute(f"CREATE KEYSPACE {ks}_rf3 WITH replication = {rf3}")  # a warning: 3 > 1 node
        session.execute(f"CREATE TABLE {ks}_rf3.t (k int PRIMARY KEY, v int)")
        quorum = ConsistencyLevel.QUORUM
        _fails(lambda: session.execute(SimpleStatement(f"INSERT INTO {ks}_rf3.t (k, v) VALUES (1, 1)", consistency_level=quorum)))  # fmt: skip
        _fails(lambda: session.execute(SimpleStatement(f"SELECT * FROM {ks}_rf3.t WHERE k = 1", consistency_level=quorum)))  # fmt: skip
        _unprepared(cluster)

        session.execute(f"CREATE ROLE {w.role} WITH PASSWORD = 'reader-secret' AND LOGIN = true")
        reader = _cluster(
            server, version, compression, w.role, "reader-secret", schema_metadata_enabled=False
        )
        try:
            _fails(lambda: reader.connect().execute(f"SELECT * FROM {ks}.every"))  # UNAUTHORIZED
        finally:
            reader.shutdown()
        session.execute(f"DROP ROLE {w.role}")

        session.execute(f"DROP KEYSPACE {ks}_rf3")
        session.execute("DROP TABLE tomb")
        session.execute("DROP TABLE every")
        session.execute("DROP TYPE address")
        session.execute(f"DROP KEYSPACE {ks}")
    finally:
        cluster.shutdown()
    return w


def _read_timeout(session: Session) -> None:
    """READ_TIMEOUT (0x1200) from a read slower than read_request_timeout. Cassandra races its own
    abort of the slow local read (answered as READ_FAILURE, reason UNKNOWN) against the coordinator's
    timeout; the coordinator usually wins, so a lost race is tried again."""
    for _ in range(4):
        try:
            session.execute("SELECT * FROM slow WHERE p = 0")
        except ReadTimeout:
            return
        except ReadFailure:
            continue
    pytest.fail("4 reads over read_request_timeout, no READ_TIMEOUT")


def _unprepared(cluster: Cluster) -> None:
    """EXECUTE of an id the server never issued: UNPREPARED (0x2500) on a connection of our own."""
    host = cluster.metadata.all_hosts()[0]
    conn = cluster.connection_factory(host.endpoint)
    try:
        msg = ExecuteMessage(b"\x5a" * 16, [], ConsistencyLevel.ONE, result_metadata_id=b"\x00" * 16)
        _fails(lambda: conn.wait_for_response(msg, timeout=30))
    finally:
        conn.close()


# ---- what the capture must show ------------------------------------------------------------------------


def to_json(ctype: Any, value: Any, version: int) -> Any:
    """A value the driver sent or received, in the form wirelog's JSON gives it (docs/protocols/cql.md)."""
    if value is None:
        return None
    if value is UNSET_VALUE:
        return "<unset>"
    name = ctype.typename
    if name in ("list", "set"):
        return [to_json(ctype.subtypes[0], v, version) for v in value]
    if name == "tuple":
        return [to_json(t, v, version) for t, v in zip(ctype.subtypes, value, strict=True)]
    if issubclass(ctype, UserType):
        return {
            f: to_json(t, v, version) for f, t, v in zip(ctype.fieldnames, ctype.subtypes, value, strict=True)
        }
    if name == "map":
        kt, vt = ctype.subtypes
        pairs = [(to_json(kt, k, version), to_json(vt, v, version)) for k, v in value.items()]
        return dict(pairs) if all(isinstance(k, str) for k, _ in pairs) else [list(p) for p in pairs]
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float):
        return value if math.isfinite(value) else ("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity"))  # fmt: skip
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, datetime.datetime):
        ms = round((value - datetime.datetime(1970, 1, 1)) / datetime.timedelta(milliseconds=1))
        t = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(milliseconds=ms)
        return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, Date):
        return (datetime.date(1970, 1, 1) + datetime.timedelta(days=value.days_from_epoch)).isoformat()
    if isinstance(value, Time):
        return value.nanosecond_time
    if isinstance(value, Duration):
        return {"months": value.months, "days": value.days, "nanoseconds": value.nanoseconds}
    if isinstance(value, Decimal | uuid.UUID):
        return str(value)
    return value  # text, ascii, inet


def _values(types: list[Any] | None, params: list[Any], version: int) -> tuple[list, list | None]:
    """(hex of each bound [value], the values typed by the driver's own deserialisers)."""
    raw = ["<unset>" if p is UNSET_VALUE else (None if p is None else p.hex()) for p in params]
    if types is None:
        return raw, None
    typed = [
        to_json(t, p if p is None or p is UNSET_VALUE else t.from_binary(p, version), version)
        for t, p in zip(types, params, strict=True)
    ]
    return raw, typed


class Expectations:
    """Field-by-field expectations for decoded records, from the driver's side of one capture."""

    def __init__(self, transcript: Transcript, version: int) -> None:
        self.version = version
        self.prepared: dict[bytes, tuple[str, list[Any]]] = {}  # id -> (query, bind types)
        for ex in transcript.exchanges:
            if isinstance(ex.request, PrepareMessage) and isinstance(ex.response, ResultMessage):
                types = [c.type for c in ex.response.bind_metadata]
                self.prepared[ex.response.query_id] = (ex.request.query, types)

    def request(self, msg: Any) -> dict[str, Any]:
        want: dict[str, Any] = {"kind": OPCODES[type(msg)]}
        if isinstance(msg, StartupMessage):
            want["options"] = {"CQL_VERSION": msg.cqlversion, **msg.options}
        elif isinstance(msg, RegisterMessage):
            want["event_types"] = list(msg.event_list)
        elif isinstance(msg, AuthResponseMessage):
            want |= {"token": "<redacted>", "sasl_mechanism": "PLAIN", "auth_user": msg.response.split(b"\0")[1].decode()}  # fmt: skip
        elif isinstance(msg, PrepareMessage):
            want |= {"query": msg.query, "keyspace": msg.keyspace}
        elif isinstance(msg, QueryMessage | ExecuteMessage):
            want |= self._params(msg)
        elif isinstance(msg, BatchMessage):
            want |= {
                "batch_type": msg.batch_type.name,
                "consistency": CL[msg.consistency_level],
                "timestamp": msg.timestamp,
                "statements": [self._statement(s) for s in msg.queries],
            }
        return want

    def _params(self, msg: QueryMessage | ExecuteMessage) -> dict[str, Any]:
        want = {
            "consistency": CL[msg.consistency_level],
            "page_size": msg.fetch_size,
            "paging_state": msg.paging_state.hex() if msg.paging_state else None,
            "serial_consistency": CL.get(msg.serial_consistency_level),
            "timestamp": msg.timestamp,
            "keyspace": msg.keyspace if self.version >= 5 else None,
        }
        if isinstance(msg, QueryMessage):
            return want | {"query": msg.query, "values": msg.query_params or None}
        query, types = self.prepared.get(msg.query_id, (None, None))
        raw, typed = _values(types, msg.query_params, self.version)
        want |= {"prepared_id": msg.query_id.hex(), "query": query, "values": raw, "values_decoded": typed}
        if self.version >= 5:
            want["result_metadata_id"] = msg.result_metadata_id.hex()
        return want

    def _statement(self, stmt: tuple) -> dict[str, Any]:
        prepared, text_or_id, params = stmt
        if not prepared:
            return {"query": text_or_id} | (
                {"values": _values(None, params, self.version)[0]} if params else {}
            )
        raw, typed = _values(self.prepared.get(text_or_id, (None, None))[1], params, self.version)
        return {"prepared_id": text_or_id.hex(), "values": raw, "values_decoded": typed}

    def response(self, req: Any, msg: Any) -> dict[str, Any]:
        want: dict[str, Any] = {
            "tracing_id": str(msg.trace_id) if msg.trace_id else None,
            "warnings": msg.warnings,
        }
        if isinstance(msg, ReadyMessage):
            want["kind"] = "ready"
        elif isinstance(msg, AuthenticateMessage):
            want |= {"kind": "authenticate", "authenticator": msg.authenticator}
        elif isinstance(msg, AuthSuccessMessage):
            want |= {"kind": "auth_success", "token": msg.token.hex() if msg.token else None}
        elif isinstance(msg, SupportedMessage):
            want |= {"kind": "supported", "options": {**msg.options, "CQL_VERSION": msg.cql_versions}}
        elif isinstance(msg, ErrorMessage):
            want |= {"kind": "error", "error_code": msg.code, "error_message": msg.message} | _error_info(msg)
        elif isinstance(msg, ResultMessage):
            want |= {"kind": "result", "result_kind": RESULT_KINDS[msg.kind]} | self._result(req, msg)
        else:
            raise AssertionError(f"unexpected response {msg!r}")
        return want

    def _result(self, req: Any, msg: ResultMessage) -> dict[str, Any]:
        if msg.kind == 2:
            rows = [
                [to_json(t, v, self.version) for t, v in zip(msg.column_types, row, strict=True)]
                for row in msg.parsed_rows
            ]
            want = {"rows": rows, "rows_count": len(rows), "paging_state": msg.paging_state.hex() if msg.paging_state else None}  # fmt: skip
            if msg.column_metadata:
                want["column_names"] = [c[2] for c in msg.column_metadata]
            return want
        if msg.kind == 3:
            return {"keyspace": msg.new_keyspace}
        if msg.kind == 4:
            want = {"prepared_id": msg.query_id.hex(), "query": req.query}
            want["bind_column_names"] = [c.name for c in msg.bind_metadata]
            if self.version >= 5:
                want["result_metadata_id"] = msg.result_metadata_id.hex()
            return want
        if msg.kind == 5:
            return _schema_change(msg.schema_change_event)
        return {}


def _schema_change(ev: dict) -> dict[str, Any]:
    target = ev["target_type"]
    return {
        "change": ev["change_type"],
        "target": target,
        "keyspace": ev["keyspace"],
        "name": None if target == "KEYSPACE" else ev[target.lower()],
    }


def _error_info(msg: ErrorMessage) -> dict[str, Any]:
    info = msg.info
    if msg.code == 0x1000:
        return {"consistency": CL[info["consistency"]], "required": info["required_replicas"], "alive": info["alive_replicas"]}  # fmt: skip
    if msg.code == 0x1200:
        return {
            "consistency": CL[info["consistency"]],
            "received": info["received_responses"],
            "block_for": info["required_responses"],
            "data_present": info["data_retrieved"],
        }
    if msg.code == 0x1300:
        want = {
            "consistency": CL[info["consistency"]],
            "received": info["received_responses"],
            "block_for": info["required_responses"],
            "data_present": info["data_retrieved"],
        }
        if info["error_code_map"] is not None:
            return want | {"reasons": info["error_code_map"]}
        return want | {"failures": info["failures"]}
    if msg.code == 0x2400:
        return {"keyspace": info["keyspace"], "table": info["table"]}
    if msg.code == 0x2500:
        return {"prepared_id": info.hex()}
    return {}


def decoded_view(rec: dict) -> dict:
    """The decoded record with the derived names the expectations use."""
    out = dict(rec)
    if "columns" in rec:
        out["column_names"] = [c["name"] for c in rec["columns"]]
    if "bind_columns" in rec:
        out["bind_column_names"] = [c["name"] for c in rec["bind_columns"]]
    return out


def mismatches(want: dict, rec: dict, where: str) -> list[str]:
    got = decoded_view(rec)
    if "statements" in want and len(got.get("statements") or ()) == len(want["statements"]):
        # a batch statement: only the fields the driver side knows (wirelog may add the prepared query)
        got["statements"] = [{k: s.get(k) for k in w} for w, s in zip(want["statements"], got["statements"], strict=True)]  # fmt: skip
    return [f"{where} {k}: decoded {got.get(k)!r}, driver {v!r}" for k, v in want.items() if got.get(k) != v]


# ---- captures ------------------------------------------------------------------------------------------


@dataclass
class Capture:
    name: str
    version: int
    compression: str | bool
    pcap: Path
    transcript: Transcript
    workload: Workload
    records: list[dict]
    raw: bytes
    secret_records: list[dict]
    seconds: float


def convert(path: Path, *extra: str) -> tuple[list[dict], bytes]:
    code, out, err = run_cli("convert", str(path), "--to", "json", *extra)
    assert code == 0, err
    return ndjson(out), out


@pytest.fixture(scope="session")
def captures(
    cassandra_server: CassandraServer,  # noqa: F811 - the fixture imported above
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Capture]:
    out = {}
    for name, (version, compression) in CONFIGS.items():
        pcap = tmp_path_factory.mktemp("cassandra-capture") / f"{cassandra_server.version}-{name}.pcap"
        started = time.monotonic()
        try:
            with tcpdump(pcap, cassandra_server.port), recording() as transcript:
                w = workload(cassandra_server, name, version, compression)
                time.sleep(1.5)  # libpcap hands tcpdump its packets in blocks retired after 1 s
        except RuntimeError as exc:
            if "tcpdump" in str(exc):
                pytest.skip(f"cannot capture on lo: {exc}")
            raise
        seconds = time.monotonic() - started
        records, raw = convert(pcap)
        secret_records, _ = convert(pcap, "--show-secrets")
        out[name] = Capture(
            name, version, compression, pcap, transcript, w, records, raw, secret_records, seconds
        )
    return out


def cql(records: list[dict], kind: str | None = None) -> list[dict]:
    return [
        r
        for r in records
        if r["record"] == "message" and r["protocol"] == "cql" and kind in (None, r["kind"])
    ]


def port_of(rec: dict) -> int:
    return int(rec["client"].rsplit(":", 1)[1])


REQUESTS = set(OPCODES.values())


def by_connection(records: list[dict]) -> tuple[dict, dict, dict]:
    """Decoded requests and responses per (client port, stream id), and events per client port."""
    requests: dict[tuple[int, int], list[dict]] = defaultdict(list)
    responses: dict[tuple[int, int], list[dict]] = defaultdict(list)
    events: dict[int, list[dict]] = defaultdict(list)
    for r in cql(records):
        key = (port_of(r), r["stream_id"])
        if r["kind"] == "event":
            events[key[0]].append(r)
        else:
            (requests if r["direction"] == "c2s" else responses)[key].append(r)
    return requests, responses, events


# ---- tests ---------------------------------------------------------------------------------------------


def compare_with_driver(
    records: list[dict], transcript: Transcript, version: int, server_port: int
) -> list[str]:
    """Every request, response and event of the driver's connections to `server_port` against the
    capture's decoded records: the same connections and stream ids, the same fields."""
    expect = Expectations(transcript, version)
    requests, responses, events = by_connection(records)
    sent: dict[tuple[int, int], list[Exchange]] = defaultdict(list)
    for ex in transcript.exchanges:
        if ex.server_port == server_port:
            sent[(ex.port, ex.stream)].append(ex)
    assert sorted(sent) == sorted(requests), "connections/stream ids differ between driver and capture"
    problems: list[str] = []
    for key, exchanges in sent.items():
        assert len(requests[key]) == len(exchanges), f"{key}: {len(requests[key])} decoded requests"
        answered = [ex for ex in exchanges if ex.response is not None]
        # A driver shutting down may never read the answer to its last request on a stream id (a
        # stream id is reused only once answered): the capture then holds one response more.
        unread = exchanges[-1].response is None
        extra = len(responses[key]) - len(answered)
        assert extra == 0 or (extra == 1 and unread), f"{key}: {len(responses[key])} decoded responses"
        for ex, rec in zip(exchanges, requests[key], strict=True):
            problems += mismatches(expect.request(ex.request), rec, f"{key} frame {rec['frame']}")
        for ex, rec in zip(answered, responses[key][: len(answered)], strict=True):
            problems += mismatches(
                expect.response(ex.request, ex.response), rec, f"{key} frame {rec['frame']}"
            )
    driver_events: dict[int, list[EventMessage]] = defaultdict(list)
    for port, to, ev in transcript.events:
        if to == server_port:
            driver_events[port].append(ev)
    assert {p: len(v) for p, v in events.items()} == {p: len(v) for p, v in driver_events.items()}
    for port, evs in driver_events.items():
        for ev, rec in zip(evs, events[port], strict=True):
            want = {"event_type": ev.event_type, "stream_id": -1}
            if ev.event_type == "SCHEMA_CHANGE":
                want |= _schema_change(ev.event_args)
            else:
                host, native_port = ev.event_args["address"]
                want |= {"change": ev.event_args["change_type"], "address": f"{host}:{native_port}"}
            problems += mismatches(want, rec, f"event port {port} frame {rec['frame']}")
    return problems


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_request_and_response_matches_the_driver(
    captures: dict[str, Capture],
    cassandra_server: CassandraServer,  # noqa: F811
    name: str,
) -> None:
    cap = captures[name]
    assert compare_with_driver(cap.records, cap.transcript, cap.version, cassandra_server.port) == []


@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_request_carries_the_outcome_the_driver_got(
    captures: dict[str, Capture],
    cassandra_server: CassandraServer,  # noqa: F811
    name: str,
    tmp_path: Path,
) -> None:
    """Apache Cassandra's answers as the driver decoded them are the requests' outcomes: an ERROR (a
    refused password, a read timeout, a tombstone failure, an unprepared statement, ...) `error`,
    anything else `answered`, and the response carries its request's id; `inspect --json`, the records
    and docs/schema.md's CQL query over the Parquet give the same numbers."""
    from tests.delivery_helpers import assert_cql_agrees

    cap = captures[name]
    parquet = tmp_path / "records.parquet"
    code, _, err = run_cli("convert", str(cap.pcap), "--to", "parquet", "-o", str(parquet))
    assert code == 0, err
    got = assert_cql_agrees(cap.pcap, parquet)
    requests, responses, _ = by_connection(cap.records)
    errors = 0
    for ex in cap.transcript.exchanges:
        if ex.server_port != cassandra_server.port or ex.response is None:
            continue
        errors += isinstance(ex.response, ErrorMessage)
    checked = 0
    for key, recs in requests.items():
        for request, response in zip(recs, responses[key], strict=False):
            want = "error" if response["kind"] == "error" else "answered"
            assert request["delivery"] == response["delivery"] == want, (key, request["frame"])
            assert request["event_id"] == response["event_id"]
            checked += 1
    assert got["error"] == errors > 0
    assert got["answered"] + got["error"] == checked
    assert got["requests"] == sum(map(len, requests.values()))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_clean_capture_has_no_findings_and_the_framing_negotiated(
    captures: dict[str, Capture], name: str
) -> None:
    cap = captures[name]
    # the only finding a clean run may give: a request the driver itself got no answer to (it closes its
    # control connection while a last metadata query is in flight, some runs), named by port and stream id
    unanswered = {(ex.port, ex.stream) for ex in cap.transcript.exchanges if ex.response is None}
    findings = [r for r in cap.records if r["record"] == "finding"]
    assert [
        f
        for f in findings
        if f["code"] != "cql.unanswered-request" or (port_of(f), f["stream_id"]) not in unanswered
    ] == []
    startups = cql(cap.records, "startup")
    assert startups and {r["version"] for r in startups} == {f"v{cap.version}"}
    assert {r["options"].get("COMPRESSION") for r in startups} == {cap.compression or None}
    handshake = {"startup", "options", "supported", "ready", "authenticate"}
    later = [r for r in cql(cap.records) if r["kind"] not in handshake]
    if cap.version == 5:  # every envelope after the handshake in frames of the negotiated kind, CRCs held
        assert {r.get("framing") for r in later} == {"lz4" if cap.compression else "crc"}
        assert {r["version"] for r in cql(cap.records)} == {"v5"}
    else:
        assert all("framing" not in r for r in cql(cap.records))
        compressed = {("compression" in r.get("flag_names", [])) for r in later if r["length"] > 9}
        assert compressed == {bool(cap.compression)}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_workload_reached_the_wire(captures: dict[str, Capture], name: str) -> None:
    """The comparison above is only as good as the traffic: every feature must really be in it."""
    cap = captures[name]
    ks = cap.workload.keyspace
    recs = cap.records
    assert {r["error_code"] for r in cql(recs, "error")} >= {0x0100, 0x1000, 0x1200, 0x1300, 0x2000, 0x2100, 0x2200, 0x2400, 0x2500}  # fmt: skip
    assert {r["batch_type"] for r in cql(recs, "batch")} == {"LOGGED", "UNLOGGED", "COUNTER"}
    unlogged = [len(r["statements"]) for r in cql(recs, "batch") if r["batch_type"] == "UNLOGGED"]
    assert unlogged == [TOMBSTONES, SLOW_ROWS]
    assert any(r.get("warnings") for r in cql(recs, "result"))  # RF 3 on one node, the big batch
    assert any(r.get("tracing_id") for r in cql(recs, "result"))
    inserts = [r for r in cql(recs, "execute") if (r.get("query") or "").startswith("INSERT INTO every")]
    assert [r["values_decoded"][0] for r in inserts] == [1, 2, 3]
    pages = [
        r
        for r in cql(recs, "query")
        if r["query"] == "SELECT * FROM pages WHERE p = 0" and r.get("page_size") == 3
    ]
    assert len(pages) == cap.workload.pages and [bool(r.get("paging_state")) for r in pages] == [False, True, True, True]  # fmt: skip
    changes = {(r["change"], r["target"]) for r in cql(recs, "event") if r["keyspace"] == ks}
    assert changes >= {("CREATED", "KEYSPACE"), ("CREATED", "TYPE"), ("CREATED", "TABLE"), ("UPDATED", "TABLE"),
                       ("DROPPED", "TABLE"), ("DROPPED", "TYPE"), ("DROPPED", "KEYSPACE")}  # fmt: skip
    register = cql(recs, "register")
    assert register and set(register[0]["event_types"]) == {
        "TOPOLOGY_CHANGE",
        "STATUS_CHANGE",
        "SCHEMA_CHANGE",
    }


GOLDEN_ROWS = {
    1: {"a": "ascii", "b": 2**62, "bl": "0001ff", "bo": True, "d": "3.14159", "db": 2.5, "f": 1.5,
        "i": "127.0.0.1", "s": -32768, "ti": -128, "t": "h\u00e9llo \u2603", "ts": "2024-02-29T12:34:56.789Z",
        "u": str(U), "tu": str(TU), "vi": str(2**70 + 1), "dt": "2024-02-29", "tm": 45_296_000_000_789,
        "du": {"months": 1, "days": 2, "nanoseconds": 3}, "l": [1, 2, 3], "st": ["a", "b"],
        "m": {"x": 1, "y": -1}, "mi": [[1, "one"], [2, "two"]], "tp": [7, "seven", 7.5],
        "ad": {"street": "rue de Rivoli", "zip": 75001, "tags": ["fr", "paris"]},
        "nest": {"p": [1, 2], "q": [3]}, "note": None},
    2: {"a": "", "b": -(2**63), "bl": "", "bo": False, "d": "-1E+3", "db": "NaN", "f": "-Infinity", "i": "::1",
        "s": 32767, "ti": 127, "t": "", "ts": "1969-12-31T23:59:59.999Z", "vi": str(-(2**64)),
        "dt": "0001-01-01", "tm": 0, "du": {"months": -1, "days": -2, "nanoseconds": -3}, "l": None,
        "st": None, "m": None, "mi": [[-5, ""]], "tp": [None, "x", None],
        "ad": {"street": "", "zip": None, "tags": None}, "nest": {"e": []}},
}  # fmt: skip


def every_rows(records: list[dict]) -> dict[int, dict[str, Any]]:
    """Rows of the `every` table from RESULTs of EXECUTEs (prepared, so typed with no metadata sent)."""
    seen = {}
    for r in cql(records, "result"):
        if r.get("request_opcode") == "execute" and r.get("rows") and "columns" in r:
            names = [c["name"] for c in r["columns"]]
            if "du" in names:
                seen.update({row[0]: dict(zip(names, row, strict=True)) for row in r["rows"]})
    return seen


@pytest.mark.parametrize("name", list(CONFIGS))
def test_typed_rows_against_golden_values(captures: dict[str, Capture], name: str) -> None:
    """Independent of the driver's deserialisers: what every column type must look like in the JSON."""
    seen = every_rows(captures[name].records)
    for k, want in GOLDEN_ROWS.items():
        assert {c: seen[k][c] for c in want if c != "du"} == {c: v for c, v in want.items() if c != "du"}
    assert seen[3]["ad"] is None and seen[3]["a"] is None and set(seen) == {1, 2, 3}


# Protocol v4 has no duration type code: Cassandra describes duration columns as the custom type
# 'org.apache.cassandra.db.marshal.DurationType' (option 0x0000), decoded like v5's 0x0015.
@pytest.mark.parametrize("name", list(CONFIGS))
def test_duration_is_typed(captures: dict[str, Capture], name: str) -> None:
    records = captures[name].records
    seen = every_rows(records)
    assert [seen[k]["du"] for k in (1, 2)] == [GOLDEN_ROWS[k]["du"] for k in (1, 2)]
    inserts = [r for r in cql(records, "execute") if (r.get("query") or "").startswith("INSERT INTO every")]
    assert [r["values_decoded"][18] for r in inserts[:2]] == [GOLDEN_ROWS[k]["du"] for k in (1, 2)]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_credentials_redacted_unless_asked(captures: dict[str, Capture], name: str) -> None:
    cap = captures[name]
    tokens = {b"\0cassandra\0cassandra", b"\0cassandra\0wrong-password", b"\0" + cap.workload.role.encode() + b"\0reader-secret"}  # fmt: skip
    for token in tokens:
        assert token.hex().encode() not in cap.raw
    assert b"wrong-password" not in cap.raw
    assert all("auth_password" not in r for r in cql(cap.records, "auth_response"))
    shown = {
        (r["auth_user"], r["auth_password"], r["token"]) for r in cql(cap.secret_records, "auth_response")
    }
    assert shown == {(t.split(b"\0")[1].decode(), t.split(b"\0")[2].decode(), t.hex()) for t in tokens}
    failed = [r for r in cql(cap.records, "error") if r["error_code"] == 0x0100]
    assert len(failed) == 1 and re.search("password", failed[0]["error_message"], re.I)


@dataclass
class Topology:
    second: CassandraServer
    transcript: Transcript
    records: list[dict]


def _wait_for(done: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {seconds:.0f} s")
        time.sleep(0.5)


def _settled(ex: Exchange) -> bool:
    return ex.response is not None or ex.connection.is_closed or ex.connection.is_defunct


@pytest.fixture(scope="session")
def topology(
    cassandra_server: CassandraServer,  # noqa: F811
    captures: dict[str, Capture],
    tmp_path_factory: pytest.TempPathFactory,
) -> Topology:
    """A second node joins and leaves (on 127.0.0.2) while a v5 driver session is on the first one."""
    if cassandra_server.version != VERSIONS[0]:
        pytest.skip("topology events are checked on the newest Cassandra only (a second node: ~30 s)")
    pcap = tmp_path_factory.mktemp("cassandra-capture") / f"{cassandra_server.version}-topology.pcap"
    seed = f"{cassandra_server.host}:{cassandra_server.storage_port}"
    with tcpdump(pcap, cassandra_server.port), recording() as transcript:
        cluster = _cluster(cassandra_server, 5, False, USER, PASSWORD)
        session = cluster.connect()

        def seen(*kinds: tuple[str, str]) -> Callable[[], bool]:
            def done() -> bool:
                got = {(ev.event_type, ev.event_args.get("change_type")) for _, _, ev in transcript.events}
                return set(kinds) <= got

            return done

        root = tmp_path_factory.mktemp(f"cassandra-{cassandra_server.version}-second")
        second = start(cassandra_server.version, root, host="127.0.0.2", seed=seed, login=False)
        try:
            _wait_for(
                seen(("TOPOLOGY_CHANGE", "NEW_NODE"), ("STATUS_CHANGE", "UP")), 120, "NEW_NODE/UP event"
            )
            session.execute("SELECT peer, native_port FROM system.peers_v2")
        finally:
            stop(second)
        _wait_for(seen(("STATUS_CHANGE", "DOWN")), 60, "DOWN event")
        # the driver refreshes its metadata after DOWN; shutting down mid-query would leave a request
        # rightly reported unanswered, so wait until every request on a live connection has its answer
        _wait_for(lambda: all(_settled(ex) for ex in transcript.exchanges), 30, "answers on live connections")
        cluster.shutdown()
        time.sleep(1.5)  # libpcap hands tcpdump its packets in blocks retired after 1 s
    return Topology(second, transcript, convert(pcap)[0])


def test_topology_and_status_events(
    topology: Topology,
    cassandra_server: CassandraServer,  # noqa: F811
) -> None:
    assert compare_with_driver(topology.records, topology.transcript, 5, cassandra_server.port) == []
    # The driver may still send a metadata query as it shuts down: "unanswered" is then the truth,
    # and the transcript shows it (no response decoded for that connection and stream id).
    unanswered = {(ex.port, ex.stream) for ex in topology.transcript.exchanges if ex.response is None}
    findings = [
        r
        for r in topology.records
        if r["record"] == "finding"
        and not (
            r["code"] == "cql.unanswered-request"
            and (int(r["client"].rsplit(":", 1)[1]), r["stream_id"]) in unanswered
        )
    ]
    assert findings == []
    address = f"{topology.second.host}:{topology.second.port}"
    events = {(r["event_type"], r["change"], r["address"]) for r in cql(topology.records, "event")}
    assert events >= {
        ("TOPOLOGY_CHANGE", "NEW_NODE", address),
        ("STATUS_CHANGE", "UP", address),
        ("STATUS_CHANGE", "DOWN", address),
    }


def test_server_footprint(cassandra_server: CassandraServer, captures: dict[str, Capture]) -> None:  # noqa: F811
    """Start-up time and memory: the numbers the issue asks for, bounded so a regression shows."""
    rss = cassandra_server.rss_kib("VmHWM") // 1024
    print(
        f"\nCassandra {cassandra_server.version}: ready in {cassandra_server.startup_seconds:.1f} s, "
        f"peak RSS {rss} MiB; workloads "
        + ", ".join(f"{c.name} {c.seconds:.1f} s" for c in captures.values())
    )
    assert cassandra_server.startup_seconds < 180 and rss < 2048
    assert all(c.seconds < 60 for c in captures.values())


def test_fixture_versions_are_the_ones_make_installs() -> None:
    """mk/cassandra.mk fills the cache the fixture reads: the two version lists must not drift apart."""
    mk = (REPO / "mk" / "cassandra.mk").read_text()
    line = re.search(r"^CASSANDRA_VERSIONS \?= (.+)$", mk, re.M)
    assert line is not None and tuple(line.group(1).split()) == VERSIONS


@pytest.mark.parametrize("name", list(CONFIGS))
def test_cassandra_captures_decode_the_same_when_impaired(
    captures: dict[str, Capture], name: str, tmp_path: Path
) -> None:
    """Apache Cassandra's own captures with packets moved later or written twice: the same
    requests, responses, events, CRC checks and findings (impair.assert_same_when_impaired)."""
    from impair import assert_same_when_impaired

    records = assert_same_when_impaired(captures[name].pcap, tmp_path)
    assert cql(records, "result")
