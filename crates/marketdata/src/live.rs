//! The feed's resting orders by `(user, order)`: where each one is (its symbol and its slot in
//! that symbol's book).
//!
//! An open-addressing table with linear probing rather than a `HashMap`, for the same reason
//! as the engine's id index: on a big venue a lookup is a cache miss, and here the address of
//! the line it starts at is known from the key alone, so [`LiveOrders::prefetch`] can start
//! that miss while the commands before it are applied. An entry holds its key, so a lookup
//! reads one line (two when its probe run crosses one). Removal shifts the rest of the run
//! back (no tombstones). Nothing iterates it into the feed's output, so the hash function
//! cannot change what the feed publishes.

use std::hash::BuildHasher;

use rialto_core::{OrderId, SymbolId, UserId};
use rialto_prefetch::prefetch;
use rustc_hash::FxBuildHasher;

use crate::book::Slot;

/// Where a resting order is: its symbol and its slot in that symbol's book.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Resting {
    pub symbol: SymbolId,
    pub slot: Slot,
}

type Key = (UserId, OrderId);

/// 32 bytes, aligned so that an entry never straddles two cache lines.
#[derive(Clone, Copy)]
#[repr(align(32))]
struct Entry {
    key: Key,
    /// `None`: a free slot.
    value: Option<Resting>,
    /// The top half of the key's hash, where its home slot comes from: removal and growth
    /// move entries without hashing their keys again.
    hash: u32,
}

const FREE: Entry = Entry {
    key: (0, 0),
    value: None,
    hash: 0,
};

fn hash_of(key: Key) -> u32 {
    // The top bits: Fx's low bits are the weak ones.
    (FxBuildHasher.hash_one(key) >> 32) as u32
}

/// Slots in the smallest table.
const MIN_SLOTS: usize = 16;

pub(crate) struct LiveOrders {
    /// A power of two long.
    slots: Vec<Entry>,
    len: usize,
}

impl Default for LiveOrders {
    fn default() -> Self {
        LiveOrders {
            slots: vec![FREE; MIN_SLOTS],
            len: 0,
        }
    }
}

impl LiveOrders {
    /// The home slot of a hash: its top bits (the table has at most 2^32 slots).
    fn home(&self, hash: u32) -> usize {
        let bits = self.slots.len().trailing_zeros();
        ((hash as u64) << 32 >> (64 - bits)) as usize
    }

    fn next(&self, i: usize) -> usize {
        (i + 1) & (self.slots.len() - 1)
    }

    /// Starts loading the line where a lookup of `key` begins.
    pub fn prefetch(&self, key: Key) {
        prefetch(&self.slots[self.home(hash_of(key))]);
    }

    fn position(&self, key: Key) -> Option<usize> {
        let mut i = self.home(hash_of(key));
        loop {
            let entry = &self.slots[i];
            entry.value?;
            if entry.key == key {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    pub fn get(&self, key: Key) -> Option<Resting> {
        self.position(key).and_then(|i| self.slots[i].value)
    }

    /// Adds `key`, which the caller knows is not here (the engine never has two live orders
    /// of one key).
    pub fn insert(&mut self, key: Key, value: Resting) {
        debug_assert!(self.position(key).is_none(), "{key:?} is live already");
        // At most three quarters full: short probe runs, in about as much memory as a
        // `HashMap`'s entries and control bytes.
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        self.place(Entry {
            key,
            value: Some(value),
            hash: hash_of(key),
        });
        self.len += 1;
    }

    fn place(&mut self, entry: Entry) {
        let mut i = self.home(entry.hash);
        while self.slots[i].value.is_some() {
            i = self.next(i);
        }
        self.slots[i] = entry;
    }

    pub fn remove(&mut self, key: Key) -> Option<Resting> {
        let found = self.position(key)?;
        let value = self.slots[found].value;
        let mask = self.slots.len() - 1;
        let mut hole = found;
        let mut i = self.next(found);
        while self.slots[i].value.is_some() {
            let home = self.home(self.slots[i].hash);
            // The entry at `i` may fill the hole if the hole lies between its home and `i`.
            if (i.wrapping_sub(home) & mask) >= (i.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[i];
                hole = i;
            }
            i = self.next(i);
        }
        self.slots[hole] = FREE;
        self.len -= 1;
        value
    }

    fn grow(&mut self) {
        let doubled = vec![FREE; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        for entry in old.into_iter().filter(|e| e.value.is_some()) {
            self.place(entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    fn resting(n: u32) -> Resting {
        Resting {
            symbol: SymbolId(n % 7),
            slot: Slot::from_index(n),
        }
    }

    proptest! {
        /// Inserts and removals over a few keys (so that probe runs collide and wrap), checked
        /// against a `HashMap` after every step.
        #[test]
        fn agrees_with_a_map(ops in prop::collection::vec((0u8..3, 0i64..40, 0i64..40, any::<u32>()), 1..600)) {
            let mut live = LiveOrders::default();
            let mut model: HashMap<Key, Resting> = HashMap::new();
            for (op, user, order, n) in ops {
                let key = (user, order);
                match op {
                    0 | 1 if !model.contains_key(&key) => {
                        live.insert(key, resting(n));
                        model.insert(key, resting(n));
                    }
                    0 | 1 => {}
                    _ => prop_assert_eq!(live.remove(key), model.remove(&key)),
                }
                prop_assert_eq!(live.len, model.len());
                for (k, v) in &model {
                    prop_assert_eq!(live.get(*k), Some(*v));
                }
                prop_assert_eq!(live.get((-1, -1)), None);
            }
        }
    }
}
