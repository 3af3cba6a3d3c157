//! What a window keeps of its events while it waits for their ACK: the records as they are while
//! the window is among its connection's newest two (nearly every window is acknowledged then),
//! else in the held store, in memory that does not grow with them once the window is complete: a
//! stalled pipeline's capture keeps millions of events waiting, and 20 bytes each (a handle and a
//! seq) were 40 MB per million.

use std::ops::Range;

use crate::held::spill::{Held, SpillStore};
use crate::model::{Field, Message, Value};

/// A window's event seqs in order: a run (1..n, or a v1 client's continuous numbering) in 8 bytes,
/// a list when they are not consecutive.
#[derive(Debug)]
pub enum Seqs {
    Run { first: u32, len: u32 },
    List(Vec<u32>),
}

impl Default for Seqs {
    fn default() -> Self {
        Seqs::Run { first: 0, len: 0 }
    }
}

impl Seqs {
    pub fn len(&self) -> usize {
        match self {
            Seqs::Run { len, .. } => *len as usize,
            Seqs::List(v) => v.len(),
        }
    }

    /// The seq of the `i`-th event (`i` below `len`).
    pub fn get(&self, i: usize) -> Option<u32> {
        match self {
            Seqs::Run { first, len } => {
                let i = u32::try_from(i).ok().filter(|i| i < len)?;
                Some(first.wrapping_add(i))
            }
            Seqs::List(v) => v.get(i).copied(),
        }
    }

    pub fn first(&self) -> Option<u32> {
        self.get(0)
    }

    pub fn last(&self) -> Option<u32> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    pub fn push(&mut self, seq: u32) {
        match self {
            Seqs::Run { first, len } if *len == 0 => (*first, *len) = (seq, 1),
            Seqs::Run { first, len } if first.checked_add(*len) == Some(seq) => *len += 1,
            Seqs::Run { first, len } => {
                let mut list: Vec<u32> = (0..*len).map(|i| first.wrapping_add(i)).collect();
                list.push(seq);
                *self = Seqs::List(list);
            }
            Seqs::List(v) => v.push(seq),
        }
    }

    /// One past the position of the last event in `within` whose seq is `value`.
    pub fn after_last(&self, within: Range<usize>, value: u32) -> Option<usize> {
        match self {
            Seqs::Run { first, .. } => {
                let i = value.wrapping_sub(*first) as usize;
                within.contains(&i).then_some(i + 1)
            }
            Seqs::List(v) => {
                let found = v.get(within.clone())?.iter().rposition(|&s| s == value)?;
                Some(within.start + found + 1)
            }
        }
    }

    /// Whether an event before position `end` has seq `value`.
    pub fn before(&self, end: usize, value: u32) -> bool {
        self.after_last(0..end.min(self.len()), value).is_some()
    }

    pub fn shrink(&mut self) {
        if let Seqs::List(v) = self {
            v.shrink_to_fit();
        }
    }
}

/// A window's records (compressed frames and events) in order: kept as they are while the store
/// has room for them (`SpillStore::keep`), else held in it. A window acknowledged soon after it
/// was sent, as nearly all are, gives its records without packing them and reading them back
/// (which cost a fifth of converting an acknowledged Beats capture).
#[derive(Debug)]
pub enum Records {
    /// With their estimated cost, counted in the store.
    Kept {
        list: Vec<Message>,
        cost: usize,
    },
    Held(Items),
}

impl Records {
    pub fn with_capacity(n: usize) -> Self {
        Records::Kept {
            list: Vec::with_capacity(n),
            cost: 0,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Records::Kept { list, .. } => list.len(),
            Records::Held(items) => items.len(),
        }
    }

    /// Add a record: kept while the store has room for it, else every record goes to the store
    /// (they stay in order) and so do the window's later ones.
    pub fn push(&mut self, m: Message, store: &mut SpillStore) {
        if let Records::Kept { list, cost } = self {
            match kept_cost(&m).filter(|&c| store.keep(c)) {
                Some(c) => {
                    list.push(m);
                    *cost += c;
                    return;
                }
                None => self.hold(store),
            }
        }
        if let Records::Held(items) = self {
            items.push(store.hold(&m), store);
        }
    }

    /// Kept records go to the store (a window that will wait: no longer among its connection's
    /// newest two).
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
                for m in &list {
                    items.push(store.hold(m), store);
                }
                items
            }
            Records::Held(items) => items,
        }
    }

    /// The window is complete: held records' handles go to the store as one record.
    pub fn pack(&mut self, store: &mut SpillStore) {
        if let Records::Held(items) = self {
            items.pack(store);
        }
    }

    /// Every record, in order (none when the spill file lost them: the store says so).
    pub fn take(&mut self, store: &mut SpillStore) -> Taken {
        match std::mem::replace(self, Records::Held(Items::Loose(Vec::new()))) {
            Records::Kept { list, cost } => {
                store.unkeep(cost);
                Taken::Kept(list.into_iter())
            }
            Records::Held(mut items) => Taken::Held(items.take(store).into_iter()),
        }
    }
}

/// A window's records on their way out (`Records::take`).
pub enum Taken {
    Kept(std::vec::IntoIter<Message>),
    Held(std::vec::IntoIter<Held>),
}

impl Taken {
    /// The next record: `Some(None)` for one the spill file lost (the store says so).
    pub fn next(&mut self, store: &mut SpillStore) -> Option<Option<Message>> {
        match self {
            Taken::Kept(list) => list.next().map(Some),
            Taken::Held(handles) => handles.next().map(|h| store.take(h)),
        }
    }
}

/// What keeping `m` as it is costs, estimated: the message, its fields, strings and document;
/// None for a record with a nested or shared value (a resend's `resend_of`), which is held.
fn kept_cost(m: &Message) -> Option<usize> {
    let mut cost = std::mem::size_of::<Message>()
        + m.fields.capacity() * std::mem::size_of::<(&str, Field)>()
        + m.event.as_ref().map_or(0, |d| d.text().len())
        + KEPT_OVERHEAD;
    for (_, field) in &m.fields {
        match field {
            Field::Value(Value::String(s)) => cost += s.len(),
            Field::Value(Value::Null | Value::Bool(_) | Value::Number(_)) => {}
            _ => return None,
        }
    }
    Some(cost)
}

/// The allocator's share of a kept record (its fields, document and strings are allocations).
const KEPT_OVERHEAD: usize = 64;

/// Lists shorter than this stay loose: packing them saves less than it costs.
const PACK_FROM: usize = 4;

/// A window's held records (compressed frames and events) in order: loose while the window fills,
/// one held list of their handles once it is complete.
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

    /// Add a record (to a complete window only when a client sends more than it announced).
    pub fn push(&mut self, item: Held, store: &mut SpillStore) {
        if let Items::Packed { .. } = self {
            let loose = self.take(store);
            *self = Items::Loose(loose);
        }
        if let Items::Loose(v) = self {
            v.push(item);
        }
    }

    /// The window is complete: its handles go to the store as one record.
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
    use crate::model::Message;

    fn seqs(values: &[u32]) -> Seqs {
        let mut s = Seqs::default();
        for &v in values {
            s.push(v);
        }
        s
    }

    #[test]
    fn a_run_and_a_list_answer_alike() {
        for values in [
            vec![1, 2, 3, 4, 5],
            vec![7, 8, 9],
            vec![u32::MAX - 1, u32::MAX],
        ] {
            let run = seqs(&values);
            assert!(matches!(run, Seqs::Run { .. }), "{values:?}");
            let list = Seqs::List(values.clone());
            let n = values.len();
            assert_eq!(
                (run.len(), run.first(), run.last()),
                (list.len(), list.first(), list.last())
            );
            for i in 0..=n {
                assert_eq!(run.get(i), list.get(i));
            }
            for value in values.iter().copied().chain([0, 6, 10, u32::MAX]) {
                for start in 0..=n {
                    for end in start..=n {
                        assert_eq!(
                            run.after_last(start..end, value),
                            list.after_last(start..end, value)
                        );
                    }
                    assert_eq!(run.before(start, value), list.before(start, value));
                }
            }
        }
    }

    #[test]
    fn seqs_that_break_the_run_become_a_list() {
        let s = seqs(&[1, 2, 3, 3, 2]);
        assert!(matches!(s, Seqs::List(_)));
        assert_eq!(
            (s.len(), s.after_last(0..5, 3), s.after_last(0..5, 2)),
            (5, Some(4), Some(5))
        );
        assert!(s.before(2, 2) && !s.before(1, 2));
        assert!(matches!(seqs(&[u32::MAX, 0]), Seqs::List(_)));
    }

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
