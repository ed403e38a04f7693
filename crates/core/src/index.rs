//! The engine's id indexes: from a user id to its account, and from `(user, order)` to the
//! order's node.
//!
//! An open-addressing table of 8-byte slots with linear probing, rather than a `HashMap`, for
//! two reasons. A lookup costs one cache miss for the slot (a `HashMap` of 24-byte entries
//! touches its control bytes and then its bucket: two), and the slot's address is known from
//! the hash alone, so [`IdIndex::prefetch`] can start that miss commands ahead of the lookup
//! (see [`crate::Engine::prefetch_ahead`]).
//!
//! A slot holds the top 32 bits of the key's hash (its fingerprint) and the value, an arena
//! index. The key itself lives in the arena item, so a lookup confirms a fingerprint match with
//! a closure that compares the item's key. The home slot of an entry is the top bits of its
//! fingerprint, so entries can move (removal shifts the rest of a probe run back, growing
//! re-places them) without the key being hashed again. Nothing here is ever iterated into the
//! engine's output, so the hash seed and the slot order cannot change what the engine reports.

use rialto_prefetch::prefetch;

/// A free slot. No entry equals it: values are arena indices, below `u32::MAX`.
const EMPTY: u64 = u64::MAX;
/// Slots in the smallest table.
const MIN_BITS: u32 = 4;

pub(crate) struct IdIndex {
    /// `fingerprint << 32 | value`, or [`EMPTY`].
    slots: Vec<u64>,
    /// `slots.len() == 1 << bits`.
    bits: u32,
    len: usize,
}

impl IdIndex {
    /// The most entries a table can hold (its slots are at most 2^32, at most half of them
    /// used); the engine refuses users and orders beyond it with `limit_exceeded`.
    pub const MAX_ENTRIES: usize = 1 << 31;

    /// A table that holds `capacity` entries without growing (its load stays at most a half).
    pub fn with_capacity(capacity: usize) -> IdIndex {
        let slots = capacity.saturating_mul(2).next_power_of_two();
        let bits = slots.trailing_zeros().clamp(MIN_BITS, 32);
        IdIndex {
            slots: vec![EMPTY; 1 << bits],
            bits,
            len: 0,
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline]
    fn home(&self, fingerprint: u32) -> usize {
        (fingerprint >> (32 - self.bits)) as usize
    }

    /// Starts loading the slot where a lookup of `hash` begins.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        prefetch(&self.slots[self.home((hash >> 32) as u32)]);
    }

    /// The value of the first entry of `hash`'s fingerprint, without checking its key: what a
    /// prefetch follows (a wrong guess costs a wasted load, nothing else).
    #[inline]
    pub fn guess(&self, hash: u64) -> Option<u32> {
        self.position(hash, |_| true).map(|i| self.slots[i] as u32)
    }

    /// The slot holding the entry of `hash` whose value `is_key` accepts.
    #[inline]
    fn position(&self, hash: u64, mut is_key: impl FnMut(u32) -> bool) -> Option<usize> {
        let fingerprint = (hash >> 32) as u32;
        let mut i = self.home(fingerprint);
        loop {
            let slot = self.slots[i];
            if slot == EMPTY {
                return None;
            }
            if (slot >> 32) as u32 == fingerprint && is_key(slot as u32) {
                return Some(i);
            }
            i = (i + 1) & self.mask();
        }
    }

    /// The value of the entry of `hash` whose value `is_key` accepts (the caller checks the key
    /// stored at that value).
    #[inline(always)]
    pub fn get(&self, hash: u64, is_key: impl FnMut(u32) -> bool) -> Option<u32> {
        self.position(hash, is_key).map(|i| self.slots[i] as u32)
    }

    /// Adds an entry; the caller has checked that its key is not present. Grows (allocating)
    /// only past half full.
    pub fn insert(&mut self, hash: u64, value: u32) {
        debug_assert!(value != u32::MAX);
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        self.place(hash & !0xffff_ffff | value as u64);
        self.len += 1;
    }

    /// Puts an entry in the first free slot of its probe run.
    fn place(&mut self, entry: u64) {
        let mut i = self.home((entry >> 32) as u32);
        while self.slots[i] != EMPTY {
            i = (i + 1) & self.mask();
        }
        self.slots[i] = entry;
    }

    /// Removes the entry of `hash` whose value `is_key` accepts, returning its value. The entries
    /// after it in its probe run shift back (no tombstones, so lookups never slow down).
    pub fn remove(&mut self, hash: u64, is_key: impl FnMut(u32) -> bool) -> Option<u32> {
        let found = self.position(hash, is_key)?;
        let value = self.slots[found] as u32;
        let mask = self.mask();
        let mut hole = found;
        let mut i = (found + 1) & mask;
        while self.slots[i] != EMPTY {
            let home = self.home((self.slots[i] >> 32) as u32);
            // The entry at `i` may fill the hole if the hole is between its home and `i`.
            if (i.wrapping_sub(home) & mask) >= (i.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[i];
                hole = i;
            }
            i = (i + 1) & mask;
        }
        self.slots[hole] = EMPTY;
        self.len -= 1;
        Some(value)
    }

    fn grow(&mut self) {
        assert!(self.bits < 32, "id index full");
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; 1 << (self.bits + 1)]);
        self.bits += 1;
        for entry in old.into_iter().filter(|&e| e != EMPTY) {
            self.place(entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A deliberately weak hash: half the keys share the home at the table's start, the other
    /// half one near its end (so their run wraps around into the first), and fingerprints repeat.
    fn clumpy_hash(key: u64) -> u64 {
        let top = if key.is_multiple_of(2) {
            0xe000_0000
        } else {
            0
        };
        ((top | (key % 3)) << 32) | key
    }

    fn is_key(keys: &[u64], key: u64) -> impl Fn(u32) -> bool + '_ {
        move |value| keys[value as usize] == key
    }

    /// The index against a `HashMap` over random inserts and removals, through growth, with
    /// keys crowded into a few homes (long probe runs that wrap around the table's end).
    #[test]
    fn agrees_with_a_map_under_churn() {
        let mut index = IdIndex::with_capacity(4);
        let mut keys: Vec<u64> = Vec::new(); // value -> key
        let mut map: HashMap<u64, u32> = HashMap::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000u64 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = (state >> 33) % 500;
            let hash = clumpy_hash(key);
            match map.get(&key) {
                Some(&value) if step % 3 != 0 => {
                    assert_eq!(index.remove(hash, is_key(&keys, key)), Some(value));
                    map.remove(&key);
                }
                Some(&value) => assert_eq!(index.get(hash, is_key(&keys, key)), Some(value)),
                None => {
                    assert_eq!(index.get(hash, is_key(&keys, key)), None);
                    keys.push(key);
                    let value = (keys.len() - 1) as u32;
                    index.insert(hash, value);
                    map.insert(key, value);
                }
            }
            assert_eq!(index.len, map.len());
        }
        for (&key, &value) in &map {
            assert_eq!(
                index.get(clumpy_hash(key), |v| keys[v as usize] == key),
                Some(value)
            );
        }
        assert!(index.slots.len() >= 2 * map.len());
    }

    #[test]
    fn sized_tables_do_not_grow() {
        let mut index = IdIndex::with_capacity(1000);
        let slots = index.slots.len();
        for v in 0..1000u32 {
            index.insert((v as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15), v);
        }
        assert_eq!(index.slots.len(), slots);
    }
}
