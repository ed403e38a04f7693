//! What became of each order: its terms, fills and end, for `GET /api/v1/orders/{id}`, the
//! place answer and the answer to a resent client order id (docs/api.md, "Client order ids").
//!
//! Fed from two sides: the place call records the terms it sent, and the user messages the
//! gateway hands over (fills, cancellations, amends; every gateway's orders) record what
//! happened. Whether an order is live always comes from the engine (a user report), so a
//! record that misses something never shows a dead order as live or the reverse.
//!
//! Kept in memory, the last [`ORDERS_KEPT`] orders per user since the server started.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use rialto_core::{CancelReason, OpenOrder, UserId};
use serde_json::{Value, json};

use crate::event::Event;

/// Orders remembered per user; the oldest go first.
pub const ORDERS_KEPT: usize = 10_000;
/// Fills remembered per order (its `filled` counts them all).
pub const FILLS_KEPT: usize = 100;
/// The longest client order id, as the big venues allow.
pub const MAX_CLIENT_ORDER_ID: usize = 36;

/// Whether `text` is a client order id: 1 to 36 of ASCII letters, digits and `.` `_` `-` `:`
/// `/` (Binance's set).
pub fn valid_client_order_id(text: &str) -> bool {
    (1..=MAX_CLIENT_ORDER_ID).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:/".contains(&b))
}

/// The engine's order id for a user's client order id: 53 bits of SHA-256(user, id), never 0,
/// so that JavaScript reads it exactly. The same id always gives the same order id, whichever
/// of REST and WebSocket it came through and across restarts, so the venue's order-id window
/// (docs/rules.md) refuses a resend of an order that ended, and the engine refuses one of a
/// live order: it never trades twice. (FIX maps a ClOrdID the same way, per session: see
/// `fix::orders::OrderDesk::engine_id_for`.) Two client ids that met on one order id (about
/// one chance in 20,000 among a million of a user's orders in one window) could only make the
/// second refused `duplicate_order_id`, never touch the first.
pub fn order_id_for(user: UserId, client_order_id: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(b"rialto client order id\n");
    hasher.update(user.to_le_bytes());
    hasher.update(client_order_id.as_bytes());
    let digest = hasher.finalize();
    let bytes = digest.first_chunk::<8>().expect("32 bytes");
    ((u64::from_le_bytes(*bytes) >> 11) as i64).max(1)
}

/// The terms an order was placed with (what the place call sent, in engine units).
#[derive(Clone, Debug, Default)]
pub struct Terms {
    pub client_order_id: Option<String>,
    pub symbol: String,
    pub side: String,
    pub order_type: String,
    pub tif: String,
    pub price: Option<i64>,
    pub qty: i64,
}

#[derive(Clone, Debug, Default)]
struct Record {
    terms: Option<Terms>,
    /// From the first event, for orders placed elsewhere.
    symbol: Option<String>,
    side: Option<String>,
    placed_ns: Option<i64>,
    /// The seq of the command that placed it, when the place call recorded its terms.
    placed_seq: Option<u64>,
    updated_ns: i64,
    filled: i64,
    fills: Vec<Value>,
    /// The last cancellation: its reason, and whether the order was still live after it is
    /// the engine's to say.
    cancelled: Option<CancelReason>,
}

#[derive(Default)]
struct UserOrders {
    records: HashMap<i64, Record>,
    order: VecDeque<i64>,
    /// The highest seq of the user's events the web side lost (web/history.rs, `gap`):
    /// records of orders placed before it may miss some.
    gap_seq: Option<u64>,
}

impl UserOrders {
    fn entry(&mut self, order: i64) -> &mut Record {
        if !self.records.contains_key(&order) {
            if self.order.len() == ORDERS_KEPT
                && let Some(oldest) = self.order.pop_front()
            {
                self.records.remove(&oldest);
            }
            self.order.push_back(order);
        }
        self.records.entry(order).or_default()
    }
}

#[derive(Default)]
pub struct OrderStatuses {
    users: Mutex<HashMap<UserId, UserOrders>>,
}

impl OrderStatuses {
    fn with<R>(&self, user: UserId, f: impl FnOnce(&mut UserOrders) -> R) -> R {
        let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
        f(users.entry(user).or_default())
    }

    /// The place call's terms, once the engine accepted the order at `seq`, `ts_ns`.
    pub fn placed(&self, user: UserId, order: i64, terms: Terms, seq: u64, ts_ns: i64) {
        self.with(user, |orders| {
            let record = orders.entry(order);
            record.placed_ns = Some(ts_ns);
            record.placed_seq = Some(seq);
            record.updated_ns = record.updated_ns.max(ts_ns);
            record.terms = Some(terms);
        });
    }

    /// A fill, cancellation or amend of one of the user's orders (from any gateway).
    pub fn observe(&self, user: UserId, msg: &Event, symbol_name: impl Fn() -> String) {
        let (order, ts_ns) = match *msg {
            Event::Trade { order, ts_ns, .. }
            | Event::Cancelled { order, ts_ns, .. }
            | Event::Amended { order, ts_ns, .. } => (order, ts_ns),
            _ => return,
        };
        self.with(user, |orders| {
            let record = orders.entry(order);
            record.updated_ns = record.updated_ns.max(ts_ns);
            if record.symbol.is_none() {
                record.symbol = Some(symbol_name());
            }
            match *msg {
                Event::Trade {
                    seq,
                    side,
                    price,
                    qty,
                    fee,
                    liquidity,
                    ..
                } => {
                    record.side.get_or_insert_with(|| side.as_str().to_string());
                    record.filled += qty;
                    if record.fills.len() < FILLS_KEPT {
                        record
                            .fills
                            .push(json!({"price": price, "qty": qty, "fee": fee,
                            "liquidity": liquidity.as_str(), "seq": seq, "ts_ns": ts_ns}));
                    }
                }
                Event::Cancelled { side, reason, .. } => {
                    record.side.get_or_insert_with(|| side.as_str().to_string());
                    record.cancelled = Some(reason);
                }
                _ => {}
            }
        });
    }

    /// Events of the user up to `seq` were lost: the records of orders placed before it are
    /// no longer whole.
    pub fn mark_gap(&self, user: UserId, seq: u64) {
        self.with(user, |orders| {
            orders.gap_seq = Some(orders.gap_seq.unwrap_or(0).max(seq));
        });
    }

    /// The order's status as `GET /api/v1/orders/{id}` shows it (engine integers), given the
    /// user's live order of that id when it has one; None for an order neither live nor known.
    pub fn status(&self, user: UserId, order: i64, live: Option<&OpenOrder>) -> Option<Value> {
        let (record, gap_seq) = self.with(user, |orders| {
            (orders.records.get(&order).cloned(), orders.gap_seq)
        });
        if record.is_none() && live.is_none() {
            return None;
        }
        let record = record.unwrap_or_default();
        let terms = record.terms.clone().unwrap_or_default();
        let symbol = live
            .map(|o| o.symbol.as_str().to_string())
            .or(record.symbol.clone())
            .unwrap_or(terms.symbol.clone());
        let side = live
            .map(|o| o.side.as_str().to_string())
            .or(record.side.clone())
            .unwrap_or(terms.side.clone());
        let (filled, remaining) = match live {
            Some(o) => (o.filled, o.remaining),
            None => (record.filled, 0),
        };
        let status = match (live, record.cancelled) {
            (Some(_), _) if filled > 0 => "partially_filled",
            (Some(_), _) => "new",
            (None, Some(CancelReason::Fok)) => "killed",
            (None, Some(CancelReason::Ioc | CancelReason::Market | CancelReason::Expired)) => {
                "expired"
            }
            (None, Some(_)) => "cancelled",
            (None, None) => "filled",
        };
        let original_qty = match (&record.terms, live) {
            (Some(t), _) => json!(t.qty),
            // Placed elsewhere or before a restart: what it holds now is all that is known.
            (None, Some(o)) => json!(o.filled + o.remaining),
            (None, None) => Value::Null,
        };
        let price = live.map(|o| o.price).or(terms.price);
        // Placed (here) after the last gap, the record has every event; otherwise it may not.
        let whole = gap_seq.is_none_or(|gap| record.placed_seq.is_some_and(|s| s > gap));
        let mut answer = json!({
            "order": order,
            "client_order_id": terms.client_order_id,
            "symbol": symbol,
            "side": side,
            "type": live.map_or(terms.order_type.clone(), |o| o.order_type.as_str().to_string()),
            "tif": live.map_or(terms.tif.clone(), |o| o.tif.as_str().to_string()),
            "price": price,
            "status": status,
            "original_qty": original_qty,
            "filled": filled,
            "remaining": remaining,
            "placed_ns": record.placed_ns,
            "updated_ns": (record.updated_ns > 0).then_some(record.updated_ns),
            "fills": record.fills,
        });
        if !whole {
            answer["incomplete"] = json!(true);
        }
        Some(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_order_ids_have_a_charset_and_map_onto_exact_javascript_integers() {
        assert!(valid_client_order_id("my-order_1.2:3/x"));
        assert!(valid_client_order_id(&"a".repeat(36)));
        assert!(!valid_client_order_id(&"a".repeat(37)));
        assert!(!valid_client_order_id(""));
        assert!(!valid_client_order_id("with space"));
        assert!(!valid_client_order_id("é"));
        let id = order_id_for(1, "retry-me");
        assert_eq!(id, order_id_for(1, "retry-me"), "the same id every time");
        assert_ne!(
            id,
            order_id_for(2, "retry-me"),
            "another user's is another order"
        );
        assert_ne!(id, order_id_for(1, "retry-me2"));
        assert!((1..1 << 53).contains(&id));
    }
}
