//! The rows of a RESULT Rows as a field its decoder writes (`model::Written`): the cells' bytes
//! kept as the wire gave them, written into the record's JSON text cell by cell, with no tree of
//! values per message (building, writing and dropping one was most of a result's cost). The tree
//! is built only for the consumers that read values (Python objects, the Hercules mapping).

use std::sync::Arc;

use crate::model::{Value, Written};

use super::types::{safe_value, write_cell, Cell, CqlType, Reader, Res};

#[derive(Debug)]
pub struct Rows {
    /// The columns' types (None: the cells are written as hex).
    types: Option<Arc<[CqlType]>>,
    columns: usize,
    rows: usize,
    /// `rows × columns` `[bytes]` cells, every one read once already by `read`.
    cells: Box<[u8]>,
}

impl Rows {
    /// Read `rows × columns` cells from `r` (a short body is `Malformed`, as before any row is
    /// kept); `types`, when given, has one type a column.
    pub fn read(
        r: &mut Reader<'_>,
        types: Option<Arc<[CqlType]>>,
        columns: usize,
        rows: usize,
    ) -> Res<Rows> {
        let ahead = r.ahead();
        let start = r.pos;
        for _ in 0..rows.saturating_mul(columns) {
            r.bytes()?;
        }
        Ok(Rows {
            types,
            columns,
            rows,
            cells: ahead[..r.pos.saturating_sub(start)].into(),
        })
    }

    /// The cells in order, row after row (every one was read once by `read`: none is short).
    fn cells(&self) -> impl Iterator<Item = Cell<'_>> {
        let mut r = Reader::new(&self.cells);
        std::iter::from_fn(move || r.bytes().ok())
    }
}

impl Written for Rows {
    fn write_json(&self, out: &mut String) {
        let mut cells = self.cells();
        out.push('[');
        for row in 0..self.rows {
            if row > 0 {
                out.push(',');
            }
            out.push('[');
            for (column, c) in (0..self.columns).zip(&mut cells) {
                if column > 0 {
                    out.push(',');
                }
                match &self.types {
                    Some(types) => write_cell(out, &types[column], c),
                    None => c.write_hexed(out),
                }
            }
            out.push(']');
        }
        out.push(']');
    }

    fn value(&self) -> Value {
        let mut cells = self.cells();
        let rows = (0..self.rows).map(|_| {
            let row = (0..self.columns)
                .zip(&mut cells)
                .map(|(column, c)| match &self.types {
                    Some(types) => safe_value(&types[column], c),
                    None => c.hexed(),
                });
            Value::Array(row.collect())
        });
        Value::Array(rows.collect())
    }
}
