//! The record contract's basic types, shared by every layer of the core (docs/records.md): directions, severities,
//! messages and findings with their machine-readable fields, and the sink that rate-limits repeatable findings.

mod fate;
pub mod json;
pub mod pyrepr;
mod record;
mod sink;
mod stream;
pub mod text;

pub use fate::{Delivery, EventId};
pub use json::Document;
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
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

/// A message field's value: its own, or one shared by many records with its JSON text made once
/// (a CQL connection's column specs, decoded once and carried by every result of the statement:
/// cloning and writing them again for each was a third of a CQL conversion).
#[derive(Clone, Debug, PartialEq)]
pub enum Field {
    Value(Value),
    Shared(Arc<Shared>),
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

impl Field {
    pub fn into_value(self) -> Value {
        match self {
            Field::Value(v) => v,
            Field::Shared(s) => s.value.clone(),
        }
    }
}

impl std::ops::Deref for Field {
    type Target = Value;

    fn deref(&self) -> &Value {
        match self {
            Field::Value(v) => v,
            Field::Shared(s) => &s.value,
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
