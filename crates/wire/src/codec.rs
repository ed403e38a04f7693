//! Encoding and decoding of frames. Layouts: `docs/protocol.md`.

use rialto_core::{
    Balance, CancelReason, CurrencyTotals, Level, Name, OpenOrder, OrderExtras, OrderType, Phase,
    Position, Priority, Reason, Side, Stp, SymbolId, SymbolKind, SymbolSpec, SymbolStatus, Tif,
    UserReport,
};

use crate::error::WireError;
use crate::msg::{
    ClientMsg, ErrorCode, Liquidity, Margin, NewOrder, OrderState, RequestKind, Secret, ServerMsg,
};
use crate::{MAX_CLIENT_FRAME, MAX_SERVER_FRAME, PROTOCOL_VERSION};

/// Frame type codes. Client → server below 0x80, server → client from 0x80.
mod ty {
    pub const LOGIN: u8 = 0x01;
    pub const ADMIN_LOGIN: u8 = 0x02;
    pub const HEARTBEAT: u8 = 0x03;
    pub const NEW_ORDER: u8 = 0x10;
    pub const CANCEL: u8 = 0x11;
    pub const MOVE: u8 = 0x12;
    pub const REDUCE: u8 = 0x13;
    pub const MASS_CANCEL: u8 = 0x14;
    pub const AMEND: u8 = 0x15;
    pub const NEW_ORDER_EXT: u8 = 0x16;
    pub const LIST_SYMBOLS: u8 = 0x20;
    pub const MY_REPORT: u8 = 0x21;
    pub const BOOK: u8 = 0x22;
    pub const MY_REPORT_EXT: u8 = 0x23;
    pub const ORDER_STATUS: u8 = 0x24;
    pub const ADD_SYMBOL: u8 = 0x40;
    pub const ADD_USER: u8 = 0x41;
    pub const ADJUST_BALANCE: u8 = 0x42;
    pub const TAKE_SNAPSHOT: u8 = 0x43;
    pub const USER_REPORT: u8 = 0x44;
    pub const VENUE_REPORT: u8 = 0x45;
    pub const LIST_USERS: u8 = 0x46;
    pub const SET_ORDER_ID_WINDOW: u8 = 0x47;
    pub const VENUE_SETTINGS: u8 = 0x48;
    pub const SET_PHASE: u8 = 0x49;
    pub const SET_BAND: u8 = 0x4a;
    pub const SET_REF_PRICE: u8 = 0x4b;
    pub const SUSPEND_USER: u8 = 0x4c;
    pub const RESUME_USER: u8 = 0x4d;
    pub const USER_REPORT_EXT: u8 = 0x4e;
    pub const SET_MARK_PRICE: u8 = 0x4f;
    pub const FUND_INSURANCE: u8 = 0x50;

    pub const S_LOGIN_ACCEPTED: u8 = 0x81;
    pub const S_ERROR: u8 = 0x82;
    pub const S_HEARTBEAT: u8 = 0x83;
    pub const S_ACCEPTED: u8 = 0x84;
    pub const S_REJECTED: u8 = 0x85;
    pub const S_TRADE: u8 = 0x86;
    pub const S_CANCELLED: u8 = 0x87;
    pub const S_AMENDED: u8 = 0x88;
    pub const S_TRIGGERED: u8 = 0x89;
    pub const S_PHASE_CHANGED: u8 = 0x8a;
    pub const S_AUCTION: u8 = 0x8b;
    pub const S_LIQUIDATED: u8 = 0x8c;
    pub const S_SYMBOL_LIST: u8 = 0x90;
    pub const S_REPORT: u8 = 0x91;
    pub const S_VENUE_REPORT: u8 = 0x92;
    pub const S_BOOK: u8 = 0x93;
    pub const S_ADMIN_RESULT: u8 = 0x94;
    pub const S_USER_ADDED: u8 = 0x95;
    pub const S_SNAPSHOT_TAKEN: u8 = 0x96;
    pub const S_USER_LIST: u8 = 0x97;
    pub const S_VENUE_SETTINGS: u8 = 0x98;
    pub const S_REPORT_EXT: u8 = 0x99;
    pub const S_ORDER_STATUS: u8 = 0x9a;
}

/// Code written for an enum field of a new order that is `None`.
const NO_CODE: u8 = 255;
/// `MassCancel` symbol meaning every symbol.
const ALL_SYMBOLS: u32 = u32::MAX;
/// `AdminResult` result byte meaning success; otherwise a `Reason` code.
const RESULT_OK: u8 = 255;
const FLAG_POST_ONLY: u8 = 0x01;
const FLAG_HAS_PRICE: u8 = 0x02;
// Amend: which fields are present.
const AMEND_PRICE: u8 = 0x01;
const AMEND_QTY: u8 = 0x02;
const AMEND_STOP_PRICE: u8 = 0x04;
// NewOrderExt: which extras are present (after the NewOrder flags).
const EXT_STOP_PRICE: u8 = 0x01;
const EXT_DISPLAY_QTY: u8 = 0x02;
const EXT_EXPIRE_TS: u8 = 0x04;
// A spec's extension: the symbol type codes.
const KIND_SPOT: u8 = 0;
const KIND_FUTURE: u8 = 1;

// Largest encoded sizes of the variable parts, for the list limits below.
const NAME_MAX: usize = 1 + Name::MAX_LEN;
const SPEC_MAX: usize = 3 * NAME_MAX + 4 * 8;
/// A spec's extension (band, day end, type, margins, mark), in AddSymbol and SymbolList.
const SPEC_EXT: usize = 5 * 8 + 1;
/// A VenueReport currency's futures part: insurance (`i64`) and position cost (`i128`).
const TOTALS_EXT: usize = 8 + 16;
/// A VenueSettings symbol's futures part: the future flag and the mark.
const STATUS_EXT: usize = 1 + 8;
// VenueSettings shares MAX_SYMBOL_LIST_ITEMS: its items are the smaller.
const _: () = assert!(4 + 1 + 3 * 8 + STATUS_EXT <= 4 + SPEC_MAX + SPEC_EXT);
const POSITION_MAX: usize = NAME_MAX + 2 * 8;
const MARGIN_MAX: usize = NAME_MAX + 3 * 8;
/// Version and type: the part of the length value before the body.
const VT: usize = 2;

/// Longest `ServerMsg::Error` message, in bytes.
pub const MAX_ERROR_MESSAGE: usize = 255;
/// Most symbols in one `SymbolList`.
pub const MAX_SYMBOL_LIST_ITEMS: usize =
    (MAX_SERVER_FRAME - VT - 8 - 2 * 4) / (4 + SPEC_MAX + SPEC_EXT);
/// Most users in one `UserList`.
pub const MAX_USER_LIST_ITEMS: usize = (MAX_SERVER_FRAME - VT - 8 - 4) / 8;
/// Most balances in one `Report`.
pub const MAX_REPORT_BALANCES: usize = 1024;
/// Most futures positions in one `Report` or `ReportExt`.
pub const MAX_REPORT_POSITIONS: usize = 1024;
/// Most margin entries (one per quote currency) in one `Report` or `ReportExt`.
pub const MAX_REPORT_MARGINS: usize = 1024;
/// A report's bytes besides its orders, at the largest: request, seq, user, four counts, the
/// balances, positions and margins.
const REPORT_FIXED_MAX: usize = 8
    + 8
    + 8
    + 4 * 4
    + MAX_REPORT_BALANCES * (NAME_MAX + 16)
    + MAX_REPORT_POSITIONS * POSITION_MAX
    + MAX_REPORT_MARGINS * MARGIN_MAX;
/// Most open orders in one `Report` (with the most balances, positions and margins beside
/// them).
pub const MAX_REPORT_ORDERS: usize =
    (MAX_SERVER_FRAME - VT - REPORT_FIXED_MAX) / (NAME_MAX + 8 + 1 + 8 + 8);
/// Most open orders in one `ReportExt` (with [`MAX_REPORT_BALANCES`] balances beside them):
/// each carries symbol, order, side, type, tif, price, stop price, remaining, shown, filled
/// and expiry.
pub const MAX_REPORT_EXT_ORDERS: usize =
    (MAX_SERVER_FRAME - VT - REPORT_FIXED_MAX) / (NAME_MAX + 8 + 3 + 6 * 8);
/// Most currencies in one `VenueReport`.
pub const MAX_VENUE_CURRENCIES: usize =
    (MAX_SERVER_FRAME - VT - 8 - 2 * 4) / (NAME_MAX + 5 * 8 + TOTALS_EXT);
/// Most levels a side in one `Book`.
pub const MAX_BOOK_LEVELS: usize = (MAX_SERVER_FRAME - VT - (8 + 8 + 4 + 4 + 4)) / (2 * 16);

// ---------------------------------------------------------------------------------------------
// Encoding

/// Appends one whole frame carrying `msg` to `out`.
pub fn encode_client(msg: &ClientMsg, out: &mut Vec<u8>) {
    let start = begin(out, client_type(msg));
    match msg {
        ClientMsg::Login { user, secret } => {
            put_i64(out, *user);
            put_secret(out, secret);
        }
        ClientMsg::AdminLogin { secret } => put_secret(out, secret),
        ClientMsg::Heartbeat { nonce } => put_u64(out, *nonce),
        ClientMsg::NewOrder(o) => {
            put_new_order(out, o);
            if !o.extras.is_none() {
                put_extras(out, &o.extras);
            }
        }
        ClientMsg::Cancel { order } => put_i64(out, *order),
        ClientMsg::Move { order, price } => {
            put_i64(out, *order);
            put_i64(out, *price);
        }
        ClientMsg::Reduce { order, qty } => {
            put_i64(out, *order);
            put_i64(out, *qty);
        }
        ClientMsg::Amend {
            order,
            price,
            qty,
            stop_price,
        } => {
            put_i64(out, *order);
            let flags = [
                (price, AMEND_PRICE),
                (qty, AMEND_QTY),
                (stop_price, AMEND_STOP_PRICE),
            ]
            .iter()
            .filter(|(field, _)| field.is_some())
            .fold(0, |flags, (_, bit)| flags | bit);
            put_u8(out, flags);
            put_i64(out, price.unwrap_or(0));
            put_i64(out, qty.unwrap_or(0));
            put_i64(out, stop_price.unwrap_or(0));
        }
        ClientMsg::MassCancel { symbol } => put_u32(out, symbol.map_or(ALL_SYMBOLS, |s| s.0)),
        ClientMsg::ListSymbols { request }
        | ClientMsg::MyReport { request }
        | ClientMsg::MyReportExt { request }
        | ClientMsg::TakeSnapshot { request }
        | ClientMsg::VenueReport { request }
        | ClientMsg::ListUsers { request }
        | ClientMsg::VenueSettings { request } => put_u64(out, *request),
        ClientMsg::SetOrderIdWindow { request, window_ns } => {
            put_u64(out, *request);
            put_i64(out, *window_ns);
        }
        ClientMsg::OrderStatus { request, order } => {
            put_u64(out, *request);
            put_i64(out, *order);
        }
        ClientMsg::SetPhase {
            request,
            symbol,
            phase,
        } => {
            put_u64(out, *request);
            put_u32(out, symbol.0);
            put_u8(out, phase.map_or(NO_CODE, Phase::code));
        }
        ClientMsg::SetBand {
            request,
            symbol,
            band_bps: value,
        }
        | ClientMsg::SetRefPrice {
            request,
            symbol,
            price: value,
        } => {
            put_u64(out, *request);
            put_u32(out, symbol.0);
            put_i64(out, *value);
        }
        ClientMsg::SuspendUser { request, user } | ClientMsg::ResumeUser { request, user } => {
            put_u64(out, *request);
            put_i64(out, *user);
        }
        ClientMsg::Book {
            request,
            symbol,
            depth,
        } => {
            put_u64(out, *request);
            put_u32(out, symbol.0);
            put_u32(out, *depth);
        }
        ClientMsg::AddSymbol { request, spec } => {
            put_u64(out, *request);
            put_spec(out, spec);
            if !spec_is_plain(spec) {
                put_spec_ext(out, spec);
            }
        }
        ClientMsg::SetMarkPrice {
            request,
            symbol,
            price,
        } => {
            put_u64(out, *request);
            put_u32(out, symbol.0);
            put_i64(out, *price);
        }
        ClientMsg::FundInsurance {
            request,
            currency,
            amount,
            tx,
        } => {
            put_u64(out, *request);
            put_name(out, currency);
            put_i64(out, *amount);
            put_i64(out, *tx);
        }
        ClientMsg::AddUser { request, user }
        | ClientMsg::UserReport { request, user }
        | ClientMsg::UserReportExt { request, user } => {
            put_u64(out, *request);
            put_i64(out, *user);
        }
        ClientMsg::AdjustBalance {
            request,
            user,
            currency,
            amount,
            tx,
        } => {
            put_u64(out, *request);
            put_i64(out, *user);
            put_name(out, currency);
            put_i64(out, *amount);
            put_i64(out, *tx);
        }
    }
    let len = finish(out, start);
    // The largest client body (AddSymbol, three full names and the extension) is far below
    // the limit.
    debug_assert!(len <= MAX_CLIENT_FRAME, "client frame of {len} bytes");
}

/// Appends one whole frame carrying `msg` to `out`.
///
/// # Panics
/// When a list is longer than its `MAX_*` constant: the server must cap lists (reports,
/// books, symbol lists) before encoding them, so that no frame exceeds [`MAX_SERVER_FRAME`].
/// An `Error` message longer than [`MAX_ERROR_MESSAGE`] bytes is cut, not a panic.
pub fn encode_server(msg: &ServerMsg, out: &mut Vec<u8>) {
    let start = begin(out, server_type(msg));
    match msg {
        ServerMsg::LoginAccepted { user, last_seq } => {
            put_i64(out, *user);
            put_u64(out, *last_seq);
        }
        ServerMsg::Error { code, message } => {
            let mut end = message.len().min(MAX_ERROR_MESSAGE);
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            put_u16(out, code.code());
            put_u8(out, end as u8);
            out.extend_from_slice(&message.as_bytes()[..end]);
        }
        ServerMsg::Heartbeat { nonce } => put_u64(out, *nonce),
        ServerMsg::Accepted {
            seq,
            ts_ns,
            order,
            kind,
        } => {
            put_u64(out, *seq);
            put_i64(out, *ts_ns);
            put_i64(out, *order);
            put_u8(out, kind.code());
        }
        ServerMsg::Rejected {
            seq,
            ts_ns,
            order,
            kind,
            reason,
        } => {
            put_u64(out, *seq);
            put_i64(out, *ts_ns);
            put_i64(out, *order);
            put_u8(out, kind.code());
            put_u8(out, reason.code());
        }
        ServerMsg::Trade {
            seq,
            ts_ns,
            order,
            symbol,
            side,
            price,
            qty,
            fee,
            liquidity,
        } => {
            put_u64(out, *seq);
            put_i64(out, *ts_ns);
            put_i64(out, *order);
            put_u32(out, symbol.0);
            put_u8(out, side.code());
            put_i64(out, *price);
            put_i64(out, *qty);
            put_i64(out, *fee);
            put_u8(out, liquidity.code());
        }
        ServerMsg::Cancelled {
            seq,
            ts_ns,
            order,
            symbol,
            side,
            qty,
            reason,
        } => {
            put_u64(out, *seq);
            put_i64(out, *ts_ns);
            put_i64(out, *order);
            put_u32(out, symbol.0);
            put_u8(out, side.code());
            put_i64(out, *qty);
            put_u8(out, reason.code());
        }
        ServerMsg::Amended {
            seq,
            ts_ns,
            order,
            symbol,
            side,
            price,
            stop_price,
            remaining,
            priority,
        } => {
            put_u64(out, *seq);
            put_i64(out, *ts_ns);
            put_i64(out, *order);
            put_u32(out, symbol.0);
            put_u8(out, side.code());
            put_i64(out, *price);
            put_i64(out, *stop_price);
            put_i64(out, *remaining);
            put_u8(out, priority.code());
        }
        ServerMsg::Triggered {
            seq,
            ts_ns,
            order,
            symbol,
            side,
            stop_price,
        } => {
            put_u64(out, *seq);
            put_i64(out, *ts_ns);
            put_i64(out, *order);
            put_u32(out, symbol.0);
            put_u8(out, side.code());
            put_i64(out, *stop_price);
        }
        ServerMsg::PhaseChanged {
            seq,
            ts_ns,
            symbol,
            phase,
        } => {
            put_u64(out, *seq);
            put_i64(out, *ts_ns);
            put_u32(out, symbol.0);
            put_u8(out, phase.code());
        }
        ServerMsg::Auction {
            seq,
            ts_ns,
            symbol,
            price,
            qty,
            imbalance,
        } => {
            put_u64(out, *seq);
            put_i64(out, *ts_ns);
            put_u32(out, symbol.0);
            put_i64(out, *price);
            put_i64(out, *qty);
            put_i64(out, *imbalance);
        }
        ServerMsg::Liquidated {
            seq,
            ts_ns,
            currency,
            equity,
            maintenance,
            shortfall,
        } => {
            put_u64(out, *seq);
            put_i64(out, *ts_ns);
            put_name(out, currency);
            put_i64(out, *equity);
            put_i64(out, *maintenance);
            put_i64(out, *shortfall);
        }
        ServerMsg::VenueSettings {
            request,
            seq,
            order_id_window_ns,
            symbols,
        } => {
            put_u64(out, *request);
            put_u64(out, *seq);
            put_i64(out, *order_id_window_ns);
            put_count(out, symbols.len(), MAX_SYMBOL_LIST_ITEMS, "venue settings");
            for (id, status) in symbols {
                put_u32(out, id.0);
                put_u8(out, status.phase.code());
                put_i64(out, status.last);
                put_i64(out, status.reference);
                put_i64(out, status.band_bps);
            }
            // The futures part only when there is a future (docs/protocol.md).
            if symbols.iter().any(|(_, s)| s.future || s.mark != 0) {
                put_u32(out, symbols.len() as u32);
                for (_, status) in symbols {
                    put_u8(out, u8::from(status.future));
                    put_i64(out, status.mark);
                }
            }
        }
        ServerMsg::SymbolList { request, symbols } => {
            put_u64(out, *request);
            put_count(out, symbols.len(), MAX_SYMBOL_LIST_ITEMS, "symbol list");
            for (id, spec) in symbols {
                put_u32(out, id.0);
                put_spec(out, spec);
            }
            if symbols.iter().any(|(_, spec)| !spec_is_plain(spec)) {
                put_u32(out, symbols.len() as u32);
                for (_, spec) in symbols {
                    put_spec_ext(out, spec);
                }
            }
        }
        ServerMsg::UserList { request, users } => {
            put_u64(out, *request);
            put_count(out, users.len(), MAX_USER_LIST_ITEMS, "user list");
            for user in users {
                put_i64(out, *user);
            }
        }
        ServerMsg::Report {
            request,
            seq,
            report,
            margins,
        } => {
            put_u64(out, *request);
            put_u64(out, *seq);
            put_report(out, report);
            put_futures_part(out, report, margins);
        }
        ServerMsg::ReportExt {
            request,
            seq,
            report,
            margins,
        } => {
            put_u64(out, *request);
            put_u64(out, *seq);
            put_report_ext(out, report);
            put_futures_part(out, report, margins);
        }
        ServerMsg::VenueReport { request, totals } => {
            put_u64(out, *request);
            put_count(out, totals.len(), MAX_VENUE_CURRENCIES, "venue report");
            for t in totals {
                put_name(out, &t.currency);
                put_i64(out, t.deposits);
                put_i64(out, t.withdrawals);
                put_i64(out, t.available);
                put_i64(out, t.held);
                put_i64(out, t.fees);
            }
            if totals
                .iter()
                .any(|t| t.insurance != 0 || t.position_cost != 0)
            {
                put_u32(out, totals.len() as u32);
                for t in totals {
                    put_i64(out, t.insurance);
                    out.extend_from_slice(&t.position_cost.to_le_bytes());
                }
            }
        }
        ServerMsg::Book {
            request,
            seq,
            symbol,
            bids,
            asks,
        } => {
            put_u64(out, *request);
            put_u64(out, *seq);
            put_u32(out, symbol.0);
            for levels in [bids, asks] {
                put_count(out, levels.len(), MAX_BOOK_LEVELS, "book side");
                for level in levels {
                    put_i64(out, level.price);
                    put_i64(out, level.qty);
                }
            }
        }
        ServerMsg::OrderStatus {
            request,
            seq,
            order,
            state,
            remaining,
        } => {
            put_u64(out, *request);
            put_u64(out, *seq);
            put_i64(out, *order);
            put_u8(out, state.code());
            put_i64(out, *remaining);
        }
        ServerMsg::AdminResult {
            request,
            seq,
            result,
        } => {
            put_u64(out, *request);
            put_u64(out, *seq);
            put_u8(out, result.map_or_else(|r| r.code(), |()| RESULT_OK));
        }
        ServerMsg::UserAdded {
            request,
            seq,
            user,
            secret,
        } => {
            put_u64(out, *request);
            put_u64(out, *seq);
            put_i64(out, *user);
            put_secret(out, secret);
        }
        ServerMsg::SnapshotTaken {
            request,
            seq,
            state_hash,
        } => {
            put_u64(out, *request);
            put_u64(out, *seq);
            out.extend_from_slice(state_hash);
        }
    }
    let len = finish(out, start);
    debug_assert!(len <= MAX_SERVER_FRAME, "server frame of {len} bytes");
}

fn client_type(msg: &ClientMsg) -> u8 {
    match msg {
        ClientMsg::Login { .. } => ty::LOGIN,
        ClientMsg::AdminLogin { .. } => ty::ADMIN_LOGIN,
        ClientMsg::Heartbeat { .. } => ty::HEARTBEAT,
        ClientMsg::NewOrder(o) if o.extras.is_none() => ty::NEW_ORDER,
        ClientMsg::NewOrder(_) => ty::NEW_ORDER_EXT,
        ClientMsg::Cancel { .. } => ty::CANCEL,
        ClientMsg::Move { .. } => ty::MOVE,
        ClientMsg::Reduce { .. } => ty::REDUCE,
        ClientMsg::MassCancel { .. } => ty::MASS_CANCEL,
        ClientMsg::Amend { .. } => ty::AMEND,
        ClientMsg::SetOrderIdWindow { .. } => ty::SET_ORDER_ID_WINDOW,
        ClientMsg::VenueSettings { .. } => ty::VENUE_SETTINGS,
        ClientMsg::SetPhase { .. } => ty::SET_PHASE,
        ClientMsg::SetBand { .. } => ty::SET_BAND,
        ClientMsg::SetRefPrice { .. } => ty::SET_REF_PRICE,
        ClientMsg::SuspendUser { .. } => ty::SUSPEND_USER,
        ClientMsg::ResumeUser { .. } => ty::RESUME_USER,
        ClientMsg::SetMarkPrice { .. } => ty::SET_MARK_PRICE,
        ClientMsg::FundInsurance { .. } => ty::FUND_INSURANCE,
        ClientMsg::ListSymbols { .. } => ty::LIST_SYMBOLS,
        ClientMsg::ListUsers { .. } => ty::LIST_USERS,
        ClientMsg::MyReport { .. } => ty::MY_REPORT,
        ClientMsg::MyReportExt { .. } => ty::MY_REPORT_EXT,
        ClientMsg::OrderStatus { .. } => ty::ORDER_STATUS,
        ClientMsg::Book { .. } => ty::BOOK,
        ClientMsg::AddSymbol { .. } => ty::ADD_SYMBOL,
        ClientMsg::AddUser { .. } => ty::ADD_USER,
        ClientMsg::AdjustBalance { .. } => ty::ADJUST_BALANCE,
        ClientMsg::TakeSnapshot { .. } => ty::TAKE_SNAPSHOT,
        ClientMsg::UserReport { .. } => ty::USER_REPORT,
        ClientMsg::UserReportExt { .. } => ty::USER_REPORT_EXT,
        ClientMsg::VenueReport { .. } => ty::VENUE_REPORT,
    }
}

fn server_type(msg: &ServerMsg) -> u8 {
    match msg {
        ServerMsg::LoginAccepted { .. } => ty::S_LOGIN_ACCEPTED,
        ServerMsg::Error { .. } => ty::S_ERROR,
        ServerMsg::Heartbeat { .. } => ty::S_HEARTBEAT,
        ServerMsg::Accepted { .. } => ty::S_ACCEPTED,
        ServerMsg::Rejected { .. } => ty::S_REJECTED,
        ServerMsg::Trade { .. } => ty::S_TRADE,
        ServerMsg::Cancelled { .. } => ty::S_CANCELLED,
        ServerMsg::Amended { .. } => ty::S_AMENDED,
        ServerMsg::Triggered { .. } => ty::S_TRIGGERED,
        ServerMsg::PhaseChanged { .. } => ty::S_PHASE_CHANGED,
        ServerMsg::Auction { .. } => ty::S_AUCTION,
        ServerMsg::Liquidated { .. } => ty::S_LIQUIDATED,
        ServerMsg::VenueSettings { .. } => ty::S_VENUE_SETTINGS,
        ServerMsg::SymbolList { .. } => ty::S_SYMBOL_LIST,
        ServerMsg::UserList { .. } => ty::S_USER_LIST,
        ServerMsg::Report { .. } => ty::S_REPORT,
        ServerMsg::ReportExt { .. } => ty::S_REPORT_EXT,
        ServerMsg::OrderStatus { .. } => ty::S_ORDER_STATUS,
        ServerMsg::VenueReport { .. } => ty::S_VENUE_REPORT,
        ServerMsg::Book { .. } => ty::S_BOOK,
        ServerMsg::AdminResult { .. } => ty::S_ADMIN_RESULT,
        ServerMsg::UserAdded { .. } => ty::S_USER_ADDED,
        ServerMsg::SnapshotTaken { .. } => ty::S_SNAPSHOT_TAKEN,
    }
}

/// Writes the header with a placeholder length; returns where the frame starts.
fn begin(out: &mut Vec<u8>, frame_type: u8) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, PROTOCOL_VERSION, frame_type]);
    start
}

/// Patches the length field of the frame at `start`; returns the length value.
fn finish(out: &mut [u8], start: usize) -> usize {
    let len = out.len() - start - 4;
    out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
    len
}

fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_count(out: &mut Vec<u8>, count: usize, max: usize, what: &str) {
    assert!(
        count <= max,
        "{what} of {count} items exceeds the wire limit of {max}: the server must cap it"
    );
    put_u32(out, count as u32);
}

fn put_name(out: &mut Vec<u8>, name: &Name) {
    let bytes = name.as_str().as_bytes();
    put_u8(out, bytes.len() as u8);
    out.extend_from_slice(bytes);
}

fn put_secret(out: &mut Vec<u8>, secret: &Secret) {
    let bytes = secret.as_bytes();
    put_u8(out, bytes.len() as u8);
    out.extend_from_slice(bytes);
}

fn put_spec(out: &mut Vec<u8>, spec: &SymbolSpec) {
    put_name(out, &spec.symbol);
    put_name(out, &spec.base);
    put_name(out, &spec.quote);
    put_i64(out, spec.base_scale);
    put_i64(out, spec.quote_scale);
    put_i64(out, spec.maker_fee);
    put_i64(out, spec.taker_fee);
}

/// Whether a spec needs no extension: a spot symbol without band or day end.
fn spec_is_plain(spec: &SymbolSpec) -> bool {
    spec.band_bps == 0 && spec.day_end == 0 && spec.kind == SymbolSpec::SPOT
}

fn put_spec_ext(out: &mut Vec<u8>, spec: &SymbolSpec) {
    put_i64(out, spec.band_bps);
    put_i64(out, spec.day_end);
    let (code, margins) = match spec.kind {
        Some(SymbolKind::Spot) => (KIND_SPOT, [0; 3]),
        Some(SymbolKind::Future {
            initial_margin,
            maintenance_margin,
            mark_price,
        }) => (
            KIND_FUTURE,
            [initial_margin, maintenance_margin, mark_price],
        ),
        None => (NO_CODE, [0; 3]),
    };
    put_u8(out, code);
    for value in margins {
        put_i64(out, value);
    }
}

/// A report's positions and margins, written only when there is one (docs/protocol.md: a
/// spot-only user's report keeps the layout it had before futures).
fn put_futures_part(out: &mut Vec<u8>, report: &UserReport, margins: &[Margin]) {
    if report.positions.is_empty() && margins.is_empty() {
        return;
    }
    put_count(
        out,
        report.positions.len(),
        MAX_REPORT_POSITIONS,
        "report positions",
    );
    for p in &report.positions {
        put_name(out, &p.symbol);
        put_i64(out, p.lots);
        put_i64(out, p.cost);
    }
    put_count(out, margins.len(), MAX_REPORT_MARGINS, "report margins");
    for m in margins {
        put_name(out, &m.currency);
        put_i64(out, m.equity);
        put_i64(out, m.initial);
        put_i64(out, m.maintenance);
    }
}

fn put_new_order(out: &mut Vec<u8>, o: &NewOrder) {
    put_i64(out, o.order);
    put_u32(out, o.symbol.0);
    put_u8(out, o.side.map_or(NO_CODE, Side::code));
    put_u8(out, o.order_type.map_or(NO_CODE, OrderType::code));
    put_u8(out, o.tif.map_or(NO_CODE, Tif::code));
    put_u8(out, o.stp.map_or(NO_CODE, Stp::code));
    let mut flags = 0;
    if o.post_only {
        flags |= FLAG_POST_ONLY;
    }
    if o.price.is_some() {
        flags |= FLAG_HAS_PRICE;
    }
    put_u8(out, flags);
    put_i64(out, o.price.unwrap_or(0));
    put_i64(out, o.qty);
}

fn put_extras(out: &mut Vec<u8>, extras: &OrderExtras) {
    let fields = [
        (extras.stop_price(), EXT_STOP_PRICE),
        (extras.display_qty(), EXT_DISPLAY_QTY),
        (extras.expire_ts(), EXT_EXPIRE_TS),
    ];
    let flags = fields
        .iter()
        .filter(|(v, _)| v.is_some())
        .fold(0, |flags, (_, bit)| flags | bit);
    put_u8(out, flags);
    for (value, _) in fields {
        put_i64(out, value.unwrap_or(0));
    }
}

fn put_balances(out: &mut Vec<u8>, report: &UserReport) {
    put_i64(out, report.user);
    put_count(
        out,
        report.balances.len(),
        MAX_REPORT_BALANCES,
        "report balances",
    );
    for (currency, balance) in &report.balances {
        put_name(out, currency);
        put_i64(out, balance.available);
        put_i64(out, balance.held);
    }
}

fn put_report(out: &mut Vec<u8>, report: &UserReport) {
    put_balances(out, report);
    put_count(out, report.orders.len(), MAX_REPORT_ORDERS, "report orders");
    for o in &report.orders {
        put_name(out, &o.symbol);
        put_i64(out, o.order);
        put_u8(out, o.side.code());
        put_i64(out, o.price);
        put_i64(out, o.remaining);
    }
}

fn put_report_ext(out: &mut Vec<u8>, report: &UserReport) {
    put_balances(out, report);
    put_count(
        out,
        report.orders.len(),
        MAX_REPORT_EXT_ORDERS,
        "report orders",
    );
    for o in &report.orders {
        put_name(out, &o.symbol);
        put_i64(out, o.order);
        put_u8(out, o.side.code());
        put_u8(out, o.order_type.code());
        put_u8(out, o.tif.code());
        for value in [
            o.price,
            o.stop_price,
            o.remaining,
            o.shown,
            o.filled,
            o.expire_ts,
        ] {
            put_i64(out, value);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// Decodes one client → server frame from the start of `buf`.
///
/// `Ok(None)`: `buf` holds no whole frame yet. `Ok(Some((msg, n)))`: the frame was the first
/// `n` bytes. An oversized or undersized length is refused as soon as the length field is in.
pub fn decode_client(buf: &[u8]) -> Result<Option<(ClientMsg, usize)>, WireError> {
    decode(buf, MAX_CLIENT_FRAME, client_body)
}

/// Decodes one server → client frame from the start of `buf`. Same contract as
/// [`decode_client`]; enum codes unknown to this version are errors here, since a server only
/// sends codes it knows.
pub fn decode_server(buf: &[u8]) -> Result<Option<(ServerMsg, usize)>, WireError> {
    decode(buf, MAX_SERVER_FRAME, server_body)
}

/// What a body decoder found wrong.
enum BodyError {
    UnknownType,
    Malformed(&'static str),
}

impl From<&'static str> for BodyError {
    fn from(field: &'static str) -> Self {
        BodyError::Malformed(field)
    }
}

fn decode<M>(
    buf: &[u8],
    max: usize,
    body: fn(u8, &mut Reader<'_>) -> Result<M, BodyError>,
) -> Result<Option<(M, usize)>, WireError> {
    let Some(len_bytes) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = u32::from_le_bytes(*len_bytes) as usize;
    if len > max {
        return Err(WireError::TooLarge { len, max });
    }
    if len < 2 {
        return Err(WireError::TooShort);
    }
    let frame_len = 4 + len;
    let Some(frame) = buf.get(..frame_len) else {
        return Ok(None);
    };
    let (version, frame_type) = (frame[4], frame[5]);
    if version != PROTOCOL_VERSION {
        return Err(WireError::UnsupportedVersion { version, frame_len });
    }
    let mut reader = Reader {
        buf: &frame[6..],
        pos: 0,
    };
    let result = body(frame_type, &mut reader).and_then(|msg| {
        reader.finish()?;
        Ok(msg)
    });
    match result {
        Ok(msg) => Ok(Some((msg, frame_len))),
        Err(BodyError::UnknownType) => Err(WireError::UnknownType {
            ty: frame_type,
            frame_len,
        }),
        Err(BodyError::Malformed(field)) => Err(WireError::Malformed { field, frame_len }),
    }
}

fn client_body(frame_type: u8, r: &mut Reader<'_>) -> Result<ClientMsg, BodyError> {
    let msg = match frame_type {
        ty::LOGIN => ClientMsg::Login {
            user: r.i64("user")?,
            secret: r.secret("secret")?,
        },
        ty::ADMIN_LOGIN => ClientMsg::AdminLogin {
            secret: r.secret("secret")?,
        },
        ty::HEARTBEAT => ClientMsg::Heartbeat {
            nonce: r.u64("nonce")?,
        },
        ty::NEW_ORDER => ClientMsg::NewOrder(new_order(r)?),
        ty::NEW_ORDER_EXT => {
            let order = new_order(r)?;
            ClientMsg::NewOrder(NewOrder {
                extras: extras(r)?,
                ..order
            })
        }
        ty::SET_PHASE => ClientMsg::SetPhase {
            request: r.u64("request")?,
            symbol: SymbolId(r.u32("symbol")?),
            // An unknown code is the engine's `invalid_phase`, not a decoding matter.
            phase: Phase::from_code(r.u8("phase")?),
        },
        ty::SET_BAND => ClientMsg::SetBand {
            request: r.u64("request")?,
            symbol: SymbolId(r.u32("symbol")?),
            band_bps: r.i64("band_bps")?,
        },
        ty::SET_REF_PRICE => ClientMsg::SetRefPrice {
            request: r.u64("request")?,
            symbol: SymbolId(r.u32("symbol")?),
            price: r.i64("price")?,
        },
        ty::SUSPEND_USER => ClientMsg::SuspendUser {
            request: r.u64("request")?,
            user: r.i64("user")?,
        },
        ty::RESUME_USER => ClientMsg::ResumeUser {
            request: r.u64("request")?,
            user: r.i64("user")?,
        },
        ty::CANCEL => ClientMsg::Cancel {
            order: r.i64("order")?,
        },
        ty::MOVE => ClientMsg::Move {
            order: r.i64("order")?,
            price: r.i64("price")?,
        },
        ty::REDUCE => ClientMsg::Reduce {
            order: r.i64("order")?,
            qty: r.i64("qty")?,
        },
        ty::AMEND => amend(r)?,
        ty::SET_ORDER_ID_WINDOW => ClientMsg::SetOrderIdWindow {
            request: r.u64("request")?,
            window_ns: r.i64("window_ns")?,
        },
        ty::VENUE_SETTINGS => ClientMsg::VenueSettings {
            request: r.u64("request")?,
        },
        ty::MASS_CANCEL => ClientMsg::MassCancel {
            symbol: match r.u32("symbol")? {
                ALL_SYMBOLS => None,
                id => Some(SymbolId(id)),
            },
        },
        ty::LIST_SYMBOLS => ClientMsg::ListSymbols {
            request: r.u64("request")?,
        },
        ty::LIST_USERS => ClientMsg::ListUsers {
            request: r.u64("request")?,
        },
        ty::MY_REPORT => ClientMsg::MyReport {
            request: r.u64("request")?,
        },
        ty::MY_REPORT_EXT => ClientMsg::MyReportExt {
            request: r.u64("request")?,
        },
        ty::ORDER_STATUS => ClientMsg::OrderStatus {
            request: r.u64("request")?,
            order: r.i64("order")?,
        },
        ty::BOOK => ClientMsg::Book {
            request: r.u64("request")?,
            symbol: SymbolId(r.u32("symbol")?),
            depth: r.u32("depth")?,
        },
        ty::ADD_SYMBOL => {
            let request = r.u64("request")?;
            let mut spec = r.spec()?;
            if !r.at_end() {
                // An unknown type code is the engine's `invalid_symbol`, not a decoding matter.
                r.spec_ext(&mut spec, false)?;
            }
            ClientMsg::AddSymbol { request, spec }
        }
        ty::SET_MARK_PRICE => ClientMsg::SetMarkPrice {
            request: r.u64("request")?,
            symbol: SymbolId(r.u32("symbol")?),
            price: r.i64("price")?,
        },
        ty::FUND_INSURANCE => ClientMsg::FundInsurance {
            request: r.u64("request")?,
            currency: r.name("currency")?,
            amount: r.i64("amount")?,
            tx: r.i64("tx")?,
        },
        ty::ADD_USER => ClientMsg::AddUser {
            request: r.u64("request")?,
            user: r.i64("user")?,
        },
        ty::ADJUST_BALANCE => ClientMsg::AdjustBalance {
            request: r.u64("request")?,
            user: r.i64("user")?,
            currency: r.name("currency")?,
            amount: r.i64("amount")?,
            tx: r.i64("tx")?,
        },
        ty::TAKE_SNAPSHOT => ClientMsg::TakeSnapshot {
            request: r.u64("request")?,
        },
        ty::USER_REPORT => ClientMsg::UserReport {
            request: r.u64("request")?,
            user: r.i64("user")?,
        },
        ty::USER_REPORT_EXT => ClientMsg::UserReportExt {
            request: r.u64("request")?,
            user: r.i64("user")?,
        },
        ty::VENUE_REPORT => ClientMsg::VenueReport {
            request: r.u64("request")?,
        },
        _ => return Err(BodyError::UnknownType),
    };
    Ok(msg)
}

fn new_order(r: &mut Reader<'_>) -> Result<NewOrder, &'static str> {
    let order = r.i64("order")?;
    let symbol = SymbolId(r.u32("symbol")?);
    // Unknown codes are not a decoding matter: the engine rejects them as invalid_order.
    let side = Side::from_code(r.u8("side")?);
    let order_type = OrderType::from_code(r.u8("order_type")?);
    let tif = Tif::from_code(r.u8("tif")?);
    let stp = Stp::from_code(r.u8("stp")?);
    let flags = r.u8("flags")?;
    if flags & !(FLAG_POST_ONLY | FLAG_HAS_PRICE) != 0 {
        return Err("flags");
    }
    let price = r.i64("price")?;
    let price = if flags & FLAG_HAS_PRICE != 0 {
        Some(price)
    } else if price == 0 {
        None
    } else {
        // One encoding per order: an absent price is written as 0.
        return Err("price");
    };
    Ok(NewOrder {
        order,
        symbol,
        side,
        order_type,
        tif,
        stp,
        post_only: flags & FLAG_POST_ONLY != 0,
        price,
        qty: r.i64("qty")?,
        extras: OrderExtras::NONE,
    })
}

fn extras(r: &mut Reader<'_>) -> Result<OrderExtras, &'static str> {
    let flags = r.u8("ext_flags")?;
    if flags & !(EXT_STOP_PRICE | EXT_DISPLAY_QTY | EXT_EXPIRE_TS) != 0 {
        return Err("ext_flags");
    }
    // One encoding per order: an absent field is written as 0.
    let mut field = |bit: u8, name: &'static str| -> Result<Option<i64>, &'static str> {
        let value = r.i64(name)?;
        if flags & bit != 0 {
            Ok(Some(value))
        } else if value == 0 {
            Ok(None)
        } else {
            Err(name)
        }
    };
    Ok(OrderExtras::with_fields(
        field(EXT_STOP_PRICE, "stop_price")?,
        field(EXT_DISPLAY_QTY, "display_qty")?,
        field(EXT_EXPIRE_TS, "expire_ts")?,
    ))
}

fn amend(r: &mut Reader<'_>) -> Result<ClientMsg, &'static str> {
    let order = r.i64("order")?;
    let flags = r.u8("flags")?;
    if flags & !(AMEND_PRICE | AMEND_QTY | AMEND_STOP_PRICE) != 0 {
        return Err("flags");
    }
    // One encoding per amend: an absent field is written as 0.
    let mut field = |bit: u8, name: &'static str| -> Result<Option<i64>, &'static str> {
        let value = r.i64(name)?;
        if flags & bit != 0 {
            Ok(Some(value))
        } else if value == 0 {
            Ok(None)
        } else {
            Err(name)
        }
    };
    Ok(ClientMsg::Amend {
        order,
        price: field(AMEND_PRICE, "price")?,
        qty: field(AMEND_QTY, "qty")?,
        stop_price: field(AMEND_STOP_PRICE, "stop_price")?,
    })
}

fn server_body(frame_type: u8, r: &mut Reader<'_>) -> Result<ServerMsg, BodyError> {
    let msg = match frame_type {
        ty::S_LOGIN_ACCEPTED => ServerMsg::LoginAccepted {
            user: r.i64("user")?,
            last_seq: r.u64("last_seq")?,
        },
        ty::S_ERROR => {
            let code = ErrorCode::from_code(r.u16("code")?).ok_or("code")?;
            let len = r.u8("message")? as usize;
            let text = std::str::from_utf8(r.take(len, "message")?).map_err(|_| "message")?;
            ServerMsg::Error {
                code,
                message: text.to_owned(),
            }
        }
        ty::S_HEARTBEAT => ServerMsg::Heartbeat {
            nonce: r.u64("nonce")?,
        },
        ty::S_ACCEPTED => ServerMsg::Accepted {
            seq: r.u64("seq")?,
            ts_ns: r.i64("ts_ns")?,
            order: r.i64("order")?,
            kind: r.kind()?,
        },
        ty::S_REJECTED => ServerMsg::Rejected {
            seq: r.u64("seq")?,
            ts_ns: r.i64("ts_ns")?,
            order: r.i64("order")?,
            kind: r.kind()?,
            reason: Reason::from_code(r.u8("reason")?).ok_or("reason")?,
        },
        ty::S_TRADE => ServerMsg::Trade {
            seq: r.u64("seq")?,
            ts_ns: r.i64("ts_ns")?,
            order: r.i64("order")?,
            symbol: SymbolId(r.u32("symbol")?),
            side: r.side()?,
            price: r.i64("price")?,
            qty: r.i64("qty")?,
            fee: r.i64("fee")?,
            liquidity: Liquidity::from_code(r.u8("liquidity")?).ok_or("liquidity")?,
        },
        ty::S_CANCELLED => ServerMsg::Cancelled {
            seq: r.u64("seq")?,
            ts_ns: r.i64("ts_ns")?,
            order: r.i64("order")?,
            symbol: SymbolId(r.u32("symbol")?),
            side: r.side()?,
            qty: r.i64("qty")?,
            reason: CancelReason::from_code(r.u8("reason")?).ok_or("reason")?,
        },
        ty::S_AMENDED => ServerMsg::Amended {
            seq: r.u64("seq")?,
            ts_ns: r.i64("ts_ns")?,
            order: r.i64("order")?,
            symbol: SymbolId(r.u32("symbol")?),
            side: r.side()?,
            price: r.i64("price")?,
            stop_price: r.i64("stop_price")?,
            remaining: r.i64("remaining")?,
            priority: Priority::from_code(r.u8("priority")?).ok_or("priority")?,
        },
        ty::S_TRIGGERED => ServerMsg::Triggered {
            seq: r.u64("seq")?,
            ts_ns: r.i64("ts_ns")?,
            order: r.i64("order")?,
            symbol: SymbolId(r.u32("symbol")?),
            side: r.side()?,
            stop_price: r.i64("stop_price")?,
        },
        ty::S_PHASE_CHANGED => ServerMsg::PhaseChanged {
            seq: r.u64("seq")?,
            ts_ns: r.i64("ts_ns")?,
            symbol: SymbolId(r.u32("symbol")?),
            phase: Phase::from_code(r.u8("phase")?).ok_or("phase")?,
        },
        ty::S_AUCTION => ServerMsg::Auction {
            seq: r.u64("seq")?,
            ts_ns: r.i64("ts_ns")?,
            symbol: SymbolId(r.u32("symbol")?),
            price: r.i64("price")?,
            qty: r.i64("qty")?,
            imbalance: r.i64("imbalance")?,
        },
        ty::S_LIQUIDATED => ServerMsg::Liquidated {
            seq: r.u64("seq")?,
            ts_ns: r.i64("ts_ns")?,
            currency: r.name("currency")?,
            equity: r.i64("equity")?,
            maintenance: r.i64("maintenance")?,
            shortfall: r.i64("shortfall")?,
        },
        ty::S_VENUE_SETTINGS => {
            let (request, seq) = (r.u64("request")?, r.u64("seq")?);
            let order_id_window_ns = r.i64("order_id_window_ns")?;
            let count = r.count("symbol count", 4 + 1 + 3 * 8)?;
            let mut symbols = Vec::with_capacity(count);
            for _ in 0..count {
                let id = SymbolId(r.u32("symbol")?);
                let status = SymbolStatus {
                    phase: Phase::from_code(r.u8("phase")?).ok_or("phase")?,
                    last: r.i64("last")?,
                    reference: r.i64("reference")?,
                    band_bps: r.i64("band_bps")?,
                    // Filled from the futures part below, when there is one.
                    future: false,
                    mark: 0,
                };
                symbols.push((id, status));
            }
            if !r.at_end() {
                r.aligned_count("future count", count)?;
                for (_, status) in &mut symbols {
                    status.future = match r.u8("future")? {
                        0 => false,
                        1 => true,
                        _ => return Err("future".into()),
                    };
                    status.mark = r.i64("mark")?;
                    if !status.future && status.mark != 0 {
                        return Err("mark".into());
                    }
                }
                // One encoding: the part is there only when a symbol is a future.
                if !symbols.iter().any(|(_, s)| s.future) {
                    return Err("future count".into());
                }
            }
            ServerMsg::VenueSettings {
                request,
                seq,
                order_id_window_ns,
                symbols,
            }
        }
        ty::S_SYMBOL_LIST => {
            let request = r.u64("request")?;
            let count = r.count("symbol count", 4 + 3 * 2 + 4 * 8)?;
            let mut symbols = Vec::with_capacity(count);
            for _ in 0..count {
                symbols.push((SymbolId(r.u32("symbol")?), r.spec()?));
            }
            if !r.at_end() {
                r.aligned_count("spec extension count", count)?;
                for (_, spec) in &mut symbols {
                    r.spec_ext(spec, true)?;
                }
                if symbols.iter().all(|(_, spec)| spec_is_plain(spec)) {
                    return Err("spec extension count".into());
                }
            }
            ServerMsg::SymbolList { request, symbols }
        }
        ty::S_USER_LIST => {
            let request = r.u64("request")?;
            let count = r.count("user count", 8)?;
            let mut users = Vec::with_capacity(count);
            for _ in 0..count {
                users.push(r.i64("user")?);
            }
            ServerMsg::UserList { request, users }
        }
        ty::S_REPORT => {
            let (request, seq) = (r.u64("request")?, r.u64("seq")?);
            let mut report = r.report()?;
            let margins = r.futures_part(&mut report)?;
            ServerMsg::Report {
                request,
                seq,
                report,
                margins,
            }
        }
        ty::S_REPORT_EXT => {
            let (request, seq) = (r.u64("request")?, r.u64("seq")?);
            let mut report = r.report_ext()?;
            let margins = r.futures_part(&mut report)?;
            ServerMsg::ReportExt {
                request,
                seq,
                report,
                margins,
            }
        }
        ty::S_VENUE_REPORT => {
            let request = r.u64("request")?;
            let count = r.count("currency count", 2 + 5 * 8)?;
            let mut totals = Vec::with_capacity(count);
            for _ in 0..count {
                totals.push(CurrencyTotals {
                    currency: r.name("currency")?,
                    deposits: r.i64("deposits")?,
                    withdrawals: r.i64("withdrawals")?,
                    available: r.i64("available")?,
                    held: r.i64("held")?,
                    fees: r.i64("fees")?,
                    // Filled from the futures part below, when there is one.
                    insurance: 0,
                    position_cost: 0,
                });
            }
            if !r.at_end() {
                r.aligned_count("futures count", count)?;
                for t in &mut totals {
                    t.insurance = r.i64("insurance")?;
                    t.position_cost = i128::from_le_bytes(r.array("position_cost")?);
                }
                // One encoding: the part is there only when a figure is not 0.
                if totals
                    .iter()
                    .all(|t| t.insurance == 0 && t.position_cost == 0)
                {
                    return Err("futures count".into());
                }
            }
            ServerMsg::VenueReport { request, totals }
        }
        ty::S_BOOK => ServerMsg::Book {
            request: r.u64("request")?,
            seq: r.u64("seq")?,
            symbol: SymbolId(r.u32("symbol")?),
            bids: r.levels("bid count")?,
            asks: r.levels("ask count")?,
        },
        ty::S_ORDER_STATUS => ServerMsg::OrderStatus {
            request: r.u64("request")?,
            seq: r.u64("seq")?,
            order: r.i64("order")?,
            state: OrderState::from_code(r.u8("state")?).ok_or("state")?,
            remaining: r.i64("remaining")?,
        },
        ty::S_ADMIN_RESULT => ServerMsg::AdminResult {
            request: r.u64("request")?,
            seq: r.u64("seq")?,
            result: match r.u8("result")? {
                RESULT_OK => Ok(()),
                code => Err(Reason::from_code(code).ok_or("result")?),
            },
        },
        ty::S_USER_ADDED => ServerMsg::UserAdded {
            request: r.u64("request")?,
            seq: r.u64("seq")?,
            user: r.i64("user")?,
            secret: r.secret("secret")?,
        },
        ty::S_SNAPSHOT_TAKEN => ServerMsg::SnapshotTaken {
            request: r.u64("request")?,
            seq: r.u64("seq")?,
            state_hash: *r
                .take(32, "state_hash")?
                .first_chunk()
                .ok_or("state_hash")?,
        },
        _ => return Err(BodyError::UnknownType),
    };
    Ok(msg)
}

/// Reads a body field by field; each read names its field for the error.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], &'static str> {
        let bytes = self
            .buf
            .get(self.pos..self.pos.saturating_add(n))
            .ok_or(field)?;
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], &'static str> {
        let bytes = self.take(N, field)?;
        bytes.first_chunk::<N>().copied().ok_or(field)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, &'static str> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, &'static str> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, &'static str> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, &'static str> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    fn i64(&mut self, field: &'static str) -> Result<i64, &'static str> {
        Ok(i64::from_le_bytes(self.array(field)?))
    }

    /// A list count, refused when the rest of the body cannot hold that many items of at
    /// least `min_item` bytes, so a lying count never reserves memory.
    fn count(&mut self, field: &'static str, min_item: usize) -> Result<usize, &'static str> {
        let count = self.u32(field)? as usize;
        let left = self.buf.len() - self.pos;
        if count > left / min_item {
            return Err(field);
        }
        Ok(count)
    }

    fn name(&mut self, field: &'static str) -> Result<Name, &'static str> {
        let len = self.u8(field)? as usize;
        let bytes = self.take(len, field)?;
        let text = std::str::from_utf8(bytes).map_err(|_| field)?;
        Name::new(text).ok_or(field)
    }

    fn secret(&mut self, field: &'static str) -> Result<Secret, &'static str> {
        let len = self.u8(field)? as usize;
        Secret::new(self.take(len, field)?).ok_or(field)
    }

    fn side(&mut self) -> Result<Side, &'static str> {
        Side::from_code(self.u8("side")?).ok_or("side")
    }

    fn kind(&mut self) -> Result<RequestKind, &'static str> {
        RequestKind::from_code(self.u8("kind")?).ok_or("kind")
    }

    fn spec(&mut self) -> Result<SymbolSpec, &'static str> {
        Ok(SymbolSpec {
            symbol: self.name("symbol")?,
            base: self.name("base")?,
            quote: self.name("quote")?,
            base_scale: self.i64("base_scale")?,
            quote_scale: self.i64("quote_scale")?,
            maker_fee: self.i64("maker_fee")?,
            taker_fee: self.i64("taker_fee")?,
            // The defaults (no band, DAY orders end at 00:00, spot) unless an extension follows.
            band_bps: 0,
            day_end: 0,
            kind: SymbolSpec::SPOT,
        })
    }

    /// Whether the body has been read to its end (an optional trailing part is absent).
    fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// The count of a list aligned item for item with one read before: it must be the same.
    fn aligned_count(&mut self, field: &'static str, count: usize) -> Result<(), &'static str> {
        if self.u32(field)? as usize == count {
            Ok(())
        } else {
            Err(field)
        }
    }

    /// A spec's extension into `spec`. `strict`: an unknown type code is malformed (a server
    /// sends only codes it knows); otherwise it is `kind: None`, for the engine to reject.
    fn spec_ext(&mut self, spec: &mut SymbolSpec, strict: bool) -> Result<(), &'static str> {
        spec.band_bps = self.i64("band_bps")?;
        spec.day_end = self.i64("day_end")?;
        let code = self.u8("type")?;
        let margins = [
            self.i64("initial_margin")?,
            self.i64("maintenance_margin")?,
            self.i64("mark_price")?,
        ];
        spec.kind = match code {
            KIND_SPOT if margins == [0; 3] => Some(SymbolKind::Spot),
            KIND_SPOT => return Err("initial_margin"),
            KIND_FUTURE => Some(SymbolKind::Future {
                initial_margin: margins[0],
                maintenance_margin: margins[1],
                mark_price: margins[2],
            }),
            _ if strict => return Err("type"),
            _ => None,
        };
        Ok(())
    }

    /// A report's optional positions and margins (docs/protocol.md); the margins.
    fn futures_part(&mut self, report: &mut UserReport) -> Result<Vec<Margin>, &'static str> {
        if self.at_end() {
            return Ok(Vec::new());
        }
        let count = self.count("position count", 2 + 16)?;
        let mut positions = Vec::with_capacity(count);
        for _ in 0..count {
            positions.push(Position {
                symbol: self.name("symbol")?,
                lots: self.i64("lots")?,
                cost: self.i64("cost")?,
            });
        }
        let count = self.count("margin count", 2 + 24)?;
        let mut margins = Vec::with_capacity(count);
        for _ in 0..count {
            margins.push(Margin {
                currency: self.name("currency")?,
                equity: self.i64("equity")?,
                initial: self.i64("initial")?,
                maintenance: self.i64("maintenance")?,
            });
        }
        // One encoding: the part is there only when it holds something.
        if positions.is_empty() && margins.is_empty() {
            return Err("position count");
        }
        report.positions = positions;
        Ok(margins)
    }

    fn levels(&mut self, field: &'static str) -> Result<Vec<Level>, &'static str> {
        let count = self.count(field, 16)?;
        let mut levels = Vec::with_capacity(count);
        for _ in 0..count {
            levels.push(Level {
                price: self.i64("price")?,
                qty: self.i64("qty")?,
            });
        }
        Ok(levels)
    }

    /// A report's user and balances; its orders follow, in either layout.
    fn report_head(&mut self) -> Result<UserReport, &'static str> {
        let user = self.i64("user")?;
        let count = self.count("balance count", 2 + 16)?;
        let mut balances = Vec::with_capacity(count);
        for _ in 0..count {
            let currency = self.name("currency")?;
            let balance = Balance {
                available: self.i64("available")?,
                held: self.i64("held")?,
            };
            balances.push((currency, balance));
        }
        Ok(UserReport {
            user,
            suspended: false,
            balances,
            orders: Vec::new(),
            positions: Vec::new(),
            margins: Vec::new(),
        })
    }

    fn report(&mut self) -> Result<UserReport, &'static str> {
        let mut report = self.report_head()?;
        let count = self.count("order count", 2 + 8 + 1 + 16)?;
        let mut orders = Vec::with_capacity(count);
        for _ in 0..count {
            let (symbol, order, side) = (self.name("symbol")?, self.i64("order")?, self.side()?);
            let (price, remaining) = (self.i64("price")?, self.i64("remaining")?);
            // This message carries a resting limit order's fields only.
            orders.push(OpenOrder {
                symbol,
                order,
                side,
                order_type: OrderType::Limit,
                tif: Tif::Gtc,
                price,
                stop_price: 0,
                remaining,
                shown: remaining,
                filled: 0,
                expire_ts: 0,
            });
        }
        report.orders = orders;
        Ok(report)
    }

    fn report_ext(&mut self) -> Result<UserReport, &'static str> {
        let mut report = self.report_head()?;
        let count = self.count("order count", 2 + 8 + 3 + 6 * 8)?;
        let mut orders = Vec::with_capacity(count);
        for _ in 0..count {
            let (symbol, order, side) = (self.name("symbol")?, self.i64("order")?, self.side()?);
            let order_type = OrderType::from_code(self.u8("order type")?).ok_or("order type")?;
            let tif = Tif::from_code(self.u8("tif")?).ok_or("tif")?;
            orders.push(OpenOrder {
                symbol,
                order,
                side,
                order_type,
                tif,
                price: self.i64("price")?,
                stop_price: self.i64("stop price")?,
                remaining: self.i64("remaining")?,
                shown: self.i64("shown")?,
                filled: self.i64("filled")?,
                expire_ts: self.i64("expire_ts")?,
            });
        }
        report.orders = orders;
        Ok(report)
    }

    fn finish(&self) -> Result<(), &'static str> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err("trailing bytes")
        }
    }
}
