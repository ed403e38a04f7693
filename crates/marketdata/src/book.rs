//! An order-by-order book that also keeps its aggregated levels: the feed's own state, and
//! what an L3 client rebuilds.

use std::collections::BTreeMap;

use rialto_core::Side;
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

/// No order: the end of a level's queue.
const NONE: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookOrder {
    pub side: Side,
    pub price: i64,
    pub qty: i64,
    /// The level's queue (oldest first) is a list through the orders themselves.
    prev: u64,
    next: u64,
}

#[derive(Clone, Copy, Debug)]
struct Level {
    total: i64,
    head: u64,
    tail: u64,
}

/// What one change did to its level: the side, price and new level total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelChange {
    pub side: Side,
    pub price: i64,
    pub total: i64,
}

#[derive(Clone, Debug, Default)]
pub struct L3Book {
    orders: FxHashMap<u64, BookOrder>,
    bids: BTreeMap<i64, Level>,
    asks: BTreeMap<i64, Level>,
}

impl L3Book {
    pub fn new() -> L3Book {
        L3Book::default()
    }

    fn side_mut(&mut self, side: Side) -> &mut BTreeMap<i64, Level> {
        match side {
            Side::Buy => &mut self.bids,
            Side::Sell => &mut self.asks,
        }
    }

    fn side(&self, side: Side) -> &BTreeMap<i64, Level> {
        match side {
            Side::Buy => &self.bids,
            Side::Sell => &self.asks,
        }
    }

    pub fn order(&self, order: u64) -> Option<&BookOrder> {
        self.orders.get(&order)
    }

    pub fn order_count(&self) -> usize {
        self.orders.len()
    }

    /// Puts an order at the back of its level.
    pub fn add(
        &mut self,
        order: u64,
        side: Side,
        price: i64,
        qty: i64,
    ) -> Result<LevelChange, BookError> {
        if qty <= 0 {
            return Err(BookError::BadQty(order));
        }
        if self.orders.contains_key(&order) {
            return Err(BookError::DuplicateOrder(order));
        }
        let level = self.side_mut(side).entry(price).or_insert(Level {
            total: 0,
            head: NONE,
            tail: NONE,
        });
        let prev = level.tail;
        level.total += qty;
        level.tail = order;
        if level.head == NONE {
            level.head = order;
        }
        let total = level.total;
        if prev != NONE {
            self.orders
                .get_mut(&prev)
                .expect("a level's tail is an order")
                .next = order;
        }
        self.orders.insert(
            order,
            BookOrder {
                side,
                price,
                qty,
                prev,
                next: NONE,
            },
        );
        Ok(LevelChange { side, price, total })
    }

    /// Takes `qty` off an order (0 < qty <= its quantity); an order at zero leaves.
    /// Returns the level change and the order's quantity left.
    pub fn take(&mut self, order: u64, qty: i64) -> Result<(LevelChange, i64), BookError> {
        let entry = self
            .orders
            .get_mut(&order)
            .ok_or(BookError::UnknownOrder(order))?;
        if qty <= 0 || qty > entry.qty {
            return Err(BookError::BadQty(order));
        }
        entry.qty -= qty;
        let o = *entry;
        if o.qty == 0 {
            self.orders.remove(&order);
            if o.prev != NONE {
                self.orders.get_mut(&o.prev).expect("linked").next = o.next;
            }
            if o.next != NONE {
                self.orders.get_mut(&o.next).expect("linked").prev = o.prev;
            }
        }
        let levels = self.side_mut(o.side);
        let level = levels.get_mut(&o.price).expect("an order's level exists");
        level.total -= qty;
        if o.qty == 0 {
            if level.head == order {
                level.head = o.next;
            }
            if level.tail == order {
                level.tail = o.prev;
            }
        }
        let total = level.total;
        if level.head == NONE {
            levels.remove(&o.price);
        }
        Ok((
            LevelChange {
                side: o.side,
                price: o.price,
                total,
            },
            o.qty,
        ))
    }

    /// Removes an order whatever its quantity.
    pub fn delete(&mut self, order: u64) -> Result<LevelChange, BookError> {
        let qty = self
            .orders
            .get(&order)
            .ok_or(BookError::UnknownOrder(order))?
            .qty;
        Ok(self.take(order, qty)?.0)
    }

    /// The total at one price (0 when no level).
    pub fn level_qty(&self, side: Side, price: i64) -> i64 {
        self.side(side).get(&price).map_or(0, |l| l.total)
    }

    /// The best level of a side: (price, total).
    pub fn best(&self, side: Side) -> Option<(i64, i64)> {
        let level = match side {
            Side::Buy => self.bids.iter().next_back(),
            Side::Sell => self.asks.iter().next(),
        };
        level.map(|(&p, l)| (p, l.total))
    }

    /// Up to `depth` levels of a side, best first.
    pub fn depth(&self, side: Side, depth: usize) -> Vec<(i64, i64)> {
        let levels = self.side(side);
        let pairs = |(&p, l): (&i64, &Level)| (p, l.total);
        match side {
            Side::Buy => levels.iter().rev().take(depth).map(pairs).collect(),
            Side::Sell => levels.iter().take(depth).map(pairs).collect(),
        }
    }

    /// Orders of a side in priority order: best price, then oldest.
    pub fn orders_in_priority(&self, side: Side) -> Vec<L3Order> {
        let levels = self.side(side);
        let iter: Box<dyn Iterator<Item = (&i64, &Level)>> = match side {
            Side::Buy => Box::new(levels.iter().rev()),
            Side::Sell => Box::new(levels.iter()),
        };
        let mut out = Vec::new();
        for (&price, level) in iter {
            let mut order = level.head;
            while order != NONE {
                let o = &self.orders[&order];
                out.push(L3Order {
                    order,
                    price,
                    qty: o.qty,
                });
                order = o.next;
            }
        }
        out
    }

    pub fn l2_snapshot(&self, seq: u64, depth: usize) -> L2Snapshot {
        L2Snapshot {
            seq,
            bids: self.depth(Side::Buy, depth),
            asks: self.depth(Side::Sell, depth),
        }
    }

    pub fn l3_snapshot(&self, seq: u64) -> L3Snapshot {
        L3Snapshot {
            seq,
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
