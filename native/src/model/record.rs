//! The record contract's two record types as the core builds them (docs/records.md): `Message`
//! (anything a decoder decoded) and `Finding` (model/), and the stream a record belongs to.

use super::{Delivery, Direction, Document, EventId, Field, Finding, Held, Value};
use std::sync::Arc;

/// Anything a decoder decoded: a frame, a request, a response, a log event. `fields` are the
/// protocol fields in the order they are written; log events put their document in `event` and
/// their delivery state in `acked` (None when the protocol cannot say); the delivery verdict
/// names the event (`event_id`, the same on every copy) and its fate (`delivery`).
#[derive(Debug, PartialEq)]
pub struct Message {
    pub protocol: &'static str,
    pub kind: &'static str,
    pub direction: Option<Direction>,
    pub offset: Option<u64>,
    pub length: u64,
    pub frame: Option<u64>,
    pub ts: Option<i64>,
    pub version: Option<&'static str>,
    pub fields: Fields,
    pub event: Option<Document>,
    pub acked: Option<bool>,
    pub event_id: Option<EventId>,
    pub delivery: Option<Delivery>,
    /// The record as its decoder held it, still in its protocol's held store, when this message
    /// is only what the verdict reads of it (its head and the fields it names, no document): a
    /// decoder lends the events it gives unacknowledged at a connection's end
    /// (`SpillStore::lend`), and the session either keeps them waiting under this handle or takes
    /// the record back before it is written. Only the session sees such a message.
    pub lent: Option<Held>,
}

/// A copy is a message of its own: a lent record stays with the original, whose owner takes it
/// back (the handle frees its bytes once). Nothing copies a lent message.
impl Clone for Message {
    fn clone(&self) -> Self {
        Message {
            protocol: self.protocol,
            kind: self.kind,
            direction: self.direction,
            offset: self.offset,
            length: self.length,
            frame: self.frame,
            ts: self.ts,
            version: self.version,
            fields: self.fields.clone(),
            event: self.event.clone(),
            acked: self.acked,
            event_id: self.event_id,
            delivery: self.delivery,
            lent: None,
        }
    }
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
            fields: Fields::default(),
            event: None,
            acked: None,
            event_id: None,
            delivery: None,
            lent: None,
        }
    }

    /// The value of a field (None when absent).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| &**v)
    }

    /// Set a field: replaced in place when present (its position kept), appended otherwise.
    pub fn set(&mut self, name: &'static str, value: impl Into<Value>) {
        let value = Field::Value(value.into());
        match self.fields.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.fields.0.push((name, value)),
        }
    }
}

/// A message's fields in the order they are written. Its own values go in as `Value`s, as a
/// finding's do; `push_shared` adds a value many records share.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fields(Vec<(&'static str, Field)>);

impl Fields {
    pub fn with_capacity(n: usize) -> Self {
        Fields(Vec::with_capacity(n))
    }

    #[inline]
    pub fn push(&mut self, (name, value): (&'static str, Value)) {
        self.0.push((name, Field::Value(value)));
    }

    pub fn push_shared(&mut self, name: &'static str, value: Arc<super::Shared>) {
        self.0.push((name, Field::Shared(value)));
    }

    /// Add a field its decoder writes straight from the bytes it keeps (`Written`).
    pub fn push_written(&mut self, name: &'static str, value: impl super::Written) {
        self.0.push((name, Field::written(value)));
    }

    pub fn extend(&mut self, pairs: impl IntoIterator<Item = (&'static str, Value)>) {
        self.0
            .extend(pairs.into_iter().map(|(n, v)| (n, Field::Value(v))));
    }
}

impl std::ops::Deref for Fields {
    type Target = Vec<(&'static str, Field)>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Fields {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl<'a> IntoIterator for &'a Fields {
    type Item = &'a (&'static str, Field);
    type IntoIter = std::slice::Iter<'a, (&'static str, Field)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl IntoIterator for Fields {
    type Item = (&'static str, Field);
    type IntoIter = std::vec::IntoIter<(&'static str, Field)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl From<Vec<(&'static str, Value)>> for Fields {
    fn from(pairs: Vec<(&'static str, Value)>) -> Self {
        let mut f = Fields::default();
        f.extend(pairs);
        f
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
