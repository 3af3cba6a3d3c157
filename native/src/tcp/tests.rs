//! Reassembly on hand-built segments (the Python suite drives the same code through `_core`).

use std::net::{IpAddr, Ipv4Addr};

use super::{Config, Event, Reassembler, StreamIds, StreamInfo};
use crate::capture::{Segment, ACK, FIN, RST, SYN};
use crate::model::Direction;

const C: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const S: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

struct Conv {
    r: Reassembler,
    frame: u64,
    events: Vec<Event>,
}

impl Conv {
    fn new(cfg: Config) -> Self {
        Conv {
            r: Reassembler::new(Config {
                server_ports: vec![5044],
                ..cfg
            }),
            frame: 0,
            events: Vec::new(),
        }
    }

    fn send(&mut self, c2s: bool, seq: u32, data: &[u8], flags: u8, ack: u32) {
        self.frame += 1;
        let (src, sport, dst, dport) = if c2s {
            (C, 40000, S, 5044)
        } else {
            (S, 5044, C, 40000)
        };
        let seg = Segment {
            frame: self.frame,
            ts: self.frame as i64 * 1000,
            src,
            sport,
            dst,
            dport,
            seq,
            ack,
            flags,
            payload: data,
            missing: 0,
        };
        self.r.segment(&seg, &mut self.events);
    }

    fn handshake(&mut self, cisn: u32, sisn: u32) {
        self.send(true, cisn, b"", SYN, 0);
        self.send(false, sisn, b"", SYN | ACK, cisn.wrapping_add(1));
        self.send(true, cisn.wrapping_add(1), b"", ACK, sisn.wrapping_add(1));
    }

    fn finish(mut self) -> Vec<Event> {
        self.r.finish(&mut self.events);
        self.events
    }
}

fn data(events: &[Event], dir: Direction) -> Vec<u8> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Chunk {
                direction, data, ..
            } if *direction == dir => Some(data.as_slice()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .concat()
}

/// Every chunk's bytes, in the order the consumer gets them (both directions).
fn chunks(events: &[Event]) -> Vec<Vec<u8>> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Chunk { data, .. } => Some(data.clone()),
            _ => None,
        })
        .collect()
}

fn codes(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .filter_map(|e| {
            if let Event::Finding(f) = e {
                Some(f.code)
            } else {
                None
            }
        })
        .collect()
}

fn info(events: &[Event]) -> &StreamInfo {
    events
        .iter()
        .find_map(|e| {
            if let Event::End(i) = e {
                Some(i.as_ref())
            } else {
                None
            }
        })
        .unwrap()
}

#[test]
fn a_segment_behind_the_ack_that_covers_it_is_placed_not_lost() {
    let mut t = Conv::new(Config::default());
    t.handshake(1000, 5000);
    t.send(true, 1001, b"AAAA", ACK, 5001);
    t.send(true, 1009, b"CCCC", ACK, 5001); // BBBB comes later in the file
    t.send(false, 5001, b"ok", ACK, 1013); // the server acknowledged all twelve bytes
    t.send(true, 1005, b"BBBB", ACK, 5001);
    let events = t.finish();
    assert_eq!(data(&events, Direction::C2S), b"AAAABBBBCCCC");
    assert!(!codes(&events).contains(&"tcp.gap"), "{:?}", codes(&events));
    assert_eq!(info(&events).gaps, 0);
    // the reply that followed the acknowledged bytes reaches the consumer after them
    let order = chunks(&events);
    assert_eq!(
        order,
        [
            b"AAAA".to_vec(),
            b"BBBB".to_vec(),
            b"CCCC".to_vec(),
            b"ok".to_vec()
        ]
    );
}

#[test]
fn a_hole_still_open_after_the_reorder_window_is_a_gap_at_the_proving_packet() {
    let mut t = Conv::new(Config {
        reorder_packets: 2,
        ..Config::default()
    });
    t.handshake(1000, 5000);
    t.send(true, 1001, b"AAAA", ACK, 5001);
    t.send(true, 1009, b"CCCC", ACK, 5001);
    t.send(false, 5001, b"", ACK, 1013); // frame 6 proves the hole
    t.send(false, 5001, b"x", ACK, 1013);
    t.send(false, 5002, b"y", ACK, 1013);
    assert!(
        !codes(&t.events).contains(&"tcp.gap"),
        "still within the window"
    );
    t.send(false, 5003, b"z", ACK, 1013); // frame 9: the window has passed
    let gap = t.events.iter().find_map(|e| match e {
        Event::Gap {
            offset,
            length,
            frame,
            ..
        } => Some((*offset, *length, *frame)),
        _ => None,
    });
    assert_eq!(gap, Some((4, 4, 6)));
    let events = t.finish();
    assert_eq!(data(&events, Direction::C2S), b"AAAACCCC");
    assert_eq!(data(&events, Direction::S2C), b"xyz");
}

#[test]
fn a_fin_missing_from_the_capture_is_not_a_missing_byte() {
    let mut t = Conv::new(Config::default());
    t.handshake(1000, 5000);
    t.send(true, 1001, b"hello", ACK, 5001);
    t.send(false, 5001, b"", ACK | FIN, 1007); // acknowledges the client's FIN, which we never saw
    let events = t.finish();
    assert!(!codes(&events).contains(&"tcp.gap"), "{:?}", codes(&events));
    assert_eq!(info(&events).gap_bytes, 0);
}

#[test]
fn acknowledged_data_never_captured_is_still_a_gap() {
    let mut t = Conv::new(Config::default());
    t.handshake(1000, 5000);
    t.send(true, 1001, b"hello", ACK, 5001);
    t.send(false, 5001, b"", ACK, 1016);
    let events = t.finish();
    assert_eq!(info(&events).gap_bytes, 10);
}

#[test]
fn sequence_numbers_wrap() {
    let mut t = Conv::new(Config::default());
    t.handshake(u32::MAX - 2, 7);
    t.send(true, u32::MAX - 1, b"abcd", ACK, 8);
    t.send(true, 2, b"efgh", ACK, 8);
    let events = t.finish();
    assert_eq!(data(&events, Direction::C2S), b"abcdefgh");
    assert_eq!(info(&events).gaps, 0);
}

#[test]
fn different_bytes_sent_twice_keep_the_policys_copy() {
    for (last_wins, expected) in [(false, &b"GOOD"[..]), (true, &b"EVIL"[..])] {
        let mut t = Conv::new(Config {
            last_wins,
            ..Config::default()
        });
        t.handshake(1, 1000);
        t.send(true, 2, b"GOOD", ACK, 1001);
        t.send(true, 2, b"EVIL", ACK, 1001);
        t.send(false, 1001, b"", ACK, 6);
        let events = t.finish();
        assert_eq!(data(&events, Direction::C2S), expected);
        assert_eq!(codes(&events), ["tcp.overlap-conflict"]);
    }
}

#[test]
fn many_short_connections_are_finished_as_they_close() {
    let mut r = Reassembler::new(Config {
        sweep_every: 64,
        ..Config::default()
    });
    let mut events = Vec::new();
    let mut frame = 0;
    for i in 0..5000u32 {
        let port = 1024 + (i % 60000) as u16;
        let ts = i64::from(i) * 1_000_000_000;
        for (c2s, flags, payload) in [
            (true, SYN, &b""[..]),
            (true, ACK, b"hi"),
            (true, FIN | ACK, b""),
            (false, FIN | ACK, b""),
        ] {
            frame += 1;
            let (src, sport, dst, dport) = if c2s {
                (C, port, S, 80)
            } else {
                (S, 80, C, port)
            };
            let seq = if c2s {
                100 + u32::from(flags & ACK != 0)
            } else {
                500
            };
            let seg = Segment {
                frame,
                ts,
                src,
                sport,
                dst,
                dport,
                seq,
                ack: 0,
                flags,
                payload,
                missing: 0,
            };
            r.segment(&seg, &mut events);
        }
    }
    let ended_before_finish = events.iter().filter(|e| matches!(e, Event::End(_))).count();
    assert!(ended_before_finish > 4900, "{ended_before_finish}");
    r.finish(&mut events);
    assert_eq!(
        events.iter().filter(|e| matches!(e, Event::End(_))).count(),
        5000
    );
}

#[test]
fn a_later_hole_waits_its_own_window() {
    let mut t = Conv::new(Config {
        reorder_packets: 1,
        ..Config::default()
    });
    t.handshake(1000, 5000);
    t.send(true, 1001, b"AAAA", ACK, 5001);
    t.send(true, 1009, b"CCCC", ACK, 5001); // hole at 4..8, never filled
    t.send(false, 5001, b"", ACK, 1013); // proves it
    t.send(true, 1017, b"EEEE", ACK, 5001); // hole at 12..16
    t.send(false, 5001, b"", ACK, 1021); // proves the second hole, as the first is declared
    t.send(true, 1013, b"DDDD", ACK, 5001); // one packet later: within its own window
    let events = t.finish();
    assert_eq!(data(&events, Direction::C2S), b"AAAACCCCDDDDEEEE");
    assert_eq!(info(&events).gap_bytes, 4);
}

#[test]
fn a_direction_without_its_syn_starts_at_its_earliest_byte_within_the_window() {
    // B written before A, and the SYN after both: every byte is kept, in sequence order
    let mut t = Conv::new(Config::default());
    t.send(true, 110, b"BBBB", ACK, 5001);
    t.send(true, 100, b"AAAAAAAAAA", ACK, 5001);
    t.send(false, 5001, b"ok", ACK, 114);
    let events = t.finish();
    assert_eq!(data(&events, Direction::C2S), b"AAAAAAAAAABBBB");
    assert_eq!(info(&events).gaps, 0);
    let mut t = Conv::new(Config::default());
    t.send(true, 110, b"BBBB", ACK, 5001);
    t.send(true, 99, b"", SYN, 0);
    t.send(true, 100, b"AAAAAAAAAA", ACK, 5001);
    let events = t.finish();
    assert_eq!(data(&events, Direction::C2S), b"AAAAAAAAAABBBB");
    // the reply waited for the request it answers
    let mut t = Conv::new(Config::default());
    t.send(true, 110, b"BBBB", ACK, 5001);
    t.send(false, 5001, b"ok", ACK, 114);
    t.send(true, 100, b"AAAAAAAAAA", ACK, 5001);
    let order = chunks(&t.finish());
    assert_eq!(
        order,
        [b"AAAAAAAAAA".to_vec(), b"BBBB".to_vec(), b"ok".to_vec()]
    );
}

/// The chunks each direction delivered, tagged, in the consumer's order.
fn tagged(events: &[Event]) -> Vec<(Direction, Vec<u8>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Chunk {
                direction, data, ..
            } => Some((*direction, data.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_reply_written_before_its_request_reaches_the_consumer_after_it() {
    let mut t = Conv::new(Config::default());
    t.handshake(1000, 5000);
    // the reply acknowledges the request's four bytes, yet the file has it first
    t.send(false, 5001, b"ok", ACK, 1005);
    assert!(
        chunks(&t.events).is_empty(),
        "the reply waits for the request"
    );
    t.send(true, 1001, b"AAAA", ACK, 5001);
    let events = t.finish();
    assert_eq!(
        tagged(&events),
        [
            (Direction::C2S, b"AAAA".to_vec()),
            (Direction::S2C, b"ok".to_vec())
        ]
    );
    assert_eq!(info(&events).gaps, 0);
}

#[test]
fn each_segment_follows_what_its_own_ack_proves_not_more() {
    let mut t = Conv::new(Config::default());
    t.handshake(1000, 5000);
    // true order: W1 (c2s 0..4), ACK1 (s2c 0..2, acks W1), W2 (c2s 4..8, acks ACK1)
    t.send(false, 5001, b"a1", ACK, 1005);
    t.send(true, 1005, b"W2W2", ACK, 5003);
    t.send(true, 1001, b"W1W1", ACK, 5001);
    let events = t.finish();
    assert_eq!(
        tagged(&events),
        [
            (Direction::C2S, b"W1W1".to_vec()),
            (Direction::S2C, b"a1".to_vec()),
            (Direction::C2S, b"W2W2".to_vec())
        ]
    );
}

#[test]
fn bytes_acknowledged_but_never_captured_become_a_gap_and_the_reply_goes_after_it() {
    let mut t = Conv::new(Config {
        reorder_packets: 3,
        ..Config::default()
    });
    t.handshake(1000, 5000);
    t.send(false, 5001, b"ok", ACK, 1005); // frame 4 acknowledges 4 bytes the capture lacks
    for i in 0..4u32 {
        t.send(false, 5003 + i, b"+", ACK, 1005);
    }
    let events = t.finish();
    let order: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Gap { direction, .. } if *direction == Direction::C2S => Some("gap"),
            Event::Chunk { data, .. } if data == b"ok" => Some("ok"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["gap", "ok"]);
    let gap = events.iter().find_map(|e| match e {
        Event::Gap {
            offset,
            length,
            frame,
            ..
        } => Some((*offset, *length, *frame)),
        _ => None,
    });
    assert_eq!(gap, Some((0, 4, 4)), "the gap is the proving packet's");
    assert_eq!(data(&events, Direction::S2C), b"ok++++");
}

#[test]
fn an_ack_one_past_the_data_waits_for_a_late_byte_then_is_a_lost_fin_not_a_gap() {
    let mut t = Conv::new(Config {
        reorder_packets: 2,
        ..Config::default()
    });
    t.handshake(1000, 5000);
    t.send(true, 1001, b"AAAA", ACK, 5001);
    t.send(false, 5001, b"ok", ACK, 1006); // the client's FIN is not in the capture
    assert_eq!(
        chunks(&t.events).len(),
        1,
        "the reply waits: it may be a one-byte segment"
    );
    for i in 0..3u32 {
        t.send(false, 5003 + i, b"+", ACK, 1006);
    }
    assert_eq!(
        data(&t.events, Direction::S2C),
        b"ok+++",
        "the window passed"
    );
    let events = t.finish();
    assert_eq!(info(&events).gaps, 0);
    assert!(!codes(&events).contains(&"tcp.gap"));
}

#[test]
fn a_one_byte_segment_written_after_its_ack_still_comes_first() {
    let mut t = Conv::new(Config::default());
    t.handshake(1000, 5000);
    t.send(true, 1001, b"AAAA", ACK, 5001);
    t.send(false, 5001, b"ok", ACK, 1006);
    t.send(true, 1005, b"B", ACK, 5001);
    let events = t.finish();
    assert_eq!(
        tagged(&events),
        [
            (Direction::C2S, b"AAAA".to_vec()),
            (Direction::C2S, b"B".to_vec()),
            (Direction::S2C, b"ok".to_vec())
        ]
    );
}

#[test]
fn forged_acks_that_wait_on_each_other_still_deliver_everything() {
    let mut t = Conv::new(Config::default());
    t.handshake(1000, 5000);
    t.send(true, 1001, b"AAAA", ACK, 5003); // acks the reply's bytes before they exist
    t.send(false, 5001, b"ok", ACK, 1005);
    let events = t.finish();
    assert_eq!(data(&events, Direction::C2S), b"AAAA");
    assert_eq!(data(&events, Direction::S2C), b"ok");
}

#[test]
fn a_refused_connection_is_not_midstream() {
    let mut t = Conv::new(Config::default());
    t.send(true, 1000, b"", SYN, 0);
    t.send(false, 0, b"", crate::capture::RST | ACK, 1001);
    let events = t.finish();
    let info = info(&events);
    assert!(info.reset && !info.midstream, "{info:?}");
}

#[test]
fn a_handshake_written_after_the_first_bytes_is_still_a_start_not_midstream() {
    let mut t = Conv::new(Config::default());
    t.send(true, 1001, b"AAAA", ACK, 5001);
    t.send(false, 5000, b"", SYN | ACK, 1001);
    t.send(true, 1000, b"", SYN, 0);
    t.send(false, 5001, b"ok", ACK, 1005);
    let events = t.finish();
    assert!(!info(&events).midstream);
    assert_eq!(
        tagged(&events),
        [
            (Direction::C2S, b"AAAA".to_vec()),
            (Direction::S2C, b"ok".to_vec())
        ]
    );
}

#[test]
fn a_reset_written_before_the_syn_it_refuses_is_one_refused_connection() {
    let mut t = Conv::new(Config::default());
    t.send(false, 0, b"", crate::capture::RST | ACK, 1001);
    t.send(true, 1000, b"", SYN, 0);
    let events = t.finish();
    let ends: Vec<&StreamInfo> = events
        .iter()
        .filter_map(|e| match e {
            Event::End(i) => Some(i.as_ref()),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    let info = ends[0];
    assert!(
        info.reset && !info.midstream && !info.port_reuse,
        "{info:?}"
    );
    assert_eq!(
        (info.stream, info.client_by, info.first_frame),
        (0, "syn", 1)
    );
    assert_eq!((info.packets_c2s, info.packets_s2c), (1, 1));
    assert_eq!(info.client, "10.0.0.1:40000");
    assert!(!codes(&events).contains(&"tcp.port-reuse"));
}

fn ends(events: &[Event]) -> Vec<&StreamInfo> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::End(i) => Some(i.as_ref()),
            _ => None,
        })
        .collect()
}

/// SYN, data both ways, FIN both ways, the last ACK: client ISN 1000 (next 1004), server 5000
/// (next 5003).
fn clean_exchange(conv: &mut Conv) {
    conv.handshake(999, 4999);
    conv.send(true, 1000, b"abc", ACK, 5000);
    conv.send(false, 5000, b"ok", ACK, 1003);
    conv.send(true, 1003, b"", FIN | ACK, 5002);
    conv.send(false, 5002, b"", FIN | ACK, 1004);
    conv.send(true, 1004, b"", ACK, 5003);
}

#[test]
fn a_connection_closed_cleanly_ends_at_its_last_ack_without_a_timer() {
    let mut conv = Conv::new(Config::default());
    conv.handshake(999, 4999);
    conv.send(true, 1000, b"abc", ACK, 5000);
    conv.send(false, 5000, b"ok", ACK, 1003);
    conv.send(true, 1003, b"", FIN | ACK, 5002);
    conv.send(false, 5002, b"", FIN | ACK, 1004);
    assert!(
        ends(&conv.events).is_empty(),
        "the server's FIN is not acknowledged yet"
    );
    conv.send(true, 1004, b"", ACK, 5003);
    let ended = ends(&conv.events);
    assert_eq!(ended.len(), 1);
    assert!(ended[0].fin_c2s && ended[0].fin_s2c && !ended[0].midstream);
    assert_eq!(data(&conv.events, Direction::C2S), b"abc");
}

#[test]
fn late_copies_of_a_finished_connections_packets_open_nothing() {
    let mut conv = Conv::new(Config::default());
    clean_exchange(&mut conv);
    conv.send(true, 1004, b"", ACK, 5003); // the last ACK twice
    conv.send(false, 5002, b"", FIN | ACK, 1004); // the server's FIN again
    conv.send(true, 1000, b"abc", ACK, 5000); // a retransmission of the data
    let events = conv.finish();
    assert_eq!(ends(&events).len(), 1);
    assert_eq!(data(&events, Direction::C2S), b"abc");
}

#[test]
fn a_new_connection_on_the_same_ports_is_its_own_after_a_clean_close() {
    for syn in [true, false] {
        let mut conv = Conv::new(Config::default());
        clean_exchange(&mut conv);
        if syn {
            conv.handshake(69_999, 90_000);
        }
        conv.send(true, 70_000, b"second", ACK, 90_001); // far from the first one's numbers
        let events = conv.finish();
        assert_eq!(ends(&events).len(), 2, "syn {syn}: {:?}", codes(&events));
        assert_eq!(data(&events, Direction::C2S), b"abcsecond", "syn {syn}");
    }
}

/// Ids by the rank of each stream's opening frame among those a `Frames` pass found are the ids
/// a counter gives the whole capture (the Spark engine's two passes over a flow), and stay so for
/// streams a hollow first packet opened early.
#[test]
fn ranked_opening_frames_give_the_counters_ids() {
    let run = |ids: StreamIds| {
        let mut conv = Conv::new(Config {
            ids,
            ..Config::default()
        });
        conv.send(false, 0, b"", RST | ACK, 1); // a hollow connection its SYN then takes over
        conv.send(true, 0, b"", SYN, 0);
        clean_exchange(&mut conv);
        conv.handshake(69_999, 90_000);
        conv.send(true, 70_000, b"second", ACK, 90_001);
        conv.send(true, 80_000, b"third", FIN | ACK, 95_000);
        let events = conv.finish();
        let mut ids: Vec<(u64, u64)> = ends(&events)
            .iter()
            .map(|i| (i.first_frame, i.stream))
            .collect();
        ids.sort_unstable();
        ids
    };
    let counted = run(StreamIds::Counter);
    let frames: Vec<u64> = run(StreamIds::Frames).iter().map(|&(_, id)| id).collect();
    assert_eq!(counted.len(), 3, "{counted:?}"); // the refused, the clean and the second one
    assert_eq!(run(StreamIds::Ranks(frames.into())), counted);
}

/// A client's SYN written after everything that followed it, the server's RST included (a packet
/// moved 8 places in a capture of Log Courier's receiver being killed): the same one connection,
/// started in the capture, not a new one on the same ports.
#[test]
fn a_syn_written_after_the_reset_that_ended_its_connection_is_still_its_own() {
    let mut conv = Conv::new(Config::default());
    conv.send(false, 4999, b"", SYN | ACK, 1000);
    conv.send(true, 1000, b"", ACK, 5000);
    conv.send(true, 1000, b"abc", ACK, 5000);
    conv.send(false, 5000, b"", ACK, 1003);
    conv.send(false, 5000, b"", RST | ACK, 1003);
    conv.send(true, 999, b"", SYN, 0);
    let events = conv.finish();
    assert!(
        !codes(&events).contains(&"tcp.port-reuse"),
        "{:?}",
        codes(&events)
    );
    let ended = ends(&events);
    assert_eq!(ended.len(), 1);
    assert!(!ended[0].midstream && ended[0].reset);
    assert_eq!(data(&events, Direction::C2S), b"abc");
}
