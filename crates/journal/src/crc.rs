//! CRC32C of one journal record. Records are short (about 60 bytes), and for inputs that small
//! the `crc32c` crate's three-way parallel path costs more than the checksum itself (about a
//! third of an append, measured with `perf` on `cargo bench -p rialto-journal --bench append`).
//! A plain loop over the SSE 4.2 `crc32` instruction does the same work in a few nanoseconds;
//! without SSE 4.2 the crate's portable code is used. Same polynomial, same results: the tests
//! compare the two.

/// CRC32C (Castagnoli) of `bytes`, as `crc32c::crc32c` computes it.
#[inline]
pub fn record_crc(bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE 4.2, checked just above.
            return unsafe { crc32c_sse42(bytes) };
        }
    }
    crc32c::crc32c(bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn crc32c_sse42(bytes: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u64};
    let mut crc = u64::from(u32::MAX);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        crc = _mm_crc32_u64(crc, word);
    }
    let mut crc = crc as u32;
    for &byte in words.remainder() {
        crc = _mm_crc32_u8(crc, byte);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_crc32c_crate_at_every_length() {
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 131 + 7) as u8).collect();
        for len in 0..bytes.len() {
            for start in 0..3.min(len + 1) {
                let slice = &bytes[start..len];
                assert_eq!(record_crc(slice), crc32c::crc32c(slice), "len {len}");
            }
        }
        // The standard check value of CRC-32C.
        assert_eq!(record_crc(b"123456789"), 0xE306_9283);
    }
}
