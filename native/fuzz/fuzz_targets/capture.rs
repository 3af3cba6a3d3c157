//! Capture reading on arbitrary bytes: the first byte picks where the rest is split between two
//! feeds; reading it so must give exactly what reading it in one feed gives, and never panic.
//! Input that starts with the gzip magic is inflated first, as the core does with gzip captures.
#![no_main]

use _core::capture::{CaptureInfo, CaptureInput, Segment};
use _core::model::{Finding, FindingSink};
use libfuzzer_sys::fuzz_target;

type Seg = (
    u64,
    i64,
    String,
    u16,
    String,
    u16,
    u32,
    u32,
    u8,
    Vec<u8>,
    u32,
);

fn read(pieces: &[&[u8]], gzip: bool) -> (Vec<Seg>, Vec<Finding>, CaptureInfo, Option<String>) {
    let mut reader = CaptureInput::new("fuzz", gzip.then_some("gzip"));
    let mut sink = FindingSink::default();
    let mut segs = Vec::new();
    let mut on_segment = |s: &Segment, _: &mut FindingSink| {
        let (src, dst) = (s.src.to_string(), s.dst.to_string());
        let payload = s.payload.to_vec();
        segs.push((
            s.frame, s.ts, src, s.sport, dst, s.dport, s.seq, s.ack, s.flags, payload, s.missing,
        ));
    };
    let mut error = None;
    for piece in pieces {
        if let Err(e) = reader.feed(piece, &mut sink, &mut on_segment) {
            error = Some(e);
            break;
        }
    }
    let finished = reader.finish(None, &mut sink, &mut on_segment);
    if let Some(error) = error {
        assert_eq!(
            finished.as_ref().err(),
            Some(&error),
            "an unusable input stays unusable"
        );
    }
    sink.finish();
    (segs, sink.drain(), reader.info().clone(), finished.err())
}

fuzz_target!(|data: &[u8]| {
    let Some((&at, bytes)) = data.split_first() else {
        return;
    };
    let cut = bytes.len() * usize::from(at) / 255;
    let (first, second) = bytes.split_at(cut);
    let gzip = bytes.starts_with(&[0x1f, 0x8b]);
    let whole = read(&[bytes], gzip);
    assert_eq!(read(&[first, second], gzip), whole);
    let (segs, _, info, _) = whole;
    assert!(info.packets >= segs.len() as u64);
    assert_eq!(info.tcp_packets + info.non_tcp_packets, info.packets);
});
