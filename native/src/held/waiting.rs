//! What a decoder keeps of records while they wait for their fate (a Lumberjack window its ACK,
//! a Gate request its answer): the records as they are while the store lets them be kept (nearly
//! every one waits only moments), else in the held store, in memory that does not grow with them
//! once the list is complete: a stalled pipeline's capture keeps millions of events waiting, and
//! 20 bytes each (a handle and a seq) were 40 MB per million.

use super::spill::SpillStore;
use crate::model::{Document, Field, Held, Message, Value};

/// What a decoder keeps of a record while it waits, as it is: the record itself (`Message`), or
/// facts it is made from later (a Lumberjack event: `decoders/lumberjack/kept.rs`). A kept
/// Message cost three allocations and ~1 KB however small its event, touched again cold at its
/// window's ACK: most of what a Filebeat window's events cost in malloc.
pub trait Keep: Sized {
    /// What keeping it as it is costs, estimated; None for one that is held at once.
    fn kept_cost(&self) -> Option<usize>;
    /// The record it stands for.
    fn into_message(self) -> Message;
    /// The record it stands for, held in `store` (`SpillStore::hold`).
    fn hold(self, store: &mut SpillStore) -> Held {
        store.hold(&self.into_message())
    }
}

impl Keep for Message {
    fn kept_cost(&self) -> Option<usize> {
        kept_cost(self)
    }

    fn into_message(self) -> Message {
        self
    }
}

/// Records waiting together, in order: kept as they are while the store has room for them
/// (`SpillStore::keep`), else held in it. A Lumberjack window acknowledged soon after it was sent,
/// as nearly all are, gives its records without packing them and reading them back (which cost a
/// fifth of converting an acknowledged Beats capture).
#[derive(Debug)]
pub enum Records<T: Keep = Message> {
    /// With their estimated cost, counted in the store.
    Kept {
        list: Vec<T>,
        cost: usize,
    },
    Held(Items),
}

impl<T: Keep> Records<T> {
    pub fn with_capacity(n: usize) -> Self {
        Records::Kept {
            list: Vec::with_capacity(n),
            cost: 0,
        }
    }

    /// An empty list whose records go to the store at once (a list that will wait).
    pub fn held(n: usize) -> Self {
        Records::Held(Items::with_capacity(n))
    }

    pub fn len(&self) -> usize {
        match self {
            Records::Kept { list, .. } => list.len(),
            Records::Held(items) => items.len(),
        }
    }

    /// Add a record: kept while the store has room for it, else every record goes to the store
    /// (they stay in order) and so do the list's later ones.
    pub fn push(&mut self, m: T, store: &mut SpillStore) {
        if let Records::Kept { list, cost } = self {
            match m.kept_cost().filter(|&c| store.keep(c)) {
                Some(c) => {
                    list.push(m);
                    *cost += c;
                    return;
                }
                None => self.hold(store),
            }
        }
        if let Records::Held(items) = self {
            let held = m.hold(store);
            items.push(held, store);
        }
    }

    /// Kept records go to the store (a list that will wait: a Lumberjack window or a Gate request
    /// no longer among its connection's newest two unacknowledged ones).
    pub fn hold(&mut self, store: &mut SpillStore) {
        let records = std::mem::replace(self, Records::Held(Items::Loose(Vec::new())));
        *self = Records::Held(records.into_held(store));
    }

    /// What the store holds of the records, kept ones put there first (a parked window's state).
    pub fn into_held(self, store: &mut SpillStore) -> Items {
        match self {
            Records::Kept { list, cost } => {
                store.unkeep(cost);
                let mut items = Items::with_capacity(list.len());
                for m in list {
                    let held = m.hold(store);
                    items.push(held, store);
                }
                items
            }
            Records::Held(items) => items,
        }
    }

    /// The list is complete: held records' handles go to the store as one record.
    pub fn pack(&mut self, store: &mut SpillStore) {
        if let Records::Held(items) = self {
            items.pack(store);
        }
    }

    /// Every record, in order (none when the spill file lost them: the store says so).
    pub fn take(&mut self, store: &mut SpillStore) -> Taken<T> {
        match std::mem::replace(self, Records::Held(Items::Loose(Vec::new()))) {
            Records::Kept { list, cost } => {
                store.unkeep(cost);
                Taken::Kept(list.into_iter())
            }
            Records::Held(mut items) => Taken::Held(items.take(store).into_iter()),
        }
    }

    /// Every record at once, in order (those the spill file lost left out: the store says so).
    pub fn take_all(&mut self, store: &mut SpillStore) -> Vec<Message> {
        let mut all = Vec::with_capacity(self.len());
        let mut taken = self.take(store);
        while let Some(m) = taken.next(store) {
            all.extend(m);
        }
        all
    }
}

/// Waiting records on their way out (`Records::take`).
pub enum Taken<T: Keep = Message> {
    Kept(std::vec::IntoIter<T>),
    Held(std::vec::IntoIter<Held>),
}

impl<T: Keep> Taken<T> {
    /// The next record: `Some(None)` for one the spill file lost (the store says so).
    pub fn next(&mut self, store: &mut SpillStore) -> Option<Option<Message>> {
        self.next_with(store, T::into_message, |_| {})
    }

    /// `next`, a kept record made by `kept`, a held one taken and then given to `taken`.
    pub fn next_with(
        &mut self,
        store: &mut SpillStore,
        kept: impl FnOnce(T) -> Message,
        taken: impl FnOnce(&mut Message),
    ) -> Option<Option<Message>> {
        match self {
            Taken::Kept(list) => list.next().map(|m| Some(kept(m))),
            Taken::Held(handles) => handles.next().map(|h| {
                let mut m = store.take(h)?;
                taken(&mut m);
                Some(m)
            }),
        }
    }

    /// `next`, a held record lent with `facts` (`SpillStore::lend`) when the store's owner takes
    /// lent records.
    pub fn lend_next(&mut self, store: &mut SpillStore, facts: &[&str]) -> Option<Option<Message>> {
        match self {
            Taken::Held(handles) if store.lending() => handles.next().map(|h| store.lend(h, facts)),
            _ => self.next(store),
        }
    }
}

/// What keeping `m` as it is costs, estimated: the message, its fields, strings and document (a
/// shared value is the records' together, and costs nothing more); None for a record with a
/// nested value (a resend's `resend_of`) or a field its decoder writes whose cost it cannot say
/// (a CQL result's rows), which is held.
fn kept_cost(m: &Message) -> Option<usize> {
    let mut cost = std::mem::size_of::<Message>()
        + m.fields.capacity() * std::mem::size_of::<(&str, Field)>()
        + m.event.as_ref().map_or(0, Document::kept_len)
        + KEPT_OVERHEAD;
    for (_, field) in &m.fields {
        match field {
            Field::Value(Value::String(s)) => cost += s.len(),
            Field::Value(Value::Null | Value::Bool(_) | Value::Number(_)) | Field::Shared(_) => {}
            Field::Written(w) => cost += w.kept_cost()?,
            Field::Value(Value::Array(_) | Value::Object(_)) => return None,
        }
    }
    Some(cost)
}

/// The allocator's share of a kept record (its fields, document and strings are allocations).
const KEPT_OVERHEAD: usize = 64;

/// Lists shorter than this stay loose: packing them saves less than it costs.
const PACK_FROM: usize = 4;

/// Held records in order: loose while the list fills, one held list of their handles once it is
/// complete.
#[derive(Debug)]
pub enum Items {
    Loose(Vec<Held>),
    Packed { list: Held, len: usize },
}

impl Items {
    pub fn with_capacity(n: usize) -> Self {
        Items::Loose(Vec::with_capacity(n))
    }

    pub fn len(&self) -> usize {
        match self {
            Items::Loose(v) => v.len(),
            Items::Packed { len, .. } => *len,
        }
    }

    /// Add a record (to a complete list only when a Lumberjack client sends more than it announced).
    pub fn push(&mut self, item: Held, store: &mut SpillStore) {
        if let Items::Packed { .. } = self {
            let loose = self.take(store);
            *self = Items::Loose(loose);
        }
        if let Items::Loose(v) = self {
            v.push(item);
        }
    }

    /// The list is complete: its handles go to the store as one record.
    pub fn pack(&mut self, store: &mut SpillStore) {
        if let Items::Loose(v) = self {
            if v.len() >= PACK_FROM {
                *self = Items::Packed {
                    list: store.hold_list(v),
                    len: v.len(),
                };
            } else {
                v.shrink_to_fit();
            }
        }
    }

    /// Every record's handle, in order (none when the spill file lost them: the store says so).
    pub fn take(&mut self, store: &mut SpillStore) -> Vec<Held> {
        match std::mem::replace(self, Items::Loose(Vec::new())) {
            Items::Loose(v) => v,
            Items::Packed { list, len } => store.take_list(list, len).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_items_come_back_in_order_and_take_more() {
        let mut store = SpillStore::new(0);
        let event = |i: u64| {
            let mut m = Message::new("lumberjack", "event");
            m.set("seq", i);
            m
        };
        let mut items = Items::with_capacity(2);
        for i in 0..10 {
            items.push(store.hold(&event(i)), &mut store);
        }
        items.pack(&mut store);
        assert!(matches!(items, Items::Packed { len: 10, .. }));
        items.push(store.hold(&event(10)), &mut store); // one more than the window announced
        assert_eq!(items.len(), 11);
        let back: Vec<Option<Message>> = items
            .take(&mut store)
            .into_iter()
            .map(|h| store.take(h))
            .collect();
        assert_eq!(back, (0..11).map(|i| Some(event(i))).collect::<Vec<_>>());
        assert_eq!(items.len(), 0);
    }
}
