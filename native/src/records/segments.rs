//! TCP segments as Arrow rows: what a task of the split engine reads back from a capture for its
//! group of connections and feeds its pipelines (docs/spark.md).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Int64Builder, UInt16Builder, UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};

use crate::capture::Segment;

/// The columns: frame, ts (ns), the endpoints (addresses as 4 or 16 bytes), the TCP header fields,
/// the payload and how many payload bytes the capture lacks.
pub fn schema() -> SchemaRef {
    let f = |name: &str, t: DataType| Field::new(name, t, false);
    Arc::new(Schema::new(vec![
        f("frame", DataType::UInt64),
        f("ts", DataType::Int64),
        f("src", DataType::Binary),
        f("sport", DataType::UInt16),
        f("dst", DataType::Binary),
        f("dport", DataType::UInt16),
        f("seq", DataType::UInt32),
        f("ack", DataType::UInt32),
        f("flags", DataType::UInt8),
        f("payload", DataType::Binary),
        f("missing", DataType::UInt32),
    ]))
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn ip_from(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?))),
        16 => Some(IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(bytes).ok()?,
        ))),
        _ => None,
    }
}

/// Segments appended one at a time, finished into one batch.
#[derive(Default)]
pub struct SegmentRows {
    frame: UInt64Builder,
    ts: Int64Builder,
    src: BinaryBuilder,
    sport: UInt16Builder,
    dst: BinaryBuilder,
    dport: UInt16Builder,
    seq: UInt32Builder,
    ack: UInt32Builder,
    flags: UInt8Builder,
    payload: BinaryBuilder,
    missing: UInt32Builder,
    rows: usize,
}

impl SegmentRows {
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn push(&mut self, s: &Segment<'_>) {
        self.frame.append_value(s.frame);
        self.ts.append_value(s.ts);
        self.src.append_value(ip_bytes(s.src));
        self.sport.append_value(s.sport);
        self.dst.append_value(ip_bytes(s.dst));
        self.dport.append_value(s.dport);
        self.seq.append_value(s.seq);
        self.ack.append_value(s.ack);
        self.flags.append_value(s.flags);
        self.payload.append_value(s.payload);
        self.missing.append_value(s.missing);
        self.rows = self.rows.saturating_add(1);
    }

    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        self.rows = 0;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.frame.finish()),
            Arc::new(self.ts.finish()),
            Arc::new(self.src.finish()),
            Arc::new(self.sport.finish()),
            Arc::new(self.dst.finish()),
            Arc::new(self.dport.finish()),
            Arc::new(self.seq.finish()),
            Arc::new(self.ack.finish()),
            Arc::new(self.flags.finish()),
            Arc::new(self.payload.finish()),
            Arc::new(self.missing.finish()),
        ];
        RecordBatch::try_new(schema(), columns)
    }
}

/// Calls `f` with each segment of a batch in the segment schema, in row order.
pub fn each_segment(
    batch: &RecordBatch,
    mut f: impl FnMut(&Segment<'_>),
) -> Result<(), ArrowError> {
    let column = |name: &str| {
        batch
            .column_by_name(name)
            .ok_or_else(|| ArrowError::SchemaError(format!("no column {name:?}")))
    };
    let frame = column("frame")?.as_primitive_opt::<UInt64Type>();
    let ts = column("ts")?.as_primitive_opt::<Int64Type>();
    let src = column("src")?.as_binary_opt::<i32>();
    let sport = column("sport")?.as_primitive_opt::<UInt16Type>();
    let dst = column("dst")?.as_binary_opt::<i32>();
    let dport = column("dport")?.as_primitive_opt::<UInt16Type>();
    let seq = column("seq")?.as_primitive_opt::<UInt32Type>();
    let ack = column("ack")?.as_primitive_opt::<UInt32Type>();
    let flags = column("flags")?.as_primitive_opt::<UInt8Type>();
    let payload = column("payload")?.as_binary_opt::<i32>();
    let missing = column("missing")?.as_primitive_opt::<UInt32Type>();
    let (
        Some(frame),
        Some(ts),
        Some(src),
        Some(sport),
        Some(dst),
        Some(dport),
        Some(seq),
        Some(ack),
        Some(flags),
        Some(payload),
        Some(missing),
    ) = (
        frame, ts, src, sport, dst, dport, seq, ack, flags, payload, missing,
    )
    else {
        return Err(ArrowError::SchemaError(
            "not the segment schema (records/segments.rs)".to_owned(),
        ));
    };
    for i in 0..batch.num_rows() {
        let (Some(s), Some(d)) = (ip_from(src.value(i)), ip_from(dst.value(i))) else {
            return Err(ArrowError::InvalidArgumentError(format!(
                "row {i}: an address is neither 4 nor 16 bytes"
            )));
        };
        if frame.is_null(i) {
            continue;
        }
        f(&Segment {
            frame: frame.value(i),
            ts: ts.value(i),
            src: s,
            sport: sport.value(i),
            dst: d,
            dport: dport.value(i),
            seq: seq.value(i),
            ack: ack.value(i),
            flags: flags.value(i),
            payload: payload.value(i),
            missing: missing.value(i),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_round_trip() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "::1".parse().unwrap();
        let seg = |src, sport, dst, dport, payload: &'static [u8]| Segment {
            frame: 7,
            ts: -5,
            src,
            sport,
            dst,
            dport,
            seq: 1,
            ack: 2,
            flags: 0x18,
            payload,
            missing: 3,
        };
        let mut rows = SegmentRows::default();
        rows.push(&seg(a, 40000, b, 5044, b"hello"));
        rows.push(&seg(b, 5044, a, 40000, b""));
        let batch = rows.finish().unwrap();
        let mut back = Vec::new();
        each_segment(&batch, |s| {
            back.push((s.src, s.sport, s.payload.to_vec(), s.missing))
        })
        .unwrap();
        assert_eq!(
            back,
            [(a, 40000, b"hello".to_vec(), 3), (b, 5044, Vec::new(), 3)]
        );
    }
}
