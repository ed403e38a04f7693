//! Order book storage: an arena of fixed order nodes addressed by u32, price levels as intrusive
//! FIFO lists in a second arena, and per book side an index of its levels by price: a sorted
//! array with the best price at the end for a small side, plus, for a busy side, a ladder (one
//! cell per price over a window around the touch, with an occupancy bitmap) so that the levels
//! where most activity is are found, added and removed in O(1). Nothing here allocates once the
//! arenas, arrays and ladders have reached their working size.

use rialto_prefetch::{prefetch, prefetch_all, prefetch_index};

use crate::types::{OrderId, Side, Stp, UserId};

/// The null index of the intrusive lists.
pub(crate) const NIL: u32 = u32::MAX;

/// A resting order. One cache line, aligned to one, so that reaching an order costs one miss.
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
pub(crate) struct OrderNode {
    /// The key of the order-id index: `(user, order)`.
    pub user: UserId,
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
    /// What kind of live order the node holds; an ordinary order never reads more than this
    /// byte of the others' state (which is in the engine's `order_extras`).
    pub kind: NodeKind,
}

const _: () = assert!(std::mem::size_of::<OrderNode>() == 64);

/// The kinds of live order an [`OrderNode`] can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeKind {
    /// A plain limit order on the book: `remaining` is its whole remaining quantity.
    Plain,
    /// An iceberg on the book: `remaining` is its shown slice; the hidden rest and the display
    /// quantity are in the engine's `order_extras`.
    Iceberg,
    /// A stop or stop-limit order waiting for its trigger: not in any level (`level` is NIL),
    /// `price` its limit or protection price (0 for none), `remaining` its quantity.
    PendingStop,
}

/// Fixed items addressed by u32 in one `Vec`. A freed slot is reused by the next allocation,
/// through a free list threaded through the freed items themselves, so that once the arena has
/// reached its working size nothing allocates.
pub(crate) struct Arena<T: Slot> {
    items: Vec<T>,
    free_head: u32,
    live: usize,
    /// Debug builds know which slots are live, to assert that nothing reads a freed one.
    #[cfg(debug_assertions)]
    in_use: Vec<bool>,
}

/// An item that can hold the free list's link while it is free.
pub(crate) trait Slot: Copy {
    fn set_free_link(&mut self, next: u32);
    fn free_link(&self) -> u32;
}

impl<T: Slot> Arena<T> {
    pub fn with_capacity(capacity: usize) -> Arena<T> {
        Arena {
            items: Vec::with_capacity(capacity),
            free_head: NIL,
            live: 0,
            #[cfg(debug_assertions)]
            in_use: Vec::with_capacity(capacity),
        }
    }

    /// Items allocated and not freed.
    pub fn live(&self) -> usize {
        self.live
    }

    pub fn alloc(&mut self, item: T) -> u32 {
        self.live += 1;
        let idx = if self.free_head != NIL {
            let idx = self.free_head;
            self.free_head = self.items[idx as usize].free_link();
            self.items[idx as usize] = item;
            idx
        } else {
            self.items.push(item);
            #[cfg(debug_assertions)]
            self.in_use.push(false);
            (self.items.len() - 1) as u32
        };
        #[cfg(debug_assertions)]
        {
            debug_assert!(!self.in_use[idx as usize], "slot {idx} handed out twice");
            self.in_use[idx as usize] = true;
        }
        idx
    }

    pub fn free(&mut self, idx: u32) {
        #[cfg(debug_assertions)]
        {
            debug_assert!(self.in_use[idx as usize], "slot {idx} freed twice");
            self.in_use[idx as usize] = false;
        }
        self.live -= 1;
        self.items[idx as usize].set_free_link(self.free_head);
        self.free_head = idx;
    }

    /// The index the next [`Arena::alloc`] hands out, if a freed slot waits (else the arena
    /// grows, and the new slot is at its end).
    #[inline]
    pub fn next_slot(&self) -> u32 {
        if self.free_head != NIL {
            self.free_head
        } else {
            self.items.len() as u32
        }
    }

    /// Starts loading item `idx` into the cache (nothing when there is none).
    #[inline]
    pub fn prefetch(&self, idx: u32) {
        rialto_prefetch::prefetch_index(&self.items, idx as usize);
    }

    #[inline]
    pub fn get(&self, idx: u32) -> &T {
        self.debug_assert_live(idx);
        &self.items[idx as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, idx: u32) -> &mut T {
        self.debug_assert_live(idx);
        &mut self.items[idx as usize]
    }

    /// Reads slot `idx` whether or not it is live: for prefetching, which follows indexes
    /// looked up commands ahead that may have been freed since (what it reads only warms the
    /// cache).
    #[inline]
    pub fn peek(&self, idx: u32) -> &T {
        &self.items[idx as usize]
    }

    /// A slot is read or written only while it is live (debug builds check).
    #[inline(always)]
    fn debug_assert_live(&self, _idx: u32) {
        #[cfg(debug_assertions)]
        debug_assert!(
            self.in_use.get(_idx as usize).copied().unwrap_or(false),
            "arena slot {_idx} used while free"
        );
    }
}

/// The arena of resting orders (of all books).
pub(crate) type Orders = Arena<OrderNode>;

impl Slot for OrderNode {
    fn set_free_link(&mut self, next: u32) {
        self.next = next;
    }
    fn free_link(&self) -> u32 {
        self.next
    }
}

/// One price level: a FIFO of orders, oldest at `head`.
///
/// Its price is not stored: it is its orders' price (see [`level_price`]), and also follows from
/// its slot's key or its ladder cell, which is how the book reads it. 16 bytes aligned to 16, so
/// that a level never straddles two cache lines and four share one: on a big venue reaching a
/// level is a miss, and a straddling one was two.
#[derive(Clone, Copy, Debug)]
#[repr(align(16))]
pub(crate) struct Level {
    /// Sum of the remaining quantity of its orders.
    pub total: i64,
    pub head: u32,
    pub tail: u32,
}

const _: () = assert!(std::mem::size_of::<Level>() == 16);

impl Level {
    fn empty() -> Level {
        Level {
            total: 0,
            head: NIL,
            tail: NIL,
        }
    }
}

/// The price of a non-empty level: its orders' (read from the oldest, which trading reads next
/// anyway).
#[inline]
pub(crate) fn level_price(levels: &Levels, orders: &Orders, level: u32) -> i64 {
    let head = levels.get(level).head;
    debug_assert!(head != NIL, "an empty level has no price of its own");
    orders.get(head).price
}

/// The arena of price levels (of all books).
pub(crate) type Levels = Arena<Level>;

impl Slot for Level {
    fn set_free_link(&mut self, next: u32) {
        self.head = next;
    }
    fn free_link(&self) -> u32 {
        self.head
    }
}

/// 12 bytes, not 16: packed to 4-byte alignment, a search reads a quarter fewer cache lines
/// (x86-64 loads an unaligned i64 at full speed).
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(4))]
struct LevelSlot {
    /// Sort key: ascending, best last (the price for bids, minus the price for asks).
    key: i64,
    level: u32,
}

/// Appends order `idx` to the back of level `level_idx`'s FIFO.
fn append_to_level(levels: &mut Levels, orders: &mut Orders, level_idx: u32, idx: u32) {
    let level = levels.get_mut(level_idx);
    let tail = level.tail;
    level.total += orders.get(idx).remaining;
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

/// `n` as a u32, saturating (for tuning values far beyond any real book).
fn clamp_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Takes order `idx` out of its level's FIFO; true when that emptied the level.
#[inline]
fn unlink_from_level(levels: &mut Levels, orders: &mut Orders, idx: u32) -> bool {
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
    level.head == NIL
}

/// Levels sorted best-last in an array: the whole index of a small book side, and the index of
/// the prices worse than the ladder's window on a busy one.
///
/// A level that empties is not taken out of the array at once (that would shift every better
/// level, and a deep book is mostly shifting): it stays in place, empty, to be reused if an order
/// comes to its price again. The best level is always non-empty, so the best price stays O(1):
/// when the best empties it is popped with any empty levels behind it. When empty levels
/// outnumber live ones, one pass compacts the array (amortised O(1) per removal).
struct SortedLevels {
    slots: Vec<LevelSlot>,
    /// Slots whose level has no orders (u32 keeps a [`BookSide`] within two cache lines; an
    /// array never holds more levels than there are orders, which an `OrderNode`'s u32
    /// indices bound).
    empty_slots: u32,
    side: Side,
}

/// Empty levels tolerated before a compaction is considered.
const EMPTY_SLOTS_SLACK: usize = 64;
/// How far from its place a new level looks for an empty slot to reuse.
const HOLE_SEARCH: usize = 8;
/// A sorted array up to this long (24 cache lines) is prefetched whole before a search.
const PREFETCH_WHOLE_SLOTS: usize = 128;
/// Levels better than a ladder's window tolerated before the window moves to them.
const AHEAD_MAX_LEVELS: usize = 32;
/// When a ladder's window moves to the best price, one cell in this many is kept better than
/// it: room for orders that improve the touch.
const WINDOW_SHARE_AHEAD: i64 = 8;
/// A ladder starts with this share of the full window (`ladder_cells`)...
const LADDER_START_SHARE: usize = 8;
/// ...and doubles when its levels are denser than one in this many cells.
const LADDER_CELLS_PER_LEVEL: usize = 16;

impl SortedLevels {
    fn new(side: Side, capacity: usize) -> SortedLevels {
        SortedLevels {
            side,
            slots: Vec::with_capacity(capacity),
            empty_slots: 0,
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

    /// The best level, if any; never an empty one.
    #[inline]
    fn best(&self) -> Option<u32> {
        self.slots.last().map(|s| s.level)
    }

    /// The best price, if any (read from the sorted array, without touching the level).
    #[inline]
    fn best_price(&self) -> Option<i64> {
        self.slots.last().map(|slot| self.price_of(slot))
    }

    /// The price of one of this array's slots.
    #[inline]
    fn price_of(&self, slot: &LevelSlot) -> i64 {
        match self.side {
            Side::Buy => slot.key,
            Side::Sell => -slot.key,
        }
    }

    /// Non-empty levels from best to worst.
    fn levels_best_first<'a>(&'a self, levels: &'a Levels) -> impl Iterator<Item = u32> + 'a {
        self.slots
            .iter()
            .rev()
            .map(|s| s.level)
            .filter(|&level| levels.get(level).head != NIL)
    }

    /// Where `price` is (`Ok`) or would go (`Err`) in the array.
    fn position(&self, price: i64) -> Result<usize, usize> {
        let key = self.key(price);
        // The touch (the end of the array) is where most activity is: settle it first.
        match self.slots.last() {
            Some(last) if last.key == key => return Ok(self.slots.len() - 1),
            Some(last) if last.key < key => return Err(self.slots.len()),
            _ => {}
        }
        self.slots.binary_search_by_key(&key, |s| s.key)
    }

    /// Appends order `idx` (whose price is set) to the back of its price level, creating the level
    /// if needed. `vacated` is the level this array emptied last, or NIL: see
    /// [`Self::insert_level`].
    fn push_back(&mut self, levels: &mut Levels, orders: &mut Orders, idx: u32, vacated: u32) {
        let price = orders.get(idx).price;
        let level_idx = match self.position(price) {
            Ok(pos) => {
                let level = self.slots[pos].level;
                if levels.get(level).head == NIL {
                    self.empty_slots -= 1;
                }
                level
            }
            Err(pos) => self.insert_level(levels, pos, price, vacated),
        };
        append_to_level(levels, orders, level_idx, idx);
    }

    /// The first of the slots within [`HOLE_SEARCH`] of `pos` (worse ones first, nearest first)
    /// that `is_hole` accepts.
    fn hole_near(&self, pos: usize, is_hole: impl Fn(&LevelSlot) -> bool) -> Option<usize> {
        let start = pos.saturating_sub(HOLE_SEARCH);
        let end = (pos + HOLE_SEARCH).min(self.slots.len());
        self.slots[start..pos]
            .iter()
            .rposition(&is_hole)
            .map(|i| start + i)
            .or_else(|| {
                self.slots[pos..end]
                    .iter()
                    .position(is_hole)
                    .map(|i| pos + i)
            })
    }

    /// Adds an empty level at `price`, which sorts at `pos`. An empty slot close by is reused, so
    /// that only the slots between it and `pos` shift. A move usually empties its old level just
    /// before it lands, next to `pos`: that one, `vacated`, is found by its slot alone, and its
    /// level is in the cache. Looking for any other empty slot reads the levels around, each
    /// likely a cache miss on a big venue, so a short array (where shifting is cheap) does not.
    fn insert_level(&mut self, levels: &mut Levels, pos: usize, price: i64, vacated: u32) -> u32 {
        let key = self.key(price);
        let vacated_hole = || {
            self.hole_near(pos, |slot| slot.level == vacated)
                .filter(|_| levels.get(vacated).head == NIL)
        };
        let any_hole = || {
            (self.empty_slots > 0 && self.slots.len() > PREFETCH_WHOLE_SLOTS)
                .then(|| self.hole_near(pos, |slot| levels.get(slot.level).head == NIL))
                .flatten()
        };
        let Some(hole) = vacated_hole().or_else(any_hole) else {
            let level = levels.alloc(Level::empty());
            self.slots.insert(pos, LevelSlot { key, level });
            return level;
        };
        let level = self.slots[hole].level;
        let at = if hole < pos {
            // The hole is worse than the new price: the slots after it move down by one.
            self.slots.copy_within(hole + 1..pos, hole);
            pos - 1
        } else {
            // The hole is better: the slots before it move up by one.
            self.slots.copy_within(pos..hole, pos + 1);
            pos
        };
        self.empty_slots -= 1;
        self.slots[at] = LevelSlot { key, level };
        level
    }

    /// Takes order `idx` out of its level. The node itself stays allocated. Returns the level
    /// when that left it empty in the array.
    fn unlink(&mut self, levels: &mut Levels, orders: &mut Orders, idx: u32) -> Option<u32> {
        let level = orders.get(idx).level;
        if !unlink_from_level(levels, orders, idx) {
            return None;
        }
        if self.best() == Some(level) {
            self.pop_best(levels);
            levels.free(level);
            return None;
        }
        self.empty_slots += 1;
        let empty = self.empty_slots as usize;
        if empty > EMPTY_SLOTS_SLACK && empty * 2 > self.slots.len() {
            self.compact(levels);
            return None;
        }
        Some(level)
    }

    /// Removes the best slot (its level stays allocated) and frees any empty levels that
    /// surface behind it, keeping the last slot non-empty. Returns the best's price and level.
    fn pop_best(&mut self, levels: &mut Levels) -> Option<(i64, u32)> {
        let best = self.slots.pop()?;
        let best = (self.price_of(&best), best.level);
        while let Some(last) = self.slots.last()
            && levels.get(last.level).head == NIL
        {
            levels.free(last.level);
            self.slots.pop();
            self.empty_slots -= 1;
        }
        Some(best)
    }

    /// Appends a non-empty level, at `price`, that is better than every level here.
    fn push_best(&mut self, price: i64, level: u32) {
        let key = self.key(price);
        debug_assert!(self.slots.last().is_none_or(|last| last.key < key));
        self.slots.push(LevelSlot { key, level });
    }

    /// Levels with orders.
    fn level_count(&self) -> usize {
        self.slots.len() - self.empty_slots as usize
    }
    /// Drops every empty level from the array.
    fn compact(&mut self, levels: &mut Levels) {
        self.slots.retain(|slot| {
            let empty = levels.get(slot.level).head == NIL;
            if empty {
                levels.free(slot.level);
            }
            !empty
        });
        self.empty_slots = 0;
    }
}

/// One side of one book.
///
/// A small side is a [`SortedLevels`] array. A busy one (`ladder_min_levels` levels or more)
/// also keeps a [`Ladder`]: a window of prices around the touch where each price maps straight
/// to its level, so that finding, adding and removing a level near the touch costs one memory
/// access instead of a binary search whose every step waits on memory. Every price in the
/// window lives in the ladder. Prices worse than the window live in the array; the few better
/// ones (an order far through the spread) in a second, short array, until there are more than
/// [`AHEAD_MAX_LEVELS`] of them and the window moves to the touch: a lone far order and its
/// cancel never move the window and every level in it. The window starts small (an eighth of
/// `ladder_cells`) and doubles when a level lands behind it while the side has more than one
/// level for every [`LADDER_CELLS_PER_LEVEL`] cells: a middling side's ladder stays a few cache
/// lines, a busy one gets the full window.
///
/// Two cache lines, aligned to one ([`BOOK_SIDE_BYTES`]): a command on a big venue finds its
/// book cold, and the engine prefetches the side it works on whole, not more.
#[repr(align(64))]
pub(crate) struct BookSide {
    side: Side,
    /// Levels better than the window (a few at most).
    ahead: SortedLevels,
    ladder: Ladder,
    /// Levels worse than the window (all of them while the ladder is not in use).
    sorted: SortedLevels,
    ladder_min_levels: u32,
    ladder_cells: u32,
    /// The level `sorted` emptied last, or NIL: where its next new level may go (a hint,
    /// checked before use).
    vacated: u32,
}

/// The size of a [`BookSide`].
pub(crate) const BOOK_SIDE_BYTES: usize = 128;
const _: () = assert!(std::mem::size_of::<BookSide>() == BOOK_SIDE_BYTES);

/// A window of `cells.len()` consecutive prices starting at `base`.
struct Ladder {
    base: i64,
    /// The level at each price, or NIL. Empty when the ladder is not in use.
    cells: Box<[u32]>,
    /// One bit per cell: set when it holds a level.
    occupied: Box<[u64]>,
    /// Cell of the best level; meaningful when `count > 0`.
    best: u32,
    count: u32,
}

impl Ladder {
    fn active(&self) -> bool {
        !self.cells.is_empty()
    }

    fn best_cell(&self) -> usize {
        self.best as usize
    }

    /// Starts loading `cell` and its word of the occupancy bitmap.
    #[inline]
    fn prefetch_cell(&self, cell: usize) {
        prefetch_index(&self.cells, cell);
        prefetch_index(&self.occupied, cell / 64);
    }

    fn cell(&self, price: i64) -> Option<usize> {
        // Prices are > 0 and the window starts above -len, so the true offset lies in
        // (-2^63, 2^63 + len): as a wrapped u64 it is below len exactly when it is in the
        // window (one subtraction and one compare instead of i128 arithmetic).
        let offset = price.wrapping_sub(self.base) as u64;
        (offset < self.cells.len() as u64).then_some(offset as usize)
    }

    fn is_better(side: Side, a: usize, b: usize) -> bool {
        match side {
            Side::Buy => a > b,
            Side::Sell => a < b,
        }
    }

    fn set(&mut self, side: Side, cell: usize, level: u32) {
        self.cells[cell] = level;
        self.occupied[cell / 64] |= 1 << (cell % 64);
        if self.count == 0 || Self::is_better(side, cell, self.best_cell()) {
            self.best = cell as u32;
        }
        self.count += 1;
    }

    #[inline]
    fn clear(&mut self, side: Side, cell: usize) {
        self.cells[cell] = NIL;
        self.occupied[cell / 64] &= !(1 << (cell % 64));
        self.count -= 1;
        if self.count > 0 && cell == self.best_cell() {
            self.best = self
                .next_worse(side, cell)
                .expect("count > 0 leaves an occupied cell") as u32;
        }
    }

    /// Moves the level at cell `from` to the empty cell `to`: set there, then cleared here, so
    /// that the best cell follows it.
    fn relocate(&mut self, side: Side, from: usize, to: usize) {
        debug_assert!(self.cells[from] != NIL && self.cells[to] == NIL);
        self.set(side, to, self.cells[from]);
        self.clear(side, from);
    }

    /// The nearest occupied cell worse than `cell` (lower for bids, higher for asks).
    fn next_worse(&self, side: Side, cell: usize) -> Option<usize> {
        let (word, bit) = (cell / 64, cell % 64);
        match side {
            Side::Buy => {
                let below = self.occupied[word] & ((1u64 << bit) - 1);
                if below != 0 {
                    return Some(word * 64 + 63 - below.leading_zeros() as usize);
                }
                (0..word)
                    .rev()
                    .find(|&w| self.occupied[w] != 0)
                    .map(|w| w * 64 + 63 - self.occupied[w].leading_zeros() as usize)
            }
            Side::Sell => {
                let above = self.occupied[word] & (!1u64).checked_shl(bit as u32).unwrap_or(0);
                if above != 0 {
                    return Some(word * 64 + above.trailing_zeros() as usize);
                }
                (word + 1..self.occupied.len())
                    .find(|&w| self.occupied[w] != 0)
                    .map(|w| w * 64 + self.occupied[w].trailing_zeros() as usize)
            }
        }
    }

    /// Occupied cells' levels, best first.
    fn levels_best_first(&self, side: Side) -> impl Iterator<Item = u32> + '_ {
        let first = (self.count > 0).then_some(self.best_cell());
        std::iter::successors(first, move |&cell| self.next_worse(side, cell))
            .map(|cell| self.cells[cell])
    }
}

impl BookSide {
    pub fn new(
        side: Side,
        capacity: usize,
        ladder_min_levels: usize,
        ladder_cells: usize,
    ) -> BookSide {
        BookSide {
            side,
            // Reserved when the ladder starts: most sides never have one.
            ahead: SortedLevels::new(side, 0),
            sorted: SortedLevels::new(side, capacity),
            ladder: Ladder {
                base: 0,
                cells: Box::default(),
                occupied: Box::default(),
                best: 0,
                count: 0,
            },
            ladder_min_levels: clamp_u32(ladder_min_levels.max(1)),
            ladder_cells: clamp_u32(ladder_cells.max(2)),
            vacated: NIL,
        }
    }

    /// The best price and level, if any, found in one pass (the engine reads both after every
    /// change to the side).
    #[inline]
    pub fn best_price_and_level(&self) -> Option<(i64, u32)> {
        if let Some(best) = self.ahead.slots.last() {
            Some((self.ahead.price_of(best), best.level))
        } else if self.ladder.count > 0 {
            let cell = self.ladder.best_cell();
            Some((self.ladder.base + cell as i64, self.ladder.cells[cell]))
        } else {
            let best = self.sorted.slots.last()?;
            Some((self.sorted.price_of(best), best.level))
        }
    }

    /// The best price, if any.
    #[inline]
    pub fn best_price(&self) -> Option<i64> {
        self.best_price_and_level().map(|(price, _)| price)
    }

    /// Starts loading what taking out the best level reads: its ladder cell, or the best end of
    /// its array.
    #[inline]
    pub fn prefetch_best(&self) {
        if let Some(best) = self.ahead.slots.last() {
            prefetch(best);
        } else if self.ladder.count > 0 {
            self.ladder.prefetch_cell(self.ladder.best_cell());
        } else if let Some(best) = self.sorted.slots.last() {
            prefetch(best);
        }
    }

    /// Starts loading what finding the level of `price` reads: its ladder cell, or the sorted
    /// array, whole when it is short (a search through a book nobody touched lately misses
    /// the cache at every step). Reads only this side's own fields, no array.
    #[inline]
    pub fn prefetch_price(&self, price: i64) {
        if let Some(cell) = self.ladder.cell(price) {
            self.ladder.prefetch_cell(cell);
        } else if self.sorted.slots.len() <= PREFETCH_WHOLE_SLOTS {
            prefetch_all(&self.sorted.slots);
        } else if let Some(best) = self.sorted.slots.last() {
            prefetch(best);
        }
    }

    /// Starts loading the ladder cell of `price` (nothing when it is not in the window): what
    /// taking the last order out of a level there writes.
    #[inline]
    pub fn prefetch_cell(&self, price: i64) {
        if let Some(cell) = self.ladder.cell(price) {
            self.ladder.prefetch_cell(cell);
        }
    }

    /// The level at `price`, if there is one, found without reading any level: for
    /// prefetching where an order will land. `price` may be anything a command carries (none
    /// at or below zero).
    #[inline]
    pub fn level_at(&self, price: i64) -> Option<u32> {
        if price <= 0 {
            return None;
        }
        let in_array = |array: &SortedLevels| {
            let pos = array.position(price).ok()?;
            Some(array.slots[pos].level)
        };
        if self.better_than_window(price) {
            return in_array(&self.ahead);
        }
        match self.ladder.cell(price) {
            Some(cell) => Some(self.ladder.cells[cell]).filter(|&level| level != NIL),
            None => in_array(&self.sorted),
        }
    }

    /// Non-empty levels from best to worst.
    pub fn levels_best_first<'a>(&'a self, levels: &'a Levels) -> impl Iterator<Item = u32> + 'a {
        self.ahead
            .levels_best_first(levels)
            .chain(self.ladder.levels_best_first(self.side))
            .chain(self.sorted.levels_best_first(levels))
    }

    /// Levels with orders.
    fn level_count(&self) -> usize {
        self.ahead.level_count() + self.ladder.count as usize + self.sorted.level_count()
    }

    /// Whether `price` is better than every price of the ladder's window (false without one).
    fn better_than_window(&self, price: i64) -> bool {
        if !self.ladder.active() {
            return false;
        }
        let base = self.ladder.base;
        match self.side {
            // At or above the window's start, the wrapped offset is the true one (see
            // `Ladder::cell`).
            Side::Buy => {
                price >= base && price.wrapping_sub(base) as u64 >= self.ladder.cells.len() as u64
            }
            Side::Sell => price < base,
        }
    }

    /// Appends order `idx` (whose price is set) to the back of its price level, creating the level
    /// if needed. `scratch` holds levels in transit should the ladder's window move.
    #[inline]
    pub fn push_back(
        &mut self,
        levels: &mut Levels,
        orders: &mut Orders,
        scratch: &mut Vec<(i64, u32)>,
        idx: u32,
    ) {
        // Most orders land in the ladder's window (never the case without a ladder): one cell,
        // inline, without the checks the other places need.
        match self.ladder.cell(orders.get(idx).price) {
            Some(cell) => self.push_back_in_cell(levels, orders, cell, idx),
            None => self.push_back_outside_window(levels, orders, scratch, idx),
        }
    }

    /// Appends order `idx` to the level at ladder cell `cell`, which it creates if needed.
    #[inline]
    fn push_back_in_cell(
        &mut self,
        levels: &mut Levels,
        orders: &mut Orders,
        cell: usize,
        idx: u32,
    ) {
        let mut level = self.ladder.cells[cell];
        if level == NIL {
            level = levels.alloc(Level::empty());
            self.ladder.set(self.side, cell, level);
        }
        append_to_level(levels, orders, level, idx);
    }

    /// [`Self::push_back`] for an order whose price is not in the ladder's window (or with no
    /// ladder).
    #[inline(never)]
    fn push_back_outside_window(
        &mut self,
        levels: &mut Levels,
        orders: &mut Orders,
        scratch: &mut Vec<(i64, u32)>,
        idx: u32,
    ) {
        if !self.ladder.active() {
            self.sorted.push_back(levels, orders, idx, self.vacated);
            if self.sorted.level_count() >= self.ladder_min_levels as usize {
                self.start_ladder(levels, scratch);
            }
            return;
        }
        let price = orders.get(idx).price;
        if self.ladder.count == 0 {
            // The side is empty (an emptied window moves to the touch at once, taking in the
            // best level of the arrays): the window moves to where trading resumes.
            debug_assert!(self.sorted.best().is_none() && self.ahead.best().is_none());
            self.move_window(levels, scratch, price, self.ladder.cells.len());
            let cell = self
                .ladder
                .cell(price)
                .expect("the window moved to the price");
            return self.push_back_in_cell(levels, orders, cell, idx);
        }
        if self.better_than_window(price) {
            self.ahead.push_back(levels, orders, idx, NIL);
            if self.ahead.level_count() > AHEAD_MAX_LEVELS {
                // The touch has moved beyond the window for good: the window follows it.
                let best = self.ahead.best_price().expect("levels ahead");
                self.move_window(levels, scratch, best, self.ladder.cells.len());
            }
        } else {
            // Worse than the window: a larger one would have taken it.
            self.sorted.push_back(levels, orders, idx, self.vacated);
            self.grow_window_if_crowded(levels, scratch);
        }
    }

    /// Moves order `idx` to `price`, at the back of its level there: [`Self::unlink`], a new
    /// price, then [`Self::push_back`].
    #[inline]
    pub fn reprice(
        &mut self,
        levels: &mut Levels,
        orders: &mut Orders,
        scratch: &mut Vec<(i64, u32)>,
        idx: u32,
        price: i64,
    ) {
        let node = orders.get(idx);
        let (Some(from), Some(to)) = (self.ladder.cell(node.price), self.ladder.cell(price)) else {
            self.unlink(levels, orders, scratch, idx);
            orders.get_mut(idx).price = price;
            return self.push_back(levels, orders, scratch, idx);
        };
        // Both prices are in the window (most moves): cell to cell. Should the window empty for
        // a moment, it is not moved to the touch, as `unlink` would: the order refills it.
        let level = node.level;
        if self.ladder.cells[to] == NIL {
            // Most levels near the touch hold one order. When such an order goes to a price with
            // no level, its level goes with it: no list to unlink, no level freed and taken
            // again (the arena would give back the same one).
            let old = levels.get(level);
            if old.head == idx && old.tail == idx {
                self.ladder.relocate(self.side, from, to);
                orders.get_mut(idx).price = price;
                return;
            }
        }
        self.unlink_in_cell(levels, orders, from, level, idx);
        orders.get_mut(idx).price = price;
        self.push_back_in_cell(levels, orders, to, idx);
    }

    /// Takes order `idx` out of its level. The node itself stays allocated.
    #[inline]
    pub fn unlink(
        &mut self,
        levels: &mut Levels,
        orders: &mut Orders,
        scratch: &mut Vec<(i64, u32)>,
        idx: u32,
    ) {
        let (price, level) = (orders.get(idx).price, orders.get(idx).level);
        // Most orders leave from the ladder's window: inline, as in `push_back`.
        let Some(cell) = self.ladder.cell(price) else {
            return self.unlink_outside_window(levels, orders, idx, price);
        };
        if self.unlink_in_cell(levels, orders, cell, level, idx) && self.ladder.count == 0 {
            self.bring_empty_window_to_touch(levels, scratch);
        }
    }

    /// Takes order `idx` out of its `level`, at ladder `cell`; when that empties the level,
    /// clears the cell and frees the level. Returns whether it did.
    #[inline]
    fn unlink_in_cell(
        &mut self,
        levels: &mut Levels,
        orders: &mut Orders,
        cell: usize,
        level: u32,
        idx: u32,
    ) -> bool {
        let emptied = unlink_from_level(levels, orders, idx);
        if emptied {
            self.ladder.clear(self.side, cell);
            levels.free(level);
        }
        emptied
    }

    /// [`Self::unlink`] for an order whose price is not in the ladder's window (or with no
    /// ladder).
    #[inline(never)]
    fn unlink_outside_window(
        &mut self,
        levels: &mut Levels,
        orders: &mut Orders,
        idx: u32,
        price: i64,
    ) {
        if self.better_than_window(price) {
            self.ahead.unlink(levels, orders, idx);
        } else if let Some(emptied) = self.sorted.unlink(levels, orders, idx) {
            self.vacated = emptied;
        }
    }

    /// Once the ladder's window has no level left, moves it to the side's best price, if any.
    #[inline(never)]
    fn bring_empty_window_to_touch(&mut self, levels: &mut Levels, scratch: &mut Vec<(i64, u32)>) {
        if let Some(best) = self.ahead.best_price().or(self.sorted.best_price()) {
            self.move_window(levels, scratch, best, self.ladder.cells.len());
        }
    }

    fn start_ladder(&mut self, levels: &mut Levels, scratch: &mut Vec<(i64, u32)>) {
        // At most AHEAD_MAX_LEVELS + 1 levels ahead, and the empty slots an array keeps until
        // it compacts: the array never grows once trading runs.
        self.ahead
            .slots
            .reserve(AHEAD_MAX_LEVELS + 1 + EMPTY_SLOTS_SLACK);
        let cells = (self.ladder_cells as usize / LADDER_START_SHARE).max(2);
        self.resize_window(levels, scratch, cells);
    }

    /// Doubles the window (up to `ladder_cells`) once the side has more than one level for
    /// every [`LADDER_CELLS_PER_LEVEL`] cells: a side that keeps getting busier gets the full
    /// window, one that stays middling keeps a small one.
    #[inline]
    fn grow_window_if_crowded(&mut self, levels: &mut Levels, scratch: &mut Vec<(i64, u32)>) {
        let cells = self.ladder.cells.len();
        if cells < self.ladder_cells as usize && self.level_count() * LADDER_CELLS_PER_LEVEL > cells
        {
            let grown = (cells * 2).min(self.ladder_cells as usize);
            self.resize_window(levels, scratch, grown);
        }
    }

    /// Gives the ladder a window of `cells` prices, placed at the side's best.
    fn resize_window(&mut self, levels: &mut Levels, scratch: &mut Vec<(i64, u32)>, cells: usize) {
        let best = self.best_price().expect("a side with levels has a best");
        self.move_window(levels, scratch, best, cells);
    }

    /// Moves the window so that `price`, the side's best, sits an eighth of the way in from its
    /// better end ([`WINDOW_SHARE_AHEAD`]): resting orders gather behind the touch, and only an
    /// order that improves the touch lands ahead of it, so most of the window is worth having
    /// behind the best price rather than half of it in front. The levels ahead and in the old
    /// window are placed again by price: into the new window, or (being worse than it and better
    /// than everything in the array) onto the array's best end; the array's best levels that
    /// fall inside the new window move into the ladder. Costs O(window / 64 + levels moved).
    ///
    /// `cells` is the window's size from now on: its current one, or a new one (allocated here)
    /// when the ladder starts or grows.
    fn move_window(
        &mut self,
        levels: &mut Levels,
        scratch: &mut Vec<(i64, u32)>,
        price: i64,
        cells: usize,
    ) {
        // Every level ahead and in the ladder with its price (from its slot or cell: no level
        // is read), best first (then reversed: worst first).
        scratch.clear();
        while let Some(best) = self.ahead.pop_best(levels) {
            scratch.push(best);
        }
        let mut cell = self.ladder.best_cell();
        if self.ladder.count > 0 {
            loop {
                // Emptied as they are collected: clearing only the occupied cells, not the whole
                // window, keeps a move O(levels + window / 64) in memory touched too.
                let level = std::mem::replace(&mut self.ladder.cells[cell], NIL);
                scratch.push((self.ladder.base + cell as i64, level));
                match self.ladder.next_worse(self.side, cell) {
                    Some(next) => cell = next,
                    None => break,
                }
            }
        }
        scratch.reverse();
        if cells == self.ladder.cells.len() {
            self.ladder.occupied.fill(0);
        } else {
            self.ladder.cells = vec![NIL; cells].into_boxed_slice();
            self.ladder.occupied = vec![0; cells.div_ceil(64)].into_boxed_slice();
        }
        self.ladder.count = 0;
        let len = self.ladder.cells.len() as i64;
        let ahead = len / WINDOW_SHARE_AHEAD;
        // Prices are > 0, so the window starts above -len (which `Ladder::cell` relies on).
        self.ladder.base = match self.side {
            Side::Buy => price.saturating_sub(len - 1 - ahead),
            Side::Sell => price.saturating_sub(ahead),
        };
        for &(price, level) in scratch.iter() {
            match self.ladder.cell(price) {
                Some(cell) => self.ladder.set(self.side, cell, level),
                None if self.better_than_window(price) => self.ahead.push_best(price, level),
                None => self.sorted.push_best(price, level),
            }
        }
        while let Some(best) = self.sorted.best_price()
            && let Some(cell) = self.ladder.cell(best)
        {
            let (_, level) = self
                .sorted
                .pop_best(levels)
                .expect("a best price has a level");
            self.ladder.set(self.side, cell, level);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::command::{Command, PlaceOrder, SymbolSpec};
    use crate::engine::{Engine, EngineConfig};
    use crate::event::OwnedEvent;
    use crate::types::{Name, Reason, Side, SymbolId};

    /// A model of one side's book: (price, order) in priority order.
    fn expected_bids(live: &[(i64, i64)]) -> Vec<(i64, i64)> {
        let mut v = live.to_vec();
        // Best (highest) price first; within a price, older (placed earlier) first. Orders are
        // placed with increasing ids, so id order is time order here.
        v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        v
    }

    fn engine_bids(e: &Engine, sym: SymbolId) -> Vec<(i64, i64)> {
        e.resting_orders(sym)
            .0
            .iter()
            .map(|o| (o.price, o.order))
            .collect()
    }

    /// An engine with one symbol, X-Y (scales 1, no fees), and users funded with `(user,
    /// currency, amount)` each.
    fn xy_engine(config: EngineConfig, funds: &[(i64, &str, i64)]) -> (Engine, SymbolId) {
        let mut e = Engine::new(config);
        let name = |s| Name::new(s).unwrap();
        let spec = SymbolSpec {
            symbol: name("X-Y"),
            base: name("X"),
            quote: name("Y"),
            base_scale: 1,
            quote_scale: 1,
            maker_fee: 0,
            taker_fee: 0,
            band_bps: 0,
            day_end: 0,
            kind: SymbolSpec::SPOT,
        };
        e.apply(0, 0, &Command::AddSymbol(Box::new(spec)), &mut ())
            .unwrap();
        for (tx, &(user, currency, amount)) in funds.iter().enumerate() {
            // A user funded twice is added once (the second add is refused).
            let _ = e.apply(0, 0, &Command::AddUser { user }, &mut ());
            let adjust = Command::AdjustBalance {
                user,
                currency: name(currency),
                amount,
                tx: tx as i64 + 1,
            };
            e.apply(0, 0, &adjust, &mut ()).unwrap();
        }
        let sym = e.symbol_id("X-Y");
        (e, sym)
    }

    /// A ladder whose window starts below zero (the touch is a few ticks above it) and orders
    /// at prices as far from it as an i64 allows: the window's arithmetic must place them in
    /// the right array, in the right order, on both sides.
    #[test]
    fn ladders_near_zero_place_extreme_prices() {
        let config = EngineConfig {
            ladder_min_levels: 1,
            ladder_cells: 8,
            ..EngineConfig::default()
        };
        let (mut e, sym) = xy_engine(config, &[(1, "X", 100), (2, "Y", 1 << 62)]);
        // User 1 sells, user 2 buys; ids count across both.
        let mut id = 0;
        let mut place = |e: &mut Engine, side: Side, price: i64| {
            id += 1;
            let user = if side == Side::Sell { 1 } else { 2 };
            let cmd = Command::Place(PlaceOrder::limit(user, id, sym, side, price, 1));
            e.apply(0, 0, &cmd, &mut ()).unwrap();
        };
        // Asks from 3 ticks: the window starts below zero. Then asks as far above as can be.
        for price in [3, 4, 5, i64::MAX, i64::MAX - 1, 6] {
            place(&mut e, Side::Sell, price);
        }
        let asks: Vec<i64> = e.resting_orders(sym).1.iter().map(|o| o.price).collect();
        assert_eq!(asks, [3, 4, 5, 6, i64::MAX - 1, i64::MAX]);
        // Bids from 1 tick, then far better than the window (but below the asks' touch: none
        // trades), then one that trades at the best ask.
        for price in [1, 2] {
            place(&mut e, Side::Buy, price);
        }
        let bids: Vec<i64> = e.resting_orders(sym).0.iter().map(|o| o.price).collect();
        assert_eq!(bids, [2, 1]);
        place(&mut e, Side::Buy, 3);
        let (bids, asks) = e.resting_orders(sym);
        assert_eq!(bids.iter().map(|o| o.price).collect::<Vec<_>>(), [2, 1]);
        assert_eq!(asks[0].price, 4, "the ask at 3 traded");
        // A bid far above every bid in the window, below the asks: it rests as the best bid.
        for order in [2, 3, 6] {
            e.apply(0, 0, &Command::Cancel { user: 1, order }, &mut ())
                .unwrap();
        }
        let far = 1i64 << 40;
        place(&mut e, Side::Buy, far);
        let bids: Vec<i64> = e.resting_orders(sym).0.iter().map(|o| o.price).collect();
        assert_eq!(bids, [far, 2, 1]);
        let asks: Vec<i64> = e.resting_orders(sym).1.iter().map(|o| o.price).collect();
        assert_eq!(asks, [i64::MAX - 1, i64::MAX]);
    }

    /// Prefetching reads commands before they are checked: prices at the bottom of the i64
    /// range, on new orders and moves on both sides, are prefetched without a panic and then
    /// rejected as usual.
    #[test]
    fn prefetching_ahead_of_bad_prices_is_harmless() {
        let funds = [(1, "X", 100), (1, "Y", 100)];
        let (mut e, sym) = xy_engine(EngineConfig::default(), &funds);
        for (order, side, price) in [(1, Side::Buy, 10), (2, Side::Sell, 20)] {
            let place = PlaceOrder::limit(1, order, sym, side, price, 1);
            e.apply(0, 0, &Command::Place(place), &mut ()).unwrap();
        }
        let mut commands = Vec::new();
        for price in [i64::MIN, -1, 0] {
            for (order, side) in [(1, Side::Buy), (2, Side::Sell)] {
                let place = PlaceOrder::limit(1, 10 + order, sym, side, price, 1);
                commands.push(Command::Place(place));
                commands.push(Command::Move {
                    user: 1,
                    order,
                    price,
                });
            }
        }
        for (i, cmd) in commands.iter().enumerate() {
            e.prefetch_ahead(&commands[i..]);
            assert_eq!(e.apply(0, 0, cmd, &mut ()), Err(Reason::InvalidPrice));
        }
        assert_eq!(e.resting_order_count(), 2);
    }

    /// A resting bid of one lot at `price`, its order id the price, not yet in a level.
    fn one_lot_bid(price: i64) -> super::OrderNode {
        super::OrderNode {
            user: 1,
            order: price,
            price,
            remaining: 1,
            account: 0,
            symbol: 0,
            level: super::NIL,
            prev: super::NIL,
            next: super::NIL,
            account_prev: super::NIL,
            account_next: super::NIL,
            side: Side::Buy,
            stp: crate::types::Stp::CancelTaker,
            post_only: false,
            kind: super::NodeKind::Plain,
        }
    }

    /// A ladder starts with an eighth of `ladder_cells` and doubles as its side fills, up to
    /// `ladder_cells`; levels keep their order through every resize.
    #[test]
    fn a_busier_side_grows_its_ladder_window() {
        use super::{BookSide, Levels, Orders, level_price};
        let mut levels = Levels::with_capacity(64);
        let mut orders = Orders::with_capacity(64);
        let mut scratch = Vec::new();
        let mut side = BookSide::new(Side::Buy, 64, 4, 256);
        let mut add = |side: &mut BookSide, price: i64| {
            let idx = orders.alloc(one_lot_bid(price));
            side.push_back(&mut levels, &mut orders, &mut scratch, idx);
        };
        // Bids from 1,000 down, a level every third tick.
        let prices: Vec<i64> = (0..41).map(|i| 1000 - 3 * i).collect();
        for &price in &prices[..6] {
            add(&mut side, price);
        }
        assert_eq!(side.ladder.cells.len(), 32, "a ladder starts at an eighth");
        for &price in &prices[6..] {
            add(&mut side, price);
        }
        // 41 levels over 121 ticks: each time one fell behind the window, it doubled.
        assert_eq!(side.ladder.cells.len(), 256);
        assert_eq!(side.ladder.count, 41, "every level in the window");
        let best_first: Vec<i64> = side
            .levels_best_first(&levels)
            .map(|level| level_price(&levels, &orders, level))
            .collect();
        assert_eq!(best_first, prices);
    }

    /// A move in a short array (no ladder) reuses the slot its order vacated: however often
    /// orders move to new prices near their old ones, the array holds one slot per level and
    /// stays sorted.
    #[test]
    fn moves_reuse_the_slot_they_vacate() {
        use super::{BookSide, Levels, Orders, level_price};
        let mut levels = Levels::with_capacity(64);
        let mut orders = Orders::with_capacity(64);
        let mut scratch = Vec::new();
        let mut side = BookSide::new(Side::Buy, 64, usize::MAX, 8);
        let prices: Vec<i64> = (1..=40).map(|i| i * 10).collect();
        let ids: Vec<u32> = prices
            .iter()
            .map(|&price| {
                let idx = orders.alloc(one_lot_bid(price));
                side.push_back(&mut levels, &mut orders, &mut scratch, idx);
                idx
            })
            .collect();
        // Each order in turn steps a few ticks up or down, never onto another order's price.
        for round in 0..200i64 {
            for (n, &idx) in ids.iter().enumerate() {
                let step = if (round + n as i64) % 2 == 0 { 3 } else { -3 };
                side.unlink(&mut levels, &mut orders, &mut scratch, idx);
                orders.get_mut(idx).price += step;
                side.push_back(&mut levels, &mut orders, &mut scratch, idx);
            }
        }
        assert_eq!(side.sorted.slots.len(), 40, "one slot per level");
        assert_eq!(levels.live(), 40);
        let best_first: Vec<i64> = side
            .levels_best_first(&levels)
            .map(|level| level_price(&levels, &orders, level))
            .collect();
        let mut want: Vec<i64> = ids.iter().map(|&idx| orders.get(idx).price).collect();
        want.sort_by(|a, b| b.cmp(a));
        assert_eq!(best_first, want);
    }

    /// An order alone at its level that moves within the ladder's window to a price with no
    /// level takes its level along, and the best follows it there and back; an order that
    /// shares its level, or moves onto another's, leaves and joins as usual.
    #[test]
    fn a_lone_order_moves_with_its_level() {
        use super::{BookSide, Levels, NIL, Orders};
        let mut levels = Levels::with_capacity(8);
        let mut orders = Orders::with_capacity(8);
        let mut scratch = Vec::new();
        let mut side = BookSide::new(Side::Buy, 8, 1, 512);
        let mut ids = Vec::new();
        for price in [100, 98, 98, 95] {
            let idx = orders.alloc(one_lot_bid(price));
            side.push_back(&mut levels, &mut orders, &mut scratch, idx);
            ids.push(idx);
        }
        let [lone, first_at_98, second_at_98, deep] = ids[..] else {
            unreachable!()
        };
        // (price, orders oldest first) per level, best first.
        let book = |side: &BookSide, levels: &Levels, orders: &Orders| -> Vec<(i64, Vec<u32>)> {
            side.levels_best_first(levels)
                .map(|level| {
                    let fifo: Vec<u32> = std::iter::successors(
                        Some(levels.get(level).head).filter(|&i| i != NIL),
                        |&i| Some(orders.get(i).next).filter(|&i| i != NIL),
                    )
                    .collect();
                    (orders.get(fifo[0]).price, fifo)
                })
                .collect()
        };
        assert!(
            [95, 97, 98, 99, 100, 102]
                .iter()
                .all(|&p| side.ladder.cell(p).is_some())
        );
        let lone_level = orders.get(lone).level;

        // Through the touch, and back behind the next level.
        side.reprice(&mut levels, &mut orders, &mut scratch, lone, 102);
        assert_eq!(side.best_price_and_level(), Some((102, lone_level)));
        side.reprice(&mut levels, &mut orders, &mut scratch, lone, 97);
        assert_eq!(orders.get(lone).level, lone_level, "the level went along");
        assert_eq!(levels.live(), 3, "no level freed or taken");
        assert_eq!(side.best_price_and_level().map(|(p, _)| p), Some(98));

        // From a shared level to a new one, and from a lone level onto a shared one.
        side.reprice(&mut levels, &mut orders, &mut scratch, first_at_98, 99);
        side.reprice(&mut levels, &mut orders, &mut scratch, deep, 98);
        assert_eq!(
            book(&side, &levels, &orders),
            vec![
                (99, vec![first_at_98]),
                (98, vec![second_at_98, deep]),
                (97, vec![lone]),
            ]
        );
        assert_eq!(levels.live(), 3);
        assert_eq!(side.ladder.count, 3);
    }

    /// Deep books empty and refill levels far from the touch: empty levels are left in place,
    /// reused by later orders (directly or as holes next to a new price), popped when they reach
    /// the touch and compacted away when they pile up. Priority must hold through all of it.
    #[test]
    fn deep_books_keep_priority_through_lazy_level_removal() {
        let (mut e, sym) = xy_engine(EngineConfig::default(), &[(1, "Y", 1 << 40)]);
        let mut live: Vec<(i64, i64)> = Vec::new();
        let mut next_id = 0;
        let mut place = |e: &mut Engine, live: &mut Vec<(i64, i64)>, price: i64| {
            next_id += 1;
            let cmd = Command::Place(PlaceOrder::limit(1, next_id, sym, Side::Buy, price, 1));
            e.apply(0, 0, &cmd, &mut ()).unwrap();
            live.push((price, next_id));
        };
        // 400 levels, two orders on every fourth.
        for price in 1..=400 {
            place(&mut e, &mut live, price * 10);
            if price % 4 == 0 {
                place(&mut e, &mut live, price * 10);
            }
        }
        assert_eq!(engine_bids(&e, sym), expected_bids(&live));
        // Empty most deep levels (enough to force compactions), keeping the best ones.
        let mut round = 0;
        while live.len() > 120 {
            round += 1;
            let victim = live
                .iter()
                .position(|&(p, id)| p < 3000 && (id + round) % 3 != 0);
            let Some(i) = victim else { break };
            let (_, id) = live.remove(i);
            e.apply(0, 0, &Command::Cancel { user: 1, order: id }, &mut ())
                .unwrap();
        }
        assert_eq!(engine_bids(&e, sym), expected_bids(&live));
        // New orders at emptied prices, between old ones, and moves one tick up (next to the hole
        // they leave behind).
        for price in (5..3000).step_by(37) {
            place(&mut e, &mut live, price);
        }
        let movers: Vec<i64> = live
            .iter()
            .filter(|(p, _)| p % 7 == 0)
            .map(|&(_, id)| id)
            .collect();
        for id in movers {
            let i = live.iter().position(|&(_, o)| o == id).unwrap();
            let price = live[i].0 + 1;
            let cmd = Command::Move {
                user: 1,
                order: id,
                price,
            };
            e.apply(0, 0, &cmd, &mut ()).unwrap();
            // A move loses priority: it joins its new level as the newest order.
            live.remove(i);
            live.push((price, id));
        }
        let mut got = engine_bids(&e, sym);
        // Moved orders are newer than their ids say: compare as sets per price, then check that
        // the book is sorted best-first.
        let mut want = expected_bids(&live);
        assert!(
            got.windows(2).all(|w| w[0].0 >= w[1].0),
            "bids out of price order"
        );
        got.sort();
        want.sort();
        assert_eq!(got, want);
        // The best price is right after every change, down to an empty book.
        while let Some(&(price, _)) = expected_bids(&live).first() {
            let mut events: Vec<OwnedEvent> = Vec::new();
            e.apply(
                0,
                0,
                &Command::Book {
                    symbol: sym,
                    depth: 1,
                },
                &mut events,
            )
            .unwrap();
            let OwnedEvent::Book { bids, .. } = &events[0] else {
                panic!("a book event")
            };
            assert_eq!(bids[0].price, price);
            let (_, id) = live.remove(live.iter().position(|&(p, _)| p == price).unwrap());
            e.apply(0, 0, &Command::Cancel { user: 1, order: id }, &mut ())
                .unwrap();
        }
        assert_eq!(engine_bids(&e, sym), vec![]);
    }
}
