//! A record waiting for its fate in a protocol's held store (`held/spill.rs`), by where its packed
//! bytes are. A contract here because a message can carry one (`Message::lent`): the Lumberjack
//! events a connection never saw acknowledged go to the session's wait under the handles they
//! were held with, not read back whole and packed again.

/// One held record in 16 bytes: where its packed bytes are, in a page or in the spill file (page
/// `u32::MAX`). Millions wait in a stalled pipeline's capture. Neither `Clone` nor `Copy`: taking
/// a record back frees its bytes, so a handle has one owner.
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    pub(crate) at: u64,
    pub(crate) len: u32,
    pub(crate) page: u32,
}

impl Held {
    /// Its 16 bytes (a list of handles, a parked window's state).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.at.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.page.to_le_bytes());
    }

    /// A handle from the 16 bytes `write_to` made (None for fewer).
    pub fn read_from(b: &[u8]) -> Option<Held> {
        let b: &[u8; 16] = b.get(..16)?.try_into().ok()?;
        let (at, rest) = b.split_at(8);
        let (len, page) = rest.split_at(4);
        Some(Held {
            at: u64::from_le_bytes(at.try_into().ok()?),
            len: u32::from_le_bytes(len.try_into().ok()?),
            page: u32::from_le_bytes(page.try_into().ok()?),
        })
    }
}
