//! An order-by-order book that also keeps its aggregated levels: the feed's own state, and
//! what an L3 client rebuilds.

use std::collections::BTreeMap;
use std::collections::hash_map::Entry;

use rialto_core::{Phase, Side};
use rustc_hash::FxHashMap;

use crate::update::{L2Snapshot, L3Order, L3Snapshot};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BookError {
    /// An update named an order the book does not have.
    UnknownOrder(u64),
    /// An add named an order the book already has.
    DuplicateOrder(u64),
    /// A quantity that is not positive, or larger than what rests.
    BadQty(u64),
}

impl std::fmt::Display for BookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BookError::UnknownOrder(o) => write!(f, "unknown order {o}"),
            BookError::DuplicateOrder(o) => write!(f, "order {o} is already on the book"),
            BookError::BadQty(o) => write!(f, "impossible quantity for order {o}"),
        }
    }
}

impl std::error::Error for BookError {}

/// No order (the end of a level's queue) or no slot.
const NONE: u32 = u32::MAX;

/// Where an order lives in its book: stable while the order rests, reused after it leaves.
/// The feed keeps it beside its own order key so that an execution or cancellation finds
/// the order without a search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot(u32);

impl Slot {
    #[cfg(test)]
    pub(crate) fn from_index(index: u32) -> Slot {
        Slot(index)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookOrder {
    pub order: u64,
    pub side: Side,
    pub price: i64,
    pub qty: i64,
    /// The order's level, a slot in `levels`.
    level: u32,
    /// The level's queue (oldest first) is a list through the orders' slots.
    prev: u32,
    next: u32,
}

#[derive(Clone, Copy, Debug)]
struct Level {
    total: i64,
    head: u32,
    tail: u32,
}

/// What one change did to its level: the side, price and new level total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelChange {
    pub side: Side,
    pub price: i64,
    pub total: i64,
}

/// Orders and levels live in slabs (vectors whose freed entries are reused); the price maps
/// only order the levels, so an execution touches no tree unless its level empties.
#[derive(Clone, Debug)]
pub struct L3Book {
    orders: Vec<BookOrder>,
    free_orders: Vec<u32>,
    /// Public order number -> slot; `None` in a book reached only by slot (the feed's, which
    /// keeps each order's slot beside its own key: on a big venue the index would cost a
    /// cache miss on every add and every removal).
    index: Option<FxHashMap<u64, u32>>,
    /// Orders resting.
    count: usize,
    levels: Vec<Level>,
    free_levels: Vec<u32>,
    /// Price -> level slot, per side.
    bids: BTreeMap<i64, u32>,
    asks: BTreeMap<i64, u32>,
}

impl Default for L3Book {
    fn default() -> L3Book {
        L3Book {
            orders: Vec::new(),
            free_orders: Vec::new(),
            index: Some(FxHashMap::default()),
            count: 0,
            levels: Vec::new(),
            free_levels: Vec::new(),
            bids: BTreeMap::new(),
            asks: BTreeMap::new(),
        }
    }
}

impl L3Book {
    pub fn new() -> L3Book {
        L3Book::default()
    }

    /// A book without the index by public order number: [`Self::order`], [`Self::take`] and
    /// [`Self::delete`] find nothing in it, and adding an order number twice is not caught.
    /// For a caller that reaches every order by the slot [`Self::add_slot`] returned.
    pub fn by_slot_only() -> L3Book {
        L3Book {
            index: None,
            ..L3Book::default()
        }
    }

    /// The slot of a public order number.
    fn slot_of(&self, order: u64) -> Result<u32, BookError> {
        self.index
            .as_ref()
            .and_then(|index| index.get(&order))
            .copied()
            .ok_or(BookError::UnknownOrder(order))
    }

    fn side_mut(&mut self, side: Side) -> &mut BTreeMap<i64, u32> {
        match side {
            Side::Buy => &mut self.bids,
            Side::Sell => &mut self.asks,
        }
    }

    fn side(&self, side: Side) -> &BTreeMap<i64, u32> {
        match side {
            Side::Buy => &self.bids,
            Side::Sell => &self.asks,
        }
    }

    pub fn order(&self, order: u64) -> Option<&BookOrder> {
        let slot = self.slot_of(order).ok()?;
        Some(&self.orders[slot as usize])
    }

    /// Starts loading the order in `slot` (see [`crate::Feed::prefetch_upcoming`]).
    pub fn prefetch_order(&self, slot: Slot) {
        rialto_prefetch::prefetch_index(&self.orders, slot.0 as usize);
    }

    /// The order in a slot that [`Self::add_slot`] returned (and that has not left since).
    pub fn order_at(&self, slot: Slot) -> &BookOrder {
        &self.orders[slot.0 as usize]
    }

    pub fn order_count(&self) -> usize {
        self.count
    }

    /// Puts an order at the back of its level.
    pub fn add(
        &mut self,
        order: u64,
        side: Side,
        price: i64,
        qty: i64,
    ) -> Result<LevelChange, BookError> {
        self.add_slot(order, side, price, qty)
            .map(|(change, _)| change)
    }

    /// [`Self::add`], also returning the order's slot.
    pub fn add_slot(
        &mut self,
        order: u64,
        side: Side,
        price: i64,
        qty: i64,
    ) -> Result<(LevelChange, Slot), BookError> {
        if qty <= 0 {
            return Err(BookError::BadQty(order));
        }
        let slot = match self.free_orders.last() {
            Some(&slot) => slot,
            None => self.orders.len() as u32,
        };
        if let Some(index) = &mut self.index {
            match index.entry(order) {
                Entry::Occupied(_) => return Err(BookError::DuplicateOrder(order)),
                Entry::Vacant(v) => v.insert(slot),
            };
        }
        self.count += 1;
        let level = self.level_for(side, price);
        let l = &mut self.levels[level as usize];
        let prev = l.tail;
        l.total += qty;
        l.tail = slot;
        if l.head == NONE {
            l.head = slot;
        }
        let total = l.total;
        if prev != NONE {
            self.orders[prev as usize].next = slot;
        }
        let entry = BookOrder {
            order,
            side,
            price,
            qty,
            level,
            prev,
            next: NONE,
        };
        if slot as usize == self.orders.len() {
            self.orders.push(entry);
        } else {
            self.free_orders.pop();
            self.orders[slot as usize] = entry;
        }
        Ok((LevelChange { side, price, total }, Slot(slot)))
    }

    /// The level at a price, created empty if there is none.
    fn level_for(&mut self, side: Side, price: i64) -> u32 {
        if let Some(&level) = self.side(side).get(&price) {
            return level;
        }
        let empty = Level {
            total: 0,
            head: NONE,
            tail: NONE,
        };
        let level = match self.free_levels.pop() {
            Some(level) => {
                self.levels[level as usize] = empty;
                level
            }
            None => {
                self.levels.push(empty);
                (self.levels.len() - 1) as u32
            }
        };
        self.side_mut(side).insert(price, level);
        level
    }

    /// Takes `qty` off an order (0 < qty <= its quantity); an order at zero leaves.
    /// Returns the level change and the order's quantity left.
    pub fn take(&mut self, order: u64, qty: i64) -> Result<(LevelChange, i64), BookError> {
        let slot = self.slot_of(order)?;
        self.take_slot(Slot(slot), qty)
    }

    /// [`Self::take`] by slot.
    pub fn take_slot(&mut self, slot: Slot, qty: i64) -> Result<(LevelChange, i64), BookError> {
        let Some(entry) = self.orders.get_mut(slot.0 as usize) else {
            return Err(BookError::UnknownOrder(u64::MAX));
        };
        if qty <= 0 || qty > entry.qty {
            return Err(BookError::BadQty(entry.order));
        }
        entry.qty -= qty;
        let o = *entry;
        let l = &mut self.levels[o.level as usize];
        l.total -= qty;
        let change = LevelChange {
            side: o.side,
            price: o.price,
            total: l.total,
        };
        if o.qty > 0 {
            return Ok((change, o.qty));
        }
        // The order leaves: unlink it from its level's queue and free its slot.
        if l.head == slot.0 {
            l.head = o.next;
        }
        if l.tail == slot.0 {
            l.tail = o.prev;
        }
        let level_empty = l.head == NONE;
        if o.prev != NONE {
            self.orders[o.prev as usize].next = o.next;
        }
        if o.next != NONE {
            self.orders[o.next as usize].prev = o.prev;
        }
        if let Some(index) = &mut self.index {
            index.remove(&o.order);
        }
        self.count -= 1;
        self.free_orders.push(slot.0);
        if level_empty {
            self.side_mut(o.side).remove(&o.price);
            self.free_levels.push(o.level);
        }
        Ok((change, 0))
    }

    /// Removes an order whatever its quantity.
    pub fn delete(&mut self, order: u64) -> Result<LevelChange, BookError> {
        let slot = self.slot_of(order)?;
        self.delete_slot(Slot(slot))
    }

    /// [`Self::delete`] by slot.
    pub fn delete_slot(&mut self, slot: Slot) -> Result<LevelChange, BookError> {
        let qty = self.order_at(slot).qty;
        Ok(self.take_slot(slot, qty)?.0)
    }

    /// The total at one price (0 when no level).
    pub fn level_qty(&self, side: Side, price: i64) -> i64 {
        self.side(side)
            .get(&price)
            .map_or(0, |&l| self.levels[l as usize].total)
    }

    /// The best level of a side: (price, total).
    pub fn best(&self, side: Side) -> Option<(i64, i64)> {
        let level = match side {
            Side::Buy => self.bids.iter().next_back(),
            Side::Sell => self.asks.iter().next(),
        };
        level.map(|(&p, &l)| (p, self.levels[l as usize].total))
    }

    /// Up to `depth` levels of a side, best first.
    pub fn depth(&self, side: Side, depth: usize) -> Vec<(i64, i64)> {
        let levels = self.side(side);
        let pairs = |(&p, &l): (&i64, &u32)| (p, self.levels[l as usize].total);
        match side {
            Side::Buy => levels.iter().rev().take(depth).map(pairs).collect(),
            Side::Sell => levels.iter().take(depth).map(pairs).collect(),
        }
    }

    /// Orders of a side in priority order: best price, then oldest.
    pub fn orders_in_priority(&self, side: Side) -> Vec<L3Order> {
        let levels = self.side(side);
        let iter: Box<dyn Iterator<Item = (&i64, &u32)>> = match side {
            Side::Buy => Box::new(levels.iter().rev()),
            Side::Sell => Box::new(levels.iter()),
        };
        let mut out = Vec::new();
        for (&price, &level) in iter {
            let mut slot = self.levels[level as usize].head;
            while slot != NONE {
                let o = &self.orders[slot as usize];
                out.push(L3Order {
                    order: o.order,
                    price,
                    qty: o.qty,
                });
                slot = o.next;
            }
        }
        out
    }

    pub fn l2_snapshot(&self, seq: u64, depth: usize, phase: Phase) -> L2Snapshot {
        L2Snapshot {
            seq,
            phase,
            bids: self.depth(Side::Buy, depth),
            asks: self.depth(Side::Sell, depth),
        }
    }

    pub fn l3_snapshot(&self, seq: u64, phase: Phase) -> L3Snapshot {
        L3Snapshot {
            seq,
            phase,
            bids: self.orders_in_priority(Side::Buy),
            asks: self.orders_in_priority(Side::Sell),
        }
    }

    /// A book holding exactly a snapshot's orders, in its priority order.
    pub fn from_snapshot(snapshot: &L3Snapshot) -> Result<L3Book, BookError> {
        let mut book = L3Book::new();
        for o in &snapshot.bids {
            book.add(o.order, Side::Buy, o.price, o.qty)?;
        }
        for o in &snapshot.asks {
            book.add(o.order, Side::Sell, o.price, o.qty)?;
        }
        Ok(book)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// A book reached by slot only goes through the same states as one reached by order
        /// number, and finds nothing by number.
        #[test]
        fn a_book_by_slot_only_matches_an_indexed_one(
            ops in prop::collection::vec((any::<bool>(), any::<bool>(), 95i64..105, 1i64..5, any::<prop::sample::Index>()), 1..300)
        ) {
            let mut indexed = L3Book::new();
            let mut by_slot = L3Book::by_slot_only();
            // Resting orders: (number, slot in `by_slot`).
            let mut live: Vec<(u64, Slot)> = Vec::new();
            let mut next = 0;
            for (add, buy, price, qty, pick) in ops {
                if add || live.is_empty() {
                    next += 1;
                    let side = if buy { Side::Buy } else { Side::Sell };
                    let a = indexed.add(next, side, price, qty).unwrap();
                    let (b, slot) = by_slot.add_slot(next, side, price, qty).unwrap();
                    prop_assert_eq!(a, b);
                    live.push((next, slot));
                } else {
                    let i = pick.index(live.len());
                    let (order, slot) = live[i];
                    let take = qty.min(by_slot.order_at(slot).qty);
                    let a = indexed.take(order, take).unwrap();
                    let b = by_slot.take_slot(slot, take).unwrap();
                    prop_assert_eq!(a, b);
                    if b.1 == 0 {
                        live.swap_remove(i);
                    }
                    prop_assert_eq!(by_slot.take(order, 1), Err(BookError::UnknownOrder(order)));
                }
                prop_assert_eq!(indexed.order_count(), live.len());
                prop_assert_eq!(by_slot.order_count(), live.len());
                prop_assert_eq!(indexed.l3_snapshot(0, Phase::Continuous), by_slot.l3_snapshot(0, Phase::Continuous));
                prop_assert!(by_slot.order(next).is_none());
            }
        }
    }
}
