//! A CQL message's cells as a field its decoder writes (`model::Written`): a RESULT's rows, or a
//! request's bound values, the cells' bytes kept as the wire gave them and written into the
//! record's JSON text cell by cell, with no tree of values per message (building, writing and
//! dropping one was most of a result's cost). The tree is built only for the consumers that read
//! values (Python objects, the Hercules mapping).

use std::sync::Arc;

use crate::model::{Value, Written};

use super::types::{safe_value, write_cell, Cell, CqlType, Reader, Res};

/// How the cells lie and are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// A RESULT's rows: this many lists of `columns` `[bytes]` cells.
    Rows(usize),
    /// A request's bound values: one list of `columns` `[value]` cells (one may be "not set").
    Values,
}

#[derive(Debug)]
pub struct Rows {
    /// The columns' types (None: the cells are written as hex).
    types: Option<Arc<[CqlType]>>,
    columns: usize,
    shape: Shape,
    /// The cells, every one read once already when they were taken.
    cells: Arc<[u8]>,
}

impl Rows {
    /// Read `rows × columns` `[bytes]` cells from `r` (a short body is `Malformed`, as before any
    /// row is kept); `types`, when given, has one type a column.
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
            shape: Shape::Rows(rows),
            cells: ahead[..r.pos.saturating_sub(start)].into(),
        })
    }

    /// A request's bound values, `[value]` cells as the wire gives them (`values`, written as hex:
    /// the types are not known), and the same cells decoded by `types` when the statement's bind
    /// types are known and as many (`values_decoded`).
    pub fn values(
        cells: Arc<[u8]>,
        count: usize,
        types: Option<Arc<[CqlType]>>,
    ) -> (Rows, Option<Rows>) {
        let decoded = types.filter(|t| t.len() == count).map(|types| Rows {
            types: Some(types),
            columns: count,
            shape: Shape::Values,
            cells: cells.clone(),
        });
        let hexed = Rows {
            types: None,
            columns: count,
            shape: Shape::Values,
            cells,
        };
        (hexed, decoded)
    }

    /// The cells in order, row after row (every one was read once: none is short).
    fn cells(&self) -> impl Iterator<Item = Cell<'_>> {
        let mut r = Reader::new(&self.cells);
        let values = self.shape == Shape::Values;
        std::iter::from_fn(move || if values { r.value() } else { r.bytes() }.ok())
    }

    /// The rows of cells (bound values: one row, not nested).
    fn rows(&self) -> usize {
        match self.shape {
            Shape::Rows(n) => n,
            Shape::Values => 1,
        }
    }

    fn write_cell(&self, out: &mut String, column: usize, c: Cell<'_>) {
        match &self.types {
            Some(types) => write_cell(out, &types[column], c),
            None => c.write_hexed(out),
        }
    }

    fn cell_value(&self, column: usize, c: Cell<'_>) -> Value {
        match &self.types {
            Some(types) => safe_value(&types[column], c),
            None => c.hexed(),
        }
    }
}

impl Written for Rows {
    fn write_json(&self, out: &mut String) {
        let mut cells = self.cells();
        let nested = self.shape != Shape::Values;
        if nested {
            out.push('[');
        }
        for row in 0..self.rows() {
            if row > 0 {
                out.push(',');
            }
            out.push('[');
            for (column, c) in (0..self.columns).zip(&mut cells) {
                if column > 0 {
                    out.push(',');
                }
                self.write_cell(out, column, c);
            }
            out.push(']');
        }
        if nested {
            out.push(']');
        }
    }

    fn value(&self) -> Value {
        let mut cells = self.cells();
        let mut rows = (0..self.rows()).map(|_| {
            let row = (0..self.columns)
                .zip(&mut cells)
                .map(|(column, c)| self.cell_value(column, c));
            Value::Array(row.collect())
        });
        match self.shape {
            Shape::Rows(_) => Value::Array(rows.collect()),
            Shape::Values => rows.next().unwrap_or_else(|| Value::Array(Vec::new())),
        }
    }
}
