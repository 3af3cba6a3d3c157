//! The record contract's basic types, shared by every layer of the core (docs/records.md): directions, severities,
//! messages and findings with their machine-readable fields, and the sink that rate-limits repeatable findings.

mod fate;
mod held;
pub mod json;
pub mod pyrepr;
mod record;
mod sink;
mod stream;
pub mod text;

pub use fate::{Delivery, EventId};
pub use held::Held;
pub use json::{DocText, Document};
pub use record::{Fields, Message, Record, Stamp};
pub use sink::FindingSink;
pub use stream::{Chunk, Gap, OwnedChunk};

use std::fmt;
use std::sync::Arc;

/// Direction of bytes inside a stream, relative to the (possibly inferred) client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    C2S,
    S2C,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::C2S => "c2s",
            Direction::S2C => "s2c",
        }
    }

    pub fn other(self) -> Direction {
        match self {
            Direction::C2S => Direction::S2C,
            Direction::S2C => Direction::C2S,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// A machine-readable detail of a record (`fields` in the record contract): plain JSON data.
pub use serde_json::Value;

/// A message field's value: its own, one shared by many records with its JSON text made once
/// (a CQL connection's column specs, decoded once and carried by every result of the statement:
/// cloning and writing them again for each was a third of a CQL conversion), or one its decoder
/// writes straight from the bytes it keeps (`Written`: a CQL result's rows).
#[derive(Debug)]
pub enum Field {
    Value(Value),
    Shared(Arc<Shared>),
    Written(Box<dyn WrittenTree>),
}

/// A value and its JSON text (`json::value`).
#[derive(Debug, PartialEq)]
pub struct Shared {
    value: Value,
    text: Box<str>,
}

impl Shared {
    pub fn new(value: Value) -> Arc<Self> {
        let mut text = String::new();
        json::value(&mut text, &value);
        Arc::new(Shared {
            value,
            text: text.into_boxed_str(),
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

/// The narrow interface a decoder hands a field's bytes to the writers through (Suricata's typed
/// transaction → JsonBuilder): its JSON text written straight from what the decoder kept, with no
/// tree of values, for NDJSON, Arrow rows and the typed tables; its value tree for the consumers
/// that read values (Python objects, the Hercules mapping, the held store, `Message::get`). The
/// two must agree byte for byte (`json::value` of the tree is the text), which a differential
/// fuzz target holds each implementation to.
pub trait Written: fmt::Debug + Send + Sync + 'static {
    fn write_json(&self, out: &mut String);
    fn value(&self) -> Value;

    /// The bytes keeping it as it is costs, when that is small and known (a scalar written from
    /// a few bytes); None: a record carrying it goes to the held store when it waits.
    fn kept_cost(&self) -> Option<usize> {
        None
    }
}

/// A `Written` field with its tree built at most once, when a consumer first asks for it.
pub trait WrittenTree: fmt::Debug + Send + Sync {
    fn write_json(&self, out: &mut String);
    fn tree(&self) -> &Value;
    /// `Written::kept_cost`, with the box and its tree's slot.
    fn kept_cost(&self) -> Option<usize>;
}

#[derive(Debug)]
struct Lazy<W> {
    source: W,
    tree: std::sync::OnceLock<Value>,
}

impl<W: Written> WrittenTree for Lazy<W> {
    fn write_json(&self, out: &mut String) {
        self.source.write_json(out);
    }

    fn tree(&self) -> &Value {
        self.tree.get_or_init(|| self.source.value())
    }

    fn kept_cost(&self) -> Option<usize> {
        // a tree built meanwhile is a scalar's: a string as long as the text at most
        let text = self.source.kept_cost()?;
        text.checked_mul(2)?
            .checked_add(std::mem::size_of::<Self>())
    }
}

impl Field {
    /// A field its decoder writes (one allocation: the source and its tree's slot together).
    pub fn written(source: impl Written) -> Self {
        Field::Written(Box::new(Lazy {
            source,
            tree: std::sync::OnceLock::new(),
        }))
    }

    pub fn into_value(self) -> Value {
        match self {
            Field::Value(v) => v,
            Field::Shared(s) => s.value.clone(),
            Field::Written(w) => w.tree().clone(),
        }
    }
}

impl Clone for Field {
    fn clone(&self) -> Self {
        match self {
            Field::Value(v) => Field::Value(v.clone()),
            Field::Shared(s) => Field::Shared(s.clone()),
            // a copy is made for the rare consumer that keeps one (tests, Python): a plain value
            Field::Written(w) => Field::Value(w.tree().clone()),
        }
    }
}

/// Fields are equal when their values are, whatever form each is kept in.
impl PartialEq for Field {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::ops::Deref for Field {
    type Target = Value;

    fn deref(&self) -> &Value {
        match self {
            Field::Value(v) => v,
            Field::Shared(s) => &s.value,
            Field::Written(w) => w.tree(),
        }
    }
}

impl From<Value> for Field {
    fn from(v: Value) -> Self {
        Field::Value(v)
    }
}

/// A problem or notable fact with a stable dotted code (`tcp.gap`, `pcap.truncated`, ...).
/// The protocol of a finding is its code's prefix.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub code: &'static str,
    pub severity: Severity,
    pub message: String,
    pub direction: Option<Direction>,
    pub offset: Option<u64>,
    pub frame: Option<u64>,
    pub ts: Option<i64>,
    pub fields: Vec<(&'static str, Value)>,
    pub stream: Option<u64>,
}

impl Finding {
    pub fn new(code: &'static str, severity: Severity, message: String) -> Self {
        Finding {
            code,
            severity,
            message,
            direction: None,
            offset: None,
            frame: None,
            ts: None,
            fields: Vec::new(),
            stream: None,
        }
    }

    pub fn protocol(&self) -> &'static str {
        self.code.split('.').next().unwrap_or(self.code)
    }

    pub fn at(mut self, frame: Option<u64>, ts: Option<i64>) -> Self {
        self.frame = frame;
        self.ts = ts;
        self
    }

    pub fn field(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.fields.push((name, value.into()));
        self
    }
}
