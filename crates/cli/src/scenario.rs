//! Scenario lines: parsing one JSON command into a [`Command`], and writing events, results and
//! the final state as compact JSON with a fixed field order (docs/scenario-format.md).
//!
//! Parsing is strict about kinds (an integer must be a JSON integer that fits in i64, a word
//! must be a string, a flag a bool) because a line that silently means something else is worse
//! than a line reported as malformed. Words that are strings but not known (`"side":"up"`) are
//! not malformed: they reach the engine as `None`, which rejects them with `invalid_order` in
//! its rule-given place.

use std::fmt;

use rialto_core::{
    AmendOrder, Amended, Balance, BookSnapshot, Cancelled, Command, CurrencyTotals, Engine, Event,
    Level, Name, OrderExtras, OrderType, Phase, PlaceOrder, Reason, RestingOrder, Side, Stp,
    SymbolId, SymbolKind, SymbolSpec, Tif, Trade, UserReport,
};
use serde_json::{Map, Value};

/// Depth of a `book` query whose line has no `depth` (Rialto's choice, docs/rules.md).
pub const DEFAULT_BOOK_DEPTH: i64 = 10;

/// What is wrong with a malformed scenario line. A malformed line is never applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineProblem {
    /// Longer than the replay's line limit; the rest of the line was skipped unread.
    TooLong {
        max_bytes: usize,
    },
    /// Not valid JSON (serde_json's message, which includes the column).
    NotJson(String),
    /// Valid JSON, but not an object.
    NotObject,
    MissingField(&'static str),
    WrongKind {
        field: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    /// A symbol or currency name that is empty or longer than [`Name::MAX_LEN`] bytes.
    BadName {
        field: &'static str,
        len: usize,
    },
    UnknownCommand(String),
}

impl fmt::Display for LineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineProblem::TooLong { max_bytes } => {
                write!(f, "line longer than {max_bytes} bytes")
            }
            LineProblem::NotJson(msg) => write!(f, "not valid JSON: {msg}"),
            LineProblem::NotObject => f.write_str("expected a JSON object"),
            LineProblem::MissingField(field) => write!(f, "missing field {field:?}"),
            LineProblem::WrongKind {
                field,
                expected,
                found,
            } => write!(f, "field {field:?}: expected {expected}, found {found}"),
            LineProblem::BadName { field, len } => write!(
                f,
                "field {field:?}: a name must be 1 to {} bytes, found {len}",
                Name::MAX_LEN
            ),
            LineProblem::UnknownCommand(cmd) => write!(f, "unknown cmd {cmd:?}"),
        }
    }
}

/// A malformed line and its 1-based line number. Displays as `line N: <what is wrong>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    pub line: u64,
    pub problem: LineProblem,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.problem)
    }
}

impl std::error::Error for LineError {}

/// True for a line that holds only whitespace: skipped, but still counted.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// One scenario line: a command and its optional time (`ts`, ns since the Unix epoch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub command: Command,
    pub ts: Option<i64>,
}

impl Line {
    /// The timestamp to apply the command with: a line without `ts` leaves the venue clock
    /// where it is, which any time at or below the clock does.
    pub fn timestamp(&self) -> i64 {
        self.ts.unwrap_or(i64::MIN)
    }
}

/// Parses one scenario line (without its line terminator) into a command and its time.
/// `Ok(None)` for a blank line. Symbol names of `place`, `book` and `mass_cancel` are resolved
/// with `engine`; an unknown one becomes [`SymbolId::NONE`] so that the engine rejects it with
/// `unknown_symbol`.
pub fn parse_line(engine: &Engine, line: &[u8]) -> Result<Option<Line>, LineProblem> {
    if is_blank(line) {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(line).map_err(json_problem)?;
    let Value::Object(map) = value else {
        return Err(LineProblem::NotObject);
    };
    let command = parse_command(engine, &map)?;
    let ts = Fields(&map).opt_int("ts")?;
    Ok(Some(Line { command, ts }))
}

/// serde_json's message says "at line 1 column N"; within one scenario line only the column
/// means anything.
fn json_problem(e: serde_json::Error) -> LineProblem {
    let msg = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    LineProblem::NotJson(match msg.strip_suffix(&suffix) {
        Some(what) => format!("{what} (column {})", e.column()),
        None => msg,
    })
}

/// Parses a command object (see [`parse_line`]). Unknown extra fields are ignored.
pub fn parse_command(engine: &Engine, map: &Map<String, Value>) -> Result<Command, LineProblem> {
    let f = Fields(map);
    let cmd = f.str("cmd")?;
    Ok(match cmd {
        "add_symbol" => Command::AddSymbol(Box::new(SymbolSpec {
            symbol: f.name("symbol")?,
            base: f.name("base")?,
            quote: f.name("quote")?,
            base_scale: f.int("base_scale")?,
            quote_scale: f.int("quote_scale")?,
            maker_fee: f.int("maker_fee")?,
            taker_fee: f.int("taker_fee")?,
            band_bps: f.opt_int("band_bps")?.unwrap_or(0),
            day_end: f.opt_int("day_end")?.unwrap_or(0),
            kind: parse_symbol_kind(&f)?,
        })),
        "add_user" => Command::AddUser {
            user: f.int("user")?,
        },
        "adjust_balance" => Command::AdjustBalance {
            user: f.int("user")?,
            currency: f.name("currency")?,
            amount: f.int("amount")?,
            tx: f.int("tx")?,
        },
        "place" => Command::Place(parse_place(engine, &f)?),
        "cancel" => Command::Cancel {
            user: f.int("user")?,
            order: f.int("order")?,
        },
        "move" => Command::Move {
            user: f.int("user")?,
            order: f.int("order")?,
            price: f.int("price")?,
        },
        "amend" => Command::Amend(AmendOrder::with_fields(
            f.int("user")?,
            f.int("order")?,
            f.opt_int("price")?,
            f.opt_int("qty")?,
            f.opt_int("stop_price")?,
        )),
        "reduce" => Command::Reduce {
            user: f.int("user")?,
            order: f.int("order")?,
            qty: f.int("qty")?,
        },
        "mass_cancel" => Command::MassCancel {
            user: f.int("user")?,
            symbol: f.opt_symbol(engine)?,
        },
        "book" => Command::Book {
            symbol: f.symbol(engine)?,
            depth: f.opt_int("depth")?.unwrap_or(DEFAULT_BOOK_DEPTH),
        },
        "user_report" => Command::UserReport {
            user: f.int("user")?,
        },
        "venue_report" => Command::VenueReport,
        "set_order_id_window" => Command::SetOrderIdWindow {
            window: f.int("window")?,
        },
        "set_phase" => Command::SetPhase {
            symbol: f.symbol(engine)?,
            phase: Phase::parse(f.str("phase")?),
        },
        "set_band" => Command::SetBand {
            symbol: f.symbol(engine)?,
            band_bps: f.int("band_bps")?,
        },
        "set_ref_price" => Command::SetRefPrice {
            symbol: f.symbol(engine)?,
            price: f.int("price")?,
        },
        "suspend_user" => Command::SuspendUser {
            user: f.int("user")?,
        },
        "set_mark_price" => Command::SetMarkPrice {
            symbol: f.symbol(engine)?,
            price: f.int("price")?,
        },
        "fund_insurance" => Command::FundInsurance {
            currency: f.name("currency")?,
            amount: f.int("amount")?,
            tx: f.int("tx")?,
        },
        "resume_user" => Command::ResumeUser {
            user: f.int("user")?,
        },
        "tick" => {
            // A tick is nothing but its time: `ts` is required here.
            f.int("ts")?;
            Command::Tick
        }
        other => return Err(LineProblem::UnknownCommand(other.to_owned())),
    })
}

/// `add_symbol`'s `type` and a future's margins and mark. Their kinds are checked whatever the
/// type; a missing margin or mark of a future is 0, which the engine refuses
/// (`invalid_symbol`), and an unknown type word is `None` (`invalid_symbol` too).
fn parse_symbol_kind(f: &Fields<'_>) -> Result<Option<SymbolKind>, LineProblem> {
    let initial_margin = f.opt_int("initial_margin")?;
    let maintenance_margin = f.opt_int("maintenance_margin")?;
    let mark_price = f.opt_int("mark_price")?;
    Ok(match f.opt_str("type")?.unwrap_or("spot") {
        "spot" => Some(SymbolKind::Spot),
        "future" => Some(SymbolKind::Future {
            initial_margin: initial_margin.unwrap_or(0),
            maintenance_margin: maintenance_margin.unwrap_or(0),
            mark_price: mark_price.unwrap_or(0),
        }),
        _ => None,
    })
}

fn parse_place(engine: &Engine, f: &Fields<'_>) -> Result<PlaceOrder, LineProblem> {
    let user = f.int("user")?;
    let order = f.int("order")?;
    let symbol = f.symbol(engine)?;
    let side = Side::parse(f.str("side")?);
    let order_type = match f.opt_str("type")? {
        Some(word) => OrderType::parse(word),
        None => Some(OrderType::Limit),
    };
    let tif = match f.opt_str("tif")? {
        Some(word) => Tif::parse(word),
        None if matches!(order_type, Some(OrderType::Market | OrderType::Stop)) => Some(Tif::Ioc),
        // A limit or stop-limit order, or an unknown type word (which the engine rejects anyway).
        None => Some(Tif::Gtc),
    };
    let price = f.opt_int("price")?;
    let qty = f.int("qty")?;
    let post_only = f.opt_bool("post_only")?.unwrap_or(false);
    let stp = match f.opt_str("stp")? {
        Some(word) => Stp::parse(word),
        None => Some(Stp::CancelTaker),
    };
    Ok(PlaceOrder {
        user,
        order,
        symbol,
        side,
        order_type,
        tif,
        price,
        qty,
        post_only,
        stp,
        extras: OrderExtras::with_fields(
            f.opt_int("stop_price")?,
            f.opt_int("display_qty")?,
            f.opt_int("expire_ts")?,
        ),
    })
}

/// Typed, strict access to the fields of one command object. An explicit `null` is a value of
/// the wrong kind, not an absent field.
struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    fn get(&self, field: &'static str) -> Result<&'a Value, LineProblem> {
        self.0.get(field).ok_or(LineProblem::MissingField(field))
    }

    fn int(&self, field: &'static str) -> Result<i64, LineProblem> {
        as_int(field, self.get(field)?)
    }

    fn opt_int(&self, field: &'static str) -> Result<Option<i64>, LineProblem> {
        self.0.get(field).map(|v| as_int(field, v)).transpose()
    }

    fn str(&self, field: &'static str) -> Result<&'a str, LineProblem> {
        as_str(field, self.get(field)?)
    }

    fn opt_str(&self, field: &'static str) -> Result<Option<&'a str>, LineProblem> {
        self.0.get(field).map(|v| as_str(field, v)).transpose()
    }

    fn opt_bool(&self, field: &'static str) -> Result<Option<bool>, LineProblem> {
        match self.0.get(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(wrong_kind(field, "a boolean", other)),
        }
    }

    /// A symbol or currency name that is being defined or moved: it must be a valid name.
    fn name(&self, field: &'static str) -> Result<Name, LineProblem> {
        let s = self.str(field)?;
        Name::new(s).ok_or(LineProblem::BadName {
            field,
            len: s.len(),
        })
    }

    /// The `symbol` to trade on or query: a name no symbol can have is simply unknown.
    fn symbol(&self, engine: &Engine) -> Result<SymbolId, LineProblem> {
        Ok(resolve_symbol(engine, self.str("symbol")?))
    }

    /// An optional `symbol` to act on: absent means every symbol.
    fn opt_symbol(&self, engine: &Engine) -> Result<Option<SymbolId>, LineProblem> {
        Ok(self.opt_str("symbol")?.map(|s| resolve_symbol(engine, s)))
    }
}

fn resolve_symbol(engine: &Engine, s: &str) -> SymbolId {
    match Name::new(s) {
        Some(_) => engine.symbol_id(s),
        None => SymbolId::NONE,
    }
}

fn as_int(field: &'static str, value: &Value) -> Result<i64, LineProblem> {
    match value {
        Value::Number(n) => n.as_i64().ok_or_else(|| {
            let found = match n.as_f64() {
                Some(x) if n.is_u64() || x.abs() >= 9.2e18 => "a number outside the i64 range",
                Some(x) if x.fract() == 0.0 => "a number with a fraction or exponent",
                _ => "a fractional number",
            };
            LineProblem::WrongKind {
                field,
                expected: "an integer",
                found,
            }
        }),
        other => Err(wrong_kind(field, "an integer", other)),
    }
}

fn as_str<'a>(field: &'static str, value: &'a Value) -> Result<&'a str, LineProblem> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(wrong_kind(field, "a string", other)),
    }
}

fn wrong_kind(field: &'static str, expected: &'static str, found: &Value) -> LineProblem {
    let found = match found {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    LineProblem::WrongKind {
        field,
        expected,
        found,
    }
}

// ---------------------------------------------------------------------------------------------
// Output. Each writer appends one line, newline included, to a byte buffer; the field order is
// the one docs/scenario-format.md shows, and the JSON is compact.

/// Symbol names by [`SymbolId`], for writing events while the engine is busy applying a
/// command (the sink cannot borrow it then). Ids are dense: the engine assigns 0, 1, 2, ...
#[derive(Clone, Debug, Default)]
pub struct SymbolNames(Vec<Option<Name>>);

impl SymbolNames {
    pub fn insert(&mut self, id: SymbolId, name: Name) {
        if id == SymbolId::NONE {
            return;
        }
        let index = id.0 as usize;
        if self.0.len() <= index {
            self.0.resize(index + 1, None);
        }
        self.0[index] = Some(name);
    }

    pub fn get(&self, id: SymbolId) -> Option<&Name> {
        self.0.get(id.0 as usize).and_then(Option::as_ref)
    }
}

/// Appends `s` as a JSON string literal, escaped.
pub fn write_json_str(buf: &mut Vec<u8>, s: &str) {
    buf.push(b'"');
    for c in s.chars() {
        match c {
            '"' => buf.extend_from_slice(b"\\\""),
            '\\' => buf.extend_from_slice(b"\\\\"),
            '\n' => buf.extend_from_slice(b"\\n"),
            '\r' => buf.extend_from_slice(b"\\r"),
            '\t' => buf.extend_from_slice(b"\\t"),
            '\u{08}' => buf.extend_from_slice(b"\\b"),
            '\u{0c}' => buf.extend_from_slice(b"\\f"),
            c if (c as u32) < 0x20 => {
                buf.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut utf8 = [0u8; 4];
                buf.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
    }
    buf.push(b'"');
}

fn write_int(buf: &mut Vec<u8>, n: i64) {
    buf.extend_from_slice(n.to_string().as_bytes());
}

/// `,"symbol":NAME`
fn symbol_field(buf: &mut Vec<u8>, names: &SymbolNames, id: SymbolId) {
    buf.push(b',');
    key(buf, "symbol");
    match names.get(id) {
        Some(name) => write_json_str(buf, name.as_str()),
        // The engine only reports symbols it has; keep the line valid JSON regardless.
        None => buf.extend_from_slice(b"null"),
    }
}

/// `"key":` (the key is a fixed, plain word).
fn key(buf: &mut Vec<u8>, k: &str) {
    buf.push(b'"');
    buf.extend_from_slice(k.as_bytes());
    buf.extend_from_slice(b"\":");
}

/// `,"key":int`
fn int_field(buf: &mut Vec<u8>, k: &str, n: i64) {
    buf.push(b',');
    key(buf, k);
    write_int(buf, n);
}

fn head(buf: &mut Vec<u8>, ev: &str, seq: u64) {
    buf.extend_from_slice(b"{\"ev\":\"");
    buf.extend_from_slice(ev.as_bytes());
    buf.extend_from_slice(b"\",\"seq\":");
    buf.extend_from_slice(seq.to_string().as_bytes());
}

/// Appends one event line.
pub fn write_event(buf: &mut Vec<u8>, seq: u64, names: &SymbolNames, event: &Event<'_>) {
    match event {
        Event::Trade(t) => write_trade(buf, seq, names, t),
        Event::Cancelled(c) => write_cancelled(buf, seq, c),
        Event::Amended(a) => write_amended(buf, seq, a),
        Event::Triggered(t) => {
            head(buf, "triggered", seq);
            symbol_field(buf, names, t.symbol);
            int_field(buf, "user", t.user);
            int_field(buf, "order", t.order);
            int_field(buf, "stop_price", t.stop_price);
            buf.extend_from_slice(b"}\n");
        }
        Event::Auction(a) => {
            head(buf, "auction", seq);
            symbol_field(buf, names, a.symbol);
            int_field(buf, "price", a.price);
            int_field(buf, "qty", a.qty);
            int_field(buf, "imbalance", a.imbalance);
            buf.extend_from_slice(b"}\n");
        }
        Event::Phase(p) => {
            head(buf, "phase", seq);
            symbol_field(buf, names, p.symbol);
            buf.extend_from_slice(b",\"phase\":");
            write_json_str(buf, p.phase.as_str());
            buf.extend_from_slice(b"}\n");
        }
        Event::Liquidated(l) => {
            head(buf, "liquidated", seq);
            int_field(buf, "user", l.user);
            buf.extend_from_slice(b",\"currency\":");
            write_json_str(buf, l.currency.as_str());
            int_field(buf, "equity", l.equity);
            int_field(buf, "maintenance", l.maintenance);
            int_field(buf, "shortfall", l.shortfall);
            buf.extend_from_slice(b"}\n");
        }
        Event::Book(b) => write_book(buf, seq, names, b),
        Event::UserReport(r) => write_user_report(buf, seq, r),
        Event::VenueReport(totals) => write_venue_report(buf, seq, totals),
    }
}

fn write_amended(buf: &mut Vec<u8>, seq: u64, a: &Amended) {
    head(buf, "amended", seq);
    int_field(buf, "user", a.user);
    int_field(buf, "order", a.order);
    int_field(buf, "price", a.price);
    int_field(buf, "stop_price", a.stop_price);
    int_field(buf, "qty", a.qty);
    buf.extend_from_slice(b",\"priority\":");
    write_json_str(buf, a.priority.as_str());
    buf.extend_from_slice(b"}\n");
}

fn write_trade(buf: &mut Vec<u8>, seq: u64, names: &SymbolNames, t: &Trade) {
    head(buf, "trade", seq);
    symbol_field(buf, names, t.symbol);
    int_field(buf, "price", t.price);
    int_field(buf, "qty", t.qty);
    int_field(buf, "maker_user", t.maker_user);
    int_field(buf, "maker_order", t.maker_order);
    int_field(buf, "taker_user", t.taker_user);
    int_field(buf, "taker_order", t.taker_order);
    int_field(buf, "maker_fee", t.maker_fee);
    int_field(buf, "taker_fee", t.taker_fee);
    buf.extend_from_slice(b"}\n");
}

fn write_cancelled(buf: &mut Vec<u8>, seq: u64, c: &Cancelled) {
    head(buf, "cancelled", seq);
    int_field(buf, "user", c.user);
    int_field(buf, "order", c.order);
    int_field(buf, "qty", c.qty);
    buf.push(b',');
    key(buf, "reason");
    write_json_str(buf, c.reason.as_str());
    buf.extend_from_slice(b"}\n");
}

/// Writes rows of integers as a JSON array of arrays: `[[a,b],[c,d]]`.
fn write_int_rows<const N: usize>(buf: &mut Vec<u8>, rows: impl Iterator<Item = [i64; N]>) {
    buf.push(b'[');
    for (i, row) in rows.enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.push(b'[');
        for (j, value) in row.into_iter().enumerate() {
            if j > 0 {
                buf.push(b',');
            }
            write_int(buf, value);
        }
        buf.push(b']');
    }
    buf.push(b']');
}

fn write_levels(buf: &mut Vec<u8>, levels: &[Level]) {
    write_int_rows(buf, levels.iter().map(|l| [l.price, l.qty]));
}

fn write_book(buf: &mut Vec<u8>, seq: u64, names: &SymbolNames, b: &BookSnapshot<'_>) {
    head(buf, "book", seq);
    symbol_field(buf, names, b.symbol);
    buf.push(b',');
    key(buf, "bids");
    write_levels(buf, b.bids);
    buf.push(b',');
    key(buf, "asks");
    write_levels(buf, b.asks);
    buf.extend_from_slice(b"}\n");
}

/// `{"CUR":{"available":a,"held":h},...}` in the given order.
fn write_balances<'b>(buf: &mut Vec<u8>, balances: impl Iterator<Item = (&'b Name, &'b Balance)>) {
    buf.push(b'{');
    for (i, (currency, balance)) in balances.enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_json_str(buf, currency.as_str());
        buf.extend_from_slice(b":{");
        key(buf, "available");
        write_int(buf, balance.available);
        int_field(buf, "held", balance.held);
        buf.push(b'}');
    }
    buf.push(b'}');
}

fn write_user_report(buf: &mut Vec<u8>, seq: u64, r: &UserReport) {
    head(buf, "user_report", seq);
    int_field(buf, "user", r.user);
    buf.extend_from_slice(if r.suspended {
        b",\"suspended\":true"
    } else {
        b",\"suspended\":false"
    });
    buf.push(b',');
    key(buf, "balances");
    write_balances(buf, r.balances.iter().map(|(n, b)| (n, b)));
    buf.push(b',');
    key(buf, "orders");
    buf.push(b'[');
    for (i, o) in r.orders.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.push(b'[');
        write_json_str(buf, o.symbol.as_str());
        buf.push(b',');
        write_int(buf, o.order);
        buf.push(b',');
        write_json_str(buf, o.side.as_str());
        buf.push(b',');
        write_int(buf, o.price);
        buf.push(b',');
        write_int(buf, o.remaining);
        buf.push(b']');
    }
    buf.extend_from_slice(b"],");
    key(buf, "positions");
    buf.push(b'[');
    for (i, p) in r.positions.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.push(b'[');
        write_json_str(buf, p.symbol.as_str());
        buf.push(b',');
        write_int(buf, p.lots);
        buf.push(b',');
        write_int(buf, p.cost);
        buf.push(b']');
    }
    buf.extend_from_slice(b"]}\n");
}

fn write_venue_report(buf: &mut Vec<u8>, seq: u64, totals: &[CurrencyTotals]) {
    head(buf, "venue_report", seq);
    buf.push(b',');
    key(buf, "currencies");
    buf.push(b'{');
    for (i, t) in totals.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_json_str(buf, t.currency.as_str());
        buf.extend_from_slice(b":{");
        key(buf, "deposits");
        write_int(buf, t.deposits);
        int_field(buf, "withdrawals", t.withdrawals);
        int_field(buf, "available", t.available);
        int_field(buf, "held", t.held);
        int_field(buf, "fees", t.fees);
        int_field(buf, "insurance", t.insurance);
        buf.extend_from_slice(format!(",\"position_cost\":{}", t.position_cost).as_bytes());
        buf.push(b'}');
    }
    buf.extend_from_slice(b"}}\n");
}

/// Appends `cmd` as one scenario line (the inverse of [`parse_line`]): every field written
/// explicitly, `place` and `book` symbols by the name `engine` knows for the id, and `ts` last
/// when given. A word the gateway could not recognise (`None`) is written as `"?"`, which
/// parses back to `None`; a symbol id the engine does not know is written as `""`, which parses
/// to [`SymbolId::NONE`] and is rejected with `unknown_symbol` exactly as the id was.
pub fn write_command(buf: &mut Vec<u8>, engine: &Engine, cmd: &Command, ts: Option<i64>) {
    let cmd_head = |buf: &mut Vec<u8>, name: &str| {
        buf.extend_from_slice(b"{\"cmd\":\"");
        buf.extend_from_slice(name.as_bytes());
        buf.push(b'"');
    };
    let str_field = |buf: &mut Vec<u8>, k: &str, v: &str| {
        buf.push(b',');
        key(buf, k);
        write_json_str(buf, v);
    };
    let symbol_field = |buf: &mut Vec<u8>, id: SymbolId| {
        let name = engine.symbol(id).map(|s| s.symbol);
        str_field(buf, "symbol", name.as_ref().map_or("", Name::as_str));
    };
    match *cmd {
        Command::AddSymbol(ref s) => {
            cmd_head(buf, "add_symbol");
            str_field(buf, "symbol", s.symbol.as_str());
            str_field(buf, "base", s.base.as_str());
            str_field(buf, "quote", s.quote.as_str());
            int_field(buf, "base_scale", s.base_scale);
            int_field(buf, "quote_scale", s.quote_scale);
            int_field(buf, "maker_fee", s.maker_fee);
            int_field(buf, "taker_fee", s.taker_fee);
            if s.band_bps != 0 {
                int_field(buf, "band_bps", s.band_bps);
            }
            if s.day_end != 0 {
                int_field(buf, "day_end", s.day_end);
            }
            match s.kind {
                Some(SymbolKind::Spot) => {}
                Some(SymbolKind::Future {
                    initial_margin,
                    maintenance_margin,
                    mark_price,
                }) => {
                    str_field(buf, "type", "future");
                    int_field(buf, "initial_margin", initial_margin);
                    int_field(buf, "maintenance_margin", maintenance_margin);
                    int_field(buf, "mark_price", mark_price);
                }
                None => str_field(buf, "type", UNKNOWN_WORD),
            }
        }
        Command::AddUser { user } => {
            cmd_head(buf, "add_user");
            int_field(buf, "user", user);
        }
        Command::AdjustBalance {
            user,
            currency,
            amount,
            tx,
        } => {
            cmd_head(buf, "adjust_balance");
            int_field(buf, "user", user);
            str_field(buf, "currency", currency.as_str());
            int_field(buf, "amount", amount);
            int_field(buf, "tx", tx);
        }
        Command::Place(ref p) => {
            cmd_head(buf, "place");
            int_field(buf, "user", p.user);
            int_field(buf, "order", p.order);
            symbol_field(buf, p.symbol);
            str_field(buf, "side", p.side.map_or(UNKNOWN_WORD, Side::as_str));
            str_field(
                buf,
                "type",
                p.order_type.map_or(UNKNOWN_WORD, OrderType::as_str),
            );
            str_field(buf, "tif", p.tif.map_or(UNKNOWN_WORD, Tif::as_str));
            if let Some(price) = p.price {
                int_field(buf, "price", price);
            }
            int_field(buf, "qty", p.qty);
            buf.extend_from_slice(if p.post_only {
                b",\"post_only\":true"
            } else {
                b",\"post_only\":false"
            });
            str_field(buf, "stp", p.stp.map_or(UNKNOWN_WORD, Stp::as_str));
            let extras = [
                ("stop_price", p.stop_price()),
                ("display_qty", p.display_qty()),
                ("expire_ts", p.expire_ts()),
            ];
            for (name, value) in extras {
                if let Some(value) = value {
                    int_field(buf, name, value);
                }
            }
        }
        Command::Cancel { user, order } => {
            cmd_head(buf, "cancel");
            int_field(buf, "user", user);
            int_field(buf, "order", order);
        }
        Command::Move { user, order, price } => {
            cmd_head(buf, "move");
            int_field(buf, "user", user);
            int_field(buf, "order", order);
            int_field(buf, "price", price);
        }
        Command::Reduce { user, order, qty } => {
            cmd_head(buf, "reduce");
            int_field(buf, "user", user);
            int_field(buf, "order", order);
            int_field(buf, "qty", qty);
        }
        Command::Book { symbol, depth } => {
            cmd_head(buf, "book");
            symbol_field(buf, symbol);
            int_field(buf, "depth", depth);
        }
        Command::UserReport { user } => {
            cmd_head(buf, "user_report");
            int_field(buf, "user", user);
        }
        Command::VenueReport => cmd_head(buf, "venue_report"),
        Command::MassCancel { user, symbol } => {
            cmd_head(buf, "mass_cancel");
            int_field(buf, "user", user);
            if let Some(symbol) = symbol {
                symbol_field(buf, symbol);
            }
        }
        Command::Amend(ref a) => {
            cmd_head(buf, "amend");
            int_field(buf, "user", a.user);
            int_field(buf, "order", a.order);
            if let Some(price) = a.price() {
                int_field(buf, "price", price);
            }
            if let Some(qty) = a.qty() {
                int_field(buf, "qty", qty);
            }
            if let Some(stop_price) = a.stop_price() {
                int_field(buf, "stop_price", stop_price);
            }
        }
        Command::SetOrderIdWindow { window } => {
            cmd_head(buf, "set_order_id_window");
            int_field(buf, "window", window);
        }
        // Its time is the `ts` below, which a tick must carry.
        Command::Tick => cmd_head(buf, "tick"),
        Command::SetPhase { symbol, phase } => {
            cmd_head(buf, "set_phase");
            symbol_field(buf, symbol);
            str_field(buf, "phase", phase.map_or(UNKNOWN_WORD, Phase::as_str));
        }
        Command::SetBand { symbol, band_bps } => {
            cmd_head(buf, "set_band");
            symbol_field(buf, symbol);
            int_field(buf, "band_bps", band_bps);
        }
        Command::SetRefPrice { symbol, price } => {
            cmd_head(buf, "set_ref_price");
            symbol_field(buf, symbol);
            int_field(buf, "price", price);
        }
        Command::SuspendUser { user } => {
            cmd_head(buf, "suspend_user");
            int_field(buf, "user", user);
        }
        Command::ResumeUser { user } => {
            cmd_head(buf, "resume_user");
            int_field(buf, "user", user);
        }
        Command::SetMarkPrice { symbol, price } => {
            cmd_head(buf, "set_mark_price");
            symbol_field(buf, symbol);
            int_field(buf, "price", price);
        }
        Command::FundInsurance {
            currency,
            amount,
            tx,
        } => {
            cmd_head(buf, "fund_insurance");
            str_field(buf, "currency", currency.as_str());
            int_field(buf, "amount", amount);
            int_field(buf, "tx", tx);
        }
    }
    let ts = match (cmd, ts) {
        (Command::Tick, None) => Some(engine.now()),
        (_, ts) => ts,
    };
    if let Some(ts) = ts {
        int_field(buf, "ts", ts);
    }
    buf.extend_from_slice(b"}\n");
}

/// What [`write_command`] writes for a word that was not recognised: no known word is `?`.
const UNKNOWN_WORD: &str = "?";

/// Appends a command's result line.
pub fn write_result(buf: &mut Vec<u8>, seq: u64, result: Result<(), Reason>) {
    head(buf, "result", seq);
    match result {
        Ok(()) => buf.extend_from_slice(b",\"status\":\"ok\"}\n"),
        Err(reason) => {
            buf.extend_from_slice(b",\"status\":\"rejected\",\"reason\":");
            write_json_str(buf, reason.as_str());
            buf.extend_from_slice(b"}\n");
        }
    }
}

fn write_resting(buf: &mut Vec<u8>, orders: &[RestingOrder]) {
    write_int_rows(
        buf,
        orders
            .iter()
            .map(|o| [o.user, o.order, o.price, o.remaining]),
    );
}

/// Appends the final-state line: every user (ascending) with its non-zero balances, the fees of
/// every currency, every symbol's resting orders in priority order, and the state hash. Names
/// are sorted by their text here, whatever order the engine lists them in.
/// The final line's `stops` and `symbols` keys: every symbol by name, its pending stops in
/// trigger order, and its phase, last and reference prices and band.
fn write_symbol_states(buf: &mut Vec<u8>, engine: &Engine, symbols: &[(SymbolId, SymbolSpec)]) {
    buf.extend_from_slice(b",\"stops\":{");
    let mut stops = Vec::new();
    for (i, (id, spec)) in symbols.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_json_str(buf, spec.symbol.as_str());
        buf.push(b':');
        stops.clear();
        engine.pending_stops(*id, &mut stops);
        buf.push(b'[');
        for (j, stop) in stops.iter().enumerate() {
            if j > 0 {
                buf.push(b',');
            }
            buf.push(b'[');
            write_int(buf, stop.user);
            buf.push(b',');
            write_int(buf, stop.order);
            buf.push(b',');
            write_json_str(buf, stop.side.as_str());
            for v in [stop.stop_price, stop.price, stop.remaining] {
                buf.push(b',');
                write_int(buf, v);
            }
            buf.push(b']');
        }
        buf.push(b']');
    }
    buf.extend_from_slice(b"},\"symbols\":{");
    for (i, (id, spec)) in symbols.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_json_str(buf, spec.symbol.as_str());
        let status = engine.symbol_status(*id).expect("a listed symbol");
        buf.extend_from_slice(if status.future {
            b":{\"type\":\"future\",\"phase\":"
        } else {
            b":{\"type\":\"spot\",\"phase\":"
        });
        write_json_str(buf, status.phase.as_str());
        int_field(buf, "last", status.last);
        int_field(buf, "ref", status.reference);
        int_field(buf, "band_bps", status.band_bps);
        int_field(buf, "mark", status.mark);
        buf.push(b'}');
    }
    buf.push(b'}');
}

pub fn write_final(buf: &mut Vec<u8>, engine: &Engine) {
    buf.extend_from_slice(b"{\"ev\":\"final\",\"balances\":{");
    let mut users = engine.users();
    users.sort_unstable();
    for (i, user) in users.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_json_str(buf, &user.to_string());
        buf.push(b':');
        let mut balances: Vec<(Name, Balance)> = engine
            .user_report(*user)
            .map(|r| r.balances)
            .unwrap_or_default();
        balances.retain(|(_, b)| b.available != 0 || b.held != 0);
        balances.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        write_balances(buf, balances.iter().map(|(n, b)| (n, b)));
    }
    buf.extend_from_slice(b"},\"fees\":{");
    let mut totals = engine.venue_totals();
    totals.sort_by(|a, b| a.currency.as_str().cmp(b.currency.as_str()));
    for (i, t) in totals.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_json_str(buf, t.currency.as_str());
        buf.push(b':');
        write_int(buf, t.fees);
    }
    buf.extend_from_slice(b"},\"books\":{");
    let mut symbols = engine.symbols_by_name();
    symbols.sort_by(|a, b| a.1.symbol.as_str().cmp(b.1.symbol.as_str()));
    for (i, (id, spec)) in symbols.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_json_str(buf, spec.symbol.as_str());
        let (bids, asks) = engine.resting_orders(*id);
        buf.extend_from_slice(b":{\"bids\":");
        write_resting(buf, &bids);
        buf.extend_from_slice(b",\"asks\":");
        write_resting(buf, &asks);
        buf.push(b'}');
    }
    buf.extend_from_slice(b"},\"orders\":");
    write_int_rows(
        buf,
        engine
            .live_orders()
            .iter()
            .map(|o| [o.user, o.order, o.filled, o.shown, o.expire_ts]),
    );
    write_symbol_states(buf, engine, &symbols);
    buf.extend_from_slice(b",\"positions\":{");
    let positions = engine.positions();
    for (i, chunk) in positions.chunk_by(|a, b| a.0 == b.0).enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_json_str(buf, &chunk[0].0.to_string());
        buf.extend_from_slice(b":{");
        let mut by_name: Vec<_> = chunk.to_vec();
        by_name.sort_by(|a, b| a.1.as_str().cmp(b.1.as_str()));
        for (j, (_, symbol, lots, cost)) in by_name.iter().enumerate() {
            if j > 0 {
                buf.push(b',');
            }
            write_json_str(buf, symbol.as_str());
            buf.extend_from_slice(format!(":[{lots},{cost}]").as_bytes());
        }
        buf.push(b'}');
    }
    buf.extend_from_slice(b"},\"insurance\":{");
    for (i, t) in totals.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_json_str(buf, t.currency.as_str());
        buf.push(b':');
        write_int(buf, t.insurance);
    }
    buf.extend_from_slice(b"},\"suspended\":[");
    for (i, user) in engine.suspended_users().iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_int(buf, *user);
    }
    buf.extend_from_slice(b"],\"now\":");
    write_int(buf, engine.now());
    buf.extend_from_slice(b",\"recent_ids\":{");
    let recent = engine.recent_order_ids();
    for (i, chunk) in recent.chunk_by(|a, b| a.0 == b.0).enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_json_str(buf, &chunk[0].0.to_string());
        buf.push(b':');
        write_int_rows(
            buf,
            chunk.iter().map(|&(_, order, ended_at)| [order, ended_at]),
        );
    }
    buf.extend_from_slice(b"},\"state_hash\":");
    write_json_str(buf, &engine.state_hash_hex());
    buf.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use rialto_core::{CancelReason, OpenOrder};

    fn name(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    fn line(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut buf = Vec::new();
        f(&mut buf);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn strings_are_escaped() {
        let s = line(|b| write_json_str(b, "a\"b\\c\nd\u{1}é"));
        assert_eq!(s, r#""a\"b\\c\nd\u0001é""#);
        let back: String = serde_json::from_str(&s).unwrap();
        assert_eq!(back, "a\"b\\c\nd\u{1}é");
    }

    #[test]
    fn events_match_the_shared_format() {
        let mut names = SymbolNames::default();
        names.insert(SymbolId(0), name("BTC-USD"));
        let trade = Trade {
            symbol: SymbolId(0),
            price: 15400,
            qty: 10,
            maker_user: 301,
            maker_order: 5001,
            taker_user: 302,
            taker_order: 5002,
            taker_side: Side::Sell,
            maker_fee: 7000,
            taker_fee: 19000,
        };
        assert_eq!(
            line(|b| write_event(b, 5, &names, &Event::Trade(trade))),
            "{\"ev\":\"trade\",\"seq\":5,\"symbol\":\"BTC-USD\",\"price\":15400,\"qty\":10,\"maker_user\":301,\"maker_order\":5001,\"taker_user\":302,\"taker_order\":5002,\"maker_fee\":7000,\"taker_fee\":19000}\n"
        );
        let cancelled = Cancelled {
            symbol: SymbolId(0),
            user: 302,
            order: 5002,
            side: Side::Sell,
            qty: 2,
            reason: CancelReason::Ioc,
        };
        assert_eq!(
            line(|b| write_event(b, 5, &names, &Event::Cancelled(cancelled))),
            "{\"ev\":\"cancelled\",\"seq\":5,\"user\":302,\"order\":5002,\"qty\":2,\"reason\":\"ioc\"}\n"
        );
        assert_eq!(
            line(|b| write_result(b, 5, Ok(()))),
            "{\"ev\":\"result\",\"seq\":5,\"status\":\"ok\"}\n"
        );
        assert_eq!(
            line(|b| write_result(b, 6, Err(Reason::InsufficientFunds))),
            "{\"ev\":\"result\",\"seq\":6,\"status\":\"rejected\",\"reason\":\"insufficient_funds\"}\n"
        );
        let bids = [Level {
            price: 15300,
            qty: 10,
        }];
        let book = BookSnapshot {
            symbol: SymbolId(0),
            bids: &bids,
            asks: &[],
        };
        assert_eq!(
            line(|b| write_event(b, 9, &names, &Event::Book(book))),
            "{\"ev\":\"book\",\"seq\":9,\"symbol\":\"BTC-USD\",\"bids\":[[15300,10]],\"asks\":[]}\n"
        );
    }

    #[test]
    fn reports_have_a_fixed_shape() {
        let report = UserReport {
            user: 301,
            suspended: false,
            balances: vec![(
                name("USD"),
                Balance {
                    available: 1,
                    held: 2,
                },
            )],
            orders: vec![OpenOrder {
                symbol: name("BTC-USD"),
                order: 5001,
                side: Side::Buy,
                order_type: OrderType::Limit,
                tif: Tif::Gtc,
                price: 15300,
                stop_price: 0,
                remaining: 10,
                shown: 10,
                filled: 0,
                expire_ts: 0,
            }],
            positions: vec![rialto_core::Position {
                symbol: name("BTC-PERP"),
                lots: -2,
                cost: -2000,
            }],
            margins: Vec::new(),
        };
        let names = SymbolNames::default();
        assert_eq!(
            line(|b| write_event(b, 3, &names, &Event::UserReport(&report))),
            "{\"ev\":\"user_report\",\"seq\":3,\"user\":301,\"suspended\":false,\"balances\":{\"USD\":{\"available\":1,\"held\":2}},\"orders\":[[\"BTC-USD\",5001,\"buy\",15300,10]],\"positions\":[[\"BTC-PERP\",-2,-2000]]}\n"
        );
        let totals = [CurrencyTotals {
            currency: name("USD"),
            deposits: 10,
            withdrawals: 1,
            available: 5,
            held: 3,
            fees: 1,
            insurance: 7,
            position_cost: -4,
        }];
        assert_eq!(
            line(|b| write_event(b, 4, &names, &Event::VenueReport(&totals))),
            "{\"ev\":\"venue_report\",\"seq\":4,\"currencies\":{\"USD\":{\"deposits\":10,\"withdrawals\":1,\"available\":5,\"held\":3,\"fees\":1,\"insurance\":7,\"position_cost\":-4}}}\n"
        );
    }

    fn problem(map: &str) -> LineProblem {
        // Commands that need no symbol lookup can be checked without an engine.
        let value: Value = serde_json::from_str(map).unwrap();
        let Value::Object(map) = value else { panic!() };
        let f = Fields(&map);
        f.int("user")
            .and_then(|_| f.name("currency"))
            .and_then(|_| f.int("amount"))
            .err()
            .unwrap()
    }

    #[test]
    fn kinds_are_strict() {
        let wrong = |found| LineProblem::WrongKind {
            field: "amount",
            expected: "an integer",
            found,
        };
        let base = r#"{"user":1,"currency":"USD","amount":"#;
        assert_eq!(
            problem(&format!("{base}1.5}}")),
            wrong("a fractional number")
        );
        assert_eq!(
            problem(&format!("{base}1.0}}")),
            wrong("a number with a fraction or exponent")
        );
        assert_eq!(
            problem(&format!("{base}9223372036854775808}}")),
            wrong("a number outside the i64 range")
        );
        assert_eq!(
            problem(&format!("{base}100000000000000000000000}}")),
            wrong("a number outside the i64 range")
        );
        assert_eq!(problem(&format!("{base}\"5\"}}")), wrong("a string"));
        assert_eq!(problem(&format!("{base}null}}")), wrong("null"));
        assert_eq!(
            problem(r#"{"user":1,"currency":"USD"}"#),
            LineProblem::MissingField("amount")
        );
        assert_eq!(
            problem(r#"{"user":1,"currency":"ABCDEFGHIJKLMNOPQRSTUVWX","amount":1}"#),
            LineProblem::BadName {
                field: "currency",
                len: 24
            }
        );
        assert_eq!(
            problem(r#"{"user":1,"currency":"","amount":1}"#),
            LineProblem::BadName {
                field: "currency",
                len: 0
            }
        );
        let err = LineError {
            line: 7,
            problem: LineProblem::WrongKind {
                field: "qty",
                expected: "an integer",
                found: "a string",
            },
        };
        assert_eq!(
            err.to_string(),
            "line 7: field \"qty\": expected an integer, found a string"
        );
    }

    #[test]
    fn i64_extremes_are_integers() {
        let v: Value = serde_json::from_str("-9223372036854775808").unwrap();
        assert_eq!(as_int("x", &v), Ok(i64::MIN));
        let v: Value = serde_json::from_str("9223372036854775807").unwrap();
        assert_eq!(as_int("x", &v), Ok(i64::MAX));
    }

    #[test]
    fn mass_cancel_takes_an_optional_symbol() {
        let mut engine = Engine::new(Default::default());
        let spec = SymbolSpec {
            symbol: name("BTC-USD"),
            base: name("BTC"),
            quote: name("USD"),
            base_scale: 1,
            quote_scale: 1,
            maker_fee: 0,
            taker_fee: 0,
            band_bps: 0,
            day_end: 0,
            kind: SymbolSpec::SPOT,
        };
        let add = Command::AddSymbol(Box::new(spec));
        assert_eq!(engine.apply(1, 0, &add, &mut ()), Ok(()));
        let parse = |l: &str| parse_line(&engine, l.as_bytes()).map(|l| l.map(|l| l.command));
        let mass = |user, symbol| Ok(Some(Command::MassCancel { user, symbol }));
        assert_eq!(parse(r#"{"cmd":"mass_cancel","user":-4}"#), mass(-4, None));
        assert_eq!(
            parse(r#"{"cmd":"mass_cancel","user":1,"symbol":"BTC-USD"}"#),
            mass(1, Some(SymbolId(0)))
        );
        // a symbol that is not there, or could not be, is the engine's unknown_symbol
        assert_eq!(
            parse(r#"{"cmd":"mass_cancel","user":1,"symbol":"ETH-USD"}"#),
            mass(1, Some(SymbolId::NONE))
        );
        assert_eq!(
            parse(r#"{"cmd":"mass_cancel","user":1,"symbol":""}"#),
            mass(1, Some(SymbolId::NONE))
        );
        assert_eq!(
            parse(r#"{"cmd":"mass_cancel","user":1,"symbol":null}"#),
            Err(LineProblem::WrongKind {
                field: "symbol",
                expected: "a string",
                found: "null"
            })
        );
        assert_eq!(
            parse(r#"{"cmd":"mass_cancel","symbol":"BTC-USD"}"#),
            Err(LineProblem::MissingField("user"))
        );
    }

    #[test]
    fn blank_lines() {
        assert!(is_blank(b""));
        assert!(is_blank(b" \t\r"));
        assert!(!is_blank(b" {}"));
    }

    fn parse_back(engine: &Engine, cmd: &Command) -> Command {
        let mut buf = Vec::new();
        write_command(&mut buf, engine, cmd, None);
        assert_eq!(buf.last(), Some(&b'\n'));
        parse_line(engine, &buf[..buf.len() - 1])
            .unwrap()
            .unwrap()
            .command
    }

    #[test]
    fn any_command_may_carry_a_time_and_a_tick_must() {
        let engine = Engine::new(Default::default());
        let parse = |l: &str| parse_line(&engine, l.as_bytes());
        let line = |command, ts| Ok(Some(Line { command, ts }));
        assert_eq!(
            parse(r#"{"cmd":"tick","ts":500}"#),
            line(Command::Tick, Some(500))
        );
        assert_eq!(
            parse(r#"{"cmd":"tick"}"#),
            Err(LineProblem::MissingField("ts"))
        );
        assert_eq!(
            parse(r#"{"cmd":"add_user","user":1,"ts":-3}"#),
            line(Command::AddUser { user: 1 }, Some(-3))
        );
        assert_eq!(
            parse(r#"{"cmd":"add_user","user":1}"#),
            line(Command::AddUser { user: 1 }, None)
        );
        assert_eq!(
            parse(r#"{"cmd":"add_user","user":1,"ts":"5"}"#),
            Err(LineProblem::WrongKind {
                field: "ts",
                expected: "an integer",
                found: "a string"
            })
        );
        // A time is written back, and a tick without one takes the clock's.
        let mut buf = Vec::new();
        write_command(&mut buf, &engine, &Command::AddUser { user: 1 }, Some(9));
        write_command(&mut buf, &engine, &Command::Tick, None);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "{\"cmd\":\"add_user\",\"user\":1,\"ts\":9}\n{\"cmd\":\"tick\",\"ts\":0}\n"
        );
    }

    #[test]
    fn written_commands_parse_back_to_themselves() {
        let mut engine = Engine::new(rialto_core::EngineConfig::default());
        let spec = SymbolSpec {
            symbol: name("BTC-\"USD\"é"),
            base: name("BTC"),
            quote: name("USD"),
            base_scale: 100,
            quote_scale: 10,
            maker_fee: -2,
            taker_fee: 5,
            band_bps: 0,
            day_end: 0,
            kind: SymbolSpec::SPOT,
        };
        assert_eq!(
            parse_back(&engine, &Command::AddSymbol(Box::new(spec))),
            Command::AddSymbol(Box::new(spec))
        );
        let future = SymbolSpec {
            kind: Some(SymbolKind::Future {
                initial_margin: 100,
                maintenance_margin: 0,
                mark_price: -3,
            }),
            ..spec
        };
        let unknown = SymbolSpec { kind: None, ..spec };
        for spec in [future, unknown] {
            assert_eq!(
                parse_back(&engine, &Command::AddSymbol(Box::new(spec))),
                Command::AddSymbol(Box::new(spec))
            );
        }
        let valid = SymbolSpec {
            maker_fee: 2,
            ..spec
        };
        engine
            .apply(1, 0, &Command::AddSymbol(Box::new(valid)), &mut ())
            .unwrap();
        let id = SymbolId(0);
        let limit = PlaceOrder::limit(i64::MIN, i64::MAX, id, Side::Sell, 100, 5);
        let mut cmds = vec![
            Command::AddUser { user: 7 },
            Command::AdjustBalance {
                user: 7,
                currency: name("USD"),
                amount: -5,
                tx: 9,
            },
            Command::Place(limit),
            Command::Place(
                limit
                    .with_post_only()
                    .with_tif(Tif::Fok)
                    .with_stp(Stp::CancelBoth),
            ),
            Command::Place(PlaceOrder::market(1, 2, id, Side::Buy, 3)),
            Command::Place(PlaceOrder {
                side: None,
                order_type: None,
                tif: None,
                stp: None,
                price: Some(-1),
                ..limit
            }),
            Command::Place(PlaceOrder {
                order_type: None,
                price: None,
                ..limit
            }),
            Command::Place(PlaceOrder {
                symbol: SymbolId::NONE,
                ..limit
            }),
            Command::Cancel { user: 1, order: 2 },
            Command::SetMarkPrice {
                symbol: id,
                price: -4,
            },
            Command::FundInsurance {
                currency: name("USD"),
                amount: -7,
                tx: 3,
            },
            Command::Move {
                user: 1,
                order: 2,
                price: 3,
            },
            Command::Reduce {
                user: 1,
                order: 2,
                qty: 3,
            },
            Command::Book {
                symbol: id,
                depth: 0,
            },
            Command::Book {
                symbol: SymbolId::NONE,
                depth: 10,
            },
            Command::UserReport { user: -1 },
            Command::VenueReport,
            Command::MassCancel {
                user: 3,
                symbol: None,
            },
            Command::MassCancel {
                user: 3,
                symbol: Some(id),
            },
            Command::MassCancel {
                user: 3,
                symbol: Some(SymbolId::NONE),
            },
            Command::Tick,
            Command::SetOrderIdWindow { window: -7 },
            Command::Amend(AmendOrder::new(1, 2)),
            Command::Amend(AmendOrder::new(1, 2).with_qty(0).with_stop_price(-5)),
            Command::Amend(AmendOrder::new(1, 2).with_price(7)),
        ];
        for tif in Tif::ALL {
            cmds.push(Command::Place(limit.with_tif(*tif)));
        }
        for cmd in &cmds {
            assert_eq!(parse_back(&engine, cmd), *cmd);
        }
        // An id the engine does not know names no symbol, like SymbolId::NONE.
        let unknown = Command::Place(PlaceOrder {
            symbol: SymbolId(5),
            ..limit
        });
        let none = Command::Place(PlaceOrder {
            symbol: SymbolId::NONE,
            ..limit
        });
        assert_eq!(parse_back(&engine, &unknown), none);
    }
}
