//! Futures over REST and WebSocket (docs/api.md, "Futures"): a user's positions with their
//! entry price, mark, unrealised profit and liquidation price, and its margin per currency.
//!
//! The engine reports positions as signed lots and cost and the margin per currency
//! ([`UserReport`]); the marks come from the venue's settings. Everything here is derived from
//! those integers exactly; the entry price, which is rarely a whole number of ticks, is the
//! one decimal string computed here.

use std::collections::BTreeMap;

use rialto_core::{SymbolKind, UserReport};
use serde_json::{Value, json};

use super::{ApiError, AppState, orders};

/// Decimals the entry price shows beyond its tick's (it is truncated toward zero there).
pub const ENTRY_PRICE_EXTRA_DECIMALS: u32 = 8;

/// A future's terms as the feed knows them: quote currency, quote scale and margins per lot.
struct FutureTerms {
    quote: String,
    quote_scale: i64,
    maintenance_margin: i64,
}

fn future_terms(state: &AppState) -> BTreeMap<String, FutureTerms> {
    state
        .md
        .feed()
        .symbols()
        .filter_map(|info| match info.spec.kind {
            Some(SymbolKind::Future {
                maintenance_margin, ..
            }) => Some((
                info.spec.symbol.as_str().to_string(),
                FutureTerms {
                    quote: info.spec.quote.as_str().to_string(),
                    quote_scale: info.spec.quote_scale,
                    maintenance_margin,
                },
            )),
            _ => None,
        })
        .collect()
}

/// Each future's mark price (ticks) from the venue's settings (`orders::venue_status`).
fn marks(settings: &Value) -> BTreeMap<String, i64> {
    settings["symbols"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|s| Some((s["symbol"].as_str()?.to_string(), s["mark"].as_i64()?)))
                .collect()
        })
        .unwrap_or_default()
}

fn saturate(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// `cost / (lots * quote_scale)`: the entry price in ticks, as a decimal string truncated
/// toward zero at [`ENTRY_PRICE_EXTRA_DECIMALS`] decimals (exact when it ends sooner).
pub fn entry_price(cost: i64, lots: i64, quote_scale: i64) -> Option<String> {
    let divisor = (lots as i128).checked_mul(quote_scale as i128)?.abs();
    if divisor == 0 {
        return None;
    }
    let negative = (cost < 0) != (lots < 0);
    let mut numerator = (cost as i128).abs();
    let mut scale = 0;
    while numerator % divisor != 0 && scale < ENTRY_PRICE_EXTRA_DECIMALS {
        numerator *= 10;
        scale += 1;
    }
    Some(write_decimal(numerator / divisor, scale, negative))
}

/// `value / 10^scale` as a decimal string in its shortest form.
fn write_decimal(mut value: i128, mut scale: u32, negative: bool) -> String {
    while scale > 0 && value % 10 == 0 {
        value /= 10;
        scale -= 1;
    }
    let digits = value.to_string();
    let text = if scale == 0 {
        digits
    } else {
        let width = scale as usize + 1;
        let digits = format!("{digits:0>width$}");
        let (whole, fraction) = digits.split_at(digits.len() - scale as usize);
        format!("{whole}.{fraction}")
    };
    if negative && value != 0 {
        format!("-{text}")
    } else {
        text
    }
}

/// A decimal string of ticks (an entry price) times the tick: the price in decimals, exactly.
pub fn times_tick(ticks: &str, tick: rialto_fix::Decimal) -> Option<String> {
    let (negative, digits) = match ticks.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, ticks),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) || fraction.len() > 18 {
        return None;
    }
    let value: i128 = format!("{whole}{fraction}").parse().ok()?;
    let value = value.checked_mul(tick.mantissa as i128)?;
    let scale = fraction.len() as u32 + u32::from(tick.scale);
    Some(write_decimal(value, scale, negative))
}

/// The mark at which a pass liquidates a user whose only position in its currency is this
/// one (docs/rules.md, "Futures": the same bound the engine keys its users by): a long is
/// below maintenance at every mark at or below it, a short at every mark at or above it.
/// `None` when no positive mark liquidates the long, or the bound leaves i64. At least 1: a
/// short already below maintenance is liquidated at any mark.
pub fn liquidation_price(
    lots: i64,
    cost: i64,
    available: i64,
    quote_scale: i64,
    maintenance_margin: i64,
) -> Option<i64> {
    let (n, k, a) = (lots as i128, cost as i128, available as i128);
    let (qs, mm) = (quote_scale as i128, maintenance_margin as i128);
    if n > 0 {
        // Below maintenance exactly when mark < ceil((K + mm·N − available) / (N·qs)).
        let bound = (k + mm * n - a).div_euclid(n * qs)
            + i128::from((k + mm * n - a).rem_euclid(n * qs) != 0);
        let price = bound - 1;
        (price >= 1).then(|| i64::try_from(price).ok()).flatten()
    } else if n < 0 {
        // Below maintenance exactly when mark > floor((available − K − mm·|N|) / (|N|·qs)).
        let n = -n;
        let bound = (a - k - mm * n).div_euclid(n * qs);
        i64::try_from((bound + 1).max(1)).ok()
    } else {
        None
    }
}

/// A user's positions as `GET /api/v1/positions` answers them, in engine integers (the entry
/// price in ticks, a decimal string: [`super::units::decimalize`] multiplies it by the tick).
pub fn positions_json(state: &AppState, report: &UserReport, settings: &Value) -> Value {
    let terms = future_terms(state);
    let marks = marks(settings);
    // Positions per quote currency: the liquidation price is exact only for a user whose
    // position is its only one in that currency.
    let mut per_currency: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &report.positions {
        if let Some(t) = terms.get(p.symbol.as_str()) {
            *per_currency.entry(t.quote.as_str()).or_default() += 1;
        }
    }
    let available = |currency: &str| {
        report
            .balances
            .iter()
            .find(|(c, _)| c.as_str() == currency)
            .map_or(0, |(_, b)| b.available)
    };
    Value::Array(
        report
            .positions
            .iter()
            .filter_map(|p| {
                let name = p.symbol.as_str();
                let t = terms.get(name)?;
                let mark = marks.get(name).copied();
                let unrealised = mark.map(|m| {
                    saturate(p.lots as i128 * m as i128 * t.quote_scale as i128 - p.cost as i128)
                });
                let liquidation = (per_currency.get(t.quote.as_str()) == Some(&1))
                    .then(|| {
                        liquidation_price(
                            p.lots,
                            p.cost,
                            available(&t.quote),
                            t.quote_scale,
                            t.maintenance_margin,
                        )
                    })
                    .flatten();
                Some(json!({
                    "symbol": name,
                    "quote": t.quote,
                    "side": if p.lots > 0 { "long" } else { "short" },
                    "size": p.lots,
                    "cost": p.cost,
                    "entry_price": entry_price(p.cost, p.lots, t.quote_scale),
                    "mark": mark,
                    "unrealised_pnl": unrealised,
                    "liquidation_price": liquidation,
                }))
            })
            .collect(),
    )
}

/// A user's margin per currency that has futures, in engine integers.
pub fn margins_json(report: &UserReport) -> Value {
    Value::Array(
        report
            .margins
            .iter()
            .map(|m| {
                json!({"currency": m.currency.as_str(), "equity": m.equity, "initial": m.initial,
                    "maintenance": m.maintenance, "available": m.available})
            })
            .collect(),
    )
}

/// A user's report and the venue's settings read right after it (for the marks).
pub async fn report_and_settings(
    state: &AppState,
    user: rialto_core::UserId,
) -> Result<(u64, UserReport, Value), ApiError> {
    let (seq, report) = orders::report(state, user).await?;
    let (_, settings) = orders::venue_status(state).await?;
    Ok((seq, report, settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_prices_are_exact_or_truncated() {
        assert_eq!(entry_price(2000, 2, 1).as_deref(), Some("1000"));
        assert_eq!(entry_price(2001, 2, 1).as_deref(), Some("1000.5"));
        assert_eq!(entry_price(-2001, -2, 1).as_deref(), Some("1000.5"));
        assert_eq!(entry_price(1000, 3, 1).as_deref(), Some("333.33333333"));
        assert_eq!(entry_price(1, 3, 1).as_deref(), Some("0.33333333"));
        assert_eq!(entry_price(5, 1, 10).as_deref(), Some("0.5"));
        assert_eq!(entry_price(5, 0, 10), None);
        let tick = |m, s| rialto_fix::Decimal::new(m, s);
        assert_eq!(times_tick("1000.5", tick(1, 2)).as_deref(), Some("10.005"));
        assert_eq!(times_tick("100050", tick(1, 2)).as_deref(), Some("1000.5"));
        assert_eq!(times_tick("3", tick(5, 1)).as_deref(), Some("1.5"));
        assert_eq!(times_tick("-0.25", tick(1, 0)).as_deref(), Some("-0.25"));
        assert_eq!(times_tick("1e5", tick(1, 0)), None);
    }

    /// The bound agrees with the rule it reads: E < MM at the liquidation price, E >= MM one
    /// tick on the safe side.
    #[test]
    fn liquidation_prices_are_the_first_mark_below_maintenance() {
        let below = |lots: i64, cost: i64, available: i64, qs: i64, mm: i64, mark: i64| {
            let e = available as i128 + lots as i128 * mark as i128 * qs as i128 - cost as i128;
            e < mm as i128 * lots.unsigned_abs() as i128
        };
        for (lots, cost, available, qs, mm) in [
            (2, 2000, 200, 1, 50),
            (3, 3002, 7, 1, 50),
            (1, 10_000, 1000, 10, 5),
            (-2, -2000, 200, 1, 50),
            (-3, -2999, 13, 3, 7),
        ] {
            let price = liquidation_price(lots, cost, available, qs, mm).unwrap();
            assert!(below(lots, cost, available, qs, mm, price), "{lots} {cost}");
            let safe = if lots > 0 { price + 1 } else { price - 1 };
            assert!(!below(lots, cost, available, qs, mm, safe), "{lots} {cost}");
        }
        // rules.md's example F3: user 1 long 2 at 1000 with 200 USD, mm 50: 930 liquidates.
        assert_eq!(liquidation_price(2, 2000, 200, 1, 50), Some(949));
        // A long whose balance covers the whole position is never liquidated.
        assert_eq!(liquidation_price(1, 1000, 2000, 1, 50), None);
    }
}
