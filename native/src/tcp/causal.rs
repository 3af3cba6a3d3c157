//! The order in which a connection's two directions reach the consumer: consistent with TCP's own
//! evidence, not with the order of the capture file.
//!
//! A segment from B carrying acknowledgment number X proves that A had sent every byte below X
//! before B sent it. Captures put packets out of order (multi-queue NICs, SPAN ports, merged
//! files), so B's bytes may be written before the A bytes they answer. Each direction's delivered
//! bytes (chunks, gaps and the gaps' findings, already in offset order) wait in a queue with the
//! ACK their packet carried; a queue's head goes out once the other direction has put out every
//! byte below that ACK. What the other direction owes is a hole the reorder window watches
//! (`Half::hole_end`): filled by the late segment or declared a gap, either way the head goes.
//! Among heads free to go, the earlier frame goes first, so an ordered capture keeps its order.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "stream offsets as in reassembler.rs; `1 - h` for a direction index of 0 or 1; queued bytes are the sum of chunks held (bounded by the reorder window)"
)]

use std::collections::VecDeque;

use super::half::Half;
use super::seq::HALF;
use super::Event;

/// A data event of one direction waiting for the other direction's bytes.
struct Queued {
    event: Event,
    frame: u64,
    /// The raw ACK (of the other direction) its packet carried, if it carried one.
    ack: Option<u32>,
    /// Where this direction's output stands after the event (chunks and gaps).
    end: Option<i64>,
    bytes: usize,
}

/// Both directions' queues and how far each direction's output has gone.
#[derive(Default)]
pub struct Merge {
    queues: [VecDeque<Queued>; 2],
    /// Stream offset up to which each direction's bytes (or gaps) went out.
    emitted: [i64; 2],
    /// Chunk bytes queued in both directions (bounded by the reorder window's byte limit).
    pub bytes: usize,
}

impl Merge {
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }

    /// Put out a data event of direction `h` (its packet's `frame` and `ack`), or queue it while it
    /// must wait for the other direction; then put out whatever became free.
    pub fn push(
        &mut self,
        h: usize,
        event: Event,
        frame: u64,
        ack: Option<u32>,
        halves: &[Half; 2],
        out: &mut Vec<Event>,
    ) {
        let (end, bytes) = match &event {
            Event::Chunk { offset, data, .. } => {
                (Some(*offset as i64 + data.len() as i64), data.len())
            }
            Event::Gap { offset, length, .. } => {
                (Some((*offset).saturating_add(*length) as i64), 0)
            }
            _ => (None, 0),
        };
        let queued = Queued {
            event,
            frame,
            ack,
            end,
            bytes,
        };
        if self.is_empty() && self.free(h, &queued, halves) {
            self.emit(h, queued, out);
            return;
        }
        self.bytes += bytes;
        self.queues[h].push_back(queued);
        self.drain(halves, out, false);
    }

    /// Put out every head free to go, the earlier frame first. Two heads each waiting for bytes
    /// the other's queue already holds cannot happen in TCP (forged or corrupt ACKs): the earlier
    /// frame goes. `force` (the connection ends) puts everything out.
    pub fn drain(&mut self, halves: &[Half; 2], out: &mut Vec<Event>, force: bool) {
        loop {
            let heads = [self.queues[0].front(), self.queues[1].front()];
            let free = [0, 1].map(|h| heads[h].is_some_and(|q| self.free(h, q, halves)));
            let h = match (free, heads) {
                ([true, true], [Some(a), Some(b)]) => usize::from(b.frame < a.frame),
                ([true, false], _) => 0,
                ([false, true], _) => 1,
                (_, [Some(a), Some(b)]) if force || self.cycle(a, b, halves) => {
                    usize::from(b.frame < a.frame)
                }
                (_, [Some(_), None]) if force => 0,
                (_, [None, Some(_)]) if force => 1,
                _ => return,
            };
            if let Some(queued) = self.queues[h].pop_front() {
                self.bytes -= queued.bytes;
                self.emit(h, queued, out);
            }
        }
    }

    fn emit(&mut self, h: usize, queued: Queued, out: &mut Vec<Event>) {
        if let Some(end) = queued.end {
            self.emitted[h] = self.emitted[h].max(end);
        }
        out.push(queued.event);
    }

    /// The other direction's offset a queued event of `h` must wait for, if any.
    fn need(h: usize, queued: &Queued, halves: &[Half; 2]) -> Option<i64> {
        let peer = &halves[1 - h];
        peer.base?;
        let need = peer.offset(queued.ack?);
        Some(peer.fin().map_or(need, |fin| need.min(fin)))
    }

    /// Whether a queued event of direction `h` may go out now.
    fn free(&self, h: usize, queued: &Queued, halves: &[Half; 2]) -> bool {
        let peer = &halves[1 - h];
        if peer.provisional.is_some() {
            return false; // the other direction's start may still move back
        }
        let Some(need) = Self::need(h, queued, halves) else {
            return true;
        };
        let have = self.emitted[1 - h];
        need <= have || need - have >= HALF
    }

    /// Whether each head waits for bytes the other direction has already delivered into its queue.
    fn cycle(&self, a: &Queued, b: &Queued, halves: &[Half; 2]) -> bool {
        let delivered = |h: usize, q: &Queued| {
            Self::need(h, q, halves).is_none_or(|need| need <= halves[1 - h].next_off)
        };
        delivered(0, a) && delivered(1, b)
    }
}
