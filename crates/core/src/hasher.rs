//! A fast hasher for the engine's integer-keyed maps.
//!
//! Users choose the keys of the order-id map, so the hash must not let them pile their orders
//! into one bucket: each word is folded in with a multiply, and `finish` runs a full avalanche
//! (the splitmix64 finaliser), so every input bit reaches every bucket bit; the start value is
//! a seed from [`crate::EngineConfig`], which a venue keeps secret so that colliding ids cannot
//! be computed offline. The engine never iterates a hash map into its output, so neither the
//! seed nor the hash order can change what it reports.

use std::hash::{BuildHasher, Hasher};

const K: u64 = 0xf135_7aea_2e62_a9c5;

#[derive(Clone, Copy, Debug)]
pub(crate) struct FastHash {
    pub seed: u64,
}

impl BuildHasher for FastHash {
    type Hasher = FastHasher;

    fn build_hasher(&self) -> FastHasher {
        FastHasher { hash: self.seed }
    }
}

pub(crate) struct FastHasher {
    hash: u64,
}

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash ^ word).wrapping_mul(K).rotate_left(29);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.hash;
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids that differ only in their high bits (which a multiply alone never carries down to
    /// the bucket bits) spread over the buckets.
    #[test]
    fn ids_differing_in_high_bits_spread_over_buckets() {
        let build = FastHash { seed: 12345 };
        let buckets: std::collections::BTreeSet<u64> = (0..1024i64)
            .map(|i| build.hash_one((7i64, i << 50)) & 4095)
            .collect();
        assert!(
            buckets.len() > 700,
            "only {} distinct buckets of 1024 keys",
            buckets.len()
        );
    }
}
