"""Message bodies per opcode and protocol version (reference/cql.md §9) → flat JSON-compatible fields.

Version rules follow the DataStax driver: [int] query flags from v5 on (DSE versions 0x41/0x42 count
as >= 5), result_metadata_id / PREPARE flags / keyspace flag from v5 except DSE v1, reason maps in
read/write failures from v5. Bodies may grow in later revisions, so unread bytes are reported as
`trailing`, not as an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wirelog.decoders.cql import envelope as env
from wirelog.decoders.cql.types import CqlType, Reader, Truncated, decode_value, hexed
from wirelog.model import REDACTED

DSE_V1 = 0x41

BATCH_TYPES = {0: "LOGGED", 1: "UNLOGGED", 2: "COUNTER"}
RESULT_KINDS = {1: "void", 2: "rows", 3: "set_keyspace", 4: "prepared", 5: "schema_change"}
ERRORS = {
    0x0000: "server_error",
    0x000A: "protocol_error",
    0x0100: "authentication_error",
    0x1000: "unavailable",
    0x1001: "overloaded",
    0x1002: "is_bootstrapping",
    0x1003: "truncate_error",
    0x1100: "write_timeout",
    0x1200: "read_timeout",
    0x1300: "read_failure",
    0x1400: "function_failure",
    0x1500: "write_failure",
    0x1600: "cdc_write_failure",
    0x1700: "cas_write_unknown",
    0x2000: "syntax_error",
    0x2100: "unauthorized",
    0x2200: "invalid",
    0x2300: "config_error",
    0x2400: "already_exists",
    0x2500: "unprepared",
}


def _modern(version: int) -> bool:
    """v5 features: PREPARE flags, result_metadata_id, keyspace flag (not in DSE v1)."""
    return version >= 5 and version != DSE_V1


@dataclass(slots=True)
class Prepared:
    """What a PREPARE taught us about a statement, to decode later EXECUTE values and result rows."""

    query: str | None = None
    bind_names: list[str] = field(default_factory=list)
    bind_types: list[CqlType] = field(default_factory=list)
    result_types: list[CqlType] | None = None


@dataclass(slots=True)
class BodyContext:
    """Connection knowledge a body decoder may use."""

    version: int
    show_secrets: bool = False
    max_depth: int = 16
    prepared: dict[bytes, Prepared] = field(default_factory=dict)
    request_query: str | None = None  # PREPARE text, for the RESULT that answers it
    result_types: list[CqlType] | None = None  # from the EXECUTE's statement, for no-metadata rows
    # Recently parsed column specs (flags, raw bytes, specs, types): results of the same statement
    # repeat them byte for byte, and re-parsing them dominated the cost of small Rows results.
    spec_cache: list[tuple[int, bytes, list[dict[str, Any]], list[CqlType]]] = field(default_factory=list)


@dataclass(slots=True)
class Body:
    fields: dict[str, Any]
    trailing: int = 0
    error: str | None = None  # set when the body ended before its fields did
    prepared: tuple[bytes, Prepared] | None = None  # a RESULT Prepared to remember


def decode(head: env.EnvelopeHeader, body: bytes, ctx: BodyContext) -> Body:
    """Decode `body` (already decompressed) for `head`; never raises on bad bytes."""
    out = Body({})
    r = Reader(body)
    try:
        _prefix(head, r, out.fields)
        decoder = (_RESPONSES if head.response else _REQUESTS).get(head.opcode)
        if decoder is not None:
            decoder(r, ctx, out)
        elif head.opcode not in env.OPCODES and r.remaining:
            out.fields["body_hex"] = r.take(r.remaining).hex()
        out.trailing = r.remaining
    except Truncated as exc:
        out.error = str(exc)
    except ValueError as exc:  # bad UTF-8 in a type name, bad address bytes, ...
        out.error = str(exc)
    return out


def _prefix(head: env.EnvelopeHeader, r: Reader, f: dict[str, Any]) -> None:
    """Tracing id, warnings and custom payload that precede the message when their flags are set."""
    if head.response and head.flags & env.FLAG_TRACING:
        f["tracing_id"] = r.uuid()
    if head.response and head.flags & env.FLAG_WARNING and head.version >= 4:
        f["warnings"] = r.string_list()
    if head.flags & env.FLAG_CUSTOM_PAYLOAD and head.version >= 4:
        f["custom_payload"] = r.bytes_map()


def _values(r: Reader, with_names: bool) -> tuple[list[bytes | str | None], list[str]]:
    names: list[str] = []
    values: list[bytes | str | None] = []
    for _ in range(r.short()):
        if with_names:
            names.append(r.string())
        values.append(r.value())
    return values, names


def _put_values(
    f: dict[str, Any], values: list[bytes | str | None], names: list[str], prep: Prepared | None
) -> None:
    f["values"] = [hexed(v) for v in values]
    if names:
        f["value_names"] = names
    if prep is not None and len(prep.bind_types) == len(values):
        f["values_decoded"] = [safe_value(t, v) for t, v in zip(prep.bind_types, values, strict=True)]


def safe_value(t: CqlType, data: bytes | str | None) -> Any:
    """A decoded value, or {"hex", "error"} when the bytes do not fit the type."""
    try:
        return decode_value(t, data)
    except (Truncated, ValueError, IndexError) as exc:
        return {"hex": hexed(data), "error": str(exc)}


def _query_parameters(r: Reader, ctx: BodyContext, f: dict[str, Any], prep: Prepared | None) -> None:
    f["consistency"] = r.consistency()
    flags = r.int() if ctx.version >= 5 else r.byte()  # [byte] in v3/v4, [int] from v5
    f["query_flags"] = flags
    if flags & 0x01:
        values, names = _values(r, bool(flags & 0x40))
        _put_values(f, values, names, prep)
    if flags & 0x04:
        f["page_size"] = r.int()
    if flags & 0x08:
        f["paging_state"] = hexed(r.bytes())
    _flagged_tail(r, ctx, f, flags)


def _flagged_tail(r: Reader, ctx: BodyContext, f: dict[str, Any], flags: int) -> None:
    """The optional fields QUERY/EXECUTE parameters and BATCH share, in flag order."""
    if flags & 0x10:
        f["serial_consistency"] = r.consistency()
    if flags & 0x20:
        f["timestamp"] = r.long()
    if flags & 0x80 and _modern(ctx.version):
        f["keyspace"] = r.string()
    if flags & 0x100 and _modern(ctx.version):
        f["now_in_seconds"] = r.int()


# ---- requests -------------------------------------------------------------------------------------


def _startup(r: Reader, ctx: BodyContext, out: Body) -> None:
    out.fields["options"] = r.string_map()


def _auth_response(r: Reader, ctx: BodyContext, out: Body) -> None:
    token = r.bytes()
    f = out.fields
    parts = token.split(b"\x00") if token is not None else []
    if len(parts) == 3:  # SASL PLAIN: authzid \0 authcid \0 password
        f["sasl_mechanism"] = "PLAIN"
        f["auth_user"] = parts[1].decode("utf-8", "replace")
        if ctx.show_secrets:
            f["auth_password"] = parts[2].decode("utf-8", "replace")
    f["token"] = hexed(token) if ctx.show_secrets or token is None else REDACTED


def _query(r: Reader, ctx: BodyContext, out: Body) -> None:
    out.fields["query"] = r.long_string()
    _query_parameters(r, ctx, out.fields, None)


def _prepare(r: Reader, ctx: BodyContext, out: Body) -> None:
    out.fields["query"] = r.long_string()
    if _modern(ctx.version):
        flags = r.int()
        out.fields["prepare_flags"] = flags
        if flags & 0x01:
            out.fields["keyspace"] = r.string()


def _execute(r: Reader, ctx: BodyContext, out: Body) -> None:
    pid = r.short_bytes()
    f = out.fields
    f["prepared_id"] = pid.hex()
    if _modern(ctx.version):
        f["result_metadata_id"] = r.short_bytes().hex()
    prep = ctx.prepared.get(pid)
    if prep is not None and prep.query is not None:
        f["query"] = prep.query
    _query_parameters(r, ctx, f, prep)


def _batch(r: Reader, ctx: BodyContext, out: Body) -> None:
    f = out.fields
    btype = r.byte()
    f["batch_type"] = BATCH_TYPES.get(btype, str(btype))
    statements = []
    for _ in range(r.short()):
        st: dict[str, Any] = {}
        prep = None
        if r.byte() == 0:
            st["query"] = r.long_string()
        else:
            pid = r.short_bytes()
            st["prepared_id"] = pid.hex()
            prep = ctx.prepared.get(pid)
            if prep is not None and prep.query is not None:
                st["query"] = prep.query
        values, names = _values(r, False)
        _put_values(st, values, names, prep)
        statements.append(st)
    f["statements"] = statements
    f["consistency"] = r.consistency()
    flags = r.int() if ctx.version >= 5 else r.byte()
    f["batch_flags"] = flags
    _flagged_tail(r, ctx, f, flags)


def _register(r: Reader, ctx: BodyContext, out: Body) -> None:
    out.fields["event_types"] = r.string_list()


# ---- responses ------------------------------------------------------------------------------------


def _error(r: Reader, ctx: BodyContext, out: Body) -> None:
    f = out.fields
    code = r.int()
    f["error_code"] = code
    f["error_name"] = ERRORS.get(code, f"0x{code:04x}")
    f["error_message"] = r.string()
    if code in (0x1000, 0x1100, 0x1200, 0x1300, 0x1500, 0x1700):
        f["consistency"] = r.consistency()
        if code == 0x1000:
            f["required"], f["alive"] = r.int(), r.int()
            return
        f["received"], f["block_for"] = r.int(), r.int()
        if code in (0x1300, 0x1500):
            if ctx.version >= 5:
                f["reasons"] = {r.inetaddr(): r.short() for _ in range(r.count())}
            else:
                f["failures"] = r.int()
        if code in (0x1100, 0x1500):
            f["write_type"] = r.string()
            if code == 0x1100 and f["write_type"] == "CAS" and ctx.version >= 5:
                f["contentions"] = r.short()
        elif code in (0x1200, 0x1300):
            f["data_present"] = bool(r.byte())
    elif code == 0x1400:
        f["keyspace"], f["function"], f["arg_types"] = r.string(), r.string(), r.string_list()
    elif code == 0x2400:
        f["keyspace"], f["table"] = r.string(), r.string()
    elif code == 0x2500:
        f["prepared_id"] = r.short_bytes().hex()


def _authenticate(r: Reader, ctx: BodyContext, out: Body) -> None:
    out.fields["authenticator"] = r.string()


def _supported(r: Reader, ctx: BodyContext, out: Body) -> None:
    out.fields["options"] = r.string_multimap()


def _token(r: Reader, ctx: BodyContext, out: Body) -> None:
    out.fields["token"] = hexed(r.bytes())


def _schema_change(r: Reader, f: dict[str, Any]) -> None:
    f["change"] = r.string()
    target = r.string()
    f["target"] = target
    f["keyspace"] = r.string()
    if target in ("TABLE", "TYPE"):
        f["name"] = r.string()
    elif target in ("FUNCTION", "AGGREGATE"):
        f["name"], f["arg_types"] = r.string(), r.string_list()


def _event(r: Reader, ctx: BodyContext, out: Body) -> None:
    f = out.fields
    etype = r.string()
    f["event_type"] = etype
    if etype in ("TOPOLOGY_CHANGE", "STATUS_CHANGE"):
        f["change"], f["address"] = r.string(), r.inet()
    elif etype == "SCHEMA_CHANGE":
        _schema_change(r, f)
    elif r.remaining:
        f["event_hex"] = r.take(r.remaining).hex()


SPEC_CACHE = 8


def _column_specs(
    r: Reader, ctx: BodyContext, flags: int, n: int
) -> tuple[list[dict[str, Any]], list[CqlType]]:
    start, data = r.pos, r.data
    for cflags, blob, specs, types in ctx.spec_cache:
        if cflags == flags and len(types) == n and data.startswith(blob, start):
            r.pos = start + len(blob)
            return specs, types
    specs, types = _parse_column_specs(r, ctx, flags, n)
    ctx.spec_cache.append((flags, data[start : r.pos], specs, types))
    if len(ctx.spec_cache) > SPEC_CACHE:
        del ctx.spec_cache[0]
    return specs, types


def _parse_column_specs(
    r: Reader, ctx: BodyContext, flags: int, n: int
) -> tuple[list[dict[str, Any]], list[CqlType]]:
    glob = (r.string(), r.string()) if flags & 0x0001 else None
    specs, types = [], []
    for _ in range(n):
        ks, table = glob if glob is not None else (r.string(), r.string())
        name = r.string()
        t = r.option(0, ctx.max_depth)
        specs.append({"keyspace": ks, "table": table, "name": name, "type": str(t)})
        types.append(t)
    return specs, types


def _rows_metadata(
    r: Reader, ctx: BodyContext, f: dict[str, Any], prefix: str, pk: bool
) -> list[CqlType] | None:
    """<metadata> of Rows and Prepared results; returns the column types (None with No_metadata)."""
    flags = r.int()
    n = r.count()
    f[f"{prefix}metadata_flags"] = flags
    f[f"{prefix}columns_count"] = n
    if pk:
        f["pk_indexes"] = [r.short() for _ in range(r.count())]
    if flags & 0x0002:
        f["paging_state"] = hexed(r.bytes())
    if flags & 0x0008 and _modern(ctx.version):
        f["new_metadata_id"] = r.short_bytes().hex()
    if flags & 0x0004:
        return None
    specs, types = _column_specs(r, ctx, flags, n)
    f[f"{prefix}columns"] = specs
    return types


def _rows(r: Reader, ctx: BodyContext, f: dict[str, Any]) -> None:
    types = _rows_metadata(r, ctx, f, "", False)
    ncols = f["columns_count"]
    if types is None and ctx.result_types is not None and len(ctx.result_types) == ncols:
        types = ctx.result_types
    nrows = r.count()
    f["rows_count"] = nrows
    rows = []
    for _ in range(nrows):
        cells = [r.bytes() for _ in range(ncols)]
        if types is None:
            rows.append([hexed(c) for c in cells])
        else:
            rows.append([safe_value(t, c) for t, c in zip(types, cells, strict=True)])
    f["rows"] = rows


def _result(r: Reader, ctx: BodyContext, out: Body) -> None:
    f = out.fields
    kind = r.int()
    f["result_kind"] = RESULT_KINDS.get(kind, str(kind))
    if kind == 2:
        _rows(r, ctx, f)
    elif kind == 3:
        f["keyspace"] = r.string()
    elif kind == 4:
        pid = r.short_bytes()
        f["prepared_id"] = pid.hex()
        if _modern(ctx.version):
            f["result_metadata_id"] = r.short_bytes().hex()
        if ctx.request_query is not None:
            f["query"] = ctx.request_query
        bind = _rows_metadata(r, ctx, f, "bind_", ctx.version >= 4)
        result = _rows_metadata(r, ctx, f, "result_", False)
        names = [c["name"] for c in f.get("bind_columns", [])]
        out.prepared = (pid, Prepared(ctx.request_query, names, bind or [], result))
    elif kind == 5:
        _schema_change(r, f)


_REQUESTS = {
    0x01: _startup,
    0x07: _query,
    0x09: _prepare,
    0x0A: _execute,
    0x0B: _register,
    0x0D: _batch,
    0x0F: _auth_response,
}
_RESPONSES = {
    0x00: _error,
    0x03: _authenticate,
    0x06: _supported,
    0x08: _result,
    0x0C: _event,
    0x0E: _token,
    0x10: _token,
}
