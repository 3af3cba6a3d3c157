//! Checked fixed-width reads from wire data: `None` past the end, never a panic.

/// `N` bytes at `at`, or None when the slice ends before.
#[inline]
pub(super) fn array<const N: usize>(data: &[u8], at: usize) -> Option<[u8; N]> {
    data.get(at..at.checked_add(N)?)?.try_into().ok()
}

#[inline]
pub(super) fn be16(data: &[u8], at: usize) -> Option<u16> {
    array(data, at).map(u16::from_be_bytes)
}

#[inline]
pub(super) fn be32(data: &[u8], at: usize) -> Option<u32> {
    array(data, at).map(u32::from_be_bytes)
}

/// A u32 in the byte order of the file (`big`: big-endian).
#[inline]
pub(super) fn u32_in(data: &[u8], at: usize, big: bool) -> Option<u32> {
    array(data, at).map(if big {
        u32::from_be_bytes
    } else {
        u32::from_le_bytes
    })
}

/// A u16 in the byte order of the file.
#[inline]
pub(super) fn u16_in(data: &[u8], at: usize, big: bool) -> Option<u16> {
    array(data, at).map(if big {
        u16::from_be_bytes
    } else {
        u16::from_le_bytes
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_both_orders_and_none_past_the_end() {
        let data = [1, 2, 3, 4, 5];
        assert_eq!(be16(&data, 3), Some(0x0405));
        assert_eq!(be16(&data, 4), None);
        assert_eq!(be32(&data, 1), Some(0x0203_0405));
        assert_eq!(u32_in(&data, 0, false), Some(0x0403_0201));
        assert_eq!(u16_in(&data, 0, true), Some(0x0102));
        assert_eq!(array::<2>(&data, usize::MAX), None);
    }
}
