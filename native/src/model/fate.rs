//! What became of a log event, as every record of it says (docs/records.md, "Delivery"): the
//! identity the cross-connection verdict gives it and the verdict's class for this copy.

use super::text::{push_hex, push_uuid};

/// The identity of a log event across its copies: the same for a resend on another connection,
/// different for distinct events that merely look alike. Written as text that says where the
/// event was first sent (docs/records.md, "Delivery"): no hash, so no collision, and a column of
/// them compresses like the columns it repeats (a hash cost Parquet a third more bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventId {
    /// Lumberjack: the stream, frame and seq of the event's first copy (`Self::NONE`: not known),
    /// `"3:1042:17"` (`-` for one not known).
    First { stream: u64, frame: u64, seq: u64 },
    /// Log Courier: the payload's nonce (its 16 bytes, or a fold of a nonce that is not 16
    /// bytes) and the event's place in the payload as first sent, `"<32 hex digits>:17"`.
    Payload { nonce: [u64; 2], index: u64 },
    /// A CQL request: its stream and the offset of its first byte in the client's bytes, `"3:1042"`.
    Request { stream: u64, offset: u64 },
    /// Hercules: the event's own UUID (canonical text).
    Uuid([u64; 2]),
}

impl EventId {
    /// A coordinate that is not known (written `-`).
    pub const NONE: u64 = u64::MAX;

    pub fn write(&self, out: &mut String) {
        let mut buf = itoa::Buffer::new();
        let mut num = |out: &mut String, n: u64| {
            if n == EventId::NONE {
                out.push('-');
            } else {
                out.push_str(buf.format(n));
            }
        };
        match *self {
            EventId::First { stream, frame, seq } => {
                num(out, stream);
                out.push(':');
                num(out, frame);
                out.push(':');
                num(out, seq);
            }
            EventId::Payload { nonce, index } => {
                push_hex(out, &nonce[0].to_be_bytes());
                push_hex(out, &nonce[1].to_be_bytes());
                out.push(':');
                num(out, index);
            }
            EventId::Request { stream, offset } => {
                num(out, stream);
                out.push(':');
                num(out, offset);
            }
            EventId::Uuid([hi, lo]) => {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&hi.to_be_bytes());
                b[8..].copy_from_slice(&lo.to_be_bytes());
                push_uuid(out, &b);
            }
        }
    }

    /// Hercules: the id of the event whose UUID has these 16 bytes (wire order).
    pub fn from_uuid(b: &[u8; 16]) -> Self {
        let word = |half: &[u8]| <[u8; 8]>::try_from(half).map_or(0, u64::from_be_bytes);
        EventId::Uuid([word(&b[..8]), word(&b[8..])])
    }

    pub fn text(&self) -> String {
        let mut s = String::with_capacity(36);
        self.write(&mut s);
        s
    }
}

/// The verdict's class, as one copy of an event carries it. Counting distinct `event_id`s per
/// class gives `inspect`'s verdict: `delivered` and `delivered_twice` together are the events
/// delivered, and each other class is the verdict's number of that name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// Acknowledged: this copy, or (on a copy that was not) an earlier one.
    Delivered,
    /// This copy was not acknowledged; a resend of it was.
    RecoveredByResend,
    /// Acknowledged again after an earlier copy was: a duplicate downstream.
    DeliveredTwice,
    /// No copy was acknowledged, and every copy's connection ended without its ACK.
    NeverAcknowledged,
    /// No copy was acknowledged, and some copy's ACK could still lie where the capture cannot
    /// see: a gap in the server's bytes, a connection still open when the capture ended.
    /// (A CQL request: its response could lie there.)
    Unknown,
    /// A CQL request and its response: the server answered (not with an ERROR).
    Answered,
    /// A CQL request and its response: the server answered with an ERROR.
    Error,
    /// A CQL request that got no response on a connection that ended (or whose stream id the
    /// client reused), with no server bytes missing after it.
    Unanswered,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Delivered => "delivered",
            Delivery::RecoveredByResend => "recovered_by_resend",
            Delivery::DeliveredTwice => "delivered_twice",
            Delivery::NeverAcknowledged => "never_acknowledged",
            Delivery::Unknown => "unknown",
            Delivery::Answered => "answered",
            Delivery::Error => "error",
            Delivery::Unanswered => "unanswered",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_say_where_the_event_was_first_sent() {
        let first = |stream, frame, seq| EventId::First { stream, frame, seq }.text();
        assert_eq!(first(3, 1042, 17), "3:1042:17");
        assert_eq!(first(0, EventId::NONE, EventId::NONE), "0:-:-");
        assert_ne!(first(1, 23, 4), first(12, 3, 4));
        let payload = EventId::Payload {
            nonce: [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210],
            index: 7,
        };
        assert_eq!(payload.text(), "0123456789abcdeffedcba9876543210:7");
        let request = EventId::Request {
            stream: 2,
            offset: 9,
        };
        assert_eq!(request.text(), "2:9");
        assert_eq!(
            EventId::Uuid([0x0123_4567_89ab_cdef, 0x0011_2233_4455_6677]).text(),
            "01234567-89ab-cdef-0011-223344556677"
        );
    }
}
