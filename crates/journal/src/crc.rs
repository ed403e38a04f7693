//! CRC32C of journal records. Records are short (about 60 bytes), and for inputs that small
//! the `crc32c` crate's three-way parallel path costs more than the checksum itself (about a
//! third of an append, measured with `perf` on `cargo bench -p rialto-journal --bench append`).
//! A plain loop over the SSE 4.2 `crc32` instruction does the same work in a few nanoseconds;
//! without SSE 4.2 the crate's portable code is used. Same polynomial, same results: the tests
//! compare the two.
//!
//! One record's CRC is a chain of dependent `crc32` instructions (3 cycles each, 10 for a
//! `place`), but the CPU can start one every cycle: [`record_crcs3`] runs three records' chains
//! side by side, which is what the writer does over a batch before writing it.

/// CRC32C (Castagnoli) of `bytes`, as `crc32c::crc32c` computes it.
#[inline]
pub fn record_crc(bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE 4.2, checked just above.
            return unsafe { sse42::crc(bytes) };
        }
    }
    crc32c::crc32c(bytes)
}

/// The CRC32C of each of three byte strings (of any lengths), computed side by side.
#[inline]
pub fn record_crcs3(a: &[u8], b: &[u8], c: &[u8]) -> [u32; 3] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE 4.2, checked just above.
            return unsafe { sse42::crcs3(a, b, c) };
        }
    }
    [crc32c::crc32c(a), crc32c::crc32c(b), crc32c::crc32c(c)]
}

#[cfg(target_arch = "x86_64")]
mod sse42 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64};

    #[target_feature(enable = "sse4.2")]
    pub(super) fn crc(bytes: &[u8]) -> u32 {
        !finish(u32::MAX, bytes)
    }

    #[target_feature(enable = "sse4.2")]
    pub(super) fn crcs3(a: &[u8], b: &[u8], c: &[u8]) -> [u32; 3] {
        let common = a.len().min(b.len()).min(c.len()) / 8 * 8;
        let (a, a_rest) = a.split_at(common);
        let (b, b_rest) = b.split_at(common);
        let (c, c_rest) = c.split_at(common);
        let (mut x, mut y, mut z) = (u32::MAX, u32::MAX, u32::MAX);
        for ((wa, wb), wc) in a
            .chunks_exact(8)
            .zip(b.chunks_exact(8))
            .zip(c.chunks_exact(8))
        {
            x = crc_u64(x, wa);
            y = crc_u64(y, wb);
            z = crc_u64(z, wc);
        }
        [!finish(x, a_rest), !finish(y, b_rest), !finish(z, c_rest)]
    }

    /// Continues `crc` over `bytes`: whole words, then one step each of 4, 2 and 1 bytes as the
    /// length needs (fewer steps in the chain than byte by byte).
    #[target_feature(enable = "sse4.2")]
    #[inline]
    fn finish(mut crc: u32, bytes: &[u8]) -> u32 {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            crc = crc_u64(crc, word);
        }
        let mut rest = words.remainder();
        if let Some((four, tail)) = rest.split_first_chunk::<4>() {
            crc = _mm_crc32_u32(crc, u32::from_le_bytes(*four));
            rest = tail;
        }
        if let Some((two, tail)) = rest.split_first_chunk::<2>() {
            crc = _mm_crc32_u16(crc, u16::from_le_bytes(*two));
            rest = tail;
        }
        if let Some(&byte) = rest.first() {
            crc = _mm_crc32_u8(crc, byte);
        }
        crc
    }

    #[target_feature(enable = "sse4.2")]
    #[inline]
    fn crc_u64(crc: u32, word: &[u8]) -> u32 {
        let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        _mm_crc32_u64(u64::from(crc), word) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes() -> Vec<u8> {
        (0..300u32).map(|i| (i * 131 + 7) as u8).collect()
    }

    #[test]
    fn matches_the_crc32c_crate_at_every_length() {
        let bytes = bytes();
        for len in 0..bytes.len() {
            for start in 0..3.min(len + 1) {
                let slice = &bytes[start..len];
                assert_eq!(record_crc(slice), crc32c::crc32c(slice), "len {len}");
            }
        }
        // The standard check value of CRC-32C.
        assert_eq!(record_crc(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn three_side_by_side_match_the_crate_at_any_mix_of_lengths() {
        let bytes = bytes();
        let lens = [0, 1, 7, 8, 9, 17, 24, 59, 60, 67, 105, 144];
        for &la in &lens {
            for &lb in &lens {
                for &lc in &lens {
                    let (a, b, c) = (&bytes[..la], &bytes[1..1 + lb], &bytes[3..3 + lc]);
                    let want = [crc32c::crc32c(a), crc32c::crc32c(b), crc32c::crc32c(c)];
                    assert_eq!(record_crcs3(a, b, c), want, "lengths {la} {lb} {lc}");
                }
            }
        }
    }
}
