//! The client side: a book rebuilt from a snapshot plus the updates after its sequence
//! number. An update that does not follow the last one is a gap: the mirror refuses it and
//! stays as it was, and the client recovers (replay the missing updates, or load a fresh
//! snapshot).

use std::collections::BTreeMap;

use rialto_core::{Phase, Side};

use crate::book::{BookError, L3Book};
use crate::update::{L2Snapshot, L3Snapshot, Update};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorError {
    /// No snapshot loaded yet.
    NoSnapshot,
    /// Updates between `expected` and `got` are missing.
    Gap { expected: u64, got: u64 },
    /// An update that does not fit the book (the feed and the mirror disagree).
    Book(BookError),
}

impl std::fmt::Display for MirrorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MirrorError::NoSnapshot => write!(f, "no snapshot loaded"),
            MirrorError::Gap { expected, got } => {
                write!(f, "gap: expected update {expected}, got {got}")
            }
            MirrorError::Book(e) => write!(f, "update does not fit the book: {e}"),
        }
    }
}

impl std::error::Error for MirrorError {}

/// Checks an update's sequence number against the last applied: `Ok(false)` when it is old
/// (already in the snapshot), `Ok(true)` when it is next.
fn next_in_line(last: Option<u64>, seq: u64) -> Result<bool, MirrorError> {
    let last = last.ok_or(MirrorError::NoSnapshot)?;
    if seq <= last {
        Ok(false)
    } else if seq == last + 1 {
        Ok(true)
    } else {
        Err(MirrorError::Gap {
            expected: last + 1,
            got: seq,
        })
    }
}

/// Aggregated depth of one symbol, and its phase (a phase change takes an L2 number).
#[derive(Clone, Debug, Default)]
pub struct L2Mirror {
    seq: Option<u64>,
    phase: Option<Phase>,
    bids: BTreeMap<i64, i64>,
    asks: BTreeMap<i64, i64>,
}

impl L2Mirror {
    pub fn new() -> L2Mirror {
        L2Mirror::default()
    }

    /// Replaces the book with a full-depth snapshot.
    pub fn load(&mut self, snapshot: &L2Snapshot) {
        self.seq = Some(snapshot.seq);
        self.phase = Some(snapshot.phase);
        self.bids = snapshot.bids.iter().copied().collect();
        self.asks = snapshot.asks.iter().copied().collect();
    }

    /// The last L2 update applied (or the snapshot's).
    pub fn seq(&self) -> Option<u64> {
        self.seq
    }

    /// The symbol's phase (none before a snapshot).
    pub fn phase(&self) -> Option<Phase> {
        self.phase
    }

    /// Applies an L2 update (a level or a phase change); other updates are ignored
    /// (`Ok(false)`).
    pub fn apply(&mut self, update: &Update) -> Result<bool, MirrorError> {
        if let Update::Phase { seq, phase, .. } = *update {
            if !next_in_line(self.seq, seq)? {
                return Ok(false);
            }
            self.phase = Some(phase);
            self.seq = Some(seq);
            return Ok(true);
        }
        let Update::Level {
            seq,
            side,
            price,
            qty,
            ..
        } = *update
        else {
            return Ok(false);
        };
        if !next_in_line(self.seq, seq)? {
            return Ok(false);
        }
        let levels = match side {
            Side::Buy => &mut self.bids,
            Side::Sell => &mut self.asks,
        };
        if qty == 0 {
            levels.remove(&price);
        } else {
            levels.insert(price, qty);
        }
        self.seq = Some(seq);
        Ok(true)
    }

    /// Levels best first.
    pub fn bids(&self) -> Vec<(i64, i64)> {
        self.bids.iter().rev().map(|(&p, &q)| (p, q)).collect()
    }

    pub fn asks(&self) -> Vec<(i64, i64)> {
        self.asks.iter().map(|(&p, &q)| (p, q)).collect()
    }
}

/// Every order of one symbol.
#[derive(Clone, Debug, Default)]
pub struct L3Mirror {
    seq: Option<u64>,
    book: L3Book,
}

impl L3Mirror {
    pub fn new() -> L3Mirror {
        L3Mirror::default()
    }

    pub fn load(&mut self, snapshot: &L3Snapshot) -> Result<(), MirrorError> {
        self.book = L3Book::from_snapshot(snapshot).map_err(MirrorError::Book)?;
        self.seq = Some(snapshot.seq);
        Ok(())
    }

    pub fn seq(&self) -> Option<u64> {
        self.seq
    }

    pub fn book(&self) -> &L3Book {
        &self.book
    }

    /// Applies an L3 update; other updates are ignored (`Ok(false)`). A refused update
    /// changes nothing.
    pub fn apply(&mut self, update: &Update) -> Result<bool, MirrorError> {
        let Some(seq) = update.l3_seq() else {
            return Ok(false);
        };
        if !next_in_line(self.seq, seq)? {
            return Ok(false);
        }
        let book = &mut self.book;
        let applied = match *update {
            Update::Added {
                order,
                side,
                price,
                qty,
                ..
            } => book.add(order, side, price, qty).map(|_| ()),
            Update::Reduced { order, qty, .. } => {
                let have = book.order(order).ok_or(BookError::UnknownOrder(order))?.qty;
                book.take(order, have - qty).map(|_| ())
            }
            Update::Executed { order, qty, .. } => book.take(order, qty).map(|_| ()),
            Update::Deleted { order, .. } => book.delete(order).map(|_| ()),
            _ => unreachable!("only L3 updates have an L3 sequence"),
        };
        applied.map_err(MirrorError::Book)?;
        self.seq = Some(seq);
        Ok(true)
    }
}

impl From<BookError> for MirrorError {
    fn from(e: BookError) -> Self {
        MirrorError::Book(e)
    }
}
