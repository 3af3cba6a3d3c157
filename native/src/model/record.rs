//! The record contract's two record types as the core builds them (docs/records.md): `Message`
//! (anything a decoder decoded) and `Finding` (model/), and the stream a record belongs to.

use super::{Direction, Document, Finding, Value};

/// Anything a decoder decoded: a frame, a request, a response, a log event. `fields` are the
/// protocol fields in the order they are written; log events put their document in `event` and
/// their delivery state in `acked` (None when the protocol cannot say).
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub protocol: &'static str,
    pub kind: &'static str,
    pub direction: Option<Direction>,
    pub offset: Option<u64>,
    pub length: u64,
    pub frame: Option<u64>,
    pub ts: Option<i64>,
    pub version: Option<&'static str>,
    pub fields: Vec<(&'static str, Value)>,
    pub event: Option<Document>,
    pub acked: Option<bool>,
}

impl Message {
    pub fn new(protocol: &'static str, kind: &'static str) -> Self {
        Message {
            protocol,
            kind,
            direction: None,
            offset: None,
            length: 0,
            frame: None,
            ts: None,
            version: None,
            fields: Vec::new(),
            event: None,
            acked: None,
        }
    }

    /// The value of a field (None when absent).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Set a field: replaced in place when present (its position kept), appended otherwise.
    pub fn set(&mut self, name: &'static str, value: impl Into<Value>) {
        let value = value.into();
        match self.fields.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.fields.push((name, value)),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    Message(Message),
    Finding(Finding),
}

impl Record {
    pub fn protocol(&self) -> &'static str {
        match self {
            Record::Message(m) => m.protocol,
            Record::Finding(f) => f.protocol(),
        }
    }

    pub fn ts(&self) -> Option<i64> {
        match self {
            Record::Message(m) => m.ts,
            Record::Finding(f) => f.ts,
        }
    }
}

impl From<Message> for Record {
    fn from(m: Message) -> Self {
        Record::Message(m)
    }
}

impl From<Finding> for Record {
    fn from(f: Finding) -> Self {
        Record::Finding(f)
    }
}

/// Which stream a record belongs to, as written in its common columns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stamp {
    pub stream: u64,
    pub client: String,
    pub server: String,
}
