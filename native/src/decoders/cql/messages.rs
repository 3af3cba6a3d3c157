//! Message bodies per opcode and protocol version (reference/cql.md §9) → flat record fields.
//!
//! Version rules follow the DataStax driver: `[int]` query flags from v5 on (DSE 0x41/0x42 count
//! as >= 5), result_metadata_id / PREPARE flags / keyspace flag from v5 except DSE v1, reason maps
//! in read/write failures from v5. Bodies may grow in later revisions, so unread bytes are reported
//! as `trailing`, not as an error. A field group read by one Python statement (`a, b = r.x(), r.y()`)
//! is kept all or nothing, as the record contract has it.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "positions within one body and a cache index modulo its size"
)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::decoders::budget::VALUE_COST;
use crate::model::{Shared, Value};

use super::envelope::{self, Header};
use super::rows::Rows;
use super::types::{hex, Cell};
use super::types::{CqlType, Malformed, Reader, Res};

const DSE_V1: u8 = 0x41;
pub const REDACTED: &str = "<redacted>";

pub use crate::model::Fields;

/// Set a field; setting it again keeps its place.
pub fn put(f: &mut Fields, name: &'static str, value: impl Into<Value>) {
    let value = value.into();
    match f.iter_mut().find(|(n, _)| *n == name) {
        Some(slot) => slot.1 = value.into(),
        None => f.push((name, value)),
    }
}

fn get<'f>(f: &'f Fields, name: &str) -> Option<&'f Value> {
    f.iter().find(|(n, _)| *n == name).map(|(_, v)| &**v)
}

/// v5 features: PREPARE flags, result_metadata_id, keyspace flag (not in DSE v1).
fn modern(version: u8) -> bool {
    version >= 5 && version != DSE_V1
}

/// What a PREPARE taught us about a statement, to decode later EXECUTE values and result rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prepared {
    pub query: Option<String>,
    pub bind_types: Arc<[CqlType]>,
    pub result_types: Option<Arc<[CqlType]>>,
}

/// Prepared statements of one server, by id.
pub type PreparedMap = HashMap<Vec<u8>, Prepared>;

/// Connection knowledge a body decoder may use.
pub struct BodyContext<'a> {
    pub version: u8,
    pub show_secrets: bool,
    pub max_depth: usize,
    pub prepared: &'a PreparedMap,
    /// The PREPARE text, for the RESULT that answers it.
    pub request_query: Option<&'a str>,
    /// The EXECUTE's statement's result columns, for rows sent without metadata.
    pub result_types: Option<&'a Arc<[CqlType]>>,
    /// The connection's column specs decoded so far (None: nothing is remembered).
    pub specs: Option<&'a Mutex<SpecCache>>,
    /// Cells of a rows result the frame's budget still pays for (decoders/budget.rs), and its cap.
    pub max_cells: usize,
    pub cap: usize,
}

/// Entries of a `SpecCache`, and the most bytes of column specs one may hold: a few KiB a
/// connection at most (specs of a dozen columns; wider ones are decoded every time).
const CACHED_SPECS: usize = 4;
const CACHED_SPEC_BYTES: usize = 256;

/// Column specs recently decoded on a connection, with the bytes they were read from: a server
/// sends the same metadata with every Rows result of a statement, and building the spec objects
/// again was the largest part of decoding one. Equal bytes decode to equal specs.
#[derive(Debug, Default)]
pub struct SpecCache {
    entries: Vec<Specs>,
    /// The entry replaced next once all are taken.
    next: usize,
}

#[derive(Debug)]
struct Specs {
    global: bool,
    n: usize,
    raw: Vec<u8>,
    specs: Arc<Shared>,
    types: Arc<[CqlType]>,
}

impl SpecCache {
    fn find(&self, global: bool, n: usize, ahead: &[u8]) -> Option<&Specs> {
        self.entries
            .iter()
            .find(|e| e.global == global && e.n == n && ahead.starts_with(&e.raw))
    }

    fn keep(&mut self, entry: Specs) {
        if self.entries.len() < CACHED_SPECS {
            self.entries.push(entry);
        } else {
            self.entries[self.next] = entry;
            self.next = (self.next + 1) % CACHED_SPECS;
        }
    }
}

#[derive(Debug, Default)]
pub struct Body {
    pub fields: Fields,
    pub trailing: usize,
    /// Set when the body ended before its fields did.
    pub error: Option<String>,
    /// A RESULT Prepared to remember.
    pub prepared: Option<(Vec<u8>, Prepared)>,
}

/// Decode `body` (already decompressed) for `head` into `fields` (appended to those given);
/// never fails on bad bytes.
pub fn decode(head: &Header, body: &[u8], ctx: &BodyContext<'_>, fields: Fields) -> Body {
    let mut out = Body {
        fields,
        ..Body::default()
    };
    let mut r = Reader::new(body);
    let result = decode_into(head, &mut r, ctx, &mut out);
    match result {
        Ok(()) => out.trailing = r.remaining(),
        Err(Malformed(e)) => out.error = Some(e),
    }
    out
}

fn decode_into(
    head: &Header,
    r: &mut Reader<'_>,
    ctx: &BodyContext<'_>,
    out: &mut Body,
) -> Res<()> {
    prefix(head, r, &mut out.fields)?;
    let f = &mut out.fields;
    match (head.response, head.opcode) {
        (false, 0x01) => put(f, "options", r.string_map()?),
        (false, 0x07) => {
            put(f, "query", r.long_string()?);
            query_parameters(r, ctx, f, None)?;
        }
        (false, 0x09) => prepare(r, ctx, f)?,
        (false, 0x0A) => execute(r, ctx, f)?,
        (false, 0x0B) => put(f, "event_types", r.string_list()?),
        (false, 0x0D) => batch(r, ctx, f)?,
        (false, 0x0F) => auth_response(r, ctx, f)?,
        (true, 0x00) => error(r, ctx, f)?,
        (true, 0x03) => put(f, "authenticator", r.string()?),
        (true, 0x06) => put(f, "options", r.string_multimap()?),
        (true, 0x08) => out.prepared = result(r, ctx, f)?,
        (true, 0x0C) => event(r, f)?,
        (true, 0x0E | 0x10) => put(f, "token", r.bytes()?.hexed()),
        (_, op) if envelope::opcode_name(op).is_none() && r.remaining() > 0 => {
            put(f, "body_hex", hex(r.rest()));
        }
        _ => {}
    }
    Ok(())
}

/// Tracing id, warnings and custom payload that precede the message when their flags are set.
fn prefix(head: &Header, r: &mut Reader<'_>, f: &mut Fields) -> Res<()> {
    if head.response && head.flags & envelope::FLAG_TRACING != 0 {
        put(f, "tracing_id", r.uuid()?);
    }
    if head.response && head.flags & envelope::FLAG_WARNING != 0 && head.version >= 4 {
        put(f, "warnings", r.string_list()?);
    }
    if head.flags & envelope::FLAG_CUSTOM_PAYLOAD != 0 && head.version >= 4 {
        put(f, "custom_payload", r.bytes_map()?);
    }
    Ok(())
}

/// A request's bound values: their `[value]` cells as the wire lays them out (with names, each
/// `[string]` name taken out), how many there are, and the names.
type Values = (Arc<[u8]>, usize, Vec<Value>);

fn values(r: &mut Reader<'_>, with_names: bool) -> Res<Values> {
    let n = usize::from(r.short()?);
    let (mut cells, mut names) = (Vec::new(), Vec::new());
    let (ahead, start) = (r.ahead(), r.pos);
    for _ in 0..n {
        if with_names {
            names.push(Value::String(r.string()?));
            let (ahead, start) = (r.ahead(), r.pos);
            r.value()?;
            cells.extend_from_slice(&ahead[..r.pos - start]);
        } else {
            r.value()?;
        }
    }
    if !with_names {
        cells.extend_from_slice(&ahead[..r.pos - start]);
    }
    Ok((cells.into(), n, names))
}

/// `values` as hex (their types are not known), `value_names`, and `values_decoded` when the
/// prepared statement's bind types are known: written from the cells' bytes, no tree.
fn put_values(f: &mut Fields, (cells, count, names): Values, prep: Option<&Prepared>) {
    let (hexed, decoded) = Rows::values(cells, count, prep.map(|p| p.bind_types.clone()));
    f.push_written("values", hexed);
    if !names.is_empty() {
        put(f, "value_names", names);
    }
    if let Some(decoded) = decoded {
        f.push_written("values_decoded", decoded);
    }
}

/// `[int]` flags from v5 on, `[byte]` before.
fn flags(r: &mut Reader<'_>, ctx: &BodyContext<'_>) -> Res<i32> {
    Ok(if ctx.version >= 5 {
        r.int()?
    } else {
        i32::from(r.byte()?)
    })
}

fn query_parameters(
    r: &mut Reader<'_>,
    ctx: &BodyContext<'_>,
    f: &mut Fields,
    prep: Option<&Prepared>,
) -> Res<()> {
    put(f, "consistency", r.consistency()?);
    let flags = flags(r, ctx)?;
    put(f, "query_flags", flags);
    if flags & 0x01 != 0 {
        let v = values(r, flags & 0x40 != 0)?;
        put_values(f, v, prep);
    }
    if flags & 0x04 != 0 {
        put(f, "page_size", r.int()?);
    }
    if flags & 0x08 != 0 {
        put(f, "paging_state", r.bytes()?.hexed());
    }
    flagged_tail(r, ctx, f, flags)
}

/// The optional fields QUERY/EXECUTE parameters and BATCH share, in flag order.
fn flagged_tail(r: &mut Reader<'_>, ctx: &BodyContext<'_>, f: &mut Fields, flags: i32) -> Res<()> {
    if flags & 0x10 != 0 {
        put(f, "serial_consistency", r.consistency()?);
    }
    if flags & 0x20 != 0 {
        put(f, "timestamp", r.long()?);
    }
    if flags & 0x80 != 0 && modern(ctx.version) {
        put(f, "keyspace", r.string()?);
    }
    if flags & 0x100 != 0 && modern(ctx.version) {
        put(f, "now_in_seconds", r.int()?);
    }
    Ok(())
}

// ---- requests ----------------------------------------------------------------------------------

fn auth_response(r: &mut Reader<'_>, ctx: &BodyContext<'_>, f: &mut Fields) -> Res<()> {
    let token = r.bytes()?;
    if let Cell::Bytes(t) = token {
        let parts: Vec<&[u8]> = t.split(|&b| b == 0).collect();
        if let [_, user, password] = parts[..] {
            // SASL PLAIN: authzid \0 authcid \0 password
            put(f, "sasl_mechanism", "PLAIN");
            put(f, "auth_user", String::from_utf8_lossy(user).into_owned());
            if ctx.show_secrets {
                put(
                    f,
                    "auth_password",
                    String::from_utf8_lossy(password).into_owned(),
                );
            }
        }
    }
    let shown = ctx.show_secrets || token == Cell::Null;
    put(
        f,
        "token",
        if shown {
            token.hexed()
        } else {
            Value::from(REDACTED)
        },
    );
    Ok(())
}

fn prepare(r: &mut Reader<'_>, ctx: &BodyContext<'_>, f: &mut Fields) -> Res<()> {
    put(f, "query", r.long_string()?);
    if modern(ctx.version) {
        let flags = r.int()?;
        put(f, "prepare_flags", flags);
        if flags & 0x01 != 0 {
            put(f, "keyspace", r.string()?);
        }
    }
    Ok(())
}

fn execute(r: &mut Reader<'_>, ctx: &BodyContext<'_>, f: &mut Fields) -> Res<()> {
    let pid = r.short_bytes()?;
    put(f, "prepared_id", hex(pid));
    if modern(ctx.version) {
        put(f, "result_metadata_id", hex(r.short_bytes()?));
    }
    let prep = ctx.prepared.get(pid);
    if let Some(q) = prep.and_then(|p| p.query.as_ref()) {
        put(f, "query", q.as_str());
    }
    query_parameters(r, ctx, f, prep)
}

fn batch(r: &mut Reader<'_>, ctx: &BodyContext<'_>, f: &mut Fields) -> Res<()> {
    let btype = r.byte()?;
    let name = match btype {
        0 => "LOGGED".to_owned(),
        1 => "UNLOGGED".to_owned(),
        2 => "COUNTER".to_owned(),
        b => b.to_string(),
    };
    put(f, "batch_type", name);
    let mut statements = Vec::new();
    for _ in 0..r.short()? {
        let mut st = Fields::default();
        let mut prep = None;
        if r.byte()? == 0 {
            put(&mut st, "query", r.long_string()?);
        } else {
            let pid = r.short_bytes()?;
            put(&mut st, "prepared_id", hex(pid));
            prep = ctx.prepared.get(pid);
            if let Some(q) = prep.and_then(|p| p.query.as_ref()) {
                put(&mut st, "query", q.as_str());
            }
        }
        let v = values(r, false)?;
        put_values(&mut st, v, prep);
        statements.push(object(st));
    }
    put(f, "statements", statements);
    put(f, "consistency", r.consistency()?);
    let flags = flags(r, ctx)?;
    put(f, "batch_flags", flags);
    flagged_tail(r, ctx, f, flags)
}

fn object(fields: Fields) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.into_value()))
            .collect(),
    )
}

// ---- responses ---------------------------------------------------------------------------------

fn error_name(code: i32) -> String {
    let name = match code {
        0x0000 => "server_error",
        0x000A => "protocol_error",
        0x0100 => "authentication_error",
        0x1000 => "unavailable",
        0x1001 => "overloaded",
        0x1002 => "is_bootstrapping",
        0x1003 => "truncate_error",
        0x1100 => "write_timeout",
        0x1200 => "read_timeout",
        0x1300 => "read_failure",
        0x1400 => "function_failure",
        0x1500 => "write_failure",
        0x1600 => "cdc_write_failure",
        0x1700 => "cas_write_unknown",
        0x2000 => "syntax_error",
        0x2100 => "unauthorized",
        0x2200 => "invalid",
        0x2300 => "config_error",
        0x2400 => "already_exists",
        0x2500 => "unprepared",
        // Python's f"0x{code:04x}" of a negative int: the sign counts in the width
        c if c < 0 => return format!("0x-{:03x}", c.unsigned_abs()),
        c => return format!("0x{c:04x}"),
    };
    name.to_owned()
}

fn error(r: &mut Reader<'_>, ctx: &BodyContext<'_>, f: &mut Fields) -> Res<()> {
    let code = r.int()?;
    put(f, "error_code", code);
    put(f, "error_name", error_name(code));
    put(f, "error_message", r.string()?);
    match code {
        0x1000 | 0x1100 | 0x1200 | 0x1300 | 0x1500 | 0x1700 => {
            put(f, "consistency", r.consistency()?);
            let (a, b) = (r.int()?, r.int()?);
            if code == 0x1000 {
                put(f, "required", a);
                put(f, "alive", b);
                return Ok(());
            }
            put(f, "received", a);
            put(f, "block_for", b);
            if code == 0x1300 || code == 0x1500 {
                if ctx.version >= 5 {
                    let mut reasons = serde_json::Map::new();
                    for _ in 0..r.count()? {
                        let addr = r.inetaddr()?;
                        reasons.insert(addr, Value::from(r.short()?));
                    }
                    put(f, "reasons", Value::Object(reasons));
                } else {
                    put(f, "failures", r.int()?);
                }
            }
            if code == 0x1100 || code == 0x1500 {
                let write_type = r.string()?;
                let cas = write_type == "CAS";
                put(f, "write_type", write_type);
                if code == 0x1100 && cas && ctx.version >= 5 {
                    put(f, "contentions", r.short()?);
                }
            } else if code == 0x1200 || code == 0x1300 {
                put(f, "data_present", r.byte()? != 0);
            }
        }
        0x1400 => {
            let (ks, function, args) = (r.string()?, r.string()?, r.string_list()?);
            put(f, "keyspace", ks);
            put(f, "function", function);
            put(f, "arg_types", args);
        }
        0x2400 => {
            let (ks, table) = (r.string()?, r.string()?);
            put(f, "keyspace", ks);
            put(f, "table", table);
        }
        0x2500 => put(f, "prepared_id", hex(r.short_bytes()?)),
        _ => {}
    }
    Ok(())
}

fn schema_change(r: &mut Reader<'_>, f: &mut Fields) -> Res<()> {
    put(f, "change", r.string()?);
    let target = r.string()?;
    put(f, "target", target.as_str());
    put(f, "keyspace", r.string()?);
    match target.as_str() {
        "TABLE" | "TYPE" => put(f, "name", r.string()?),
        "FUNCTION" | "AGGREGATE" => {
            let (name, args) = (r.string()?, r.string_list()?);
            put(f, "name", name);
            put(f, "arg_types", args);
        }
        _ => {}
    }
    Ok(())
}

fn event(r: &mut Reader<'_>, f: &mut Fields) -> Res<()> {
    let etype = r.string()?;
    put(f, "event_type", etype.as_str());
    match etype.as_str() {
        "TOPOLOGY_CHANGE" | "STATUS_CHANGE" => {
            let (change, address) = (r.string()?, r.inet()?);
            put(f, "change", change);
            put(f, "address", address);
        }
        "SCHEMA_CHANGE" => schema_change(r, f)?,
        _ if r.remaining() > 0 => put(f, "event_hex", hex(r.rest())),
        _ => {}
    }
    Ok(())
}

fn column_specs(
    r: &mut Reader<'_>,
    ctx: &BodyContext<'_>,
    flags: i32,
    n: usize,
) -> Res<(Arc<Shared>, Arc<[CqlType]>)> {
    let global = flags & 0x0001 != 0;
    let ahead = r.ahead();
    // (a decoder is Sync, hence the Mutex; one thread uses it, a poisoned one is left unused)
    if let Some(Ok(cache)) = ctx.specs.map(Mutex::lock) {
        if let Some(hit) = cache.find(global, n, ahead) {
            r.pos += hit.raw.len();
            return Ok((hit.specs.clone(), hit.types.clone()));
        }
    }
    let start = r.pos;
    let (specs, types) = read_column_specs(r, ctx, global, n)?;
    let (specs, types) = (Shared::new(specs), Arc::<[CqlType]>::from(types));
    let raw = &ahead[..r.pos - start];
    let cache = ctx.specs.filter(|_| raw.len() <= CACHED_SPEC_BYTES);
    if let Some(Ok(mut cache)) = cache.map(Mutex::lock) {
        cache.keep(Specs {
            global,
            n,
            raw: raw.to_vec(),
            specs: specs.clone(),
            types: types.clone(),
        });
    }
    Ok((specs, types))
}

fn read_column_specs(
    r: &mut Reader<'_>,
    ctx: &BodyContext<'_>,
    global: bool,
    n: usize,
) -> Res<(Value, Vec<CqlType>)> {
    let global = if global {
        Some((r.string()?, r.string()?))
    } else {
        None
    };
    let (mut specs, mut types) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let (ks, table) = match &global {
            Some(g) => g.clone(),
            None => (r.string()?, r.string()?),
        };
        let name = r.string()?;
        let t = r.option(0, ctx.max_depth)?;
        let mut spec = serde_json::Map::with_capacity(4);
        spec.insert("keyspace".to_owned(), Value::String(ks));
        spec.insert("table".to_owned(), Value::String(table));
        spec.insert("name".to_owned(), Value::String(name));
        spec.insert("type".to_owned(), Value::String(t.name()));
        specs.push(Value::Object(spec));
        types.push(t);
    }
    Ok((Value::Array(specs), types))
}

/// Field names of a `<metadata>` block: Rows, a Prepared's bind part, a Prepared's result part.
struct MetaNames {
    flags: &'static str,
    count: &'static str,
    columns: &'static str,
}

const ROWS: MetaNames = MetaNames {
    flags: "metadata_flags",
    count: "columns_count",
    columns: "columns",
};
const BIND: MetaNames = MetaNames {
    flags: "bind_metadata_flags",
    count: "bind_columns_count",
    columns: "bind_columns",
};
const RESULT: MetaNames = MetaNames {
    flags: "result_metadata_flags",
    count: "result_columns_count",
    columns: "result_columns",
};

/// `<metadata>` of Rows and Prepared results: (column count, column types; None with No_metadata).
fn metadata(
    r: &mut Reader<'_>,
    ctx: &BodyContext<'_>,
    f: &mut Fields,
    names: &MetaNames,
    pk: bool,
) -> Res<(usize, Option<Arc<[CqlType]>>)> {
    let flags = r.int()?;
    let n = r.count()?;
    put(f, names.flags, flags);
    put(f, names.count, n);
    if pk {
        let mut pks = Vec::new();
        for _ in 0..r.count()? {
            pks.push(Value::from(r.short()?));
        }
        put(f, "pk_indexes", pks);
    }
    if flags & 0x0002 != 0 {
        put(f, "paging_state", r.bytes()?.hexed());
    }
    if flags & 0x0008 != 0 && modern(ctx.version) {
        put(f, "new_metadata_id", hex(r.short_bytes()?));
    }
    if flags & 0x0004 != 0 {
        return Ok((n, None));
    }
    let (specs, types) = column_specs(r, ctx, flags, n)?;
    f.push_shared(names.columns, specs);
    Ok((n, Some(types)))
}

fn rows(r: &mut Reader<'_>, ctx: &BodyContext<'_>, f: &mut Fields) -> Res<()> {
    let (ncols, own) = metadata(r, ctx, f, &ROWS, false)?;
    let types = own.or_else(|| ctx.result_types.filter(|t| t.len() == ncols).cloned());
    let nrows = r.count()?;
    put(f, "rows_count", nrows);
    if ncols == 0 && nrows > 0 {
        // rows of no columns take no bytes: a hostile count would allocate without bound
        return Err(Malformed(format!("{nrows} rows of no columns")));
    }
    // A cell costs a JSON value however few bytes it had (a null is 4): an inflated body of
    // nulls would cost thirty times its size. Refused before any row is decoded.
    if (nrows as u64).saturating_mul(ncols as u64) > ctx.max_cells as u64 {
        return Err(Malformed(format!(
            "{nrows} rows of {ncols} columns: more cells than the {}-byte inflate cap pays for \
             ({VALUE_COST} bytes a cell besides the inflated bytes)",
            ctx.cap
        )));
    }
    f.push_written("rows", Rows::read(r, types, ncols, nrows)?);
    Ok(())
}

fn result(
    r: &mut Reader<'_>,
    ctx: &BodyContext<'_>,
    f: &mut Fields,
) -> Res<Option<(Vec<u8>, Prepared)>> {
    let kind = r.int()?;
    let name = match kind {
        1 => "void".to_owned(),
        2 => "rows".to_owned(),
        3 => "set_keyspace".to_owned(),
        4 => "prepared".to_owned(),
        5 => "schema_change".to_owned(),
        k => k.to_string(),
    };
    put(f, "result_kind", name);
    match kind {
        2 => rows(r, ctx, f)?,
        3 => put(f, "keyspace", r.string()?),
        4 => {
            let pid = r.short_bytes()?;
            put(f, "prepared_id", hex(pid));
            if modern(ctx.version) {
                put(f, "result_metadata_id", hex(r.short_bytes()?));
            }
            if let Some(q) = ctx.request_query {
                put(f, "query", q);
            }
            let (_, bind) = metadata(r, ctx, f, &BIND, ctx.version >= 4)?;
            let (_, result_types) = metadata(r, ctx, f, &RESULT, false)?;
            let prepared = Prepared {
                query: ctx.request_query.map(str::to_owned),
                bind_types: bind.unwrap_or_default(),
                result_types,
            };
            return Ok(Some((pid.to_vec(), prepared)));
        }
        5 => schema_change(r, f)?,
        _ => {}
    }
    Ok(None)
}

/// The `query` field of decoded fields (a request's statement text).
pub fn query_of(f: &Fields) -> Option<String> {
    get(f, "query").and_then(Value::as_str).map(str::to_owned)
}
