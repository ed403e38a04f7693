//! The JSON shapes of docs/api.md.

use rialto_core::SymbolSpec;
use rialto_marketdata::{Candle, L2Snapshot, L3Snapshot, SymbolInfo, Update};
use serde_json::{Value, json};

use crate::config::InstrumentSettings;

pub fn symbol(info: &SymbolInfo, instrument: Option<&InstrumentSettings>) -> Value {
    let SymbolSpec {
        symbol,
        base,
        quote,
        base_scale,
        quote_scale,
        maker_fee,
        taker_fee,
        ..
    } = info.spec;
    let (tick, lot) =
        instrument.map_or(("1", "1"), |i| (i.price_tick.as_str(), i.qty_lot.as_str()));
    json!({
        "symbol": symbol.as_str(),
        "id": info.id.0,
        "base": base.as_str(),
        "quote": quote.as_str(),
        "base_scale": base_scale,
        "quote_scale": quote_scale,
        "maker_fee": maker_fee,
        "taker_fee": taker_fee,
        "price_tick": tick,
        "qty_lot": lot,
        "type": info.spec.kind.map_or("spot", |k| k.as_str()),
    })
}

/// A symbol as `GET /api/v1/exchange-info` shows it, in engine integers (fees in quote minor
/// units per lot); `status` is its entry of `GET /api/v1/status`.
pub fn exchange_symbol(
    info: &SymbolInfo,
    scales: Option<&crate::web::units::Scales>,
    status: &Value,
    max_open_orders: u32,
) -> Value {
    let spec = info.spec;
    let one = rialto_fix::Decimal::new(1, 0);
    let (tick, lot) = scales.map_or((one, one), |s| (s.tick, s.lot));
    let mut symbol = json!({
        "symbol": spec.symbol.as_str(),
        "id": info.id.0,
        "base": spec.base.as_str(),
        "quote": spec.quote.as_str(),
        "price_tick": tick.to_string(),
        "qty_lot": lot.to_string(),
        "price_decimals": tick.scale,
        "qty_decimals": lot.scale,
        "base_scale": spec.base_scale,
        "quote_scale": spec.quote_scale,
        "maker_fee": spec.maker_fee,
        "taker_fee": spec.taker_fee,
        "phase": status["phase"],
        "band_bps": status["band_bps"],
        "reference": status["reference"],
        "last": status["last"],
        "limits": {
            "min_price": 1,
            "min_qty": 1,
            "max_open_orders_per_user": max_open_orders,
        },
        "type": "spot",
    });
    if let Some(rialto_core::SymbolKind::Future {
        initial_margin,
        maintenance_margin,
        ..
    }) = spec.kind
    {
        symbol["type"] = json!("future");
        symbol["initial_margin"] = json!(initial_margin);
        symbol["maintenance_margin"] = json!(maintenance_margin);
        symbol["mark"] = status["mark"].clone();
    }
    symbol
}

fn pairs(levels: &[(i64, i64)]) -> Value {
    Value::Array(levels.iter().map(|&(p, q)| json!([p, q])).collect())
}

pub fn l2(symbol: &str, snapshot: &L2Snapshot) -> Value {
    json!({"symbol": symbol, "seq": snapshot.seq, "phase": snapshot.phase.as_str(), "bids": pairs(&snapshot.bids), "asks": pairs(&snapshot.asks)})
}

pub fn l3_orders(snapshot: &L3Snapshot) -> (Value, Value) {
    let side = |orders: &[rialto_marketdata::L3Order]| {
        Value::Array(
            orders
                .iter()
                .map(|o| json!([o.order, o.price, o.qty]))
                .collect(),
        )
    };
    (side(&snapshot.bids), side(&snapshot.asks))
}

pub fn l3(symbol: &str, snapshot: &L3Snapshot) -> Value {
    let (bids, asks) = l3_orders(snapshot);
    json!({"symbol": symbol, "seq": snapshot.seq, "phase": snapshot.phase.as_str(), "bids": bids, "asks": asks})
}

pub fn trade(update: &Update) -> Value {
    match *update {
        Update::Trade {
            trade,
            ts_ns,
            price,
            qty,
            taker_side,
            ..
        } => {
            json!({"trade": trade, "ts_ns": ts_ns, "price": price, "qty": qty, "taker_side": taker_side.as_str()})
        }
        _ => Value::Null,
    }
}

pub fn candle(c: &Candle) -> Value {
    json!({
        "start_ns": c.start_ns,
        "open": c.open,
        "high": c.high,
        "low": c.low,
        "close": c.close,
        "volume": c.volume,
        "trades": c.trades,
    })
}

/// An L3 update as a WebSocket `orders.<symbol>` entry.
pub fn l3_update(update: &Update) -> Value {
    match *update {
        Update::Added {
            seq,
            order,
            side,
            price,
            qty,
            ..
        } => {
            json!({"seq": seq, "op": "add", "order": order, "side": side.as_str(), "price": price, "qty": qty})
        }
        Update::Reduced {
            seq, order, qty, ..
        } => {
            json!({"seq": seq, "op": "reduce", "order": order, "qty": qty})
        }
        Update::Executed {
            seq,
            order,
            qty,
            trade,
            ..
        } => json!({"seq": seq, "op": "execute", "order": order, "qty": qty, "trade": trade}),
        Update::Deleted { seq, order, .. } => json!({"seq": seq, "op": "delete", "order": order}),
        _ => Value::Null,
    }
}

pub fn bbo(ch: &str, seq: u64, bid: Option<(i64, i64)>, ask: Option<(i64, i64)>) -> Value {
    let level = |l: Option<(i64, i64)>| l.map_or(Value::Null, |(p, q)| json!([p, q]));
    json!({"ch": ch, "seq": seq, "bid": level(bid), "ask": level(ask)})
}
