use super::*;

const S: i64 = 1_000_000_000;

fn stamp(stream: u64) -> Stamp {
    Stamp {
        stream,
        ..Stamp::default()
    }
}

fn window(n: u64, ts: i64, frame: u64) -> Record {
    let mut m = Message::new("lumberjack", "window");
    (m.direction, m.ts, m.frame) = (Some(Direction::C2S), Some(ts), Some(frame));
    m.set("window", n);
    m.set("received", 3u64);
    m.into()
}

fn ack(stream_window: u64, ts: i64, frame: u64) -> Record {
    let mut m = Message::new("lumberjack", "ack");
    (m.direction, m.ts, m.frame) = (Some(Direction::S2C), Some(ts), Some(frame));
    m.set("window", stream_window);
    m.set("value", 3u64);
    m.into()
}

fn parse(t: &mut Timeline, top: usize) -> Value {
    serde_json::from_str(&t.json(top)).unwrap()
}

#[test]
fn a_late_ack_is_a_stall_with_its_frames_whichever_record_comes_first() {
    for ack_first in [false, true] {
        let mut t = Timeline::new(2 * S);
        let (w, a) = (window(1, 10 * S, 5), ack(1, 15 * S, 9));
        let order = if ack_first { [&a, &w] } else { [&w, &a] };
        for r in order {
            t.record(r, Some(&stamp(7)));
        }
        t.record(&window(2, 16 * S, 11), Some(&stamp(7)));
        t.record(&ack(2, 16 * S + S / 2, 12), Some(&stamp(7)));
        let j = parse(&mut t, 10);
        let stalls = j["stalls"].as_array().unwrap();
        assert_eq!(stalls.len(), 1, "only the 5 s wait is a stall: {stalls:?}");
        assert_eq!(stalls[0]["start"], 10 * S);
        assert_eq!(stalls[0]["end"], 15 * S);
        assert_eq!(stalls[0]["sent_frame"], 5);
        assert_eq!(stalls[0]["answer_frame"], 9);
        let hist = j["latency_by"]["window"].as_array().unwrap();
        assert_eq!(hist.iter().map(|v| v.as_u64().unwrap()).sum::<u64>(), 2);
    }
}

#[test]
fn a_window_never_answered_stalls_until_the_capture_ends() {
    let mut t = Timeline::new(2 * S);
    t.record(&window(1, 10 * S, 5), Some(&stamp(1)));
    let mut f = Finding::new("x.y", Severity::Warning, "late".into());
    f.ts = Some(30 * S);
    t.record(&f.into(), None);
    let j = parse(&mut t, 10);
    assert_eq!(j["stalls"][0]["start"], 10 * S);
    assert_eq!(j["stalls"][0]["end"], Value::Null);
    assert_eq!(
        j["stalls"][0]["until"],
        30 * S,
        "to the capture's end: its connection has no end"
    );
    assert_eq!(j["stalls"][0]["stream"], 1);
}

#[test]
fn each_stall_is_drawn_on_its_own_window() {
    // Two pipelined windows wait together, a third later: three bars, each over its own wait, with
    // the window's seq range (they used to merge into one bar over the whole stretch).
    let mut t = Timeline::new(S);
    for (n, sent, acked) in [(1, 0, 5), (2, 2, 7), (3, 20, 25)] {
        let Record::Message(mut w) = window(n, sent * S, n * 10) else {
            unreachable!()
        };
        w.set("seq_first", (n * 100 + 1) as i64);
        w.set("seq_last", (n * 100 + 3) as i64);
        t.record(&w.into(), Some(&stamp(4)));
        t.record(&ack(n, acked * S, n * 10 + 1), Some(&stamp(4)));
    }
    let j = parse(&mut t, 10);
    let stalls = j["stalls"].as_array().unwrap();
    let spans: Vec<(Value, Value, Value)> = stalls
        .iter()
        .map(|s| {
            (
                s["start"].clone(),
                s["until"].clone(),
                s["seq_first"].clone(),
            )
        })
        .collect();
    assert_eq!(
        spans,
        vec![
            (json!(0), json!(5 * S), json!(101)),
            (json!(2 * S), json!(7 * S), json!(201)),
            (json!(20 * S), json!(25 * S), json!(301)),
        ]
    );
    assert_eq!(stalls[0]["seq_last"], 103);
    assert_eq!(stalls[0]["request"], "window");
}

#[test]
fn bin_widths_are_round_and_each_a_multiple_of_the_one_before() {
    let mut widths = vec![BASE_BIN_NS];
    while widths.len() < 10 {
        let w = *widths.last().unwrap();
        widths.push(w * coarser(w));
    }
    let ms: Vec<i64> = widths.iter().map(|w| w / 1_000_000).collect();
    assert_eq!(ms, [1, 2, 10, 20, 100, 200, 1000, 2000, 10_000, 20_000]);
    // a capture of 30 s: the bins coarsen to 20 ms (1,500 of them)
    let mut t = Timeline::new(S);
    for i in 0..=300i64 {
        let mut m = Message::new("lumberjack", "event");
        (m.ts, m.acked) = (Some(1_000 * S + i * S / 10), Some(true));
        t.record(&m.into(), Some(&stamp(0)));
    }
    let j = parse(&mut t, 1);
    assert_eq!(j["bin_ns"], 20_000_000);
}

#[test]
fn lanes_are_ranked_by_problems_before_size() {
    let mut t = Timeline::new(S);
    // stream 0: many events, all fine; 1: one never acknowledged; 2: a stall; 3: a finding
    for i in 0..50 {
        let mut m = Message::new("lumberjack", "event");
        (m.ts, m.acked) = (Some(i * S / 100), Some(true));
        t.record(&m.into(), Some(&stamp(0)));
    }
    let mut m = Message::new("lumberjack", "event");
    (m.ts, m.acked) = (Some(S), Some(false));
    t.record(&m.into(), Some(&stamp(1)));
    t.record(&window(1, S, 3), Some(&stamp(2)));
    t.record(&ack(1, 5 * S, 4), Some(&stamp(2)));
    let mut f = Finding::new("x.y", Severity::Warning, "odd".into());
    (f.ts, f.stream) = (Some(S), Some(3));
    t.record(&f.into(), None);
    let j = parse(&mut t, 3);
    let order: Vec<u64> = j["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["stream"].as_u64().unwrap())
        .collect();
    assert_eq!(order, [1, 2, 3]);
    assert_eq!(j["folded"]["connections"], 1);
    assert_eq!(j["folded"]["events"], 50);
}

fn end(t: &mut Timeline, stream: u64, ts: i64) {
    t.event(&crate::tcp::Event::End(Box::new(crate::tcp::StreamInfo {
        stream,
        first_ts: ts,
        last_ts: ts,
        last_frame: stream,
        fin_c2s: true,
        ..Default::default()
    })));
}

#[test]
fn ended_lanes_fold_into_a_bounded_top_and_counts() {
    let mut t = Timeline::new(S);
    let n = 5 * lanes::KEPT as u64;
    for stream in 0..n {
        let ts = stream as i64 * 1000;
        let mut m = Message::new("lumberjack", "event");
        // every 1000th connection loses its event
        (m.ts, m.acked) = (Some(ts), Some(stream % 1000 != 7));
        t.record(&m.into(), Some(&stamp(stream)));
        end(&mut t, stream, ts);
        assert!(
            t.lanes.held() <= 2 * lanes::KEPT + 1,
            "{} lanes held after {stream} connections",
            t.lanes.held()
        );
    }
    // a record of a folded connection after its end (its fate waited for the input's end)
    let mut late = Message::new("lumberjack", "event");
    (late.ts, late.acked) = (Some(S), Some(true));
    t.record(&late.into(), Some(&stamp(15_000)));
    let j = parse(&mut t, 100);
    let lanes = j["lanes"].as_array().unwrap();
    // the connections that lost an event are the first lanes, whatever their place
    let lost: Vec<u64> = (0..n).filter(|s| s % 1000 == 7).collect();
    let first: Vec<u64> = lanes[..lost.len()]
        .iter()
        .map(|l| l["stream"].as_u64().unwrap())
        .collect();
    assert_eq!(first, lost);
    assert_eq!(j["folded"]["connections"], n - 100);
    assert_eq!(
        j["folded"]["events"],
        n - 100 + 1,
        "the late event counts too"
    );
    let unacked: u64 = lanes.iter().map(|l| l["unacked"].as_u64().unwrap()).sum();
    assert_eq!(
        unacked + j["folded"]["unacked"].as_u64().unwrap(),
        lost.len() as u64
    );
}

#[test]
fn series_stay_bounded_and_keep_every_count() {
    let mut t = Timeline::new(S);
    let mut events = 0;
    for i in 0..100_000i64 {
        let mut m = Message::new("lumberjack", "event");
        (m.ts, m.acked) = (Some(i * 7 * S / 10), Some(true));
        t.record(&m.into(), Some(&stamp((i % 50) as u64)));
        events += 1;
    }
    let j = parse(&mut t, 5);
    let bins = j["series"]["bin"].as_array().unwrap();
    assert!(bins.len() as i64 <= MAX_BINS, "{} bins", bins.len());
    let sum: u64 = j["series"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(sum, events);
    assert_eq!(j["lanes"].as_array().unwrap().len(), 5);
    assert_eq!(j["folded"]["connections"], 45);
    assert_eq!(j["folded"]["events"], 45 * 2000);
}

#[test]
fn marks_are_capped_and_thinned_evenly() {
    let mut t = Timeline::new(S);
    for i in 0..100_000u64 {
        t.record(&window(i + 1, i as i64 * 1000, i), Some(&stamp(0)));
    }
    let j = parse(&mut t, 1);
    let n = j["marks"]["ts"].as_array().unwrap().len();
    let stride = j["mark_stride"].as_u64().unwrap();
    assert!(n <= ROUTINE_MARKS, "{n}");
    assert_eq!(n as u64, 100_000 / stride);
}

#[test]
fn never_acknowledged_events_of_a_frame_are_one_mark() {
    let mut t = Timeline::new(S);
    for seq in 1..=4u64 {
        let mut m = Message::new("lumberjack", "event");
        (m.ts, m.frame, m.acked) = (Some(S), Some(3), Some(false));
        m.delivery = Some(Delivery::NeverAcknowledged);
        m.set("seq", seq);
        t.record(&m.into(), Some(&stamp(2)));
    }
    // unacknowledged on its connection but delivered by a resend: not a lost event
    let mut m = Message::new("lumberjack", "event");
    (m.ts, m.frame, m.acked) = (Some(S), Some(4), Some(false));
    m.delivery = Some(Delivery::RecoveredByResend);
    m.set("seq", 5);
    t.record(&m.into(), Some(&stamp(2)));
    let j = parse(&mut t, 1);
    assert_eq!(j["marks"]["kind"], json!(["unacked", "recovered"]));
    assert_eq!(j["series"]["unacked"], json!([4]));
    assert_eq!(j["series"]["recovered"], json!([1]));
    assert_eq!(j["marks"]["count"], json!([4, 1]));
    assert_eq!(
        (
            j["marks"]["first"][0].clone(),
            j["marks"]["last"][0].clone()
        ),
        (json!(1), json!(4))
    );
    assert_eq!(j["lanes"][0]["unacked"], 5); // on its connection
}

#[test]
fn hostile_timestamps_do_not_overflow() {
    let mut t = Timeline::new(S);
    for ts in [i64::MIN, -1, 0, i64::MAX] {
        let mut m = Message::new("cql", "result");
        (m.ts, m.direction) = (Some(ts), Some(Direction::S2C));
        m.set("latency_ns", i64::MAX);
        t.record(&m.into(), Some(&stamp(0)));
    }
    let j = parse(&mut t, 1);
    assert!(j["series"]["bin"].as_array().unwrap().len() as i64 <= MAX_BINS);
}

#[test]
fn a_close_without_data_ends_the_wait_of_an_unanswered_window() {
    // The shipper gives up 0.7 s after its window and closes: the FIN carries no bytes, so only
    // the stream's end says how long the window waited.
    let mut t = Timeline::new(S / 2);
    t.record(&window(1, 10 * S, 5), Some(&stamp(2)));
    t.event(&crate::tcp::Event::End(Box::new(crate::tcp::StreamInfo {
        stream: 2,
        first_ts: 10 * S,
        last_ts: 10 * S + 7 * S / 10,
        last_frame: 9,
        fin_c2s: true,
        ..Default::default()
    })));
    let j = parse(&mut t, 10);
    assert_eq!(j["stalls"][0]["start"], 10 * S);
    assert_eq!(j["stalls"][0]["end"], Value::Null);
    assert_eq!(j["stalls"][0]["until"], 10 * S + 7 * S / 10);
}

#[test]
fn a_folded_fleet_keeps_the_connection_still_waiting_for_its_ack() {
    // 50,000 connections end; one of them (stream 25,000, the least events of all) sent a window
    // that no ACK answered: it is kept whole, so its stall is drawn to its own last packet.
    let mut t = Timeline::new(S);
    for stream in 0..50_000u64 {
        let ts = stream as i64 * 1000;
        if stream == 25_000 {
            t.record(&window(1, ts, 5), Some(&stamp(stream)));
        } else {
            let mut m = Message::new("lumberjack", "event");
            (m.ts, m.acked) = (Some(ts), Some(true));
            t.record(&m.into(), Some(&stamp(stream)));
        }
        end(&mut t, stream, ts);
    }
    let mut f = Finding::new("x.y", Severity::Info, "late".into());
    f.ts = Some(300 * S);
    t.record(&f.into(), None);
    let j = parse(&mut t, 1);
    assert_eq!(
        j["lanes"][0]["stream"], 25_000,
        "the stalled connection ranks first"
    );
    assert_eq!(j["stalls"][0]["stream"], 25_000);
    assert_eq!(
        j["stalls"][0]["until"],
        25_000 * 1000,
        "to its connection's last packet, not the capture's end"
    );
}
