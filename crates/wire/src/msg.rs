//! The messages of the protocol, as values. Their byte layouts are in `codec.rs` and
//! `docs/protocol.md`.

use std::fmt;

use rialto_core::{
    CancelReason, CurrencyTotals, Level, Name, OrderExtras, OrderId, OrderType, Phase, Priority,
    Reason, Side, Stp, SymbolId, SymbolSpec, SymbolStatus, Tif, UserId, UserReport,
};

/// Client → server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientMsg {
    /// Trader login on the order gateway.
    Login {
        user: UserId,
        secret: Secret,
    },
    /// Only meaningful on the admin listener.
    AdminLogin {
        secret: Secret,
    },
    /// The server answers with a Heartbeat carrying the same nonce.
    Heartbeat {
        nonce: u64,
    },
    NewOrder(NewOrder),
    Cancel {
        order: OrderId,
    },
    Move {
        order: OrderId,
        price: i64,
    },
    Reduce {
        order: OrderId,
        qty: i64,
    },
    /// Changes a live order's price, total quantity (filled + remaining, as FIX `OrderQty`)
    /// and/or stop price at once (docs/rules.md, "Amend"). A field left `None` keeps its value.
    Amend {
        order: OrderId,
        price: Option<i64>,
        qty: Option<i64>,
        stop_price: Option<i64>,
    },
    /// `None` cancels on every symbol (`u32::MAX` on the wire, so `Some(SymbolId::NONE)` is
    /// read back as `None`).
    MassCancel {
        symbol: Option<SymbolId>,
    },
    /// Admin: every user's id.
    ListUsers {
        request: u64,
    },
    ListSymbols {
        request: u64,
    },
    /// The sender's own balances and open orders.
    MyReport {
        request: u64,
    },
    /// [`ClientMsg::MyReport`] answered by [`ServerMsg::ReportExt`]: every field of each open
    /// order (type, tif, stop price, shown quantity, filled, expiry).
    MyReportExt {
        request: u64,
    },
    /// What became of one of the sender's orders, by its order id: answered by
    /// [`ServerMsg::OrderStatus`] (after a fail-over: was an order in flight placed?).
    OrderStatus {
        request: u64,
        order: OrderId,
    },
    Book {
        request: u64,
        symbol: SymbolId,
        depth: u32,
    },
    // Admin only.
    AddSymbol {
        request: u64,
        spec: SymbolSpec,
    },
    AddUser {
        request: u64,
        user: UserId,
    },
    AdjustBalance {
        request: u64,
        user: UserId,
        currency: Name,
        amount: i64,
        tx: i64,
    },
    TakeSnapshot {
        request: u64,
    },
    UserReport {
        request: u64,
        user: UserId,
    },
    /// Admin: [`ClientMsg::UserReport`] answered by [`ServerMsg::ReportExt`].
    UserReportExt {
        request: u64,
        user: UserId,
    },
    VenueReport {
        request: u64,
    },
    /// Admin: how long (ns of venue time) the id of an order that ended stays taken
    /// (docs/rules.md, "Order ids are not reused within a window").
    SetOrderIdWindow {
        request: u64,
        window_ns: i64,
    },
    /// Admin: the venue's settings (answered by [`ServerMsg::VenueSettings`]).
    VenueSettings {
        request: u64,
    },
    /// Admin: a symbol's trading phase; `None` is a phase code this version does not know
    /// (the engine rejects it `invalid_phase`).
    SetPhase {
        request: u64,
        symbol: SymbolId,
        phase: Option<Phase>,
    },
    /// Admin: a symbol's price band in basis points of its reference price (0: none).
    SetBand {
        request: u64,
        symbol: SymbolId,
        band_bps: i64,
    },
    /// Admin: a symbol's reference price.
    SetRefPrice {
        request: u64,
        symbol: SymbolId,
        price: i64,
    },
    /// Admin: cancels a user's orders and refuses new ones until resumed.
    SuspendUser {
        request: u64,
        user: UserId,
    },
    ResumeUser {
        request: u64,
        user: UserId,
    },
    /// Admin: a future's mark price, ticks (docs/rules.md, "Futures"); a change may start a
    /// liquidation pass.
    SetMarkPrice {
        request: u64,
        symbol: SymbolId,
        price: i64,
    },
    /// Admin: adds to (amount > 0) or takes from (< 0) a currency's insurance fund; `tx` shares
    /// the id space of [`ClientMsg::AdjustBalance`].
    FundInsurance {
        request: u64,
        currency: Name,
        amount: i64,
        tx: i64,
    },
}

impl ClientMsg {
    /// The request id of a query or admin command, which its reply carries back.
    pub fn request_id(&self) -> Option<u64> {
        match *self {
            ClientMsg::ListSymbols { request }
            | ClientMsg::ListUsers { request }
            | ClientMsg::MyReport { request }
            | ClientMsg::MyReportExt { request }
            | ClientMsg::OrderStatus { request, .. }
            | ClientMsg::Book { request, .. }
            | ClientMsg::AddSymbol { request, .. }
            | ClientMsg::AddUser { request, .. }
            | ClientMsg::AdjustBalance { request, .. }
            | ClientMsg::TakeSnapshot { request }
            | ClientMsg::UserReport { request, .. }
            | ClientMsg::UserReportExt { request, .. }
            | ClientMsg::VenueReport { request }
            | ClientMsg::SetOrderIdWindow { request, .. }
            | ClientMsg::VenueSettings { request }
            | ClientMsg::SetPhase { request, .. }
            | ClientMsg::SetBand { request, .. }
            | ClientMsg::SetRefPrice { request, .. }
            | ClientMsg::SuspendUser { request, .. }
            | ClientMsg::ResumeUser { request, .. }
            | ClientMsg::SetMarkPrice { request, .. }
            | ClientMsg::FundInsurance { request, .. } => Some(request),
            ClientMsg::Login { .. }
            | ClientMsg::AdminLogin { .. }
            | ClientMsg::Heartbeat { .. }
            | ClientMsg::NewOrder(_)
            | ClientMsg::Cancel { .. }
            | ClientMsg::Move { .. }
            | ClientMsg::Reduce { .. }
            | ClientMsg::Amend { .. }
            | ClientMsg::MassCancel { .. } => None,
        }
    }
}

/// A new order as a client sends it. An enum field the client sent with a code this version
/// does not know is `None`; the engine rejects the order with `invalid_order` in its place in
/// the rejection order (docs/rules.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOrder {
    pub order: OrderId,
    pub symbol: SymbolId,
    pub side: Option<Side>,
    pub order_type: Option<OrderType>,
    pub tif: Option<Tif>,
    pub stp: Option<Stp>,
    pub post_only: bool,
    pub price: Option<i64>,
    pub qty: i64,
    /// Stop price, display quantity, expiry time (docs/rules.md); [`OrderExtras::NONE`] for
    /// a plain order, which travels as NewOrder (0x10), any other as NewOrderExt (0x16).
    pub extras: OrderExtras,
}

impl NewOrder {
    /// A GTC limit order, cancel_taker self-trade prevention, not post-only.
    pub fn limit(order: OrderId, symbol: SymbolId, side: Side, price: i64, qty: i64) -> Self {
        NewOrder {
            order,
            symbol,
            side: Some(side),
            order_type: Some(OrderType::Limit),
            tif: Some(Tif::Gtc),
            stp: Some(Stp::CancelTaker),
            post_only: false,
            price: Some(price),
            qty,
            extras: OrderExtras::NONE,
        }
    }

    /// An unpriced market IOC order, cancel_taker self-trade prevention.
    pub fn market(order: OrderId, symbol: SymbolId, side: Side, qty: i64) -> Self {
        NewOrder {
            order_type: Some(OrderType::Market),
            tif: Some(Tif::Ioc),
            price: None,
            ..NewOrder::limit(order, symbol, side, 0, qty)
        }
    }
}

/// A login secret: 1 to [`Secret::MAX_LEN`] bytes, held inline. Its `Debug` shows only the
/// length, so a secret never reaches a log by accident.
#[derive(Clone)]
pub struct Secret {
    len: u8,
    bytes: [u8; Secret::MAX_LEN],
}

impl Secret {
    pub const MAX_LEN: usize = 64;

    /// `None` when `bytes` is empty or longer than [`Secret::MAX_LEN`].
    pub fn new(bytes: &[u8]) -> Option<Secret> {
        if bytes.is_empty() || bytes.len() > Self::MAX_LEN {
            return None;
        }
        let mut inline = [0u8; Self::MAX_LEN];
        inline[..bytes.len()].copy_from_slice(bytes);
        Some(Secret {
            len: bytes.len() as u8,
            bytes: inline,
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(<{} bytes>)", self.len)
    }
}

/// Server → client. `seq` is the venue's sequence number of the command, `ts_ns` its sequencer
/// time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerMsg {
    /// `user` is 0 for an admin login.
    LoginAccepted {
        user: UserId,
        last_seq: u64,
    },
    /// A protocol-level problem. `message` is at most [`crate::MAX_ERROR_MESSAGE`] bytes of
    /// UTF-8; the encoder cuts a longer one at a character boundary.
    Error {
        code: ErrorCode,
        message: String,
    },
    Heartbeat {
        nonce: u64,
    },
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
    /// At most [`crate::MAX_SYMBOL_LIST_ITEMS`] symbols.
    SymbolList {
        request: u64,
        symbols: Vec<(SymbolId, SymbolSpec)>,
    },
    /// At most [`crate::MAX_USER_LIST_ITEMS`] users, ascending.
    UserList {
        request: u64,
        users: Vec<UserId>,
    },
    /// At most [`crate::MAX_REPORT_BALANCES`] balances, [`crate::MAX_REPORT_ORDERS`] orders,
    /// [`crate::MAX_REPORT_POSITIONS`] positions (`report.positions`) and
    /// [`crate::MAX_REPORT_MARGINS`] margins. `seq`: the venue's last sequence number when the
    /// report was made, the state it shows.
    Report {
        request: u64,
        seq: u64,
        report: UserReport,
        /// The user's margin in each currency that quotes a future it has a position or an
        /// open order in, by currency name.
        margins: Vec<Margin>,
    },
    /// A [`ServerMsg::Report`] whose open orders carry all their fields, answering the `Ext`
    /// requests. At most [`crate::MAX_REPORT_BALANCES`] balances,
    /// [`crate::MAX_REPORT_EXT_ORDERS`] orders, and positions and margins as in Report.
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
    /// At most [`crate::MAX_VENUE_CURRENCIES`] currencies.
    VenueReport {
        request: u64,
        totals: Vec<CurrencyTotals>,
    },
    /// At most [`crate::MAX_BOOK_LEVELS`] levels a side.
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
    /// [`crate::MAX_SYMBOL_LIST_ITEMS`] symbols.
    VenueSettings {
        request: u64,
        seq: u64,
        order_id_window_ns: i64,
        symbols: Vec<(SymbolId, SymbolStatus)>,
    },
}

impl ServerMsg {
    /// The request id this message answers, for replies to queries and admin commands.
    pub fn request_id(&self) -> Option<u64> {
        match *self {
            ServerMsg::SymbolList { request, .. }
            | ServerMsg::UserList { request, .. }
            | ServerMsg::Report { request, .. }
            | ServerMsg::ReportExt { request, .. }
            | ServerMsg::OrderStatus { request, .. }
            | ServerMsg::VenueReport { request, .. }
            | ServerMsg::Book { request, .. }
            | ServerMsg::AdminResult { request, .. }
            | ServerMsg::UserAdded { request, .. }
            | ServerMsg::SnapshotTaken { request, .. }
            | ServerMsg::VenueSettings { request, .. } => Some(request),
            ServerMsg::LoginAccepted { .. }
            | ServerMsg::Error { .. }
            | ServerMsg::Heartbeat { .. }
            | ServerMsg::Accepted { .. }
            | ServerMsg::Rejected { .. }
            | ServerMsg::Trade { .. }
            | ServerMsg::Cancelled { .. }
            | ServerMsg::Amended { .. }
            | ServerMsg::Triggered { .. }
            | ServerMsg::PhaseChanged { .. }
            | ServerMsg::Auction { .. }
            | ServerMsg::Liquidated { .. } => None,
        }
    }
}

/// A user's cross margin in one quote currency (docs/rules.md, "Futures"), each figure in
/// minor units of that currency, saturated to i64: equity (available plus unrealised PnL at
/// the mark), the initial margin its positions and orders need, and the maintenance margin
/// under which it is liquidated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Margin {
    pub currency: Name,
    pub equity: i64,
    pub initial: i64,
    pub maintenance: i64,
}

macro_rules! code_enum {
    ($(#[$meta:meta])* $name:ident : $repr:ty { $($variant:ident = $code:literal => $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr($repr)]
        pub enum $name { $($variant = $code),+ }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The snake_case name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }

            /// The code on the wire.
            pub fn code(self) -> $repr {
                self as $repr
            }

            /// The inverse of [`Self::code`]; `None` for a code no value has.
            pub fn from_code(code: $repr) -> Option<$name> {
                match code { $($code => Some($name::$variant),)+ _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

code_enum!(
    /// Which kind of order command an Accepted or Rejected answers.
    RequestKind: u8 {
        Place = 0 => "place",
        Cancel = 1 => "cancel",
        Move = 2 => "move",
        Reduce = 3 => "reduce",
        MassCancel = 4 => "mass_cancel",
        Amend = 5 => "amend",
    }
);

code_enum!(
    /// What an order-status query found. `Unknown`: the venue has no order of the user's with
    /// that id open, and none that ended within its order-id window (never placed, rejected,
    /// or ended longer ago than the window). `Open`: resting on the book or a pending stop.
    /// `Ended`: placed, then filled, cancelled or expired, and its id is still taken (the
    /// order-id window remembers it).
    OrderState: u8 {
        Unknown = 0 => "unknown",
        Open = 1 => "open",
        Ended = 2 => "ended",
    }
);

code_enum!(
    /// Whether a fill's order was resting (maker) or incoming (taker).
    Liquidity: u8 {
        Maker = 0 => "maker",
        Taker = 1 => "taker",
    }
);

code_enum!(
    /// What a protocol-level [`ServerMsg::Error`] is about.
    ErrorCode: u16 {
        Malformed = 1 => "malformed",
        UnknownType = 2 => "unknown_type",
        UnsupportedVersion = 3 => "unsupported_version",
        TooLarge = 4 => "too_large",
        NotLoggedIn = 5 => "not_logged_in",
        AuthFailed = 6 => "auth_failed",
        NotAdmin = 7 => "not_admin",
        Throttled = 8 => "throttled",
        AlreadyLoggedIn = 9 => "already_logged_in",
        Busy = 10 => "busy",
        ShuttingDown = 11 => "shutting_down",
        Internal = 12 => "internal",
    }
);
