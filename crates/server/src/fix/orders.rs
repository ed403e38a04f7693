//! The order desk of one FIX session: turns FIX order messages into engine commands, and the
//! engine's replies and events into the ExecutionReports FIX expects (CumQty, LeavesQty, AvgPx,
//! OrdStatus), keyed by ClOrdID.
//!
//! Rules (docs/fix.md):
//! - A ClOrdID is unique among the session's live orders and those with a request in flight.
//! - OrderID (37) is the venue's id for the order and survives replaces.
//! - The engine's id of an order is derived from the session and the order's first ClOrdID
//!   ([`OrderDesk::engine_id_for`]), so the venue's order-id window (docs/rules.md) refuses a
//!   NewOrderSingle resent with a ClOrdID whose order ended within the window (case 19a).
//! - Replace: one `amend` (docs/rules.md, "Amend"), answered by Replaced or by an
//!   OrderCancelReject.

// Reports are built and consumed in place, one at a time; boxing them to please these lints
// would allocate for every report.
#![allow(clippy::large_enum_variant, clippy::result_large_err)]

use std::collections::{HashMap, VecDeque};

use rialto_core::{
    AmendOrder, CancelReason, Command, OrderExtras, OrderId, OrderType, PlaceOrder, Reason, Side,
    Stp, SymbolId, Tif, UserId,
};
use rialto_fix::Decimal;
use rialto_fix::app::{
    self, NewOrderSingle, OrderCancelReplaceRequest, OrderCancelRequest, ShownQtyTag,
};
use rialto_wire::RequestKind;

use super::instruments::{Instrument, Instruments};

/// ClOrdIDs longer than this are refused (kept inline: no allocation per order).
pub const MAX_CL_ORD_ID: usize = 64;

/// A ClOrdID (or other short client text) held inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClOrdId {
    len: u8,
    bytes: [u8; MAX_CL_ORD_ID],
}

impl ClOrdId {
    /// No ClOrdID: a report of an order the session did not send (a liquidation's close)
    /// leaves the field out.
    pub const NONE: ClOrdId = ClOrdId {
        len: 0,
        bytes: [0; MAX_CL_ORD_ID],
    };

    pub fn new(text: &[u8]) -> Option<ClOrdId> {
        if text.is_empty() || text.len() > MAX_CL_ORD_ID {
            return None;
        }
        let mut bytes = [0; MAX_CL_ORD_ID];
        bytes[..text.len()].copy_from_slice(text);
        Some(ClOrdId {
            len: text.len() as u8,
            bytes,
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl std::fmt::Debug for ClOrdId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// One order of this session, as FIX reports it.
#[derive(Clone, Debug)]
pub struct FixOrder {
    /// OrderID (37).
    pub order_id: u64,
    /// The engine's id of the order (SecondaryOrderID), derived from its first ClOrdID.
    pub engine_id: OrderId,
    pub cl_ord_id: ClOrdId,
    pub symbol: SymbolId,
    pub side: Side,
    pub ord_type: u8,
    pub time_in_force: Option<u8>,
    pub price_ticks: Option<i64>,
    /// StopPx of a stop or stop-limit order, in ticks.
    pub stop_ticks: Option<i64>,
    /// An iceberg's shown quantity in lots, with the tag the client gave it in.
    pub shown: Option<(ShownQtyTag, i64)>,
    /// ExpireTime of a GTD order, ns since the Unix epoch.
    pub expire_ts: Option<i64>,
    /// OrderQty: the total, fills included.
    pub order_qty_lots: i64,
    pub cum_lots: i64,
    /// Sum of price × qty over the fills, for AvgPx.
    pub notional: i128,
    pub leaves_lots: i64,
    pub status: u8,
    /// ExecutionReport New went out (at the engine's accept, or before the first fill).
    pub acknowledged: bool,
}

impl FixOrder {
    fn is_done(&self) -> bool {
        self.leaves_lots == 0 && self.acknowledged
    }

    fn status_after_fill(&self) -> u8 {
        if self.leaves_lots == 0 {
            app::ord_status::FILLED
        } else if self.cum_lots > 0 {
            app::ord_status::PARTIALLY_FILLED
        } else {
            app::ord_status::NEW
        }
    }
}

/// A request sent to the engine and not answered yet, in sending order.
#[derive(Clone, Copy, Debug)]
enum Pending {
    New,
    Cancel {
        cl_ord_id: ClOrdId,
    },
    /// An amend: the replace is done when the engine accepts it.
    Replace {
        cl_ord_id: ClOrdId,
        price_ticks: Option<i64>,
        order_qty_lots: i64,
        /// A new StopPx, if the replace changes it.
        stop_ticks: Option<i64>,
    },
    MassCancel {
        cl_ord_id: ClOrdId,
        request_type: u8,
    },
}

/// What the desk asks its session to send.
#[derive(Clone, Debug)]
pub enum Report {
    Execution(Execution),
    CancelReject {
        order_id: Option<u64>,
        cl_ord_id: ClOrdId,
        orig_cl_ord_id: ClOrdId,
        ord_status: u8,
        response_to: u8,
        reason: u32,
        text: &'static str,
    },
    MassCancel {
        cl_ord_id: ClOrdId,
        request_type: u8,
        accepted: bool,
        text: &'static str,
    },
}

/// One ExecutionReport: the order's state after the event, and the event.
#[derive(Clone, Debug)]
pub struct Execution {
    pub order: FixOrder,
    pub exec_type: u8,
    /// The ClOrdID this report answers (a replace's or cancel's new one), and the one it
    /// replaced.
    pub cl_ord_id: ClOrdId,
    pub orig_cl_ord_id: Option<ClOrdId>,
    /// Ticks and lots of a fill.
    pub last: Option<(i64, i64)>,
    pub ord_rej_reason: Option<u32>,
    pub text: Option<&'static str>,
    /// The Symbol as the client sent it, when it names no listed symbol.
    pub raw_symbol: Option<ClOrdId>,
    /// OrderQty and Price as the client sent them (echoed on a rejected new order, whose
    /// figures may not convert).
    pub raw_qty: Option<Decimal>,
    pub raw_price: Option<Decimal>,
    pub raw_side: Option<u8>,
    /// StopPx and the iceberg's shown quantity as the client sent them (a rejected new order).
    pub raw_stop_px: Option<Decimal>,
    pub raw_shown: Option<(ShownQtyTag, Decimal)>,
    /// The engine sequence number behind the report (0 for a gateway-side rejection).
    pub seq: u64,
    pub ts_ns: i64,
}

/// A command for the engine with the reply the desk expects.
#[derive(Clone, Debug)]
pub struct ToEngine {
    pub order: OrderId,
    pub kind: RequestKind,
    pub command: Command,
}

/// A new order's checked terms (instrument, lots, ticks, type, time in force, extras), or why
/// not.
type Checked<'i> = Result<
    (
        &'i Instrument,
        i64,
        Option<i64>,
        OrderType,
        Tif,
        OrderExtras,
    ),
    (u32, &'static str),
>;

/// The order desk of one FIX session.
pub struct OrderDesk {
    user: UserId,
    orders: HashMap<u64, FixOrder>,
    /// Engine order id → OrderID.
    by_engine_id: HashMap<OrderId, u64>,
    /// Live ClOrdIDs (the current one of each live order, and those in flight) → OrderID.
    by_cl_ord_id: HashMap<ClOrdId, u64>,
    pending: HashMap<OrderId, VecDeque<Pending>>,
    /// Mass cancels in flight (their replies carry no order id).
    pending_mass: VecDeque<Pending>,
    next_order_id: u64,
    /// The start of this session's OrderID range: what sets its engine ids apart from other
    /// sessions' (of the same user).
    id_base: u64,
    /// The liquidation close being reported, with the seq of the command that made it.
    liquidation: Option<(u64, FixOrder)>,
}

/// The Text of every report of a liquidation's close.
const LIQUIDATION: &str = "liquidation";

/// SecondaryOrderID (198): the engine's id of the order, so that a restart finds it again.
pub const SECONDARY_ORDER_ID: u32 = 198;

/// FIX OrderRejReason values used here.
mod ord_rej {
    pub const UNKNOWN_SYMBOL: u32 = 1;
    pub const ORDER_EXCEEDS_LIMIT: u32 = 3;
    pub const UNKNOWN_ORDER: u32 = 5;
    pub const DUPLICATE_ORDER: u32 = 6;
    pub const UNSUPPORTED_ORDER_CHARACTERISTIC: u32 = 11;
    pub const INCORRECT_QUANTITY: u32 = 13;
    pub const OTHER: u32 = 99;
}

fn reason_text(reason: Reason) -> &'static str {
    reason.as_str()
}

fn ord_rej_reason(reason: Reason) -> u32 {
    match reason {
        Reason::UnknownSymbol => ord_rej::UNKNOWN_SYMBOL,
        Reason::InsufficientFunds | Reason::LimitExceeded => ord_rej::ORDER_EXCEEDS_LIMIT,
        Reason::UnknownOrder => ord_rej::UNKNOWN_ORDER,
        Reason::DuplicateOrderId => ord_rej::DUPLICATE_ORDER,
        Reason::InvalidQty => ord_rej::INCORRECT_QUANTITY,
        _ => ord_rej::OTHER,
    }
}

impl OrderDesk {
    /// `first_order_id` is where OrderIDs (and the engine ids of this desk's orders) start.
    pub fn new(user: UserId, first_order_id: u64) -> OrderDesk {
        OrderDesk {
            user,
            orders: HashMap::new(),
            by_engine_id: HashMap::new(),
            by_cl_ord_id: HashMap::new(),
            pending: HashMap::new(),
            pending_mass: VecDeque::new(),
            next_order_id: first_order_id,
            id_base: first_order_id,
            liquidation: None,
        }
    }

    /// The engine's id for an order whose first ClOrdID is `cl_ord_id`: 63 bits of
    /// SHA-256(session's OrderID base, ClOrdID), never 0. The same ClOrdID on the same session
    /// always gives the same id, so the engine's order-id window refuses an order resent
    /// after its first one ended (docs/rules.md): it never trades twice. Two ClOrdIDs that
    /// met on one id (about one chance in 10^7 after ten million orders in a window) could
    /// only make the second order refused `duplicate_order_id`, never touch the first.
    pub fn engine_id_for(&self, cl_ord_id: &ClOrdId) -> OrderId {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(self.id_base.to_le_bytes());
        hasher.update(cl_ord_id.as_bytes());
        let digest = hasher.finalize();
        let bytes = digest.first_chunk::<8>().expect("32 bytes");
        let id = (u64::from_le_bytes(*bytes) >> 1) as OrderId;
        id.max(1)
    }

    pub fn user(&self) -> UserId {
        self.user
    }

    pub fn live_orders(&self) -> impl Iterator<Item = &FixOrder> {
        self.orders.values()
    }

    pub fn order_by_cl_ord_id(&self, cl_ord_id: &[u8]) -> Option<&FixOrder> {
        let key = ClOrdId::new(cl_ord_id)?;
        self.orders.get(self.by_cl_ord_id.get(&key)?)
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_order_id;
        self.next_order_id += 1;
        id
    }

    fn reject_new(
        &self,
        cl_ord_id: ClOrdId,
        symbol: SymbolId,
        side: Side,
        qty_lots: i64,
        (reason, text): (u32, &'static str),
        ts_ns: i64,
    ) -> Report {
        Report::Execution(Execution {
            order: FixOrder {
                order_id: 0,
                engine_id: 0,
                cl_ord_id,
                symbol,
                side,
                ord_type: b'2',
                time_in_force: None,
                price_ticks: None,
                stop_ticks: None,
                shown: None,
                expire_ts: None,
                order_qty_lots: qty_lots,
                cum_lots: 0,
                notional: 0,
                leaves_lots: 0,
                status: app::ord_status::REJECTED,
                acknowledged: true,
            },
            exec_type: app::exec_type::REJECTED,
            cl_ord_id,
            orig_cl_ord_id: None,
            last: None,
            ord_rej_reason: Some(reason),
            text: Some(text),
            raw_symbol: None,
            raw_qty: None,
            raw_price: None,
            raw_side: None,
            raw_stop_px: None,
            raw_shown: None,
            seq: 0,
            ts_ns,
        })
    }

    /// A NewOrderSingle: a command for the engine, or a rejection to send at once.
    pub fn new_order(
        &mut self,
        msg: &NewOrderSingle<'_>,
        instruments: &Instruments,
        ts_ns: i64,
    ) -> Result<ToEngine, Report> {
        let Some(cl_ord_id) = ClOrdId::new(msg.cl_ord_id) else {
            return Err(self.reject_new(
                ClOrdId::new(b"?").expect("short"),
                SymbolId::NONE,
                Side::Buy,
                0,
                (ord_rej::OTHER, "ClOrdID longer than 64 characters"),
                ts_ns,
            ));
        };
        let side = match msg.side {
            b'1' => Side::Buy,
            b'2' => Side::Sell,
            _ => Side::Buy,
        };
        let reject = |reason, text| Err((reason, text));
        let checked: Checked<'_> = (|| {
            let Some(instrument) = instruments.by_name(msg.symbol) else {
                return reject(ord_rej::UNKNOWN_SYMBOL, "unknown symbol");
            };
            if !matches!(msg.side, b'1' | b'2') {
                return reject(
                    ord_rej::UNSUPPORTED_ORDER_CHARACTERISTIC,
                    "only Side 1 (buy) and 2 (sell) are supported",
                );
            }
            let order_type = match msg.ord_type {
                b'1' => OrderType::Market,
                b'2' => OrderType::Limit,
                b'3' => OrderType::Stop,
                b'4' => OrderType::StopLimit,
                _ => {
                    return reject(
                        ord_rej::UNSUPPORTED_ORDER_CHARACTERISTIC,
                        "only OrdType 1 (market), 2 (limit), 3 (stop) and 4 (stop limit) are supported",
                    );
                }
            };
            // A market or stop order without a TimeInForce is IOC, any other GTC; Day (0) and
            // GTD (6) are the venue's `day` and `gtd` (docs/rules.md, "GTD and DAY").
            let tif = match (msg.time_in_force, order_type) {
                (None, OrderType::Market | OrderType::Stop) => Tif::Ioc,
                // A market order never rests: its day is its arrival.
                (Some(b'0'), OrderType::Market) => Tif::Ioc,
                (None, _) | (Some(b'1'), _) => Tif::Gtc,
                (Some(b'0'), _) => Tif::Day,
                (Some(b'3'), _) => Tif::Ioc,
                (Some(b'4'), _) => Tif::Fok,
                (Some(b'6'), _) => Tif::Gtd,
                _ => {
                    return reject(
                        ord_rej::UNSUPPORTED_ORDER_CHARACTERISTIC,
                        "TimeInForce must be 0 (day), 1 (GTC), 3 (IOC), 4 (FOK) or 6 (GTD)",
                    );
                }
            };
            let mut extras = OrderExtras::NONE;
            match (order_type, msg.stop_px) {
                (OrderType::Stop | OrderType::StopLimit, None) => {
                    return reject(ord_rej::OTHER, "a stop order needs a StopPx");
                }
                (_, Some(p)) => match instrument.ticks(p) {
                    // On any other order the engine refuses it (invalid_order).
                    Ok(t) => extras = extras.with_stop_price(t),
                    Err(_) => return reject(ord_rej::OTHER, "StopPx is not on the tick grid"),
                },
                (_, None) => {}
            }
            match (tif, msg.expire_time) {
                (Tif::Gtd, None) => {
                    return reject(ord_rej::OTHER, "TimeInForce 6 (GTD) needs an ExpireTime");
                }
                (_, Some(ts)) => extras = extras.with_expire_ts(ts),
                (_, None) => {}
            }
            if let Some((_, shown)) = msg.display_qty {
                match instrument.lots(shown) {
                    Ok(l) => extras = extras.with_display_qty(l),
                    Err(_) => {
                        return reject(
                            ord_rej::INCORRECT_QUANTITY,
                            "DisplayQty is not a whole number of lots",
                        );
                    }
                }
            }
            let qty = match instrument.lots(msg.order_qty) {
                Ok(q) if q > 0 => q,
                Ok(_) => {
                    return reject(ord_rej::INCORRECT_QUANTITY, "OrderQty must be positive");
                }
                Err(_) => {
                    return reject(
                        ord_rej::INCORRECT_QUANTITY,
                        "OrderQty is not a whole number of lots",
                    );
                }
            };
            let price = match (order_type, msg.price) {
                // The gateway answers this with BusinessMessageReject 5 first (case 14m).
                (OrderType::Limit, None) => {
                    return reject(ord_rej::OTHER, "a limit order needs a Price");
                }
                (_, Some(p)) => match instrument.ticks(p) {
                    Ok(t) => Some(t),
                    Err(_) => return reject(ord_rej::OTHER, "Price is not on the tick grid"),
                },
                (_, None) => None,
            };
            Ok((instrument, qty, price, order_type, tif, extras))
        })();
        // A rejected order echoes what the client sent.
        let echo = |mut report: Report| {
            if let Report::Execution(exec) = &mut report {
                exec.raw_symbol = ClOrdId::new(msg.symbol);
                exec.raw_qty = Some(msg.order_qty);
                exec.raw_price = msg.price;
                exec.raw_side = Some(msg.side);
                exec.raw_stop_px = msg.stop_px;
                exec.raw_shown = msg.display_qty;
                exec.order.ord_type = msg.ord_type;
                exec.order.time_in_force = msg.time_in_force;
                exec.order.expire_ts = msg.expire_time;
            }
            report
        };
        let (instrument, qty, price, order_type, tif, extras) = match checked {
            Ok(v) => v,
            Err((reason, text)) => {
                let symbol = instruments
                    .by_name(msg.symbol)
                    .map_or(SymbolId::NONE, |i| i.id);
                let report = self.reject_new(cl_ord_id, symbol, side, 0, (reason, text), ts_ns);
                return Err(echo(report));
            }
        };
        if self.by_cl_ord_id.contains_key(&cl_ord_id) {
            return Err(echo(self.reject_new(
                cl_ord_id,
                instrument.id,
                side,
                qty,
                (
                    ord_rej::DUPLICATE_ORDER,
                    "duplicate ClOrdID: a live order has it",
                ),
                ts_ns,
            )));
        }
        let engine_id = self.engine_id_for(&cl_ord_id);
        if self.by_engine_id.contains_key(&engine_id) {
            // An order of this session that was first sent with this ClOrdID is still live
            // (under a replace's ClOrdID now): the engine would refuse it too.
            return Err(echo(self.reject_new(
                cl_ord_id,
                instrument.id,
                side,
                qty,
                (
                    ord_rej::DUPLICATE_ORDER,
                    "duplicate ClOrdID: a live order was first sent with it",
                ),
                ts_ns,
            )));
        }
        let order_id = self.take_id();
        let place = PlaceOrder {
            user: self.user,
            order: engine_id,
            symbol: instrument.id,
            side: Some(side),
            order_type: Some(order_type),
            tif: Some(tif),
            price,
            qty,
            post_only: msg.post_only(),
            stp: Some(Stp::CancelTaker),
            extras,
        };
        self.orders.insert(
            order_id,
            FixOrder {
                order_id,
                engine_id,
                cl_ord_id,
                symbol: instrument.id,
                side,
                ord_type: msg.ord_type,
                time_in_force: msg.time_in_force,
                price_ticks: price,
                stop_ticks: extras.stop_price(),
                shown: msg
                    .display_qty
                    .and_then(|(tag, _)| Some((tag, extras.display_qty()?))),
                expire_ts: extras.expire_ts(),
                order_qty_lots: qty,
                cum_lots: 0,
                notional: 0,
                leaves_lots: qty,
                status: app::ord_status::NEW,
                acknowledged: false,
            },
        );
        self.by_engine_id.insert(engine_id, order_id);
        self.by_cl_ord_id.insert(cl_ord_id, order_id);
        self.pending
            .entry(engine_id)
            .or_default()
            .push_back(Pending::New);
        Ok(ToEngine {
            order: engine_id,
            kind: RequestKind::Place,
            command: Command::Place(place),
        })
    }

    fn cancel_reject(
        &self,
        order: Option<&FixOrder>,
        cl_ord_id: &[u8],
        orig: &[u8],
        response_to: u8,
        reason: u32,
        text: &'static str,
    ) -> Report {
        let short = |t: &[u8]| ClOrdId::new(t).unwrap_or(ClOrdId::new(b"?").expect("short"));
        Report::CancelReject {
            order_id: order.map(|o| o.order_id),
            cl_ord_id: short(cl_ord_id),
            orig_cl_ord_id: short(orig),
            ord_status: order.map_or(app::ord_status::REJECTED, |o| o.status),
            response_to,
            reason,
            text,
        }
    }

    /// Finds the live order an OrigClOrdID names, and checks the new ClOrdID.
    fn amend_target(
        &self,
        cl_ord_id: &[u8],
        orig: &[u8],
        response_to: u8,
    ) -> Result<(u64, ClOrdId), Report> {
        let found = ClOrdId::new(orig)
            .and_then(|k| self.by_cl_ord_id.get(&k))
            .and_then(|id| self.orders.get(id).map(|order| (id, order)));
        let Some((order_id, order)) = found else {
            return Err(self.cancel_reject(
                None,
                cl_ord_id,
                orig,
                response_to,
                app::cxl_rej_reason::UNKNOWN_ORDER,
                "unknown order: no live order has this OrigClOrdID",
            ));
        };
        let Some(new_id) = ClOrdId::new(cl_ord_id) else {
            return Err(self.cancel_reject(
                Some(order),
                cl_ord_id,
                orig,
                response_to,
                app::cxl_rej_reason::OTHER,
                "ClOrdID longer than 64 characters",
            ));
        };
        if self.by_cl_ord_id.contains_key(&new_id) {
            return Err(self.cancel_reject(
                Some(order),
                cl_ord_id,
                orig,
                response_to,
                app::cxl_rej_reason::DUPLICATE_CL_ORD_ID,
                "duplicate ClOrdID: a live order has it",
            ));
        }
        Ok((*order_id, new_id))
    }

    pub fn cancel(&mut self, msg: &OrderCancelRequest<'_>) -> Result<ToEngine, Report> {
        let (order_id, cl_ord_id) = self.amend_target(msg.cl_ord_id, msg.orig_cl_ord_id, b'1')?;
        let engine_id = self.orders[&order_id].engine_id;
        self.by_cl_ord_id.insert(cl_ord_id, order_id);
        self.pending
            .entry(engine_id)
            .or_default()
            .push_back(Pending::Cancel { cl_ord_id });
        Ok(ToEngine {
            order: engine_id,
            kind: RequestKind::Cancel,
            command: Command::Cancel {
                user: self.user,
                order: engine_id,
            },
        })
    }

    pub fn replace(
        &mut self,
        msg: &OrderCancelReplaceRequest<'_>,
        instruments: &Instruments,
    ) -> Result<ToEngine, Report> {
        let (order_id, cl_ord_id) = self.amend_target(msg.cl_ord_id, msg.orig_cl_ord_id, b'2')?;
        let order = &self.orders[&order_id];
        let reject = |reason, text| {
            Err(self.cancel_reject(
                Some(order),
                msg.cl_ord_id,
                msg.orig_cl_ord_id,
                b'2',
                reason,
                text,
            ))
        };
        let Some(instrument) = instruments.by_id(order.symbol) else {
            return reject(app::cxl_rej_reason::OTHER, "the symbol is no longer listed");
        };
        if msg.side.is_some_and(|s| s != side_char(order.side)) {
            return reject(app::cxl_rej_reason::BROKER_OPTION, "Side cannot change");
        }
        let price_ticks = match msg.price {
            None => order.price_ticks,
            Some(p) => match instrument.ticks(p) {
                Ok(t) => Some(t),
                Err(_) => {
                    return reject(app::cxl_rej_reason::OTHER, "Price is not on the tick grid");
                }
            },
        };
        let order_qty_lots = match msg.order_qty {
            None => order.order_qty_lots,
            Some(q) => match instrument.lots(q) {
                Ok(l) if l > 0 => l,
                _ => {
                    return reject(
                        app::cxl_rej_reason::OTHER,
                        "OrderQty is not a positive number of lots",
                    );
                }
            },
        };
        // TimeInForce and ExpireTime are the order's for its life: a replace may repeat them,
        // not change them (an `amend` has no such field).
        let effective_tif = |tif: Option<u8>| match (tif, order.ord_type) {
            (None, b'1' | b'3') => b'3',
            (None, _) => b'1',
            (Some(t), _) => t,
        };
        if msg.time_in_force.is_some()
            && effective_tif(msg.time_in_force) != effective_tif(order.time_in_force)
        {
            return reject(
                app::cxl_rej_reason::BROKER_OPTION,
                "TimeInForce cannot change",
            );
        }
        if msg.expire_time.is_some() && msg.expire_time != order.expire_ts {
            return reject(
                app::cxl_rej_reason::BROKER_OPTION,
                "ExpireTime cannot change",
            );
        }
        // A new StopPx re-prices a pending stop's trigger (the engine refuses it once the stop
        // has triggered).
        let stop_ticks = match (msg.stop_px, order.stop_ticks) {
            (None, _) => None,
            (Some(_), None) => {
                return reject(
                    app::cxl_rej_reason::BROKER_OPTION,
                    "StopPx on an order that is not a stop",
                );
            }
            (Some(p), Some(old)) => match instrument.ticks(p) {
                Ok(t) if t == old => None,
                Ok(t) => Some(t),
                Err(_) => {
                    return reject(app::cxl_rej_reason::OTHER, "StopPx is not on the tick grid");
                }
            },
        };
        // One amend carries the whole new state: the price (when the order has one), the new
        // total and any new trigger price. The engine decides whether the order keeps its
        // place, and ends it when the total is at or below what has filled.
        let engine_id = order.engine_id;
        let amend = AmendOrder::with_fields(
            self.user,
            engine_id,
            price_ticks,
            Some(order_qty_lots),
            stop_ticks,
        );
        let pending = Pending::Replace {
            cl_ord_id,
            price_ticks,
            order_qty_lots,
            stop_ticks,
        };
        let (kind, command) = (RequestKind::Amend, Command::Amend(amend));
        self.by_cl_ord_id.insert(cl_ord_id, order_id);
        self.pending
            .entry(engine_id)
            .or_default()
            .push_back(pending);
        Ok(ToEngine {
            order: engine_id,
            kind,
            command,
        })
    }

    pub fn mass_cancel(
        &mut self,
        msg: &app::OrderMassCancelRequest<'_>,
        instruments: &Instruments,
    ) -> Result<ToEngine, Report> {
        let cl_ord_id = ClOrdId::new(msg.cl_ord_id).unwrap_or(ClOrdId::new(b"?").expect("short"));
        let refuse = |text| Report::MassCancel {
            cl_ord_id,
            request_type: msg.request_type,
            accepted: false,
            text,
        };
        let symbol = match (msg.request_type, msg.symbol) {
            (b'7', _) => None,
            (b'1', Some(name)) => match instruments.by_name(name) {
                Some(i) => Some(i.id),
                None => return Err(refuse("unknown symbol")),
            },
            (b'1', None) => return Err(refuse("MassCancelRequestType 1 needs a Symbol")),
            _ => {
                return Err(refuse(
                    "MassCancelRequestType must be 1 (security) or 7 (all)",
                ));
            }
        };
        self.pending_mass.push_back(Pending::MassCancel {
            cl_ord_id,
            request_type: msg.request_type,
        });
        Ok(ToEngine {
            order: 0,
            kind: RequestKind::MassCancel,
            command: Command::MassCancel {
                user: self.user,
                symbol,
            },
        })
    }

    /// Cancels of every live order (cancel on disconnect).
    pub fn cancel_all(&mut self) -> Vec<ToEngine> {
        let mut out: Vec<ToEngine> = self
            .orders
            .values()
            .filter(|o| o.leaves_lots > 0)
            .map(|o| ToEngine {
                order: o.engine_id,
                kind: RequestKind::Cancel,
                command: Command::Cancel {
                    user: self.user,
                    order: o.engine_id,
                },
            })
            .collect();
        out.sort_by_key(|t| t.order);
        for t in &out {
            let order = self
                .by_engine_id
                .get(&t.order)
                .and_then(|id| self.orders.get(id));
            if let Some(cl_ord_id) = order.map(|o| o.cl_ord_id) {
                self.pending
                    .entry(t.order)
                    .or_default()
                    .push_back(Pending::Cancel { cl_ord_id });
            }
        }
        out
    }

    fn execution(&self, order: &FixOrder, exec_type: u8, seq: u64, ts_ns: i64) -> Execution {
        Execution {
            order: order.clone(),
            exec_type,
            cl_ord_id: order.cl_ord_id,
            orig_cl_ord_id: None,
            last: None,
            ord_rej_reason: None,
            text: None,
            raw_symbol: None,
            raw_qty: None,
            raw_price: None,
            raw_side: None,
            raw_stop_px: None,
            raw_shown: None,
            seq,
            ts_ns,
        }
    }

    /// Forgets an order that is done (filled, cancelled or rejected).
    fn retire(&mut self, order_id: u64) {
        if let Some(order) = self.orders.get(&order_id) {
            let engine_id = order.engine_id;
            if self.pending.get(&engine_id).is_some_and(|p| !p.is_empty()) {
                return; // a request is still in flight: keep it for its answer
            }
            self.pending.remove(&engine_id);
            self.by_engine_id.remove(&engine_id);
            let order_id_copy = order_id;
            self.by_cl_ord_id.retain(|_, id| *id != order_id_copy);
            self.orders.remove(&order_id);
        }
    }

    /// The engine accepted or rejected one of this desk's requests. Returns what to send, and
    /// possibly a follow-up command (the new half of a cancel-and-new replace).
    pub fn on_reply(
        &mut self,
        engine_id: OrderId,
        kind: RequestKind,
        result: Result<(), Reason>,
        seq: u64,
        ts_ns: i64,
        reports: &mut Vec<Report>,
    ) {
        if kind == RequestKind::MassCancel {
            if let Some(Pending::MassCancel {
                cl_ord_id,
                request_type,
            }) = self.pending_mass.pop_front()
            {
                reports.push(Report::MassCancel {
                    cl_ord_id,
                    request_type,
                    accepted: result.is_ok(),
                    text: result.err().map_or("", reason_text),
                });
            }
            return;
        }
        let Some(pending) = self.pending.get_mut(&engine_id).and_then(|p| p.pop_front()) else {
            return;
        };
        let Some(&order_id) = self.by_engine_id.get(&engine_id) else {
            return;
        };
        let Some(order) = self.orders.get_mut(&order_id) else {
            return;
        };
        match (pending, result) {
            (Pending::New, Ok(())) => {
                if !order.acknowledged {
                    order.acknowledged = true;
                    let order = order.clone();
                    reports.push(Report::Execution(self.execution(
                        &order,
                        app::exec_type::NEW,
                        seq,
                        ts_ns,
                    )));
                }
            }
            (Pending::New, Err(reason)) => {
                order.status = app::ord_status::REJECTED;
                order.leaves_lots = 0;
                order.acknowledged = true;
                let order = order.clone();
                let mut exec = self.execution(&order, app::exec_type::REJECTED, seq, ts_ns);
                exec.ord_rej_reason = Some(ord_rej_reason(reason));
                exec.text = Some(reason_text(reason));
                reports.push(Report::Execution(exec));
                self.retire(order_id);
            }
            (Pending::Cancel { .. }, Ok(())) => {
                // The Cancelled event that follows reports it.
                self.pending
                    .entry(engine_id)
                    .or_default()
                    .push_front(pending);
            }
            // A refused cancel or amend (of any kind): the order stays as it was.
            (Pending::Cancel { cl_ord_id } | Pending::Replace { cl_ord_id, .. }, Err(reason)) => {
                let response_to = if matches!(pending, Pending::Cancel { .. }) {
                    b'1'
                } else {
                    b'2'
                };
                let order = order.clone();
                self.by_cl_ord_id.remove(&cl_ord_id);
                let text = reason_text(reason);
                reports.push(Report::CancelReject {
                    order_id: Some(order.order_id),
                    cl_ord_id,
                    orig_cl_ord_id: order.cl_ord_id,
                    ord_status: order.status,
                    response_to,
                    reason: if reason == Reason::UnknownOrder {
                        app::cxl_rej_reason::TOO_LATE_TO_CANCEL
                    } else {
                        app::cxl_rej_reason::OTHER
                    },
                    text,
                });
            }
            (
                Pending::Replace {
                    cl_ord_id,
                    price_ticks,
                    order_qty_lots,
                    stop_ticks,
                },
                Ok(()),
            ) => {
                // Every fill before the amend has been counted (the engine's events come in
                // order), so what is left is the new total less CumQty; at or below it, the
                // engine ended the order (its Cancelled, reason reduce, is this report).
                let orig = order.cl_ord_id;
                self.by_cl_ord_id.remove(&orig);
                order.cl_ord_id = cl_ord_id;
                order.price_ticks = price_ticks;
                if stop_ticks.is_some() {
                    order.stop_ticks = stop_ticks;
                }
                order.order_qty_lots = order_qty_lots;
                order.leaves_lots = (order_qty_lots - order.cum_lots).max(0);
                order.status = order.status_after_fill();
                let order = order.clone();
                let mut exec = self.execution(&order, app::exec_type::REPLACED, seq, ts_ns);
                exec.orig_cl_ord_id = Some(orig);
                reports.push(Report::Execution(exec));
                if order.leaves_lots == 0 {
                    self.retire(order_id);
                }
            }
            (Pending::MassCancel { .. }, _) => {}
        }
        if self.orders.get(&order_id).is_some_and(FixOrder::is_done) {
            self.retire(order_id);
        }
    }

    /// OrderStatusRequest: the order's state as an ExecutionReport (ExecType I), or a
    /// rejected one naming the ClOrdID when no live order has it.
    pub fn status(
        &self,
        cl_ord_id: &[u8],
        symbol: Option<&[u8]>,
        side: Option<u8>,
        ts_ns: i64,
    ) -> Report {
        if let Some(order) = self.order_by_cl_ord_id(cl_ord_id) {
            return Report::Execution(self.execution(
                order,
                app::exec_type::ORDER_STATUS,
                0,
                ts_ns,
            ));
        }
        let side = if side == Some(b'2') {
            Side::Sell
        } else {
            Side::Buy
        };
        let unknown = ClOrdId::new(cl_ord_id).unwrap_or(ClOrdId::new(b"?").expect("short"));
        let mut report = self.reject_new(
            unknown,
            SymbolId::NONE,
            side,
            0,
            (ord_rej::UNKNOWN_ORDER, "unknown order"),
            ts_ns,
        );
        if let Report::Execution(exec) = &mut report {
            exec.exec_type = app::exec_type::ORDER_STATUS;
            exec.raw_symbol = symbol.and_then(ClOrdId::new);
        }
        report
    }

    /// Rebuilds the desk from one ExecutionReport it sent before a restart (read back from
    /// the session's message store, oldest first).
    pub fn restore(&mut self, frame: &rialto_fix::Frame<'_>, instruments: &Instruments) {
        use rialto_fix::parse::parse_uint;
        use rialto_fix::tags;
        let (mut order_id, mut engine_id, mut cl_ord_id, mut status, mut exec_type) =
            (None, None, None, None, None);
        let (mut symbol, mut side, mut ord_type, mut tif) = (None, None, None, None);
        let (mut stop_px, mut shown, mut expire_ts) = (None, None, None);
        let (mut price, mut order_qty, mut leaves, mut cum, mut last_px, mut last_qty) =
            (None, None, None, None, None, None);
        for field in frame.fields().filter_map(Result::ok) {
            let v = field.value;
            let dec = || Decimal::parse(v).ok();
            match field.tag {
                tags::ORDER_ID => order_id = parse_uint(v),
                SECONDARY_ORDER_ID => engine_id = parse_uint(v),
                tags::CL_ORD_ID => cl_ord_id = ClOrdId::new(v),
                tags::ORD_STATUS => status = v.first().copied(),
                tags::EXEC_TYPE => exec_type = v.first().copied(),
                tags::SYMBOL => symbol = instruments.by_name(v).copied(),
                tags::SIDE => side = v.first().copied(),
                tags::ORD_TYPE => ord_type = v.first().copied(),
                tags::TIME_IN_FORCE => tif = v.first().copied(),
                tags::PRICE => price = dec(),
                tags::ORDER_QTY => order_qty = dec(),
                tags::LEAVES_QTY => leaves = dec(),
                tags::CUM_QTY => cum = dec(),
                tags::LAST_PX => last_px = dec(),
                tags::LAST_QTY => last_qty = dec(),
                tags::STOP_PX => stop_px = dec(),
                tags::MAX_FLOOR => shown = dec().map(|d| (ShownQtyTag::MaxFloor, d)),
                tags::DISPLAY_QTY => shown = dec().map(|d| (ShownQtyTag::DisplayQty, d)),
                tags::EXPIRE_TIME => expire_ts = rialto_fix::time::parse_utc_timestamp(v),
                _ => {}
            }
        }
        // A report without a ClOrdID (a liquidation's close) took an OrderID too.
        if let Some(id) = order_id {
            self.next_order_id = self.next_order_id.max(id + 1);
        }
        let (Some(order_id), Some(cl_ord_id), Some(status), Some(instrument)) =
            (order_id, cl_ord_id, status, symbol)
        else {
            return;
        };
        // FIX 4.0 reports have no SecondaryOrderID: the id the order had (its first report,
        // read before this one), else the one its ClOrdID gives.
        let engine_id = engine_id
            .map(|id| id as OrderId)
            .or_else(|| self.orders.get(&order_id).map(|o| o.engine_id))
            .unwrap_or_else(|| self.engine_id_for(&cl_ord_id));
        self.next_order_id = self.next_order_id.max(order_id + 1);
        let lots = |d: Option<Decimal>| d.and_then(|d| instrument.lots(d).ok());
        let ticks = |d: Option<Decimal>| d.and_then(|d| instrument.ticks(d).ok());
        // FIX 4.0 reports have no LeavesQty: what is left is OrderQty − CumQty.
        let leaves_lots = lots(leaves).or_else(|| lots(order_qty)?.checked_sub(lots(cum)?));
        let terminal = matches!(status, b'2' | b'3' | b'4' | b'8' | b'C');
        if terminal || leaves_lots == Some(0) {
            if let Some(old) = self.orders.remove(&order_id) {
                self.by_engine_id.remove(&old.engine_id);
                self.by_cl_ord_id.retain(|_, id| *id != order_id);
            }
            return;
        }
        if let Some(old) = self.orders.get(&order_id) {
            self.by_engine_id.remove(&old.engine_id);
            self.by_cl_ord_id.retain(|_, id| *id != order_id);
        }
        let notional = self.orders.get(&order_id).map_or(0, |o| o.notional);
        // FIX 4.0 reports have no ExecType: a fill is one with shares in LastShares.
        let is_fill = match exec_type {
            Some(t) => matches!(t, b'F' | b'1' | b'2'),
            None => lots(last_qty).is_some_and(|q| q > 0),
        };
        let fill = match (is_fill, ticks(last_px), lots(last_qty)) {
            (true, Some(p), Some(q)) => i128::from(p) * i128::from(q),
            _ => 0,
        };
        let order = FixOrder {
            order_id,
            engine_id,
            cl_ord_id,
            symbol: instrument.id,
            side: if side == Some(b'2') {
                Side::Sell
            } else {
                Side::Buy
            },
            ord_type: ord_type.unwrap_or(b'2'),
            time_in_force: tif,
            price_ticks: ticks(price),
            stop_ticks: ticks(stop_px),
            shown: shown.and_then(|(tag, d)| Some((tag, lots(Some(d))?))),
            expire_ts,
            order_qty_lots: lots(order_qty).unwrap_or(0),
            cum_lots: lots(cum).unwrap_or(0),
            notional: notional + fill,
            leaves_lots: leaves_lots.unwrap_or(0),
            status,
            acknowledged: true,
        };
        self.by_engine_id.insert(order.engine_id, order_id);
        self.by_cl_ord_id.insert(cl_ord_id, order_id);
        self.orders.insert(order_id, order);
    }

    /// A fill of one of this desk's orders (other orders of the user are not ours).
    pub fn on_trade(
        &mut self,
        engine_id: OrderId,
        price_ticks: i64,
        qty_lots: i64,
        seq: u64,
        ts_ns: i64,
        reports: &mut Vec<Report>,
    ) {
        let Some(&order_id) = self.by_engine_id.get(&engine_id) else {
            return;
        };
        let Some(order) = self.orders.get_mut(&order_id) else {
            return;
        };
        if !order.acknowledged {
            // Filled on arrival before the accept came back: New goes first.
            order.acknowledged = true;
            let order = order.clone();
            reports.push(Report::Execution(self.execution(
                &order,
                app::exec_type::NEW,
                seq,
                ts_ns,
            )));
        }
        let order = self.orders.get_mut(&order_id).expect("present");
        order.cum_lots += qty_lots;
        order.leaves_lots -= qty_lots;
        order.notional += i128::from(price_ticks) * i128::from(qty_lots);
        order.status = order.status_after_fill();
        let order = order.clone();
        let mut exec = self.execution(&order, app::exec_type::TRADE, seq, ts_ns);
        exec.last = Some((price_ticks, qty_lots));
        reports.push(Report::Execution(exec));
        if order.is_done() {
            self.retire(order_id);
        }
    }

    /// The close of a liquidation (docs/fix.md, "Liquidations"): the venue's market IOC order
    /// of engine id 0 on `symbol` in the command of `seq`, as this desk reports it: under an
    /// OrderID of its own, with no ClOrdID. Its figures count the fills reported so far (the
    /// close's size is not announced): OrderQty and CumQty grow with each fill, LeavesQty 0.
    fn liquidation_close(&mut self, symbol: SymbolId, side: Side, seq: u64) -> &mut FixOrder {
        let same = matches!(&self.liquidation, Some((s, o)) if *s == seq && o.symbol == symbol);
        if !same {
            let order = FixOrder {
                order_id: self.take_id(),
                engine_id: 0,
                cl_ord_id: ClOrdId::NONE,
                symbol,
                side,
                // Market, immediate or cancel.
                ord_type: b'1',
                time_in_force: Some(b'3'),
                price_ticks: None,
                stop_ticks: None,
                shown: None,
                expire_ts: None,
                order_qty_lots: 0,
                cum_lots: 0,
                notional: 0,
                leaves_lots: 0,
                status: app::ord_status::NEW,
                acknowledged: true,
            };
            self.liquidation = Some((seq, order));
        }
        let (_, order) = self.liquidation.as_mut().expect("set above");
        order
    }

    /// A fill of a liquidation's close: ExecutionReport ExecType F, OrdStatus filled, Text
    /// `liquidation`.
    #[allow(clippy::too_many_arguments)]
    pub fn on_liquidation_trade(
        &mut self,
        symbol: SymbolId,
        side: Side,
        price_ticks: i64,
        qty_lots: i64,
        seq: u64,
        ts_ns: i64,
        reports: &mut Vec<Report>,
    ) {
        let order = self.liquidation_close(symbol, side, seq);
        order.order_qty_lots += qty_lots;
        order.cum_lots += qty_lots;
        order.notional += i128::from(price_ticks) * i128::from(qty_lots);
        order.status = app::ord_status::FILLED;
        let order = order.clone();
        let mut exec = self.execution(&order, app::exec_type::TRADE, seq, ts_ns);
        exec.last = Some((price_ticks, qty_lots));
        exec.text = Some(LIQUIDATION);
        reports.push(Report::Execution(exec));
    }

    /// What of a liquidation's close did not fill (no more bids or asks, or a band edge):
    /// ExecutionReport ExecType 4, OrdStatus canceled, Text `liquidation`.
    #[allow(clippy::too_many_arguments)]
    pub fn on_liquidation_cancelled(
        &mut self,
        symbol: SymbolId,
        side: Side,
        qty_lots: i64,
        seq: u64,
        ts_ns: i64,
        reports: &mut Vec<Report>,
    ) {
        let order = self.liquidation_close(symbol, side, seq);
        order.order_qty_lots += qty_lots;
        order.status = app::ord_status::CANCELED;
        let order = order.clone();
        let mut exec = self.execution(&order, app::exec_type::CANCELED, seq, ts_ns);
        exec.text = Some(LIQUIDATION);
        reports.push(Report::Execution(exec));
    }

    /// A pending stop order of this desk triggered: ExecutionReport ExecType L (triggered or
    /// activated by system), its status unchanged; its fills follow.
    pub fn on_triggered(
        &mut self,
        engine_id: OrderId,
        seq: u64,
        ts_ns: i64,
        reports: &mut Vec<Report>,
    ) {
        let Some(order) = self
            .by_engine_id
            .get(&engine_id)
            .and_then(|id| self.orders.get(id))
        else {
            return;
        };
        let order = order.clone();
        reports.push(Report::Execution(self.execution(
            &order,
            app::exec_type::TRIGGERED,
            seq,
            ts_ns,
        )));
    }

    /// Quantity left the book (or never entered it). `None` when the order is not this
    /// desk's.
    pub fn on_cancelled(
        &mut self,
        engine_id: OrderId,
        qty_lots: i64,
        reason: CancelReason,
        seq: u64,
        ts_ns: i64,
        reports: &mut Vec<Report>,
    ) -> Option<()> {
        let order_id = *self.by_engine_id.get(&engine_id)?;
        if reason == CancelReason::Reduce {
            return Some(()); // an amend ended it: reported as its Replaced
        }
        let queue = self.pending.entry(engine_id).or_default();
        let pending = match queue.front() {
            Some(p @ Pending::Cancel { .. }) if reason == CancelReason::User => {
                let p = *p;
                queue.pop_front();
                Some(p)
            }
            _ => None,
        };
        let order = self.orders.get_mut(&order_id)?;
        if !order.acknowledged {
            order.acknowledged = true;
            let order = order.clone();
            reports.push(Report::Execution(self.execution(
                &order,
                app::exec_type::NEW,
                seq,
                ts_ns,
            )));
        }
        let order = self.orders.get_mut(&order_id)?;
        order.leaves_lots = (order.leaves_lots - qty_lots).max(0);
        let expired = reason == CancelReason::Expired;
        order.status = match (order.leaves_lots, expired) {
            (0, true) => app::ord_status::EXPIRED,
            (0, false) => app::ord_status::CANCELED,
            _ => order.status,
        };
        let order = order.clone();
        let exec_type = if expired {
            app::exec_type::EXPIRED
        } else {
            app::exec_type::CANCELED
        };
        let mut exec = self.execution(&order, exec_type, seq, ts_ns);
        if let Some(Pending::Cancel { cl_ord_id }) = pending {
            self.by_cl_ord_id.remove(&cl_ord_id);
            exec.orig_cl_ord_id = Some(order.cl_ord_id);
            exec.cl_ord_id = cl_ord_id;
        }
        exec.text = match reason {
            CancelReason::User => None,
            other => Some(other.as_str()),
        };
        reports.push(Report::Execution(exec));
        if order.leaves_lots == 0 {
            self.retire(order_id);
        }
        Some(())
    }
}

pub fn side_char(side: Side) -> u8 {
    match side {
        Side::Buy => b'1',
        Side::Sell => b'2',
    }
}

/// The figures of an execution in FIX units.
pub struct Figures {
    pub price: Option<Decimal>,
    pub order_qty: Decimal,
    pub leaves_qty: Decimal,
    pub cum_qty: Decimal,
    pub avg_px: Decimal,
    pub last: Option<(Decimal, Decimal)>,
    pub stop_px: Option<Decimal>,
    pub shown_qty: Option<(ShownQtyTag, Decimal)>,
}

impl Execution {
    pub fn figures(&self, instrument: &Instrument) -> Figures {
        let o = &self.order;
        let qty = |lots| instrument.qty(lots);
        let avg_px = if o.cum_lots == 0 {
            Decimal::new(0, instrument.price_tick.scale)
        } else {
            // AvgPx = notional / cum in ticks, then in price units: (n/c) × tick.
            let tick = instrument.price_tick;
            let scale = tick.scale.saturating_add(4).min(12);
            let total = o.notional * i128::from(tick.mantissa);
            let avg = Decimal::ratio(total, i128::from(o.cum_lots), scale);
            // `avg` is in units of 10^-tick.scale at `scale` digits: fix the exponent.
            Decimal::new(avg.mantissa, scale + tick.scale).normalized()
        };
        Figures {
            price: o.price_ticks.map(|t| instrument.price(t)),
            order_qty: qty(o.order_qty_lots),
            leaves_qty: qty(o.leaves_lots),
            cum_qty: qty(o.cum_lots),
            avg_px,
            last: self.last.map(|(p, q)| (instrument.price(p), qty(q))),
            stop_px: o.stop_ticks.map(|t| instrument.price(t)),
            shown_qty: o.shown.map(|(tag, lots)| (tag, qty(lots))),
        }
    }
}

trait Normalized {
    fn normalized(self) -> Self;
}

impl Normalized for Decimal {
    /// Drops trailing zeros after the point.
    fn normalized(mut self) -> Decimal {
        while self.scale > 0 && self.mantissa % 10 == 0 {
            self.mantissa /= 10;
            self.scale -= 1;
        }
        self
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::InstrumentSettings;
    use rialto_core::{Name, SymbolSpec};
    use rialto_fix::{MessageWriter, next_frame, tags};

    /// BTC-USD (tick 0.01, lot 0.001) as symbol 0: the instruments of the FIX unit tests.
    pub(crate) fn instruments() -> Instruments {
        let mut settings = std::collections::BTreeMap::new();
        settings.insert(
            "BTC-USD".to_string(),
            InstrumentSettings {
                price_tick: "0.01".into(),
                qty_lot: "0.001".into(),
            },
        );
        let mut instruments = Instruments::new(&settings);
        let name = |t| Name::new(t).unwrap();
        let spec = SymbolSpec {
            symbol: name("BTC-USD"),
            base: name("BTC"),
            quote: name("USD"),
            base_scale: 1000,
            quote_scale: 1,
            maker_fee: 0,
            taker_fee: 0,
            band_bps: 0,
            day_end: 0,
            kind: SymbolSpec::SPOT,
        };
        instruments.refresh(&[(SymbolId(0), spec)]);
        instruments
    }

    /// A message of `msg_type` with `fields`, framed, for the decoders.
    fn message(msg_type: &str, fields: &[(u32, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = MessageWriter::begin(&mut out, b"FIX.4.4", msg_type.as_bytes());
        for (tag, value) in fields {
            w.str(*tag, value.as_bytes());
        }
        w.finish();
        out
    }

    fn place(desk: &mut OrderDesk, id: &str, side: &str, qty: &str, price: &str) -> ToEngine {
        try_place(desk, id, side, qty, price).unwrap()
    }

    /// A NewOrderSingle (limit, BTC-USD) through the desk: what it sends on, or its refusal.
    fn try_place(
        desk: &mut OrderDesk,
        id: &str,
        side: &str,
        qty: &str,
        price: &str,
    ) -> Result<ToEngine, Report> {
        let bytes = message(
            "D",
            &[
                (tags::CL_ORD_ID, id),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, side),
                (tags::ORDER_QTY, qty),
                (tags::ORD_TYPE, "2"),
                (tags::PRICE, price),
            ],
        );
        let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
        let nos = NewOrderSingle::decode(&frame).unwrap();
        desk.new_order(&nos, &instruments(), 0)
    }

    fn replace(
        desk: &mut OrderDesk,
        orig: &str,
        id: &str,
        qty: &str,
        price: &str,
    ) -> Result<ToEngine, Report> {
        let bytes = message(
            "G",
            &[
                (tags::ORIG_CL_ORD_ID, orig),
                (tags::CL_ORD_ID, id),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, "1"),
                (tags::ORDER_QTY, qty),
                (tags::ORD_TYPE, "2"),
                (tags::PRICE, price),
            ],
        );
        let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
        let m = OrderCancelReplaceRequest::decode(&frame).unwrap();
        desk.replace(&m, &instruments())
    }

    fn executions(reports: &[Report]) -> Vec<&Execution> {
        reports
            .iter()
            .filter_map(|r| match r {
                Report::Execution(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn fills_add_up_to_cum_leaves_and_an_exact_average() {
        let mut desk = OrderDesk::new(1, 1 << 40);
        let t = place(&mut desk, "A", "1", "0.010", "100.00");
        assert_eq!(t.kind, RequestKind::Place);
        let mut reports = Vec::new();
        // Filled before the accept came back: New goes first.
        desk.on_trade(t.order, 10_000, 3, 7, 0, &mut reports);
        desk.on_reply(t.order, RequestKind::Place, Ok(()), 7, 0, &mut reports);
        desk.on_trade(t.order, 9_999, 7, 8, 0, &mut reports);
        let e = executions(&reports);
        assert_eq!(e.len(), 3, "{reports:?}");
        assert_eq!(e[0].exec_type, app::exec_type::NEW);
        assert_eq!(e[1].exec_type, app::exec_type::TRADE);
        assert_eq!((e[1].order.cum_lots, e[1].order.leaves_lots), (3, 7));
        assert_eq!(e[1].order.status, app::ord_status::PARTIALLY_FILLED);
        assert_eq!(e[2].order.status, app::ord_status::FILLED);
        let figures = e[2].figures(instruments().by_id(SymbolId(0)).unwrap());
        // (100.00 × 3 + 99.99 × 7) / 10 = 99.993
        assert_eq!(figures.avg_px.to_string(), "99.993");
        assert_eq!(figures.cum_qty.to_string(), "0.010");
        // Done: the ClOrdID may be used again.
        assert!(desk.order_by_cl_ord_id(b"A").is_none());
        place(&mut desk, "A", "1", "0.001", "1");
    }

    #[test]
    fn a_replace_is_one_amend_and_its_report_counts_the_fills() {
        let mut desk = OrderDesk::new(1, 1 << 40);
        let t = place(&mut desk, "A", "1", "0.010", "100.00");
        let mut reports = Vec::new();
        desk.on_reply(t.order, RequestKind::Place, Ok(()), 1, 0, &mut reports);

        let m = replace(&mut desk, "A", "B", "0.010", "99.00").unwrap();
        assert_eq!((m.order, m.kind), (t.order, RequestKind::Amend));
        let Command::Amend(a) = m.command else {
            panic!("an amend")
        };
        assert_eq!(
            (a.order, a.price(), a.qty()),
            (t.order, Some(9_900), Some(10))
        );
        desk.on_reply(m.order, m.kind, Ok(()), 2, 0, &mut reports);
        desk.on_trade(t.order, 9_900, 3, 3, 0, &mut reports);

        // A new total of 6 with 3 filled leaves 3.
        let r = replace(&mut desk, "B", "C", "0.006", "99.00").unwrap();
        desk.on_reply(r.order, r.kind, Ok(()), 4, 0, &mut reports);
        // A total at what has filled ends the order: Replaced, Filled, nothing left.
        let d = replace(&mut desk, "C", "D", "0.003", "99.00").unwrap();
        desk.on_reply(d.order, d.kind, Ok(()), 5, 0, &mut reports);
        assert!(
            desk.on_cancelled(d.order, 3, CancelReason::Reduce, 5, 0, &mut reports)
                .is_none()
        );

        let e = executions(&reports);
        let replaced: Vec<_> = e
            .iter()
            .filter(|x| x.exec_type == app::exec_type::REPLACED)
            .collect();
        assert_eq!(replaced.len(), 3, "{reports:?}");
        let o = &replaced[1].order;
        assert_eq!((o.order_qty_lots, o.cum_lots, o.leaves_lots), (6, 3, 3));
        assert_eq!(o.status, app::ord_status::PARTIALLY_FILLED);
        assert_eq!(replaced[1].cl_ord_id.as_bytes(), b"C");
        assert_eq!(replaced[1].orig_cl_ord_id.unwrap().as_bytes(), b"B");
        let o = &replaced[2].order;
        assert_eq!((o.leaves_lots, o.status), (0, app::ord_status::FILLED));
        assert_eq!(
            e.len(),
            5,
            "no report for the reduce that ended it: {reports:?}"
        );
        // The OrderID and the engine's id never changed.
        assert!(e.iter().all(|x| x.order.order_id == 1 << 40));
        assert!(e.iter().all(|x| x.order.engine_id == t.order));
        assert!(desk.live_orders().next().is_none());
    }

    /// A replace may re-price a pending stop's trigger; TimeInForce and ExpireTime may be
    /// repeated but not changed, and StopPx on an order that is not a stop is refused.
    #[test]
    fn a_replace_moves_a_stops_trigger_and_refuses_new_terms() {
        let mut desk = OrderDesk::new(1, 1 << 40);
        let stop = message(
            "D",
            &[
                (tags::CL_ORD_ID, "S"),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, "1"),
                (tags::ORDER_QTY, "0.002"),
                (tags::ORD_TYPE, "4"),
                (tags::PRICE, "101.00"),
                (tags::STOP_PX, "100.00"),
                (tags::TIME_IN_FORCE, "6"),
                (tags::EXPIRE_TIME, "20261127-12:00:00.000"),
            ],
        );
        let (frame, _) = next_frame(&stop, 4096).unwrap().unwrap();
        let t = desk
            .new_order(&NewOrderSingle::decode(&frame).unwrap(), &instruments(), 0)
            .unwrap();
        let mut reports = Vec::new();
        desk.on_reply(t.order, RequestKind::Place, Ok(()), 1, 0, &mut reports);
        let replace_with = |desk: &mut OrderDesk, id: &str, extra: &[(u32, &str)]| {
            let mut fields = vec![
                (tags::ORIG_CL_ORD_ID, "S"),
                (tags::CL_ORD_ID, id),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, "1"),
                (tags::ORDER_QTY, "0.002"),
                (tags::ORD_TYPE, "4"),
                (tags::PRICE, "101.00"),
            ];
            fields.extend_from_slice(extra);
            let bytes = message("G", &fields);
            let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
            desk.replace(
                &OrderCancelReplaceRequest::decode(&frame).unwrap(),
                &instruments(),
            )
        };
        let refusal = |r: Result<ToEngine, Report>| match r {
            Err(Report::CancelReject { text, .. }) => text.to_string(),
            other => panic!("a cancel reject: {other:?}"),
        };
        assert_eq!(
            refusal(replace_with(&mut desk, "T1", &[(tags::TIME_IN_FORCE, "1")])),
            "TimeInForce cannot change"
        );
        assert_eq!(
            refusal(replace_with(
                &mut desk,
                "T2",
                &[(tags::EXPIRE_TIME, "20261127-13:00:00.000")]
            )),
            "ExpireTime cannot change"
        );
        // The same terms repeated, and a new trigger: one amend with the stop price.
        let m = replace_with(
            &mut desk,
            "T3",
            &[
                (tags::TIME_IN_FORCE, "6"),
                (tags::EXPIRE_TIME, "20261127-12:00:00.000"),
                (tags::STOP_PX, "100.50"),
            ],
        )
        .unwrap();
        let Command::Amend(a) = m.command else {
            panic!("an amend")
        };
        assert_eq!(
            (a.price(), a.qty(), a.stop_price()),
            (Some(10_100), Some(2), Some(10_050))
        );
        desk.on_reply(m.order, m.kind, Ok(()), 2, 0, &mut reports);
        let replaced = executions(&reports)
            .into_iter()
            .find(|x| x.exec_type == app::exec_type::REPLACED)
            .expect("a Replaced report");
        assert_eq!(replaced.order.stop_ticks, Some(10_050));

        // StopPx on a plain limit order is refused.
        place(&mut desk, "L", "1", "0.001", "99.00");
        let bytes = message(
            "G",
            &[
                (tags::ORIG_CL_ORD_ID, "L"),
                (tags::CL_ORD_ID, "L2"),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, "1"),
                (tags::ORDER_QTY, "0.001"),
                (tags::ORD_TYPE, "2"),
                (tags::PRICE, "99.00"),
                (tags::STOP_PX, "98.00"),
            ],
        );
        let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
        let r = desk.replace(
            &OrderCancelReplaceRequest::decode(&frame).unwrap(),
            &instruments(),
        );
        assert_eq!(refusal(r), "StopPx on an order that is not a stop");
    }

    #[test]
    fn engine_ids_follow_the_session_and_the_first_cl_ord_id() {
        let mut desk = OrderDesk::new(1, 1 << 40);
        let other = OrderDesk::new(1, 2 << 40);
        let id = |d: &OrderDesk, c: &str| d.engine_id_for(&ClOrdId::new(c.as_bytes()).unwrap());
        assert_eq!(id(&desk, "A"), id(&desk, "A"));
        assert_ne!(id(&desk, "A"), id(&desk, "B"));
        assert_ne!(id(&desk, "A"), id(&other, "A"));
        assert!(id(&desk, "A") > 0);
        // A resend of an order that ended goes to the engine with the same id, for its
        // order-id window to refuse.
        let t = place(&mut desk, "A", "1", "0.001", "1");
        assert_eq!(t.order, id(&desk, "A"));
        let mut reports = Vec::new();
        desk.on_reply(t.order, t.kind, Ok(()), 1, 0, &mut reports);
        desk.on_cancelled(t.order, 1, CancelReason::Ioc, 1, 0, &mut reports);
        assert!(desk.live_orders().next().is_none());
        assert_eq!(place(&mut desk, "A", "1", "0.001", "1").order, t.order);
        // While an order first sent as X lives on as Y, a new X is refused at once.
        let x = place(&mut desk, "X", "1", "0.001", "1");
        desk.on_reply(x.order, x.kind, Ok(()), 2, 0, &mut reports);
        let r = replace(&mut desk, "X", "Y", "0.002", "1").unwrap();
        desk.on_reply(r.order, r.kind, Ok(()), 3, 0, &mut reports);
        let Err(Report::Execution(dup)) = try_place(&mut desk, "X", "1", "0.001", "1") else {
            panic!("refused")
        };
        assert_eq!(dup.ord_rej_reason, Some(ord_rej::DUPLICATE_ORDER));
    }

    #[test]
    fn a_refused_amend_leaves_the_order_and_rejects_are_answered() {
        let mut desk = OrderDesk::new(1, 1 << 40);
        let t = place(&mut desk, "A", "1", "0.010", "100.00");
        let mut reports = Vec::new();
        desk.on_reply(t.order, RequestKind::Place, Ok(()), 1, 0, &mut reports);
        let c = replace(&mut desk, "A", "B", "0.020", "100.00").unwrap();
        reports.clear();
        desk.on_reply(
            c.order,
            c.kind,
            Err(Reason::InsufficientFunds),
            2,
            0,
            &mut reports,
        );
        match &reports[..] {
            [
                Report::CancelReject {
                    response_to: b'2',
                    ord_status,
                    text,
                    ..
                },
            ] => {
                assert_eq!(*ord_status, app::ord_status::NEW);
                assert_eq!(*text, "insufficient_funds");
            }
            other => panic!("{other:?}"),
        }
        let o = desk.order_by_cl_ord_id(b"A").expect("still A");
        assert_eq!((o.order_qty_lots, o.leaves_lots), (10, 10));
        assert!(desk.order_by_cl_ord_id(b"B").is_none());

        // Unknown orders and duplicate ClOrdIDs.
        assert!(matches!(
            replace(&mut desk, "nope", "X", "0.001", "1"),
            Err(Report::CancelReject { reason: 1, .. })
        ));
        let t = place(&mut desk, "L", "2", "0.001", "1");
        desk.on_reply(t.order, t.kind, Ok(()), 4, 0, &mut reports);
        let Err(Report::Execution(dup)) = try_place(&mut desk, "L", "2", "0.001", "1") else {
            panic!("a duplicate is refused")
        };
        assert_eq!(dup.ord_rej_reason, Some(ord_rej::DUPLICATE_ORDER));
    }

    /// After a restart the desk reads an order's terms back from its reports, so the reports
    /// that follow go on echoing them.
    #[test]
    fn a_restored_order_keeps_its_stop_price_shown_quantity_and_expiry() {
        let mut desk = OrderDesk::new(1, 1 << 40);
        let expire = "20261127-10:00:00.000";
        for (shown_tag, shown) in [
            (tags::MAX_FLOOR, ShownQtyTag::MaxFloor),
            (1138, ShownQtyTag::DisplayQty),
        ] {
            let bytes = message(
                "8",
                &[
                    (tags::ORDER_ID, "1099511627776"),
                    (SECONDARY_ORDER_ID, "77"),
                    (tags::CL_ORD_ID, "A"),
                    (tags::EXEC_TYPE, "0"),
                    (tags::ORD_STATUS, "0"),
                    (tags::SYMBOL, "BTC-USD"),
                    (tags::SIDE, "2"),
                    (tags::ORD_TYPE, "4"),
                    (tags::PRICE, "99.00"),
                    (tags::STOP_PX, "100.00"),
                    (tags::TIME_IN_FORCE, "6"),
                    (tags::EXPIRE_TIME, expire),
                    (shown_tag, "0.002"),
                    (tags::ORDER_QTY, "0.010"),
                    (tags::LEAVES_QTY, "0.010"),
                    (tags::CUM_QTY, "0"),
                ],
            );
            let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
            desk.restore(&frame, &instruments());
            let o = desk.order_by_cl_ord_id(b"A").expect("restored");
            assert_eq!(
                (o.engine_id, o.ord_type, o.time_in_force),
                (77, b'4', Some(b'6'))
            );
            assert_eq!((o.price_ticks, o.stop_ticks), (Some(9_900), Some(10_000)));
            assert_eq!(o.shown, Some((shown, 2)));
            assert_eq!(
                o.expire_ts,
                rialto_fix::time::parse_utc_timestamp(expire.as_bytes())
            );
        }
    }

    #[test]
    fn off_grid_prices_and_quantities_are_refused_not_rounded() {
        let mut desk = OrderDesk::new(1, 1 << 40);
        for (qty, price) in [("0.0005", "1"), ("0.001", "100.005"), ("0", "1")] {
            let bytes = message(
                "D",
                &[
                    (tags::CL_ORD_ID, "A"),
                    (tags::SYMBOL, "BTC-USD"),
                    (tags::SIDE, "1"),
                    (tags::ORDER_QTY, qty),
                    (tags::ORD_TYPE, "2"),
                    (tags::PRICE, price),
                ],
            );
            let (frame, _) = next_frame(&bytes, 4096).unwrap().unwrap();
            let nos = NewOrderSingle::decode(&frame).unwrap();
            let Err(Report::Execution(e)) = desk.new_order(&nos, &instruments(), 0) else {
                panic!("{qty} @ {price} must be refused")
            };
            assert_eq!(e.exec_type, app::exec_type::REJECTED);
            assert_eq!(e.raw_qty.unwrap().to_string(), qty);
        }
    }
}
