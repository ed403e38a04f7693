//! What one command adds to the history, derived from the command, its result and its events
//! exactly as the engine (or a replica of it) reported them. Pure: the live tap and the
//! rebuild from the journal call the same function, so both write the same rows.

use rialto_core::{Command, OwnedEvent, Reason, Side, UserId};

/// Ids of trades and history events: `seq * ID_PER_SEQ + index` (docs/api.md, "Durable
/// history"). A command's trades and events beyond `ID_PER_SEQ - 1` are not recorded.
pub const ID_PER_SEQ: i64 = 1_000_000;

/// The id of the `index`th trade (or event) of the command at `seq`, `None` past the limit.
pub fn id_of(seq: u64, index: usize) -> Option<i64> {
    let index = i64::try_from(index).ok().filter(|&i| i < ID_PER_SEQ)?;
    i64::try_from(seq)
        .ok()?
        .checked_mul(ID_PER_SEQ)?
        .checked_add(index)
}

/// One trade, with both sides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TradeRow {
    /// `seq * ID_PER_SEQ + the trade's index among the command's trades`.
    pub id: i64,
    /// `seq * ID_PER_SEQ + the event's index among the command's events`: the id of the two
    /// fill events.
    pub event_id: i64,
    pub seq: u64,
    pub ts_ns: i64,
    pub symbol: u32,
    pub price: i64,
    pub qty: i64,
    pub taker_side: Side,
    pub maker_user: UserId,
    pub maker_order: i64,
    pub maker_fee: i64,
    pub taker_user: UserId,
    pub taker_order: i64,
    pub taker_fee: i64,
}

/// What an order event says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// An order command the engine applied; `kind` is the command's word.
    Accepted {
        kind: &'static str,
    },
    Rejected {
        kind: &'static str,
        reason: &'static str,
    },
    Cancelled {
        reason: &'static str,
    },
    Amended {
        priority: &'static str,
    },
    Triggered,
}

/// One of a user's order events (fills are [`TradeRow`]s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow {
    pub user: UserId,
    /// `seq * ID_PER_SEQ + the event's index` (the command's result comes after its events).
    pub id: i64,
    pub seq: u64,
    pub ts_ns: i64,
    pub kind: EventKind,
    pub order: i64,
    pub symbol: Option<u32>,
    pub side: Option<Side>,
    pub price: i64,
    pub qty: i64,
    pub stop_price: i64,
    /// A placed order's type and time in force (its accepted `place` event only).
    pub order_type: Option<&'static str>,
    pub tif: Option<&'static str>,
}

/// The rows of a run of consecutive commands, `first_seq..=last_seq` (every command in it,
/// whether it added rows or not).
#[derive(Clone, Debug, Default)]
pub struct Rows {
    pub first_seq: u64,
    pub last_seq: u64,
    pub trades: Vec<TradeRow>,
    pub events: Vec<EventRow>,
    /// (second of venue time, the first seq at or after it), for time-range queries.
    pub seconds: Vec<(i64, u64)>,
    /// Trades or events past [`ID_PER_SEQ`] in one command, left out.
    pub left_out: u64,
}

impl Rows {
    pub fn is_empty(&self) -> bool {
        self.first_seq == 0
    }

    pub fn row_count(&self) -> usize {
        self.trades.len() + self.events.len()
    }

    /// Rows its buffers have room for without growing.
    pub fn capacity(&self) -> usize {
        self.trades.capacity() + self.events.capacity()
    }

    /// Empties it, keeping its buffers for the next run.
    pub fn clear(&mut self) {
        self.first_seq = 0;
        self.last_seq = 0;
        self.trades.clear();
        self.events.clear();
        self.seconds.clear();
        self.left_out = 0;
    }

    /// Makes room for `events` event rows and `trades` trades without growing.
    pub fn reserve(&mut self, events: usize, trades: usize) {
        self.events
            .reserve(events.saturating_sub(self.events.len()));
        self.trades
            .reserve(trades.saturating_sub(self.trades.len()));
    }

    /// Moves `next`'s rows to the end of this run if this one is empty or `next` starts right
    /// after it, leaving `next` empty with its buffers kept; else changes neither and returns
    /// false.
    pub fn take_from(&mut self, next: &mut Rows) -> bool {
        if next.is_empty() || !(self.is_empty() || next.first_seq == self.last_seq + 1) {
            return false;
        }
        if self.is_empty() {
            self.first_seq = next.first_seq;
        }
        self.last_seq = next.last_seq;
        self.trades.append(&mut next.trades);
        self.events.append(&mut next.events);
        // A second both runs began in is counted once, from this run's first seq in it.
        let same_second = matches!(
            (self.seconds.last(), next.seconds.first()),
            (Some(&(last, _)), Some(&(first, _))) if first <= last
        );
        self.seconds
            .extend(next.seconds.drain(..).skip(usize::from(same_second)));
        self.left_out += next.left_out;
        next.clear();
        true
    }

    /// Adds the command at `seq` (the one after `last_seq`, or the first).
    pub fn add(
        &mut self,
        seq: u64,
        ts_ns: i64,
        cmd: &Command,
        result: Result<(), Reason>,
        events: &[OwnedEvent],
    ) {
        if self.first_seq == 0 {
            self.first_seq = seq;
        }
        debug_assert!(self.last_seq == 0 || seq > self.last_seq, "seqs only rise");
        self.last_seq = seq;
        let second = ts_ns.div_euclid(1_000_000_000);
        if self.seconds.last().is_none_or(|&(s, _)| s < second) {
            self.seconds.push((second, seq));
        }
        let mut trades = 0usize;
        for (index, event) in events.iter().enumerate() {
            let Some(event_id) = id_of(seq, index) else {
                self.left_out += 1;
                continue;
            };
            let row = |user, order, symbol, kind, side, price, qty, stop_price| EventRow {
                user,
                id: event_id,
                seq,
                ts_ns,
                kind,
                order,
                symbol: Some(symbol),
                side: Some(side),
                price,
                qty,
                stop_price,
                order_type: None,
                tif: None,
            };
            match *event {
                OwnedEvent::Trade(t) => {
                    let Some(id) = id_of(seq, trades) else {
                        self.left_out += 1;
                        continue;
                    };
                    trades += 1;
                    self.trades.push(TradeRow {
                        id,
                        event_id,
                        seq,
                        ts_ns,
                        symbol: t.symbol.0,
                        price: t.price,
                        qty: t.qty,
                        taker_side: t.taker_side,
                        maker_user: t.maker_user,
                        maker_order: t.maker_order,
                        maker_fee: t.maker_fee,
                        taker_user: t.taker_user,
                        taker_order: t.taker_order,
                        taker_fee: t.taker_fee,
                    });
                }
                OwnedEvent::Cancelled(c) => self.events.push(row(
                    c.user,
                    c.order,
                    c.symbol.0,
                    EventKind::Cancelled {
                        reason: c.reason.as_str(),
                    },
                    c.side,
                    0,
                    c.qty,
                    0,
                )),
                OwnedEvent::Amended(a) => self.events.push(row(
                    a.user,
                    a.order,
                    a.symbol.0,
                    EventKind::Amended {
                        priority: a.priority.as_str(),
                    },
                    a.side,
                    a.price,
                    a.qty,
                    a.stop_price,
                )),
                OwnedEvent::Triggered(t) => self.events.push(row(
                    t.user,
                    t.order,
                    t.symbol.0,
                    EventKind::Triggered,
                    t.side,
                    0,
                    0,
                    t.stop_price,
                )),
                _ => {}
            }
        }
        if let Some((user, order, kind)) = order_command(cmd) {
            let Some(id) = id_of(seq, events.len()) else {
                self.left_out += 1;
                return;
            };
            let kind = match result {
                Ok(()) => EventKind::Accepted { kind },
                Err(reason) => EventKind::Rejected {
                    kind,
                    reason: reason.as_str(),
                },
            };
            let mut row = EventRow {
                user,
                id,
                seq,
                ts_ns,
                kind,
                order,
                symbol: None,
                side: None,
                price: 0,
                qty: 0,
                stop_price: 0,
                order_type: None,
                tif: None,
            };
            if let (Ok(()), Command::Place(p)) = (result, cmd) {
                // The terms as placed: what the order's status shows once it has ended, after
                // a restart too (docs/api.md, "Order status").
                row.symbol = Some(p.symbol.0);
                row.side = p.side;
                row.price = p.price.unwrap_or(0);
                row.qty = p.qty;
                row.stop_price = p.stop_price().unwrap_or(0);
                row.order_type = p.order_type.map(|t| t.as_str());
                row.tif = p.tif.map(|t| t.as_str());
            }
            self.events.push(row);
        }
    }
}

/// A trader's order command: its user, order id (0 for a mass cancel) and word (the order
/// history's `kind`).
fn order_command(cmd: &Command) -> Option<(UserId, i64, &'static str)> {
    Some(match *cmd {
        Command::Place(ref p) => (p.user, p.order, "place"),
        Command::Cancel { user, order } => (user, order, "cancel"),
        Command::Move { user, order, .. } => (user, order, "move"),
        Command::Reduce { user, order, .. } => (user, order, "reduce"),
        Command::Amend(ref a) => (a.user, a.order, "amend"),
        Command::MassCancel { user, .. } => (user, 0, "mass_cancel"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rialto_core::{Engine, EngineConfig, PlaceOrder, SymbolId};

    #[test]
    fn ids_are_the_seq_and_the_index_and_stop_at_the_limit() {
        assert_eq!(id_of(7, 0), Some(7_000_000));
        assert_eq!(id_of(7, 3), Some(7_000_003));
        assert_eq!(id_of(7, 999_999), Some(7_999_999));
        assert_eq!(id_of(7, 1_000_000), None);
        assert_eq!(id_of(u64::MAX, 0), None);
    }

    #[test]
    fn a_crossing_order_gives_a_trade_and_both_commands_their_events() {
        let mut engine = Engine::new(EngineConfig::default());
        let mut rows = Rows::default();
        let mut seq = 0;
        let mut apply = |engine: &mut Engine, rows: &mut Rows, cmd: Command| {
            seq += 1;
            let mut events = Vec::new();
            let result = engine.apply(seq, seq as i64 * 1_000_000_000, &cmd, &mut events);
            rows.add(seq, seq as i64 * 1_000_000_000, &cmd, result, &events);
            result
        };
        for cmd in crate::demo::demo_commands() {
            apply(&mut engine, &mut rows, cmd).unwrap();
        }
        let set_up = rows.last_seq;
        assert!(rows.trades.is_empty() && rows.events.is_empty());
        let sym = SymbolId(0);
        let price = 500_000;
        apply(
            &mut engine,
            &mut rows,
            Command::Place(PlaceOrder::limit(1, 11, sym, Side::Sell, price, 2)),
        )
        .unwrap();
        apply(
            &mut engine,
            &mut rows,
            Command::Place(PlaceOrder::limit(2, 21, sym, Side::Buy, price, 1)),
        )
        .unwrap();
        assert_eq!(rows.trades.len(), 1);
        let t = &rows.trades[0];
        let taker_seq = set_up as i64 + 2;
        assert_eq!(t.id, taker_seq * ID_PER_SEQ);
        assert_eq!(
            (t.maker_user, t.maker_order, t.taker_user, t.taker_order),
            (1, 11, 2, 21)
        );
        assert_eq!((t.price, t.qty, t.taker_side), (price, 1, Side::Buy));
        // The two places were accepted; the second one's result comes after its trade.
        let accepted: Vec<_> = rows.events.iter().map(|e| (e.user, e.id)).collect();
        assert_eq!(
            accepted,
            vec![
                (1, (taker_seq - 1) * ID_PER_SEQ),
                (2, taker_seq * ID_PER_SEQ + 1)
            ]
        );
        assert_eq!(rows.seconds.first().map(|s| s.1), Some(1));
    }

    #[test]
    fn a_run_takes_the_next_one_only_when_it_follows_and_counts_a_shared_second_once() {
        let add_user = |user| Command::AddUser { user };
        let second = 1_000_000_000;
        let mut first = Rows::default();
        first.add(1, 5 * second, &add_user(1), Ok(()), &[]);
        first.add(2, 6 * second, &add_user(2), Ok(()), &[]);
        let mut gap = Rows::default();
        gap.add(4, 6 * second, &add_user(4), Ok(()), &[]);
        assert!(!first.take_from(&mut gap), "seq 3 is missing");
        assert_eq!((first.last_seq, gap.first_seq), (2, 4));
        let mut next = Rows::default();
        next.add(3, 6 * second, &add_user(3), Ok(()), &[]);
        next.add(4, 7 * second, &add_user(4), Ok(()), &[]);
        assert!(first.take_from(&mut next));
        assert_eq!((first.first_seq, first.last_seq), (1, 4));
        assert_eq!(first.seconds, [(5, 1), (6, 2), (7, 4)]);
        assert!(next.is_empty() && next.seconds.is_empty());
    }
}
