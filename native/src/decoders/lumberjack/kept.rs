//! What a window keeps of its records while they wait for its ACK as they are (not held in the
//! store): a plain event as the facts its record is made of, anything else as its record.
//!
//! Why: a kept event record was a `Message` (216 bytes), a field list of 8 slots (704 bytes) and
//! its document, three allocations touched again cold when the ACK came and the record was
//! completed and written. A Filebeat window's events outlive the allocator's per-thread cache, so
//! those allocations took the slow path: malloc and free were ~16 % of converting a Filebeat-shaped
//! capture, and completing the cold records (`Message::set`) another 4 %. The facts are one
//! allocation-free value in the window's list, and the record is built when it is written.

use super::report::{message, version_str, Pos, PROTOCOL};
use crate::held::pack::{pack_document, pack_field, pack_head, Head, Names};
use crate::held::spill::SpillStore;
use crate::held::waiting::Keep;
use crate::model::{Document, Fields, Held, Message, Value};

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
        let mut fields = Fields::with_capacity(EVENT_FIELDS);
        fields.extend(self.fields());
        let mut m = message("event", &self.pos, self.length, self.version, fields);
        m.event = self.document;
        m
    }

    /// Its record packed as `held::pack::pack` packs it, without building it: an event that waits
    /// past its window's turn (a stalled pipeline's capture holds millions) was made a record to
    /// be packed, its field list allocated and freed.
    fn pack(&self, names: &mut Names, out: &mut Vec<u8>) {
        let head = Head {
            protocol: PROTOCOL,
            kind: "event",
            version: Some(version_str(self.version)),
            direction: Some(self.pos.direction),
            acked: None,
            offset: Some(self.pos.offset),
            frame: self.pos.frame,
            ts: self.pos.ts,
            length: self.length,
        };
        let fields = self.fields();
        pack_head(&head, fields.len(), names, out);
        for (name, v) in &fields {
            pack_field(name, v, names, out);
        }
        pack_document(self.document.as_ref(), out);
    }

    /// An event record's own fields: `seq`, `window`, `ack_frame` and `ack_offset` (null until
    /// its ACK), `compressed`, `inflated_offset`.
    fn fields(&self) -> [(&'static str, Value); 6] {
        [
            ("seq", Value::from(self.seq)),
            ("window", self.window.into()),
            ("ack_frame", Value::Null),
            ("ack_offset", Value::Null),
            ("compressed", Value::Bool(self.compressed)),
            ("inflated_offset", self.inflated_offset.into()),
        ]
    }
}

/// Slots of an event record's field list: its own fields (`Event::fields`), and `resend_of` or
/// `tls` added later without growing.
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
            Item::Event(e) => store.hold_packed(|names, out| e.pack(names, out)),
            Item::Record(m) => store.hold(&m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::held::pack::pack;
    use crate::model::Direction;

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
    }

    /// A kept event packs to the very bytes its record packs to, whatever it holds (what the held
    /// store gives back is that record).
    #[test]
    fn a_kept_event_packs_as_its_record() {
        let event = |window, inflated_offset, ts, document: Option<&str>| Event {
            pos: Pos {
                direction: Direction::C2S,
                offset: 1 << 40,
                frame: Some(300),
                ts,
            },
            length: 1_000,
            version: b'1',
            seq: u32::MAX,
            window,
            compressed: false,
            inflated_offset,
            document: document.map(Document::canonical),
        };
        for e in [
            event(None, None, None, None),
            event(Some(7), Some(0), Some(-1), Some(r#"{"message":"hé\n"}"#)),
            event(Some(u64::MAX), None, Some(i64::MAX), Some("[1,2.5]")),
        ] {
            // a name is numbered by its address where first met, and the same literal can lie
            // at two addresses (two codegen units): each path numbers its own names from zero
            let mut direct = Vec::new();
            e.pack(&mut Names::default(), &mut direct);
            let mut via = Vec::new();
            pack(&e.into_message(), &mut Names::default(), &mut via);
            assert_eq!(direct, via);
        }
    }
}
