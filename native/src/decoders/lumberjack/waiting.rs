//! A window's event seqs while it waits for its ACK (what it keeps of its events is
//! `held::waiting::Records`).

use std::ops::Range;

/// A window's event seqs in order: a run (1..n, or a v1 client's continuous numbering) in 8 bytes,
/// a list when they are not consecutive.
#[derive(Debug)]
pub enum Seqs {
    Run { first: u32, len: u32 },
    List(Vec<u32>),
}

impl Default for Seqs {
    fn default() -> Self {
        Seqs::Run { first: 0, len: 0 }
    }
}

impl Seqs {
    pub fn len(&self) -> usize {
        match self {
            Seqs::Run { len, .. } => *len as usize,
            Seqs::List(v) => v.len(),
        }
    }

    /// The seq of the `i`-th event (`i` below `len`).
    pub fn get(&self, i: usize) -> Option<u32> {
        match self {
            Seqs::Run { first, len } => {
                let i = u32::try_from(i).ok().filter(|i| i < len)?;
                Some(first.wrapping_add(i))
            }
            Seqs::List(v) => v.get(i).copied(),
        }
    }

    pub fn first(&self) -> Option<u32> {
        self.get(0)
    }

    pub fn last(&self) -> Option<u32> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    pub fn push(&mut self, seq: u32) {
        match self {
            Seqs::Run { first, len } if *len == 0 => (*first, *len) = (seq, 1),
            Seqs::Run { first, len } if first.checked_add(*len) == Some(seq) => *len += 1,
            Seqs::Run { first, len } => {
                let mut list: Vec<u32> = (0..*len).map(|i| first.wrapping_add(i)).collect();
                list.push(seq);
                *self = Seqs::List(list);
            }
            Seqs::List(v) => v.push(seq),
        }
    }

    /// One past the position of the last event in `within` whose seq is `value`.
    pub fn after_last(&self, within: Range<usize>, value: u32) -> Option<usize> {
        match self {
            Seqs::Run { first, .. } => {
                let i = value.wrapping_sub(*first) as usize;
                within.contains(&i).then_some(i + 1)
            }
            Seqs::List(v) => {
                let found = v.get(within.clone())?.iter().rposition(|&s| s == value)?;
                Some(within.start + found + 1)
            }
        }
    }

    /// Whether an event before position `end` has seq `value`.
    pub fn before(&self, end: usize, value: u32) -> bool {
        self.after_last(0..end.min(self.len()), value).is_some()
    }

    pub fn shrink(&mut self) {
        if let Seqs::List(v) = self {
            v.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(values: &[u32]) -> Seqs {
        let mut s = Seqs::default();
        for &v in values {
            s.push(v);
        }
        s
    }

    #[test]
    fn a_run_and_a_list_answer_alike() {
        for values in [
            vec![1, 2, 3, 4, 5],
            vec![7, 8, 9],
            vec![u32::MAX - 1, u32::MAX],
        ] {
            let run = seqs(&values);
            assert!(matches!(run, Seqs::Run { .. }), "{values:?}");
            let list = Seqs::List(values.clone());
            let n = values.len();
            assert_eq!(
                (run.len(), run.first(), run.last()),
                (list.len(), list.first(), list.last())
            );
            for i in 0..=n {
                assert_eq!(run.get(i), list.get(i));
            }
            for value in values.iter().copied().chain([0, 6, 10, u32::MAX]) {
                for start in 0..=n {
                    for end in start..=n {
                        assert_eq!(
                            run.after_last(start..end, value),
                            list.after_last(start..end, value)
                        );
                    }
                    assert_eq!(run.before(start, value), list.before(start, value));
                }
            }
        }
    }

    #[test]
    fn seqs_that_break_the_run_become_a_list() {
        let s = seqs(&[1, 2, 3, 3, 2]);
        assert!(matches!(s, Seqs::List(_)));
        assert_eq!(
            (s.len(), s.after_last(0..5, 3), s.after_last(0..5, 2)),
            (5, Some(4), Some(5))
        );
        assert!(s.before(2, 2) && !s.before(1, 2));
        assert!(matches!(seqs(&[u32::MAX, 0]), Seqs::List(_)));
    }
}
