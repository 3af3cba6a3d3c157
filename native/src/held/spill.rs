//! Records that wait for their fate (log events until their ACK, Gate events until their answer),
//! kept as packed bytes under one memory budget for the whole process and spilled to a temporary
//! file past it (issue 28: a stalled pipeline's capture holds every event to its end).
//!
//! Why packed: a `Message` is a tree of allocations (fields, values, the document) that cost about
//! three times the record's text; packed, an event costs its bytes plus a 16-byte handle. Packed
//! records share 64 KiB pages, each freed when its last record is taken: one allocation per record
//! cost its malloc overhead and fragmented the heap (128 MiB of records took 188 MB). Why one
//! budget: what each connection holds is bounded by `Limits::max_pending_events`, but not their sum.
//! The spill file has no name (O_TMPFILE, or unlinked as soon as it is made), so no exit path,
//! SIGKILL included, can leave it behind. A record comes back exactly as it went in (`pack.rs`), so
//! the budget never changes an answer.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::pack::{back, pack, unpack, unpack_facts, Back, Names, Packer};
use crate::model::{Finding, Held, Message, Severity};

/// Bytes of the pages of every store of the process and of the records kept unpacked (`keep`):
/// what the budget bounds.
static IN_MEMORY: AtomicUsize = AtomicUsize::new(0);
/// A page of packed records (a bigger record has a page of its own).
const PAGE: usize = 64 << 10;
/// Spilled bytes written to the file at once: the file is a row of slots of this size, each
/// written whole once its records are (a bigger record takes the slots it needs at the file's end).
const SLOT: usize = 1 << 20;
/// Bytes read from the file at once: a window's events went out together and come back together,
/// but the windows of many connections are interleaved in the file.
const READ_AHEAD: usize = 32 << 10;

const IN_FILE: u32 = u32::MAX;

#[derive(Debug)]
struct Page {
    bytes: Vec<u8>,
    /// Records in it not taken yet.
    live: u32,
}

/// The pages of one store; a freed page's slot is reused.
#[derive(Debug, Default)]
struct Pages {
    slots: Vec<Option<Page>>,
    free: Vec<u32>,
    /// The page new records go to.
    current: Option<u32>,
}

impl Pages {
    /// Room for `len` bytes within `budget`: (page, offset), None when the budget is spent.
    fn place(&mut self, len: usize, budget: usize) -> Option<(u32, u32)> {
        if let Some(i) = self.current {
            let page = self.slots[i as usize].as_mut()?;
            if page.bytes.len() + len <= page.bytes.capacity() {
                page.live += 1;
                return Some((i, u32::try_from(page.bytes.len()).ok()?));
            }
        }
        if let Some(old) = self.current.take() {
            self.release_empty(old); // an empty current page too small for this record
        }
        let size = len.max(PAGE);
        if IN_MEMORY.load(Ordering::Relaxed).saturating_add(size) > budget {
            return None;
        }
        IN_MEMORY.fetch_add(size, Ordering::Relaxed);
        let page = Page {
            bytes: Vec::with_capacity(size),
            live: 1,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(page);
                i
            }
            None => {
                self.slots.push(Some(page));
                u32::try_from(self.slots.len() - 1).ok()?
            }
        };
        self.current = Some(i);
        Some((i, 0))
    }

    fn bytes(&self, page: u32, at: u32, len: u32) -> Option<&[u8]> {
        let page = self.slots.get(page as usize)?.as_ref()?;
        page.bytes
            .get(at as usize..(at as usize).checked_add(len as usize)?)
    }

    /// One record of `page` was taken: the page goes when it was the last (the current page
    /// stays, to be filled).
    fn release(&mut self, i: u32) {
        let Some(Some(page)) = self.slots.get_mut(i as usize) else {
            return;
        };
        page.live -= 1;
        if page.live > 0 {
            return;
        }
        if self.current == Some(i) {
            page.bytes.clear(); // the current page starts again from its beginning
        } else {
            self.release_empty(i);
        }
    }

    fn release_empty(&mut self, i: u32) {
        if let Some(slot) = self.slots.get_mut(i as usize) {
            if let Some(page) = slot.take_if(|p| p.live == 0) {
                IN_MEMORY.fetch_sub(page.bytes.capacity(), Ordering::Relaxed);
                self.free.push(i);
            }
        }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        let held: usize = self
            .slots
            .iter()
            .flatten()
            .map(|p| p.bytes.capacity())
            .sum();
        IN_MEMORY.fetch_sub(held, Ordering::Relaxed);
    }
}

/// The held records of one session (a capture, or a part of one).
#[derive(Debug)]
pub struct SpillStore {
    budget: usize,
    /// Estimated bytes of the records their decoders keep as they are, unpacked (`keep`).
    kept: usize,
    /// The most `kept` has been: what the budget counts of kept records (`keep`).
    kept_peak: usize,
    names: Names,
    scratch: Vec<u8>,
    pages: Pages,
    file: SpillFile,
    /// Spilled records not taken back yet: at zero the file starts over.
    spilled_live: usize,
    lost: u64,
    said: bool,
    /// Packed bytes of the records taken back so far (what a `close` call has made).
    taken: u64,
    /// Whether the store's owner takes lent records (`lend`): the session does; a decoder driven
    /// on its own (tests, fuzzing) gives whole records.
    lending: bool,
    /// `set_notes`.
    notes: bool,
    pub stats: Stats,
}

impl Drop for SpillStore {
    /// The kept records' share of the budget is given back when the session ends.
    fn drop(&mut self) {
        IN_MEMORY.fetch_sub(self.kept_peak, Ordering::Relaxed);
    }
}

/// The spill file, created at the first record past the budget. A slot whose records were all taken
/// back is written again before the file grows: rewriting pages the page cache holds cost a
/// fifteenth of what growing the file did (1.5 GB: 0.14 s against 2.16 s of system time here), and
/// records move from the connections' windows to the verdict's wait at a stalled capture's end.
#[derive(Debug, Default)]
struct SpillFile {
    file: Option<File>,
    /// The file's end (a multiple of SLOT): slots past it were never written.
    end: u64,
    /// Spilled bytes not written yet, bound for the slot at `pending_at`.
    pending: Vec<u8>,
    pending_at: u64,
    /// Records not taken back yet, per slot (a bigger record's count is its first slot's).
    live: Vec<u32>,
    /// Written slots whose records were all taken back, to be written again.
    free: Vec<u64>,
    read: Vec<u8>,
    read_at: u64,
    /// A record read on its own (`ahead` false), past the read-ahead buffer, which it leaves as is.
    alone: Vec<u8>,
    /// Why the file failed (the records stay in memory, or are lost when it fails on reading).
    failure: Option<(io::ErrorKind, String)>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Stats {
    pub spilled_records: u64,
    pub spilled_bytes: u64,
}

impl Default for SpillStore {
    fn default() -> Self {
        SpillStore::new(DEFAULT_BUDGET)
    }
}

/// `--held-memory`'s default.
pub const DEFAULT_BUDGET: usize = 128 << 20;
/// Records kept unpacked (`SpillStore::keep`) take at most an eighth of the budget, and 16 MiB.
const KEPT_SHARE: usize = 8;
const KEPT_MAX: usize = 16 << 20;

impl SpillStore {
    pub fn new(budget: usize) -> Self {
        SpillStore {
            budget,
            kept: 0,
            kept_peak: 0,
            names: Names::default(),
            scratch: Vec::new(),
            pages: Pages::default(),
            file: SpillFile::default(),
            spilled_live: 0,
            lost: 0,
            said: false,
            taken: 0,
            lending: false,
            notes: false,
            stats: Stats::default(),
        }
    }

    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
    }

    /// Records keep where their document's message lies (`Document::message_at`): for the Arrow
    /// rows, which read it there. Kept for every output, it cost Log Courier's JSON 0.6 % of its
    /// instructions (bench_ab `--instructions`) for nothing.
    pub fn set_notes(&mut self, notes: bool) {
        self.notes = notes;
    }

    /// The owner takes lent records (`lend`).
    pub fn set_lending(&mut self, lending: bool) {
        self.lending = lending;
    }

    pub fn lending(&self) -> bool {
        self.lending
    }

    /// Whether a decoder may keep a record of `cost` estimated bytes as it is, unpacked, while it
    /// waits (until `unkeep`): nearly every record waits only moments (a Lumberjack window's ACK,
    /// a CQL response follow within milliseconds), and packing it then reading it back cost more
    /// than everything else done with it but reading its text. Within a share of the budget, so
    /// that records that wait for long still go to pages and the spill file, and counted in the
    /// budget at the most they have been (`kept_peak`): the pages spill that much sooner. The
    /// small allocations of records kept then freed stay with the process, and pages do not fit
    /// between them: counting only the records kept now let the peak RSS of a stalled capture grow
    /// by half the share.
    pub fn keep(&mut self, cost: usize) -> bool {
        let share = (self.budget / KEPT_SHARE).min(KEPT_MAX);
        let kept = self.kept.saturating_add(cost);
        if kept > share || self.file.failure.is_some() {
            return false;
        }
        self.kept = kept;
        if kept > self.kept_peak {
            IN_MEMORY.fetch_add(kept - self.kept_peak, Ordering::Relaxed);
            self.kept_peak = kept;
        }
        true
    }

    /// A kept record of `cost` bytes (`keep`) is gone.
    pub fn unkeep(&mut self, cost: usize) {
        self.kept -= cost.min(self.kept);
    }

    /// Keep `m` until `take`.
    pub fn hold(&mut self, m: &Message) -> Held {
        self.scratch.clear();
        pack(m, &mut self.names, self.notes, &mut self.scratch);
        self.keep_scratch()
    }

    /// Keep the message `write` packs (`Packer`) until `take`.
    pub fn hold_packed(&mut self, write: impl FnOnce(Packer<'_>)) -> Held {
        self.scratch.clear();
        write(Packer::new(&mut self.names, self.notes, &mut self.scratch));
        self.keep_scratch()
    }

    /// Keep a list of handles until `take_list` (a window waiting for its ACK keeps one handle
    /// instead of one per event: 16 bytes an event add up in a stalled pipeline's capture).
    pub fn hold_list(&mut self, list: &[Held]) -> Held {
        self.scratch.clear();
        for h in list {
            h.write_to(&mut self.scratch);
        }
        self.keep_scratch()
    }

    /// Keep bytes until `take_bytes` (a parked window's state).
    pub fn hold_bytes(&mut self, bytes: &[u8]) -> Held {
        self.scratch.clear();
        self.scratch.extend_from_slice(bytes);
        self.keep_scratch()
    }

    /// The bytes `held` was made from; None when the spill file could not give them back (the
    /// `n` records they stand for are lost: `finding` says so). Read from the file without
    /// read-ahead: a parked window comes back on its own, its records later and elsewhere.
    pub fn take_bytes(&mut self, held: Held, n: usize) -> Option<Vec<u8>> {
        self.take_with(held, n, false, |b, _| Some(b.to_vec()))
    }

    /// `n` held records are lost although their bytes came back (they did not read as what went
    /// in): `finding` says so.
    pub fn lose(&mut self, n: usize) {
        self.lost += n as u64;
    }

    /// The bytes in `scratch`, in a page within the budget, else in the spill file.
    fn keep_scratch(&mut self) -> Held {
        let len = self.scratch.len();
        let len32 = u32::try_from(len).unwrap_or(u32::MAX); // a record is far below 4 GiB
        loop {
            // past the budget, in memory anyway when the file failed
            let budget = if self.file.failure.is_none() {
                self.budget
            } else {
                usize::MAX
            };
            if let Some((page, at)) = self.pages.place(len, budget) {
                if let Some(Some(p)) = self.pages.slots.get_mut(page as usize) {
                    p.bytes.extend_from_slice(&self.scratch);
                }
                return Held {
                    at: u64::from(at),
                    len: len32,
                    page,
                };
            }
            if let Some(at) = self.file.append(&self.scratch) {
                self.spilled_live += 1;
                self.stats.spilled_records += 1;
                self.stats.spilled_bytes += len as u64;
                return Held {
                    at,
                    len: len32,
                    page: IN_FILE,
                };
            } // the file failed: now in memory
        }
    }

    /// The record `held` was made from; None when the spill file could not give it back (then
    /// `finding` says so).
    pub fn take(&mut self, held: Held) -> Option<Message> {
        self.take_with(held, 1, true, unpack)
    }

    /// `take`, the record given to `give` read in place when it can be (`pack::back`): a record
    /// written once and dropped is written from its bytes, nothing made of it.
    pub fn take_back<T>(&mut self, held: Held, give: impl FnOnce(Back<'_, '_>) -> T) -> Option<T> {
        self.take_with(held, 1, true, |b, names| back(b, names, give))
    }

    /// What the record `held` stands for says of `facts`: its message with only those fields and
    /// no document (`pack::unpack_facts`), lent with the handle (`Message::lent`) while the record
    /// stays here; its owner takes the record back (`take`) or keeps it waiting under the handle.
    /// A Lumberjack window's events were held at their arrival; those its connection never saw
    /// acknowledged wait for their fate again at its end (`pipeline/fates.rs`), which reads only
    /// the verdict's facts of them: reading each whole and packing it again cost 8-12 % of
    /// converting bench_shapes' stalled capture, reading all but the document still 8 %
    /// (docs/architecture.md, "Lent records"). None when the bytes cannot be read back (the record
    /// is lost: `finding` says so).
    pub fn lend(&mut self, held: Held, facts: &[&str]) -> Option<Message> {
        match self.read_with(&held, true, |b, names| unpack_facts(b, names, facts)) {
            Some(mut m) => {
                m.lent = Some(held);
                Some(m)
            }
            None => {
                self.take(held); // its bytes go, counted lost
                None
            }
        }
    }

    /// The list `held` was made from; None when the spill file could not give it back (its `n`
    /// records are lost: `finding` says so).
    pub fn take_list(&mut self, held: Held, n: usize) -> Option<Vec<Held>> {
        self.take_with(held, n, true, |b, _| {
            let list: Option<Vec<Held>> = b.chunks_exact(16).map(Held::read_from).collect();
            list.filter(|_| b.len() % 16 == 0)
        })
    }

    /// `read` of the bytes `held` stands for, which are released; None (and `n` records lost)
    /// when they cannot be read back.
    fn take_with<T>(
        &mut self,
        held: Held,
        n: usize,
        ahead: bool,
        read: impl FnOnce(&[u8], &Names) -> Option<T>,
    ) -> Option<T> {
        self.taken = self.taken.saturating_add(u64::from(held.len));
        let value = self.read_with(&held, ahead, read);
        self.release(held);
        if value.is_none() {
            self.lost += n as u64;
        }
        value
    }

    /// `read` of the bytes `held` stands for, which stay.
    fn read_with<T>(
        &mut self,
        held: &Held,
        ahead: bool,
        read: impl FnOnce(&[u8], &Names) -> Option<T>,
    ) -> Option<T> {
        let bytes = match held.page {
            IN_FILE => self.file.read(held.at, held.len as usize, ahead),
            page => {
                let at = u32::try_from(held.at).unwrap_or(u32::MAX);
                self.pages.bytes(page, at, held.len)
            }
        };
        bytes.and_then(|b| read(b, &self.names))
    }

    /// The bytes `held` stands for are no longer needed.
    fn release(&mut self, held: Held) {
        match held.page {
            IN_FILE => {
                self.file.release(held.at);
                self.spilled_live -= 1;
                if self.spilled_live == 0 {
                    self.file.start_over();
                }
            }
            page => self.pages.release(page),
        }
    }

    /// Packed bytes of the records taken back so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Once, what went wrong with the spill file. (Asked after every chunk of every stream: the
    /// answer is nearly always that nothing did, in place, whatever the codegen units inline.)
    #[inline]
    pub fn finding(&mut self) -> Option<Finding> {
        self.file.failure.as_ref()?;
        self.failure_finding()
    }

    #[cold]
    fn failure_finding(&mut self) -> Option<Finding> {
        let (kind, why) = self.file.failure.as_ref()?;
        if self.said && self.lost == 0 {
            return None;
        }
        let lost = std::mem::take(&mut self.lost);
        self.said = true;
        let text = if lost > 0 {
            format!("{lost} held record(s) could not be read back from the spill file: {why}")
        } else {
            format!(
                "records waiting for their acknowledgement stay in memory past the budget of {} \
                 bytes: the spill file failed ({why})",
                self.budget
            )
        };
        let severity = if lost > 0 {
            Severity::Error
        } else {
            Severity::Warning
        };
        Some(
            Finding::new("internal.spill-failed", severity, text)
                .field("error", format!("{kind:?}"))
                .field("lost", lost),
        )
    }
}

impl SpillFile {
    /// Append a packed record to the file; its offset, None when the file fails.
    fn append(&mut self, packed: &[u8]) -> Option<u64> {
        if self.file.is_none() {
            match spill_file() {
                Ok(f) => self.file = Some(f),
                Err(e) => return self.failed(e),
            }
        }
        // a record never straddles two slots' worth of pending bytes
        if !self.pending.is_empty() && self.pending.len() + packed.len() > SLOT {
            if let Err(e) = self.flush() {
                return self.failed(e);
            }
        }
        if self.pending.is_empty() {
            self.pending_at = match self.free.pop() {
                Some(at) if packed.len() <= SLOT => at,
                other => {
                    self.free.extend(other); // a bigger record goes to the end
                    self.end
                }
            };
        }
        let at = self.pending_at + self.pending.len() as u64;
        self.pending.extend_from_slice(packed);
        let slot = slot_of(self.pending_at);
        if self.live.len() <= slot {
            self.live.resize(slot + 1, 0);
        }
        self.live[slot] += 1;
        if self.pending.len() >= SLOT {
            if let Err(e) = self.flush() {
                return self.failed(e);
            }
        }
        Some(at)
    }

    /// The pending bytes to their slot (the file grows by the slots they take at its end).
    fn flush(&mut self) -> io::Result<()> {
        let (at, len) = (self.pending_at, self.pending.len() as u64);
        if let Some(f) = &self.file {
            f.write_all_at(&self.pending, at)?;
        }
        self.pending.clear();
        self.end = self.end.max(at + len.div_ceil(SLOT as u64) * SLOT as u64);
        // what was read ahead from the slot's former records is stale now
        if self.read_at < at + len && at < self.read_at + self.read.len() as u64 {
            self.read.clear();
        }
        let slot = slot_of(at);
        if self.live.get(slot) == Some(&0) {
            self.free.push(at); // all taken back while pending
        }
        Ok(())
    }

    /// The record at `at` was taken back: its slot is free once it holds no other.
    fn release(&mut self, at: u64) {
        let slot = slot_of(at);
        let Some(live) = self.live.get_mut(slot).filter(|n| **n > 0) else {
            return;
        };
        *live -= 1;
        let pending = !self.pending.is_empty() && slot_of(self.pending_at) == slot;
        if *live == 0 && !pending {
            self.free.push(slot as u64 * SLOT as u64);
        }
    }

    fn failed<T>(&mut self, e: io::Error) -> Option<T> {
        self.failure = Some((e.kind(), e.to_string()));
        None
    }

    fn read(&mut self, at: u64, len: usize, ahead: bool) -> Option<&[u8]> {
        let in_pending = at >= self.pending_at && at < self.pending_at + self.pending.len() as u64;
        if in_pending {
            let start = usize::try_from(at - self.pending_at).ok()?;
            return self.pending.get(start..start.checked_add(len)?);
        }
        if at >= self.end {
            return None;
        }
        let end = at.checked_add(len as u64)?;
        let cached = at >= self.read_at && end <= self.read_at + self.read.len() as u64;
        if cached {
            let start = (at - self.read_at) as usize;
            return self.read.get(start..start + len);
        }
        let (buf, want) = if ahead {
            self.read_at = at;
            let want = (self.end - at).min(READ_AHEAD.max(len) as u64);
            (&mut self.read, want)
        } else {
            (&mut self.alone, len as u64)
        };
        // the buffer keeps its length from read to read, so this zeroes only what it grows by
        buf.resize(usize::try_from(want).ok()?, 0);
        let result = match &self.file {
            Some(f) => read_at_most(f, buf, at),
            None => Err(io::ErrorKind::NotFound.into()),
        };
        if let Err(e) = result {
            buf.clear();
            self.failure = Some((e.kind(), e.to_string()));
            return None;
        }
        buf.get(..len)
    }

    /// Every spilled record was taken back: the file's space is reused.
    fn start_over(&mut self) {
        self.pending.clear();
        self.read.clear();
        self.live.clear();
        self.free.clear();
        (self.end, self.pending_at, self.read_at) = (0, 0, 0);
        if let Some(f) = &self.file {
            if let Err(e) = f.set_len(0) {
                self.failed::<()>(e);
            }
        }
    }
}

/// `buf` filled from the file at `at`: one positioned read (a seek and a read through `Read::take`
/// were several system calls a read-ahead), more only when the kernel gives less. Bytes past the
/// file's end are left out: its last slot is written only as far as its records.
fn read_at_most(f: &File, buf: &mut Vec<u8>, at: u64) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(())
}

/// The slot holding the byte at `at`.
fn slot_of(at: u64) -> usize {
    usize::try_from(at / SLOT as u64).unwrap_or(usize::MAX)
}

/// A file in the temporary directory (TMPDIR) that has no name: nothing to remove on any exit.
fn spill_file() -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir();
    let unnamed = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(O_TMPFILE)
        .open(&dir);
    if let Ok(f) = unnamed {
        return Ok(f);
    }
    // file systems without O_TMPFILE: a name that lives only until the next line
    let mut tries = 0u32;
    loop {
        let path = dir.join(format!(".wirelog-spill-{}-{tries}", std::process::id()));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => {
                std::fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 100 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Linux's O_TMPFILE (__O_TMPFILE | O_DIRECTORY, the same on every architecture Rust targets but
/// alpha, parisc and sparc); std has no constant for it and this crate no libc.
#[cfg(target_os = "linux")]
const O_TMPFILE: i32 = 0o20_000_000 | 0o200_000;
#[cfg(not(target_os = "linux"))]
const O_TMPFILE: i32 = 0;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Direction, Document, Value};

    fn event(i: u64) -> Message {
        let mut m = Message::new("lumberjack", "event");
        m.direction = Some(Direction::C2S);
        m.offset = Some(100 * i);
        m.length = 80;
        m.frame = Some(i + 1);
        m.ts = Some(-5 - i as i64);
        m.version = Some("2");
        m.set("seq", i);
        m.set("f", 1.5_f64);
        m.set("neg", -7_i64);
        m.set(
            "nested",
            serde_json::json!({"a": [1, null, true, "x"], "b": {"c": 2.25e300}}),
        );
        m.event = Some(Document::canonical(format!(r#"{{"message":"event {i}"}}"#)));
        m
    }

    #[test]
    fn records_come_back_as_they_went_whatever_the_budget() {
        for budget in [0, 600, usize::MAX] {
            let mut store = SpillStore::new(budget);
            let held: Vec<Held> = (0..5000).map(|i| store.hold(&event(i))).collect();
            for (i, h) in held.into_iter().enumerate() {
                assert_eq!(store.take(h), Some(event(i as u64)), "budget {budget}");
            }
            if budget == 0 {
                assert_eq!(store.stats.spilled_records, 5000);
            }
            assert!(store.finding().is_none());
        }
    }

    #[test]
    fn records_are_kept_within_a_share_of_the_budget() {
        let mut store = SpillStore::new(8_000);
        assert!(store.keep(600) && store.keep(400));
        assert!(!store.keep(1), "an eighth of the budget");
        store.unkeep(400);
        assert!(store.keep(400) && !store.keep(1));
        assert!(
            !SpillStore::new(0).keep(1),
            "no budget: every record is held"
        );
        let mut big = SpillStore::new(usize::MAX);
        assert!(big.keep(KEPT_MAX) && !big.keep(1), "16 MiB at most");
    }

    #[test]
    fn slots_taken_back_are_written_again_before_the_file_grows() {
        // Records held and taken back oldest first while as many new ones are held (a stalled
        // capture's end: from the windows to the verdict's wait), now and then one bigger than a
        // slot: every record comes back as it went, and the file grows only by the big ones.
        let record = |i: u64| {
            let mut m = event(i);
            if i % 25_000 == 7 {
                m.event = Some(Document::canonical(format!(
                    r#"{{"m":"{}"}}"#,
                    "x".repeat(SLOT)
                )));
            }
            m
        };
        let mut store = SpillStore::new(0);
        let mut held: std::collections::VecDeque<(u64, Held)> =
            (0..60_000).map(|i| (i, store.hold(&record(i)))).collect();
        let start = store.file.end;
        assert!(start >= 4 * SLOT as u64, "{start}");
        for i in 60_000..200_000 {
            let (j, h) = held.pop_front().expect("held");
            assert_eq!(store.take(h), Some(record(j)));
            held.push_back((i, store.hold(&record(i))));
        }
        let bigs = (60_000..200_000).filter(|i| i % 25_000 == 7).count() as u64;
        assert!(
            store.file.end <= start + (2 * bigs + 2) * SLOT as u64,
            "{} from {start}",
            store.file.end
        );
        while let Some((j, h)) = held.pop_back() {
            assert_eq!(store.take(h), Some(record(j)));
        }
        assert_eq!((store.file.end, store.spilled_live), (0, 0));
        assert!(store.finding().is_none());
    }

    #[test]
    fn the_file_starts_over_when_every_spilled_record_is_back() {
        let mut store = SpillStore::new(0);
        for round in 0..3 {
            let held: Vec<Held> = (0..20_000).map(|i| store.hold(&event(i))).collect();
            assert!(store.file.end > 0, "round {round}");
            for (i, h) in held.into_iter().enumerate().rev() {
                assert_eq!(store.take(h), Some(event(i as u64)));
            }
            assert_eq!((store.file.end, store.file.pending.len()), (0, 0));
        }
    }

    #[test]
    fn a_list_of_handles_comes_back_and_its_records_with_it() {
        for budget in [0, 4096, usize::MAX] {
            let mut store = SpillStore::new(budget);
            let lists: Vec<(Held, usize)> = (0..50)
                .map(|l| {
                    let held: Vec<Held> = (0..l).map(|i| store.hold(&event(100 * l + i))).collect();
                    (store.hold_list(&held), held.len())
                })
                .collect();
            for (l, (list, n)) in lists.into_iter().enumerate().rev() {
                let held = store.take_list(list, n).expect("the list");
                assert_eq!(held.len(), l);
                for (i, h) in held.into_iter().enumerate() {
                    assert_eq!(
                        store.take(h),
                        Some(event((100 * l + i) as u64)),
                        "budget {budget}"
                    );
                }
            }
            assert!(store.finding().is_none());
            assert_eq!(store.file.end + store.file.pending.len() as u64, 0);
        }
    }

    #[test]
    fn a_lent_record_is_its_facts_and_comes_back_whole() {
        // lent in the order held, as a window's events are, then taken back in another order
        for budget in [0, 4096, usize::MAX] {
            let mut store = SpillStore::new(budget);
            let held: Vec<Held> = (0..3000).map(|i| store.hold(&event(i))).collect();
            let mut lent = Vec::new();
            for (i, h) in held.into_iter().enumerate() {
                // a float, a negative number and nested values skipped; a missing name is no matter
                let mut m = store
                    .lend(h, &["neg", "seq", "absent"])
                    .expect("a lent record");
                let handle = m.lent.take().expect("its handle");
                let mut facts = event(i as u64);
                facts.event = None;
                facts
                    .fields
                    .retain(|(name, _)| ["seq", "neg"].contains(name));
                assert_eq!(m, facts, "budget {budget}");
                lent.push(handle);
            }
            let taken = store.taken();
            for (i, h) in lent.into_iter().enumerate().rev() {
                assert_eq!(store.take(h), Some(event(i as u64)), "budget {budget}");
            }
            assert!(store.taken() > taken, "taken back once, when taken");
            assert!(store.finding().is_none());
            assert_eq!(store.file.end + store.file.pending.len() as u64, 0);
            assert!(store.pages.slots.iter().flatten().all(|p| p.live == 0));
        }
    }

    #[test]
    fn a_record_that_cannot_be_lent_is_counted_lost() {
        let mut store = SpillStore::new(usize::MAX);
        let h = store.hold(&event(1));
        let bad = Held {
            at: h.at,
            len: h.len - 1, // its document cut short
            page: h.page,
        };
        assert_eq!(store.lend(bad, &["seq"]), None);
        assert_eq!(store.lost, 1);
        assert!(
            store.pages.slots.iter().flatten().all(|p| p.live == 0),
            "its bytes went"
        );
    }

    #[test]
    fn a_written_document_and_a_null_field_survive() {
        let mut store = SpillStore::new(0);
        let mut m = event(3);
        m.event = Some(Document::from(serde_json::json!({"z": 1, "a": [-1, 0.1]})));
        m.set("nothing", Value::Null);
        m.acked = Some(false);
        let h = store.hold(&m);
        assert_eq!(store.take(h), Some(m));
    }
}
