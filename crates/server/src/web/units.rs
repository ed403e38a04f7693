//! Decimal strings for every price, quantity, amount and fee (docs/api.md, "Units").
//!
//! The engine counts integers: ticks, lots and minor units. The API speaks decimals by default,
//! as the big venues do (`"65000.50"`), and the engine's integers when the client asks with
//! `?units=int`. Answers are made in the integer form and turned into decimals here, in one
//! place, by field name (the names of docs/api.md): a price field is ticks of its symbol, a
//! quantity field lots, an amount minor units of its currency.
//!
//! Each symbol's tick and lot are its `[instruments]` settings (1 and 1 when it has none). A
//! currency's minor unit follows from the first symbol (by id) that trades it: one lot moves
//! `base_scale` base minor units, so a base minor unit is `qty_lot / base_scale`; one tick of
//! one lot moves `quote_scale` quote minor units, so a quote minor unit is
//! `price_tick * qty_lot / quote_scale`. A unit that is no decimal (a scale of 3 under a tick
//! of 1) leaves that currency's amounts in minor units, with 0 decimals.

use std::collections::BTreeMap;

use axum::http::Uri;
use rialto_fix::Decimal;
use rialto_fix::decimal::DecimalError;
use serde_json::{Value, json};

use super::{ApiError, AppState};

/// How an answer writes prices, quantities and amounts, and how a request gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Units {
    /// Decimal strings ("65000.50"), times as ms plus ns as a string: the default.
    Decimal,
    /// The engine's integers: ticks, lots, minor units, times in ns (`?units=int`).
    Int,
}

impl Units {
    /// The `units` query parameter: `decimal` (the default) or `int`.
    pub fn parse(text: Option<&str>) -> Result<Units, ApiError> {
        match text {
            None | Some("decimal") => Ok(Units::Decimal),
            Some("int") => Ok(Units::Int),
            Some(other) => Err(ApiError::bad_request(
                "bad_request",
                format!("units must be decimal or int, not {other:?}"),
            )),
        }
    }

    pub fn of(uri: &Uri) -> Result<Units, ApiError> {
        Units::parse(super::rest::query_value(uri, "units").as_deref())
    }
}

/// One symbol's decimal sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scales {
    pub tick: Decimal,
    pub lot: Decimal,
    /// The minor unit of the quote currency (fees, and what a trade costs).
    pub quote_minor: Decimal,
}

impl Scales {
    /// A symbol without sizes: ticks, lots and minor units as they are.
    pub const ONE: Scales = Scales {
        tick: ONE,
        lot: ONE,
        quote_minor: ONE,
    };

    fn of_units(units: i64, size: Decimal) -> Value {
        match Decimal::from_units(units, size) {
            Ok(d) => Value::String(d.to_string()),
            // Engine values times a configured size always fit; the integer, rather than a
            // wrong decimal, if one did not.
            Err(_) => json!(units),
        }
    }

    pub fn price(&self, ticks: i64) -> Value {
        Scales::of_units(ticks, self.tick)
    }

    pub fn qty(&self, lots: i64) -> Value {
        Scales::of_units(lots, self.lot)
    }

    pub fn quote_amount(&self, minor: i64) -> Value {
        Scales::of_units(minor, self.quote_minor)
    }
}

/// Every symbol's sizes and every currency's minor unit, as of one read of the feed.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub symbols: BTreeMap<String, Scales>,
    /// Minor unit by currency name.
    pub currencies: BTreeMap<String, Decimal>,
    /// Base and quote currency of each symbol.
    pub pairs: BTreeMap<String, (String, String)>,
}

/// `value / divisor` as a decimal, exactly, or None when it has no finite decimal form.
fn divide(value: Decimal, divisor: i64) -> Option<Decimal> {
    if divisor <= 0 {
        return None;
    }
    let (mut mantissa, mut scale) = (i128::from(value.mantissa), value.scale);
    while mantissa % i128::from(divisor) != 0 {
        if scale >= rialto_fix::decimal::MAX_SCALE {
            return None;
        }
        mantissa = mantissa.checked_mul(10)?;
        scale += 1;
    }
    let mut mantissa = mantissa / i128::from(divisor);
    // The shortest form: 0.00100 is 0.001.
    while scale > 0 && mantissa % 10 == 0 {
        mantissa /= 10;
        scale -= 1;
    }
    Some(Decimal::new(i64::try_from(mantissa).ok()?, scale))
}

fn multiply(a: Decimal, b: Decimal) -> Option<Decimal> {
    let scale = a.scale.checked_add(b.scale)?;
    if scale > rialto_fix::decimal::MAX_SCALE {
        return None;
    }
    Some(Decimal::new(a.mantissa.checked_mul(b.mantissa)?, scale))
}

const ONE: Decimal = Decimal::new(1, 0);

impl Catalog {
    pub fn of(state: &AppState) -> Catalog {
        let instruments = state.instruments.lock().unwrap_or_else(|e| e.into_inner());
        let feed = state.md.feed();
        let mut catalog = Catalog::default();
        for info in feed.symbols() {
            let spec = info.spec;
            let name = spec.symbol.as_str().to_string();
            let parse = |t: &str| Decimal::parse(t.as_bytes()).ok().filter(|d| d.mantissa > 0);
            let (tick, lot) = instruments.get(&name).map_or((ONE, ONE), |i| {
                (
                    parse(&i.price_tick).unwrap_or(ONE),
                    parse(&i.qty_lot).unwrap_or(ONE),
                )
            });
            let (base, quote) = (spec.base.as_str(), spec.quote.as_str());
            let base_minor = divide(lot, spec.base_scale).unwrap_or(ONE);
            let quote_minor = multiply(tick, lot)
                .and_then(|v| divide(v, spec.quote_scale))
                .unwrap_or(ONE);
            let currencies = &mut catalog.currencies;
            // A future's base names its underlying, no currency (docs/rules.md, "Futures").
            if !matches!(spec.kind, Some(rialto_core::SymbolKind::Future { .. })) {
                currencies.entry(base.to_string()).or_insert(base_minor);
            }
            let quote_minor = *currencies.entry(quote.to_string()).or_insert(quote_minor);
            catalog.symbols.insert(
                name.clone(),
                Scales {
                    tick,
                    lot,
                    quote_minor,
                },
            );
            catalog
                .pairs
                .insert(name, (base.to_string(), quote.to_string()));
        }
        catalog
    }

    pub fn currency_minor(&self, name: &str) -> Decimal {
        self.currencies.get(name).copied().unwrap_or(ONE)
    }

    pub fn amount(&self, currency: &str, minor: i64) -> Value {
        Scales::of_units(minor, self.currency_minor(currency))
    }

    pub fn scales(&self, symbol: &str) -> Option<&Scales> {
        self.symbols.get(symbol)
    }
}

// ----- answers --------------------------------------------------------------------------------

/// Fields that hold a price in ticks.
const PRICES: &[&str] = &[
    "price",
    "stop_price",
    "last",
    "reference",
    "open",
    "high",
    "low",
    "close",
    "avg_price",
    "min_price",
    // A future's mark price, and a position's liquidation price.
    "mark",
    "liquidation_price",
    // The 24 h ticker's last price less its open.
    "change",
];
/// Fields that hold a quantity in lots.
const QTYS: &[&str] = &[
    "qty",
    "remaining",
    "shown",
    "filled",
    "volume",
    "display_qty",
    "imbalance",
    "original_qty",
    "min_qty",
    // A futures position's signed lots.
    "size",
];
/// Fields that hold an amount of the symbol's quote currency.
const QUOTE_AMOUNTS: &[&str] = &[
    "fee",
    "maker_fee",
    "taker_fee",
    "quote_volume",
    // A future's margins per lot, and a position's cost and unrealised profit.
    "initial_margin",
    "maintenance_margin",
    "cost",
    "unrealised_pnl",
];
/// Fields that hold an amount of the object's `currency`.
const AMOUNTS: &[&str] = &[
    "available",
    "held",
    "deposits",
    "withdrawals",
    "fees",
    "amount",
    // Futures: margin figures, a liquidation's shortfall, the insurance fund.
    "equity",
    "initial",
    "maintenance",
    "shortfall",
    "insurance",
    "position_cost",
];

/// Rewrites an answer made in engine integers into decimals, in place; `symbol` is the symbol
/// an answer is about when its objects do not say (a book, a channel's messages). An object
/// with a `symbol` (or `currency`) field is read with that one's sizes.
pub fn decimalize(value: &mut Value, catalog: &Catalog, symbol: Option<&str>) {
    match value {
        Value::Array(items) => {
            for item in items {
                decimalize(item, catalog, symbol);
            }
        }
        Value::Object(map) => {
            let own = map
                .get("symbol")
                .and_then(Value::as_str)
                .map(str::to_string);
            let symbol = own.as_deref().or(symbol);
            let scales = symbol.and_then(|s| catalog.scales(s)).copied();
            let currency = map
                .get("currency")
                .and_then(Value::as_str)
                .map(str::to_string);
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let Some(field) = map.get_mut(&key) else {
                    continue;
                };
                let k = key.as_str();
                match (field.as_i64(), scales) {
                    (None, Some(s)) if k == "entry_price" => {
                        // A decimal string of ticks (docs/api.md, "Futures").
                        let priced = field
                            .as_str()
                            .and_then(|ticks| super::futures::times_tick(ticks, s.tick));
                        if let Some(text) = priced {
                            *field = Value::String(text);
                        }
                    }
                    (Some(n), Some(s)) if PRICES.contains(&k) => *field = s.price(n),
                    (Some(n), Some(s)) if QTYS.contains(&k) => *field = s.qty(n),
                    (Some(n), Some(s)) if QUOTE_AMOUNTS.contains(&k) => *field = s.quote_amount(n),
                    (Some(n), _) if AMOUNTS.contains(&k) && currency.is_some() => {
                        *field = catalog.amount(currency.as_deref().unwrap_or(""), n)
                    }
                    _ => match k {
                        "bids" | "asks" | "bid" | "ask" => levels(field, scales.as_ref()),
                        _ => decimalize(field, catalog, symbol),
                    },
                }
            }
            times(map);
        }
        _ => {}
    }
}

/// `[price, qty]` and `[order, price, qty]` levels, one level (`bid`) or a list (`bids`).
fn levels(field: &mut Value, scales: Option<&Scales>) {
    let Some(scales) = scales else { return };
    let Value::Array(items) = field else { return };
    let one = |level: &mut Vec<Value>| {
        let n = level.len();
        if n < 2 {
            return;
        }
        if let (Some(p), Some(q)) = (level[n - 2].as_i64(), level[n - 1].as_i64()) {
            level[n - 2] = scales.price(p);
            level[n - 1] = scales.qty(q);
        }
    };
    if items.iter().all(Value::is_array) {
        for item in items.iter_mut() {
            if let Value::Array(level) = item {
                one(level);
            }
        }
    } else {
        one(items);
    }
}

/// `ts_ns` (and `start_ns`, `placed_ns`, `updated_ns`) become ms in `ts` (`start`, `placed`,
/// `updated`), and the ns as a string, which JavaScript reads exactly; `expire_ts` (ns)
/// becomes a string.
fn times(map: &mut serde_json::Map<String, Value>) {
    const TIMES: [(&str, &str); 4] = [
        ("ts_ns", "ts"),
        ("start_ns", "start"),
        ("placed_ns", "placed"),
        ("updated_ns", "updated"),
    ];
    for (ns_key, ms_key) in TIMES {
        if let Some(ns) = map.get(ns_key).and_then(Value::as_i64) {
            map.insert(ms_key.to_string(), json!(ns.div_euclid(1_000_000)));
            map.insert(ns_key.to_string(), Value::String(ns.to_string()));
        }
    }
    if let Some(ns) = map.get("expire_ts").and_then(Value::as_i64) {
        map.insert("expire_ts".to_string(), Value::String(ns.to_string()));
    }
}

/// An answer in the units the client asked for.
pub fn answer(mut value: Value, units: Units, state: &AppState, symbol: Option<&str>) -> Value {
    if units == Units::Decimal {
        decimalize(&mut value, &Catalog::of(state), symbol);
    }
    value
}

// ----- requests -------------------------------------------------------------------------------

/// A price, quantity or amount in a request: a decimal string (the default units) or an
/// integer (`?units=int`, and the engine's units).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(untagged)]
pub enum Amount {
    Int(i64),
    Text(String),
    /// Any other JSON number (a fraction): refused with a message.
    Float(f64),
}

/// What a request's amount is measured in.
#[derive(Clone, Copy, Debug)]
pub enum Measure {
    Price,
    Qty,
    /// An amount of a currency with this minor unit.
    Amount(Decimal),
}

impl Amount {
    /// The engine's integer for a field `name`, read in `units` with `scales`.
    pub fn to_engine(
        &self,
        name: &str,
        measure: Measure,
        units: Units,
        scales: Option<&Scales>,
    ) -> Result<i64, ApiError> {
        let (code, size, unit) = match measure {
            Measure::Price => ("invalid_price", scales.map(|s| s.tick), "tick"),
            Measure::Qty => ("invalid_qty", scales.map(|s| s.lot), "lot"),
            Measure::Amount(minor) => ("invalid_qty", Some(minor), "minor unit"),
        };
        match (self, units) {
            (Amount::Int(n), Units::Int) => Ok(*n),
            (_, Units::Int) => Err(ApiError::bad_request(
                "malformed_json",
                format!("`{name}` must be an integer (units=int: ticks and lots)"),
            )),
            (Amount::Text(text), Units::Decimal) => {
                // An unknown symbol: the engine rejects the order `unknown_symbol` in its
                // rule-given place; any positive integer stands in.
                let Some(size) = size else { return Ok(1) };
                match Decimal::parse(text.trim().as_bytes()).and_then(|d| d.to_units(size)) {
                    Ok(n) => Ok(n),
                    Err(DecimalError::OffGrid) => Err(ApiError::bad_request(
                        code,
                        format!("`{name}` {text} is not a whole number of the {unit} {size}"),
                    )),
                    Err(DecimalError::Overflow) => Err(ApiError::bad_request(
                        code,
                        format!("`{name}` {text} is too large"),
                    )),
                    Err(DecimalError::Format) => Err(ApiError::bad_request(
                        "malformed_json",
                        format!(
                            "`{name}` must be a decimal string such as \"65000.50\", not {text:?}"
                        ),
                    )),
                }
            }
            (_, Units::Decimal) => Err(ApiError::bad_request(
                "malformed_json",
                format!(
                    "`{name}` must be a decimal string such as \"65000.50\" (a JSON number is read \
                     only with ?units=int, as ticks or lots)"
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        Decimal::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn minor_units_follow_from_tick_lot_and_scales() {
        assert_eq!(divide(d("0.001"), 1000), Some(d("0.000001")));
        assert_eq!(
            multiply(d("0.01"), d("0.001")).and_then(|v| divide(v, 1)),
            Some(d("0.00001"))
        );
        assert_eq!(divide(d("1"), 4), Some(d("0.25")));
        assert_eq!(divide(d("1"), 3), None, "a third has no decimal form");
    }

    fn catalog() -> Catalog {
        let mut c = Catalog::default();
        c.symbols.insert(
            "BTC-USD".into(),
            Scales {
                tick: d("0.01"),
                lot: d("0.001"),
                quote_minor: d("0.00001"),
            },
        );
        c.currencies.insert("USD".into(), d("0.00001"));
        c.currencies.insert("BTC".into(), d("0.000001"));
        c
    }

    #[test]
    fn answers_turn_into_decimal_strings_by_field() {
        let mut v = json!({"symbol": "BTC-USD", "price": 6500050, "qty": 3, "fee": 2,
            "order": 9_007_199_254_740_993_i64, "seq": 5, "ts_ns": 1_795_000_000_123_456_789_i64,
            "bids": [[6500000, 2]], "bid": [6500000, 1]});
        decimalize(&mut v, &catalog(), None);
        assert_eq!(v["price"], "65000.50");
        assert_eq!(v["qty"], "0.003");
        assert_eq!(v["fee"], "0.00002");
        assert_eq!(v["order"], 9_007_199_254_740_993_i64, "ids stay integers");
        assert_eq!(v["seq"], 5);
        assert_eq!(v["ts"], 1_795_000_000_123_i64);
        assert_eq!(v["ts_ns"], "1795000000123456789");
        assert_eq!(v["bids"], json!([["65000.00", "0.002"]]));
        assert_eq!(v["bid"], json!(["65000.00", "0.001"]));
        let mut b = json!([{"currency": "USD", "available": 1_000_000_000_000_i64, "held": 0}]);
        decimalize(&mut b, &catalog(), None);
        assert_eq!(b[0]["available"], "10000000.00000");
        assert_eq!(b[0]["held"], "0.00000");
    }

    #[test]
    fn request_amounts_must_sit_on_the_tick_and_lot() {
        let c = catalog();
        let s = c.scales("BTC-USD");
        let text = |t: &str| Amount::Text(t.into());
        let price = |a: Amount| a.to_engine("price", Measure::Price, Units::Decimal, s);
        assert_eq!(price(text("65000.50")).unwrap(), 6500050);
        assert_eq!(price(text("65000.5")).unwrap(), 6500050);
        let off = price(text("65000.505")).unwrap_err();
        assert_eq!(off.code, "invalid_price");
        assert!(off.message.contains("tick 0.01"), "{}", off.message);
        assert_eq!(price(text("abc")).unwrap_err().code, "malformed_json");
        assert_eq!(
            price(Amount::Int(6500050)).unwrap_err().code,
            "malformed_json"
        );
        let qty = |a: Amount, u| a.to_engine("qty", Measure::Qty, u, s);
        assert_eq!(
            qty(text("0.0015"), Units::Decimal).unwrap_err().code,
            "invalid_qty"
        );
        assert_eq!(qty(Amount::Int(7), Units::Int).unwrap(), 7);
        assert_eq!(
            qty(text("7"), Units::Int).unwrap_err().code,
            "malformed_json"
        );
    }
}
