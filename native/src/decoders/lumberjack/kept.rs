//! What a window keeps of its records while they wait for its ACK as they are (not held in the
//! store): a plain event as the facts its record is made of, anything else as its record.
//!
//! Why: a kept event record was a `Message` (216 bytes), a field list of 8 slots (704 bytes) and
//! its document, three allocations touched again cold when the ACK came and the record was
//! completed and written. A Filebeat window's events outlive the allocator's per-thread cache, so
//! those allocations took the slow path: malloc and free were ~16 % of converting a Filebeat-shaped
//! capture, and completing the cold records (`Message::set`) another 4 %. The facts are one
//! allocation-free value in the window's list, and the record is built when it is written.

use super::report::{message, version_str, Pos};
use crate::held::pack::Scalar;
use crate::held::spill::SpillStore;
use crate::held::waiting::Keep;
use crate::model::{Document, Fields, Held, Message};

/// Where the ACK of an event is: its frame (None when the capture has no number for it) and
/// offset.
pub type Ack = (Option<u64>, u64);

/// A window's kept record.
#[derive(Debug)]
pub enum Item {
    Event(Event),
    /// A compressed frame's record, or an event with more to say than `Event` holds (a resend's
    /// `resend_of`, an invalid payload's `raw`).
    Record(Box<Message>),
}

/// A J or D frame's event record, but for its ACK (`ack_frame`, `ack_offset`, `acked`: known
/// when it is written).
#[derive(Debug)]
pub struct Event {
    pub pos: Pos,
    pub length: u64,
    pub version: u8,
    pub seq: u32,
    /// Its window's index; None until it has one (`fields` writes `window: null`).
    pub window: Option<u64>,
    pub compressed: bool,
    pub inflated_offset: Option<u64>,
    pub document: Option<Document>,
}

impl Event {
    /// Its record: the fields in the order event records have always had them.
    pub fn into_message(self) -> Message {
        self.into_record(None)
    }

    /// Its record, with the frame and offset of the ACK that acknowledged it when there was one
    /// (`ack_frame`, `ack_offset`).
    fn into_record(self, ack: Option<Ack>) -> Message {
        let mut fields = Fields::with_capacity(EVENT_FIELDS);
        self.facts(ack, |name, fact| fields.push((name, fact.into())));
        let mut m = self.head(fields);
        m.event = self.document;
        m
    }

    /// Its record held in `store`, packed from the facts: no message, field list or value is
    /// made of them (`Packer`).
    fn hold(self, store: &mut SpillStore) -> Held {
        let mut facts = 0;
        self.facts(None, |_, _| facts = usize::saturating_add(facts, 1));
        store.hold_packed(|mut p| {
            p.head(&self.head(Fields::default()), facts);
            self.facts(None, |name, fact| p.scalar(name, fact));
            p.event(self.document.as_ref());
        })
    }

    /// Its record with `fields` and no document.
    fn head(&self, fields: Fields) -> Message {
        message("event", &self.pos, self.length, self.version, fields)
    }

    /// Its record's own fields to `field` in order: `seq`, `window`,
    /// `ack_frame` and `ack_offset` (`ack`'s, null until its ACK), `compressed`, `inflated_offset`.
    /// (Each a call where its value is known: an array of them was read back through a `match`.)
    #[inline(always)]
    fn facts(&self, ack: Option<Ack>, mut field: impl FnMut(&'static str, Scalar)) {
        field("seq", Scalar::Unsigned(u64::from(self.seq)));
        field("window", self.window.into());
        field("ack_frame", ack.and_then(|a| a.0).into());
        field("ack_offset", ack.map(|a| a.1).into());
        field("compressed", Scalar::Bool(self.compressed));
        field("inflated_offset", self.inflated_offset.into());
    }
}

/// Slots of an event record's own fields (`Event::facts`), and of one that takes `resend_of` or
/// `tls` later without growing.
const EVENT_FIELDS: usize = 8;

/// What the allocator adds to a kept event's document.
const DOCUMENT_OVERHEAD: usize = 16;

/// A kept event's share of its window's list: the list grows by doubling, so a slot costs up to
/// twice its size. (Counted at its size alone, twice as many events were kept as Messages had been
/// within the same share, and converting bench_shapes' acknowledged python-sender capture peaked
/// 11 MB higher; at twice, 6 MB.)
const SLOT: usize = 2 * std::mem::size_of::<Item>();

impl Item {
    /// The version its record has (a window made for an event without one takes it).
    pub fn version(&self) -> Option<&'static str> {
        match self {
            Item::Event(e) => Some(version_str(e.version)),
            Item::Record(m) => m.version,
        }
    }

    /// Its record is in window `index`.
    pub fn set_window(&mut self, index: u64) {
        match self {
            Item::Event(e) => e.window = Some(index),
            Item::Record(m) => m.set("window", index),
        }
    }

    /// Its record, to be completed.
    pub fn record(self) -> Message {
        match self {
            Item::Event(e) => e.into_message(),
            Item::Record(m) => *m,
        }
    }

    /// Its record, acknowledged by the ACK at `ack`: an event's is made with the ACK's frame and
    /// offset, not completed by two `Message::set` (each a search of its fields and a value
    /// dropped: 1.6 % of the instructions of converting bench_spark's capture).
    pub fn acked_record(self, ack: Ack) -> Message {
        match self {
            Item::Event(e) => {
                let mut m = e.into_record(Some(ack));
                m.acked = Some(true);
                m
            }
            Item::Record(m) => {
                let mut m = *m;
                acknowledged(&mut m, ack);
                m
            }
        }
    }
}

/// `m` acknowledged by the ACK at `ack`: `acked`, and its ACK fields set.
pub fn acknowledged(m: &mut Message, (frame, offset): Ack) {
    m.acked = Some(true);
    m.set("ack_frame", frame);
    m.set("ack_offset", offset);
}

impl Keep for Item {
    fn kept_cost(&self) -> Option<usize> {
        match self {
            Item::Event(e) => {
                let document = e
                    .document
                    .as_ref()
                    .map_or(0, |d| d.kept_len().saturating_add(DOCUMENT_OVERHEAD));
                Some(SLOT.saturating_add(document))
            }
            Item::Record(m) => m
                .kept_cost()
                .map(|c| c.saturating_add(std::mem::size_of::<Item>())),
        }
    }

    fn into_message(self) -> Message {
        self.record()
    }

    fn hold(self, store: &mut SpillStore) -> Held {
        match self {
            Item::Event(e) => e.hold(store),
            Item::Record(m) => store.hold(&m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::report::PROTOCOL;
    use super::*;
    use crate::model::{Direction, Value};

    /// An event kept as facts becomes the very record it was made as before there were facts: the
    /// same fields in the same order.
    #[test]
    fn a_kept_event_is_the_record_it_stands_for() {
        let event = |window: Option<u64>| Event {
            pos: Pos {
                direction: Direction::C2S,
                offset: 1_234,
                frame: Some(9),
                ts: Some(-5),
            },
            length: 77,
            version: b'2',
            seq: 3,
            window,
            compressed: true,
            inflated_offset: Some(40),
            document: Some(Document::canonical(r#"{"message":"hé"}"#)),
        };
        let mut m = Message::new(PROTOCOL, "event");
        m.direction = Some(Direction::C2S);
        m.offset = Some(1_234);
        m.length = 77;
        m.frame = Some(9);
        m.ts = Some(-5);
        m.version = Some("2");
        m.set("seq", 3u64);
        m.set("window", Value::Null);
        m.set("ack_frame", Value::Null);
        m.set("ack_offset", Value::Null);
        m.set("compressed", true);
        m.set("inflated_offset", 40u64);
        m.event = Some(Document::canonical(r#"{"message":"hé"}"#));
        assert_eq!(event(None).into_message(), m);
        let mut item = Item::Event(event(None));
        item.set_window(4);
        m.set("window", 4u64);
        assert_eq!(item.record(), m);
        // acknowledged: made with its ACK as the record completed by `acknowledged` is, an event
        // or a record kept whole alike, an ACK frame the capture has no number for too
        for ack in [(Some(12), 34), (None, 0)] {
            let mut want = m.clone();
            want.acked = Some(true);
            want.set("ack_frame", ack.0);
            want.set("ack_offset", ack.1);
            let mut item = Item::Event(event(None));
            item.set_window(4);
            assert_eq!(item.acked_record(ack), want);
            let whole = Item::Record(Box::new(m.clone()));
            assert_eq!(whole.acked_record(ack), want);
        }
    }

    /// An event held from its facts (no message built) is held as the bytes its record packs to,
    /// and comes back as that record, whatever its facts are.
    #[test]
    fn a_held_event_is_its_record_packed() {
        let event = |k: u64| Event {
            pos: Pos {
                direction: if k % 2 == 0 {
                    Direction::C2S
                } else {
                    Direction::S2C
                },
                offset: k * 100_003,
                frame: (k % 3 != 0).then_some(k * 7),
                ts: match k % 3 {
                    0 => None,
                    1 => Some(-5 - k as i64),
                    _ => Some(1_764_654_000_123_456_789 + k as i64),
                },
            },
            length: k * 1_000,
            version: if k % 2 == 0 { b'1' } else { b'2' },
            seq: u32::MAX - k as u32,
            window: (k % 4 != 0).then_some(k),
            compressed: k % 5 == 0,
            inflated_offset: (k % 2 == 0).then_some(k << 20),
            document: match k % 3 {
                0 => None,
                1 => Some(Document::canonical(r#"{"message":"h\u00e9"}"#)),
                _ => Some(Document::canonical_noted(r#"{"message":"hé"}"#, (12, 15))),
            },
        };
        for notes in [false, true] {
            let (mut direct, mut built) = (SpillStore::new(1 << 20), SpillStore::new(1 << 20));
            direct.set_notes(notes);
            built.set_notes(notes);
            for k in 0..24 {
                let held = Item::Event(event(k)).hold(&mut direct);
                let record = built.hold(&event(k).into_message());
                let bytes = direct.take_bytes(held, 1);
                assert!(bytes.is_some(), "event {k}");
                assert_eq!(
                    bytes,
                    built.take_bytes(record, 1),
                    "event {k}, notes {notes}"
                );
                let held = Item::Event(event(k)).hold(&mut direct);
                assert_eq!(direct.take(held), Some(event(k).into_message()));
            }
        }
    }
}
