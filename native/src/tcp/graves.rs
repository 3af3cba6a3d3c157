//! A connection that closed cleanly (FIN both ways, every byte delivered and acknowledged) is
//! finished at once, not after the close grace period: its held events go out with their verdict
//! while the capture goes on (issue 28). For that grace period it leaves a grave per direction, so a
//! late copy of one of its packets (a duplicated last ACK, a retransmitted FIN) is absorbed instead
//! of opening a connection of its own, as it was while the connection waited.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

use super::seq::at_or_after;

pub type Key = (IpAddr, u16, IpAddr, u16);

#[derive(Debug, Default)]
pub struct Graves {
    /// 4-tuple as sent → (its first and one past its last sequence number, when the grave goes).
    by_key: HashMap<Key, (u32, u32, i64)>,
    order: VecDeque<(i64, Key)>,
}

impl Graves {
    /// `start..=end`: the sequence numbers the sender of `key` used, its SYN to one past its FIN.
    pub fn bury(&mut self, key: Key, (start, end): (u32, u32), until: i64, most: usize) {
        self.by_key.insert(key, (start, end, until));
        self.order.push_back((until, key));
        while self.order.len() > most {
            self.pop();
        }
    }

    /// A packet of no live connection: whether it is a late copy of a buried one's (not a SYN,
    /// and within that connection's sequence numbers: a new connection on the same ports starts
    /// anywhere in the 2^32 of them).
    pub fn absorbs(&self, key: &Key, syn: bool, seq: u32, len: u32) -> bool {
        let last = seq.wrapping_add(len);
        !syn && self
            .by_key
            .get(key)
            .is_some_and(|&(start, end, _)| at_or_after(seq, start) && at_or_after(end, last))
    }

    /// A new connection on the 4-tuple: its packets are its own.
    pub fn forget(&mut self, key: &Key) {
        self.by_key.remove(key);
    }

    /// Graves whose grace period passed (capture time `now`) go.
    pub fn expire(&mut self, now: i64) {
        while self.order.front().is_some_and(|&(until, _)| until < now) {
            self.pop();
        }
    }

    fn pop(&mut self) {
        if let Some((until, key)) = self.order.pop_front() {
            // a later burial of the same 4-tuple has its own entry in `order`
            if self.by_key.get(&key).is_some_and(|&(_, _, u)| u == until) {
                self.by_key.remove(&key);
            }
        }
    }
}
