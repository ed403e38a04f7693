//! What the engine stage tells the gateways: [`Event`], the one internal message between the
//! engine stage and every gateway (binary, FIX, web), and [`Outbound`], an event with the
//! session, user or audience it is for.
//!
//! It carries the command's result and the events it caused, as values; it is not the binary
//! protocol's message. The binary gateway turns each event into a `wire::ServerMsg` (a move,
//! no copy of its lists) and encodes that (server/src/gateway.rs); the FIX gateway
//! (server/src/fix/mod.rs) and the web side (server/src/web/bridge.rs, history.rs) translate
//! the events themselves. The lists it carries (reports, books, symbol lists) are already cut
//! to what one binary frame holds (the limits in docs/protocol.md), so every gateway shows the
//! same answer.

use rialto_core::{
    CancelReason, CurrencyTotals, Level, Name, OrderId, Phase, Priority, Reason, Side, SymbolId,
    SymbolSpec, SymbolStatus, UserId, UserReport,
};
use rialto_wire::{ErrorCode, Liquidity, Margin, OrderState, RequestKind, Secret, ServerMsg};

use crate::pipeline::SessionId;

/// Who an event is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Session(SessionId),
    /// Every session logged in as this user (fills and cancels of its orders).
    User(UserId),
    /// Everyone: every logged-in binary and FIX session and the web's public `status`
    /// channel (phase changes and auction results).
    Public,
    /// The web's public `status` channel only: a symbol's new band or reference price, which no
    /// binary or FIX message carries (a `VenueSettings` of that one symbol).
    WebStatus,
}

/// An event on its way from the engine stage (or the snapshot writer) to the gateways.
#[derive(Clone, Debug)]
pub struct Outbound {
    pub target: Target,
    pub event: Event,
}

/// What the engine stage tells a gateway: a command's answer or one of its events. `seq` is
/// the venue's sequence number of the command, `ts_ns` its sequencer time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A protocol-level problem. `message` is at most [`rialto_wire::MAX_ERROR_MESSAGE`] bytes of
    /// UTF-8; the encoder cuts a longer one at a character boundary.
    Error { code: ErrorCode, message: String },
    Accepted {
        seq: u64,
        ts_ns: i64,
        order: OrderId,
        kind: RequestKind,
    },
    Rejected {
        seq: u64,
        ts_ns: i64,
        order: OrderId,
        kind: RequestKind,
        reason: Reason,
    },
    Trade {
        seq: u64,
        ts_ns: i64,
        order: OrderId,
        symbol: SymbolId,
        side: Side,
        price: i64,
        qty: i64,
        fee: i64,
        liquidity: Liquidity,
    },
    Cancelled {
        seq: u64,
        ts_ns: i64,
        order: OrderId,
        symbol: SymbolId,
        side: Side,
        qty: i64,
        reason: CancelReason,
    },
    /// An order of the receiver's was amended (docs/rules.md, "Amend"): its price, stop price
    /// (0 for an order that is not a pending stop), new remaining quantity, and whether it
    /// kept its place in its level's queue.
    Amended {
        seq: u64,
        ts_ns: i64,
        order: OrderId,
        symbol: SymbolId,
        side: Side,
        price: i64,
        stop_price: i64,
        remaining: i64,
        priority: Priority,
    },
    /// A pending stop order of the receiver's triggered: it enters the book now, as a market
    /// (stop) or limit (stop-limit) order; its trades follow.
    Triggered {
        seq: u64,
        ts_ns: i64,
        order: OrderId,
        symbol: SymbolId,
        side: Side,
        stop_price: i64,
    },
    /// A symbol's trading phase changed (to every logged-in session).
    PhaseChanged {
        seq: u64,
        ts_ns: i64,
        symbol: SymbolId,
        phase: Phase,
    },
    /// A symbol was added (to every gateway, `Target::Public`): the FIX gateway takes it into
    /// its instrument list at once. No binary or web message carries it ([`Event::into_wire`]
    /// gives none); a symbol's terms never change once added.
    SymbolAdded {
        seq: u64,
        ts_ns: i64,
        symbol: SymbolId,
        spec: SymbolSpec,
    },
    /// A call auction uncrossed (to every logged-in session): its price, the lots executed
    /// and the imbalance (bids minus asks at that price). Follows the uncross trades.
    Auction {
        seq: u64,
        ts_ns: i64,
        symbol: SymbolId,
        price: i64,
        qty: i64,
        imbalance: i64,
    },
    /// The receiver's margin in `currency` fell below maintenance and its futures positions
    /// there were closed (docs/rules.md, "Futures"): follows the liquidation's cancellations
    /// and trades. Equity and maintenance are before the liquidation (saturated to i64);
    /// `shortfall` is what the insurance fund paid (0 if nothing).
    Liquidated {
        seq: u64,
        ts_ns: i64,
        currency: Name,
        equity: i64,
        maintenance: i64,
        shortfall: i64,
    },
    /// At most [`rialto_wire::MAX_SYMBOL_LIST_ITEMS`] symbols.
    SymbolList {
        request: u64,
        symbols: Vec<(SymbolId, SymbolSpec)>,
    },
    /// At most [`rialto_wire::MAX_USER_LIST_ITEMS`] users, ascending.
    UserList { request: u64, users: Vec<UserId> },
    /// At most [`rialto_wire::MAX_REPORT_BALANCES`] balances, [`rialto_wire::MAX_REPORT_ORDERS`] orders,
    /// [`rialto_wire::MAX_REPORT_POSITIONS`] positions (`report.positions`) and
    /// [`rialto_wire::MAX_REPORT_MARGINS`] margins. `seq`: the venue's last sequence number when the
    /// report was made, the state it shows.
    Report {
        request: u64,
        seq: u64,
        report: UserReport,
        /// The user's margin in each currency that quotes a future it has a position or an
        /// open order in, by currency name.
        margins: Vec<Margin>,
    },
    /// A [`Event::Report`] whose open orders carry all their fields, answering the `Ext`
    /// requests. At most [`rialto_wire::MAX_REPORT_BALANCES`] balances,
    /// [`rialto_wire::MAX_REPORT_EXT_ORDERS`] orders, and positions and margins as in Report.
    ReportExt {
        request: u64,
        seq: u64,
        report: UserReport,
        margins: Vec<Margin>,
    },
    /// The state of one of the user's orders as of `seq` (the venue's last sequence number):
    /// `remaining` is its open quantity while it is `open`, else 0.
    OrderStatus {
        request: u64,
        seq: u64,
        order: OrderId,
        state: OrderState,
        remaining: i64,
    },
    /// At most [`rialto_wire::MAX_VENUE_CURRENCIES`] currencies.
    VenueReport {
        request: u64,
        totals: Vec<CurrencyTotals>,
    },
    /// At most [`rialto_wire::MAX_BOOK_LEVELS`] levels a side.
    Book {
        request: u64,
        seq: u64,
        symbol: SymbolId,
        bids: Vec<Level>,
        asks: Vec<Level>,
    },
    AdminResult {
        request: u64,
        seq: u64,
        result: Result<(), Reason>,
    },
    UserAdded {
        request: u64,
        seq: u64,
        user: UserId,
        secret: Secret,
    },
    SnapshotTaken {
        request: u64,
        seq: u64,
        state_hash: [u8; 32],
    },
    /// The venue's settings as of `seq`: the order-id window, and each symbol's trading
    /// status (phase, last and reference price, band), by id; at most
    /// [`rialto_wire::MAX_SYMBOL_LIST_ITEMS`] symbols.
    VenueSettings {
        request: u64,
        seq: u64,
        order_id_window_ns: i64,
        symbols: Vec<(SymbolId, SymbolStatus)>,
    },
}

impl Event {
    /// The binary protocol's message for this event (docs/protocol.md): a move, nothing is
    /// copied. `None` for an event no binary message carries (a symbol added: binary clients
    /// ask for the symbol list).
    pub fn into_wire(self) -> Option<ServerMsg> {
        Some(match self {
            Event::SymbolAdded { .. } => return None,
            Event::Error { code, message } => ServerMsg::Error { code, message },
            Event::Accepted {
                seq,
                ts_ns,
                order,
                kind,
            } => ServerMsg::Accepted {
                seq,
                ts_ns,
                order,
                kind,
            },
            Event::Rejected {
                seq,
                ts_ns,
                order,
                kind,
                reason,
            } => ServerMsg::Rejected {
                seq,
                ts_ns,
                order,
                kind,
                reason,
            },
            Event::Trade {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                price,
                qty,
                fee,
                liquidity,
            } => ServerMsg::Trade {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                price,
                qty,
                fee,
                liquidity,
            },
            Event::Cancelled {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                qty,
                reason,
            } => ServerMsg::Cancelled {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                qty,
                reason,
            },
            Event::Amended {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                price,
                stop_price,
                remaining,
                priority,
            } => ServerMsg::Amended {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                price,
                stop_price,
                remaining,
                priority,
            },
            Event::Triggered {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                stop_price,
            } => ServerMsg::Triggered {
                seq,
                ts_ns,
                order,
                symbol,
                side,
                stop_price,
            },
            Event::PhaseChanged {
                seq,
                ts_ns,
                symbol,
                phase,
            } => ServerMsg::PhaseChanged {
                seq,
                ts_ns,
                symbol,
                phase,
            },
            Event::Auction {
                seq,
                ts_ns,
                symbol,
                price,
                qty,
                imbalance,
            } => ServerMsg::Auction {
                seq,
                ts_ns,
                symbol,
                price,
                qty,
                imbalance,
            },
            Event::Liquidated {
                seq,
                ts_ns,
                currency,
                equity,
                maintenance,
                shortfall,
            } => ServerMsg::Liquidated {
                seq,
                ts_ns,
                currency,
                equity,
                maintenance,
                shortfall,
            },
            Event::SymbolList { request, symbols } => ServerMsg::SymbolList { request, symbols },
            Event::UserList { request, users } => ServerMsg::UserList { request, users },
            Event::Report {
                request,
                seq,
                report,
                margins,
            } => ServerMsg::Report {
                request,
                seq,
                report,
                margins,
            },
            Event::ReportExt {
                request,
                seq,
                report,
                margins,
            } => ServerMsg::ReportExt {
                request,
                seq,
                report,
                margins,
            },
            Event::OrderStatus {
                request,
                seq,
                order,
                state,
                remaining,
            } => ServerMsg::OrderStatus {
                request,
                seq,
                order,
                state,
                remaining,
            },
            Event::VenueReport { request, totals } => ServerMsg::VenueReport { request, totals },
            Event::Book {
                request,
                seq,
                symbol,
                bids,
                asks,
            } => ServerMsg::Book {
                request,
                seq,
                symbol,
                bids,
                asks,
            },
            Event::AdminResult {
                request,
                seq,
                result,
            } => ServerMsg::AdminResult {
                request,
                seq,
                result,
            },
            Event::UserAdded {
                request,
                seq,
                user,
                secret,
            } => ServerMsg::UserAdded {
                request,
                seq,
                user,
                secret,
            },
            Event::SnapshotTaken {
                request,
                seq,
                state_hash,
            } => ServerMsg::SnapshotTaken {
                request,
                seq,
                state_hash,
            },
            Event::VenueSettings {
                request,
                seq,
                order_id_window_ns,
                symbols,
            } => ServerMsg::VenueSettings {
                request,
                seq,
                order_id_window_ns,
                symbols,
            },
        })
    }

    /// The request id this event answers, for replies to queries and admin commands.
    pub fn request_id(&self) -> Option<u64> {
        match *self {
            Event::SymbolList { request, .. }
            | Event::UserList { request, .. }
            | Event::Report { request, .. }
            | Event::ReportExt { request, .. }
            | Event::OrderStatus { request, .. }
            | Event::VenueReport { request, .. }
            | Event::Book { request, .. }
            | Event::AdminResult { request, .. }
            | Event::UserAdded { request, .. }
            | Event::SnapshotTaken { request, .. }
            | Event::VenueSettings { request, .. } => Some(request),
            Event::Error { .. }
            | Event::Accepted { .. }
            | Event::Rejected { .. }
            | Event::Trade { .. }
            | Event::Cancelled { .. }
            | Event::Amended { .. }
            | Event::Triggered { .. }
            | Event::PhaseChanged { .. }
            | Event::Auction { .. }
            | Event::SymbolAdded { .. }
            | Event::Liquidated { .. } => None,
        }
    }
}
