//! The `causal` fuzz target's body: a conversation written in TCP order, then the same packets
//! with data-chosen ones moved up to 8 places later or written twice, must reach the consumer as
//! the same interleaving of the two directions' bytes, with no gap.
//!
//! Every segment of the conversation acknowledges all the bytes the other side sent before it, so
//! the order in which its directions must be decoded is total: a decoder fed in that order gives
//! the same records whatever the file's order.

use std::net::{IpAddr, Ipv4Addr};

use super::{Config, Event, Reassembler};
use crate::capture::{Segment, ACK, FIN, SYN};
use crate::model::Direction;

const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const MAX_MOVE: usize = 8;

struct Packet {
    c2s: bool,
    seq: u32,
    ack: u32,
    flags: u8,
    payload: Vec<u8>,
}

pub fn causal(data: &[u8]) {
    let Some((&isn, rest)) = data.split_first() else {
        return;
    };
    let (conversation, moves) = conversation(u32::from(isn) << 24, rest);
    let in_order: Vec<usize> = (0..conversation.len()).collect();
    let mut order: Vec<(usize, usize)> = Vec::new(); // (place, packet)
    for (i, m) in moves.iter().enumerate() {
        order.push((i + usize::from(m & 0x0F) % (MAX_MOVE + 1), i));
        if m & 0x80 != 0 {
            order.push((i + usize::from(m >> 4 & 7), i)); // a duplicate
        }
    }
    order.sort();
    let impaired: Vec<usize> = order.into_iter().map(|(_, i)| i).collect();
    let want = interleaving(&conversation, &in_order);
    let got = interleaving(&conversation, &impaired);
    assert_eq!(got, want, "file order {impaired:?}");
}

/// The handshake, then data segments (direction and length from the input), each acknowledging
/// everything the other side sent, then a FIN each way; and each packet's move.
fn conversation(isn: u32, data: &[u8]) -> (Vec<Packet>, Vec<u8>) {
    let (c_isn, s_isn) = (isn, isn.wrapping_add(0x8000_0000));
    let mut next = [c_isn.wrapping_add(1), s_isn.wrapping_add(1)];
    let mut packets = vec![
        Packet {
            c2s: true,
            seq: c_isn,
            ack: 0,
            flags: SYN,
            payload: Vec::new(),
        },
        Packet {
            c2s: false,
            seq: s_isn,
            ack: next[0],
            flags: SYN | ACK,
            payload: Vec::new(),
        },
        Packet {
            c2s: true,
            seq: next[0],
            ack: next[1],
            flags: ACK,
            payload: Vec::new(),
        },
    ]; // fmt: skip
    let mut moves = vec![0, 0, 0];
    for (n, pair) in data.chunks_exact(2).take(64).enumerate() {
        let c2s = pair[0] & 1 == 0;
        let len = usize::from(pair[0] >> 1) + 1; // 1..=128 bytes
        let (me, peer) = if c2s { (0, 1) } else { (1, 0) };
        let payload = (0..len).map(|i| (n * 7 + i) as u8).collect::<Vec<_>>();
        packets.push(Packet {
            c2s,
            seq: next[me],
            ack: next[peer],
            flags: ACK,
            payload,
        });
        next[me] = next[me].wrapping_add(len as u32);
        moves.push(pair[1]);
    }
    for (c2s, me, peer) in [(true, 0, 1), (false, 1, 0)] {
        packets.push(Packet {
            c2s,
            seq: next[me],
            ack: next[peer],
            flags: FIN | ACK,
            payload: Vec::new(),
        });
        next[me] = next[me].wrapping_add(1);
        moves.push(0);
    }
    (packets, moves)
}

/// The consumer's view of the packets written in `order`: each direction's bytes as runs, in the
/// order they came out (consecutive chunks of a direction joined), and whether a gap came.
fn interleaving(packets: &[Packet], order: &[usize]) -> (Vec<(Direction, Vec<u8>)>, bool) {
    let mut r = Reassembler::new(Config {
        server_ports: vec![5044],
        ..Config::default()
    });
    let mut events = Vec::new();
    for (frame, &i) in order.iter().enumerate() {
        let p = &packets[i];
        let (src, sport, dst, dport) = if p.c2s {
            (CLIENT, 40000, SERVER, 5044)
        } else {
            (SERVER, 5044, CLIENT, 40000)
        };
        let seg = Segment {
            frame: frame as u64 + 1,
            ts: i as i64 * 1000,
            src,
            sport,
            dst,
            dport,
            seq: p.seq,
            ack: p.ack,
            flags: p.flags,
            payload: &p.payload,
            missing: 0,
        };
        r.segment(&seg, &mut events);
    }
    r.finish(&mut events);
    let mut runs: Vec<(Direction, Vec<u8>)> = Vec::new();
    let mut gap = false;
    for e in events {
        match e {
            Event::Chunk {
                direction, data, ..
            } => match runs.last_mut() {
                Some((d, run)) if *d == direction => run.extend_from_slice(&data),
                _ => runs.push((direction, data)),
            },
            Event::Gap { .. } => gap = true,
            _ => {}
        }
    }
    (runs, gap)
}

#[cfg(test)]
mod tests {
    #[test]
    fn causal_regressions() {
        crate::fuzzing::replay("causal", super::causal);
    }

    #[test]
    fn a_conversation_moved_about_keeps_its_interleaving() {
        // client 3 bytes, server 5, client 1, server 2; moves of up to 8 places and duplicates
        let mut data = vec![7u8];
        for (dir_len, mv) in [
            (4, 0x08),
            (9, 0x83),
            (0, 0x01),
            (3, 0xF7),
            (2, 0x02),
            (1, 0x05),
        ] {
            data.extend_from_slice(&[dir_len, mv]);
        }
        super::causal(&data);
    }
}
