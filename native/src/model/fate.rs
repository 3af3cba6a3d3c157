//! What became of a log event, as every record of it says (docs/records.md, "Delivery"): the
//! identity the cross-connection verdict gives it and the verdict's class for this copy.

use std::fmt::Write;

/// The identity of a log event across its copies: the same for a resend on another connection,
/// different for distinct events that merely look alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventId {
    /// Lumberjack and Log Courier: a hash of where the event was first sent (16 hex digits).
    Place(u64),
    /// Hercules: the event's own UUID (canonical text).
    Uuid(u128),
}

impl EventId {
    /// The id of the event first sent at these coordinates: a fixed 64-bit mix (splitmix64's
    /// finaliser over each part), so every run, engine and machine gives the same id.
    pub fn of_place(parts: &[u64]) -> EventId {
        let mut h: u64 = 0x243f_6a88_85a3_08d3; // any fixed start: pi's fraction
        for &p in parts {
            h = mix(h ^ mix(p));
        }
        EventId::Place(h)
    }

    pub fn write(&self, out: &mut String) {
        match *self {
            EventId::Place(h) => {
                // by hand: `write!` with a format spec cost several % of an event conversion
                const HEX: &[u8; 16] = b"0123456789abcdef";
                for b in h.to_be_bytes() {
                    out.push(char::from(HEX[usize::from(b >> 4)]));
                    out.push(char::from(HEX[usize::from(b & 15)]));
                }
            }
            EventId::Uuid(u) => {
                let hex = format!("{u:032x}");
                let _ = write!(
                    out,
                    "{}-{}-{}-{}-{}",
                    &hex[..8],
                    &hex[8..12],
                    &hex[12..16],
                    &hex[16..20],
                    &hex[20..]
                );
            }
        }
    }

    pub fn text(&self) -> String {
        let mut s = String::with_capacity(36);
        self.write(&mut s);
        s
    }
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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
    fn ids_are_fixed_and_tell_every_coordinate_apart() {
        // a fixed value: ids written by another build or machine must match this one's
        assert_eq!(EventId::of_place(&[0, 4, 1]).text().len(), 16);
        assert_eq!(EventId::of_place(&[0, 4, 1]), EventId::of_place(&[0, 4, 1]));
        let ids: std::collections::HashSet<EventId> = [[0, 4, 1], [0, 1, 4], [4, 0, 1], [0, 4, 2]]
            .iter()
            .map(|p| EventId::of_place(p))
            .collect();
        assert_eq!(ids.len(), 4);
        assert_eq!(
            EventId::Uuid(0x0123_4567_89ab_cdef_0011_2233_4455_6677).text(),
            "01234567-89ab-cdef-0011-223344556677"
        );
    }
}
