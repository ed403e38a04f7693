//! Order book storage: an arena of fixed order nodes addressed by u32, price levels as intrusive
//! FIFO lists in a second arena, and per book side a sorted array of levels with the best price
//! at the end (so the best is O(1) and the busy part of the array, near the touch, is cheap to
//! insert into). Nothing here allocates once the arenas and arrays have reached their working
//! size.

use crate::types::{OrderId, Side, Stp};

/// The null index of the intrusive lists.
pub(crate) const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
pub(crate) struct OrderNode {
    pub order: OrderId,
    pub price: i64,
    pub remaining: i64,
    /// Index of the owning account.
    pub account: u32,
    pub symbol: u32,
    /// Index of the level in [`Levels`]; on the free list, unused.
    pub level: u32,
    /// Neighbours in the level's FIFO (older, newer); `next` also links the free list.
    pub prev: u32,
    pub next: u32,
    /// Neighbours in the account's list of open orders.
    pub account_prev: u32,
    pub account_next: u32,
    pub side: Side,
    pub stp: Stp,
    pub post_only: bool,
}

/// The arena of resting orders.
pub(crate) struct Orders {
    nodes: Vec<OrderNode>,
    free_head: u32,
    live: usize,
}

impl Orders {
    pub fn with_capacity(capacity: usize) -> Orders {
        Orders {
            nodes: Vec::with_capacity(capacity),
            free_head: NIL,
            live: 0,
        }
    }

    pub fn live(&self) -> usize {
        self.live
    }

    pub fn alloc(&mut self, node: OrderNode) -> u32 {
        self.live += 1;
        if self.free_head != NIL {
            let idx = self.free_head;
            self.free_head = self.nodes[idx as usize].next;
            self.nodes[idx as usize] = node;
            idx
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        }
    }

    pub fn free(&mut self, idx: u32) {
        self.live -= 1;
        self.nodes[idx as usize].next = self.free_head;
        self.free_head = idx;
    }

    #[inline]
    pub fn get(&self, idx: u32) -> &OrderNode {
        &self.nodes[idx as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, idx: u32) -> &mut OrderNode {
        &mut self.nodes[idx as usize]
    }
}

/// One price level: a FIFO of orders, oldest at `head`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Level {
    pub price: i64,
    /// Sum of the remaining quantity of its orders.
    pub total: i64,
    pub head: u32,
    pub tail: u32,
}

/// The arena of price levels (of all books).
pub(crate) struct Levels {
    levels: Vec<Level>,
    free_head: u32,
}

impl Levels {
    pub fn with_capacity(capacity: usize) -> Levels {
        Levels {
            levels: Vec::with_capacity(capacity),
            free_head: NIL,
        }
    }

    fn alloc(&mut self, price: i64) -> u32 {
        let level = Level {
            price,
            total: 0,
            head: NIL,
            tail: NIL,
        };
        if self.free_head != NIL {
            let idx = self.free_head;
            self.free_head = self.levels[idx as usize].head;
            self.levels[idx as usize] = level;
            idx
        } else {
            self.levels.push(level);
            (self.levels.len() - 1) as u32
        }
    }

    fn free(&mut self, idx: u32) {
        self.levels[idx as usize].head = self.free_head;
        self.free_head = idx;
    }

    #[inline]
    pub fn get(&self, idx: u32) -> &Level {
        &self.levels[idx as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, idx: u32) -> &mut Level {
        &mut self.levels[idx as usize]
    }
}

#[derive(Clone, Copy, Debug)]
struct LevelSlot {
    /// Sort key: ascending, best last (the price for bids, minus the price for asks).
    key: i64,
    level: u32,
}

/// One side of one book: its levels sorted best-last.
pub(crate) struct BookSide {
    side: Side,
    slots: Vec<LevelSlot>,
}

impl BookSide {
    pub fn new(side: Side, capacity: usize) -> BookSide {
        BookSide {
            side,
            slots: Vec::with_capacity(capacity),
        }
    }

    #[inline]
    fn key(&self, price: i64) -> i64 {
        // Prices are > 0, so negation cannot overflow.
        match self.side {
            Side::Buy => price,
            Side::Sell => -price,
        }
    }

    /// The best level, if any.
    #[inline]
    pub fn best(&self) -> Option<u32> {
        self.slots.last().map(|s| s.level)
    }

    /// Levels from best to worst.
    pub fn levels_best_first(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().rev().map(|s| s.level)
    }

    fn position(&self, price: i64) -> Result<usize, usize> {
        let key = self.key(price);
        // Most activity is near the touch, at the end of the array: look there first.
        match self.slots.last() {
            Some(last) if last.key == key => return Ok(self.slots.len() - 1),
            Some(last) if last.key < key => return Err(self.slots.len()),
            _ => {}
        }
        self.slots.binary_search_by_key(&key, |s| s.key)
    }

    /// Appends order `idx` (whose price is set) to the back of its price level, creating the level
    /// if needed.
    pub fn push_back(&mut self, levels: &mut Levels, orders: &mut Orders, idx: u32) {
        let price = orders.get(idx).price;
        let level_idx = match self.position(price) {
            Ok(pos) => self.slots[pos].level,
            Err(pos) => {
                let level = levels.alloc(price);
                let key = self.key(price);
                self.slots.insert(pos, LevelSlot { key, level });
                level
            }
        };
        let level = levels.get_mut(level_idx);
        let tail = level.tail;
        let remaining = orders.get(idx).remaining;
        level.total += remaining;
        level.tail = idx;
        if tail == NIL {
            level.head = idx;
        } else {
            orders.get_mut(tail).next = idx;
        }
        let node = orders.get_mut(idx);
        node.level = level_idx;
        node.prev = tail;
        node.next = NIL;
    }

    /// Takes order `idx` out of its level, removing the level when it empties. The node itself
    /// stays allocated.
    pub fn unlink(&mut self, levels: &mut Levels, orders: &mut Orders, idx: u32) {
        let node = *orders.get(idx);
        if node.prev != NIL {
            orders.get_mut(node.prev).next = node.next;
        }
        if node.next != NIL {
            orders.get_mut(node.next).prev = node.prev;
        }
        let level = levels.get_mut(node.level);
        if level.head == idx {
            level.head = node.next;
        }
        if level.tail == idx {
            level.tail = node.prev;
        }
        level.total -= node.remaining;
        if level.head == NIL {
            let price = level.price;
            match self.position(price) {
                Ok(pos) => {
                    self.slots.remove(pos);
                }
                Err(_) => unreachable!("an order's level is always indexed"),
            }
            levels.free(node.level);
        }
    }
}
