#!/usr/bin/env python3
# Writes docs/openapi.json (the REST API description served at /openapi.json):
#   python3 scripts/gen-openapi.py > docs/openapi.json
# Keep it in step with crates/server/src/web/rest.rs; a unit test there compares the two.
import json
def ref(n): return {"$ref": f"#/components/schemas/{n}"}
def ok(schema, desc="OK"): return {"description": desc, "content": {"application/json": {"schema": schema}}}
err = {"description": "An error (docs/api.md, Errors)", "content": {"application/json": {"schema": ref("Error")}}}
sym = {"name": "symbol", "in": "path", "required": True, "schema": {"type": "string"}, "example": "BTC-USD"}
order = {"name": "order", "in": "path", "required": True, "schema": {"type": "integer", "format": "int64"}}
def q(name, desc, mx): return {"name": name, "in": "query", "required": False, "description": desc, "schema": {"type": "integer", "minimum": 1, "maximum": mx}}
signed = [{"RialtoKey": [], "RialtoTimestamp": [], "RialtoSignature": []}]
units = {"name": "units", "in": "query", "required": False, "description": "decimal (the default): prices, quantities, amounts and fees as decimal strings, times as ms plus ns as a string; int: the engine's integers (ticks, lots, minor units, ns)", "schema": {"type": "string", "enum": ["decimal", "int"]}}
def op(summary, resp, params=None, body=None, private=False, tag="public"):
    o = {"summary": summary, "tags": [tag], "responses": {"200": resp, "default": err}}
    o["parameters"] = (params or []) + [units]
    if body: o["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    if private: o["security"] = signed
    return o
i64 = {"type": "integer", "format": "int64"}
cid = {"type": "string", "pattern": "^[A-Za-z0-9._:/-]{1,36}$", "description": "the client's own id for an order"}
cid_param = {"name": "cid", "in": "path", "required": True, "schema": cid}
# A price, quantity, amount or fee: a decimal string, or with units=int the engine's integer.
dec = {"oneOf": [{"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?$"}, i64], "description": "a decimal string (\"65000.50\"); with units=int an integer (ticks, lots or minor units)"}
def d(desc): return {**dec, "description": desc + "; a decimal string, or with units=int an integer"}
# A time in ns: a string of digits, or with units=int an integer; beside it the ms in `ts`.
ns = {"oneOf": [{"type": "string", "pattern": "^-?[0-9]+$"}, i64], "description": "ns since the Unix epoch: a string (an integer with units=int)"}
ms = {**i64, "description": "ms since the Unix epoch (not with units=int)"}
arr = lambda s: {"type": "array", "items": s}
# The history database's ranges (docs/api.md, "Durable history").
def t(name, desc): return {"name": name, "in": "query", "required": False, "description": desc, "schema": {**i64, "minimum": 0}}
since, until = t("start_time", "ms since the Unix epoch, inclusive (docs/api.md, Durable history)"), t("end_time", "ms since the Unix epoch, exclusive")
from_id = t("from_id", "ids at or after this one, oldest first")
page = [q("limit", "default 100", 1000), since, until, from_id]
symq = {"name": "symbol", "in": "query", "required": False, "schema": {"type": "string"}, "example": "BTC-USD"}
interval = {"name": "interval", "in": "query", "required": False, "description": "default 1m", "schema": {"type": "string", "enum": ["1m", "5m", "15m", "1h", "4h", "1d"]}}
level = {"type": "array", "items": dec, "minItems": 2, "maxItems": 2, "description": "[price, qty]"}

keyp = {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}, "example": "rk3fQ9x0LmT2pW8sVb1c"}
paths = {
 "/api/v1/admin/keys": {
   "post": op("Create an API key for a user: permissions (read is implied; trade, withdraw), an optional IP allow-list and a label; the answer holds its secret, shown this once", ok(ref("NewApiKey")), body=ref("ApiKeyTerms"), private=True, tag="admin"),
   "get": op("Every issued API key, or one user's (never secrets)", ok(arr(ref("ApiKey"))), [{"name": "user", "in": "query", "required": False, "schema": i64}], private=True, tag="admin")},
 "/api/v1/admin/keys/{key}": {"delete": op("Revoke an API key (that key alone stops working)", ok({"type": "object", "properties": {"revoked": ref("ApiKey")}}), [keyp], private=True, tag="admin")},
 "/api/v1/keys": {"get": op("The signer's user's issued API keys (never secrets)", ok(arr(ref("ApiKey"))), private=True, tag="trading")},
 "/api/v1/keys/{key}": {"delete": op("Revoke one of the user's API keys: a key may revoke itself; another key needs the trade permission", ok({"type": "object", "properties": {"revoked": ref("ApiKey")}}), [keyp], private=True, tag="trading")},
 "/api/v1/time": {"get": op("Server time", ok({"type": "object", "properties": {"ts": ms, "ts_ns": ns}}))},
 "/api/v1/exchange-info": {"get": op("Every symbol's tick, lot, decimals, fees, band, limits and phase, and every currency's decimals", ok(ref("ExchangeInfo")))},
 "/api/v1/symbols": {"get": op("Listed symbols with their tick and lot sizes", ok(arr(ref("Symbol"))))},
 "/api/v1/book/{symbol}": {"get": op("L2 book: aggregated levels, best first", ok(ref("L2Book")), [sym, q("depth", "levels a side (default 50)", 1000)])},
 "/api/v1/book/{symbol}/orders": {"get": op("L3 book: resting orders in priority order, at most `limit` a side", ok(ref("L3Book")), [sym, q("limit", "orders a side (default and most 1000); truncated says whether a side had more", 1000)])},
 "/api/v1/trades/{symbol}": {"get": op("The feed's recent trades, oldest first", ok(arr(ref("Trade"))), [sym, q("limit", "default 100", 1000)])},
 "/api/v1/trades/{symbol}/history": {"get": op("Every trade since the venue began, oldest first (the last `limit`, or the first from `from_id`/`start_time`)", ok(arr(ref("TradeRecord"))), [sym] + page)},
 "/api/v1/candles/{symbol}": {"get": op("Candles of an interval, oldest first", ok(arr(ref("Candle"))), [sym, interval, q("limit", "default 60", 1440), since, until])},
 "/api/v1/ticker/24h": {"get": op("24 h statistics of every symbol, or of one (`symbol`: one object)", ok({"oneOf": [arr(ref("Ticker")), ref("Ticker")]}), [symq])},
 "/api/v1/fills": {"get": op("Fills of the key's user, oldest first", ok(arr(ref("OrderEvent"))), [symq] + page, private=True, tag="trading")},
 "/api/v1/status": {"get": op("Each symbol's trading status: phase, last and reference price, price band", ok({"type": "object", "properties": {"seq": i64, "symbols": arr(ref("SymbolStatus"))}}))},
 "/api/v1/orders": {
   "post": op("Place an order; the answer says what became of it, with its fills (a resent client_order_id is refused duplicate_order_id with the original's status under error.order)", ok(ref("OrderStatus")), body=ref("NewOrder"), private=True, tag="trading"),
   "get": op("Open orders", ok(arr(ref("OpenOrder"))), private=True, tag="trading"),
   "delete": op("Mass cancel (one symbol, or all)", ok(ref("OrderAck")), [{"name": "symbol", "in": "query", "required": False, "schema": {"type": "string"}}], private=True, tag="trading")},
 "/api/v1/orders/history": {"get": op("Order events of the key's user, oldest first", ok(arr(ref("OrderEvent"))), page, private=True, tag="trading")},
 "/api/v1/orders/by-client-id/{cid}": {"get": op("One of the key's user's orders by its client order id", ok(ref("OrderStatus")), [cid_param], private=True, tag="trading"),
   "delete": op("Cancel an order by its client order id", ok(ref("OrderAck")), [cid_param], private=True, tag="trading"),
   "patch": op("Amend an order by its client order id (as PATCH /api/v1/orders/{order})", ok(ref("OrderAck")), [cid_param], ref("Amend"), True, "trading")},
 "/api/v1/orders/{order}": {"get": op("One of the key's user's orders: terms, status, quantities, times and fills", ok(ref("OrderStatus")), [order], private=True, tag="trading"),
   "delete": op("Cancel an order", ok(ref("OrderAck")), [order], private=True, tag="trading"),
   "patch": op("Amend an order: a new price, total quantity (fills included) and/or stop price at once; it keeps its place when the price is unchanged and the remaining does not grow", ok(ref("OrderAck")), [order], ref("Amend"), True, "trading")},
 "/api/v1/orders/{order}/move": {"post": op("Move an order to a new price (it loses priority)", ok(ref("OrderAck")), [order], {"type": "object", "required": ["price"], "properties": {"price": dec}, "additionalProperties": False}, True, "trading")},
 "/api/v1/orders/{order}/reduce": {"post": op("Take quantity off an order (it keeps priority)", ok(ref("OrderAck")), [order], {"type": "object", "required": ["qty"], "properties": {"qty": dec}, "additionalProperties": False}, True, "trading")},
 "/api/v1/balances": {"get": op("Balances of the key's user", ok(arr(ref("Balance"))), private=True, tag="trading")},
 "/api/v1/admin/deposits": {"post": op("Deposit to a user", ok(ref("AdminAck")), body=ref("Transfer"), private=True, tag="admin")},
 "/api/v1/admin/withdrawals": {"post": op("Withdraw from a user", ok(ref("AdminAck")), body=ref("Transfer"), private=True, tag="admin")},
 "/api/v1/admin/users": {"get": op("Every user's id, ascending", ok(arr({"type": "object", "properties": {"user": i64}})), private=True, tag="admin"), "post": op("Add a user; answers its secret", ok({"type": "object", "properties": {"user": i64, "secret": {"type": "string"}, "seq": i64}}), body={"type": "object", "required": ["user"], "properties": {"user": i64}, "additionalProperties": False}, private=True, tag="admin")},
 "/api/v1/admin/symbols": {"post": op("List a new symbol", ok(ref("AdminAck")), body=ref("NewSymbol"), private=True, tag="admin")},
 "/api/v1/admin/venue": {"get": op("Venue totals per currency", ok(arr(ref("CurrencyTotals"))), private=True, tag="admin")},
 "/api/v1/admin/settings": {"get": op("The venue's settings", ok(ref("VenueSettings")), private=True, tag="admin")},
 "/api/v1/admin/settings/order_id_window": {"post": op("Set the order-id window (set_order_id_window): an order id stays taken this long after its order ended", ok(ref("AdminAck")), body={"type": "object", "required": ["window_ns"], "properties": {"window_ns": {**i64, "minimum": 0, "description": "ns of venue time; 0: only live orders' ids are taken"}}, "additionalProperties": False}, private=True, tag="admin")},
 "/api/v1/admin/symbols/{symbol}/phase": {"post": op("Set a symbol's trading phase (set_phase)", ok(ref("AdminAck")), [sym], {"type": "object", "required": ["phase"], "properties": {"phase": {"type": "string", "enum": ["continuous", "auction", "halted", "closed"]}}, "additionalProperties": False}, True, "admin")},
 "/api/v1/admin/symbols/{symbol}/band": {"post": op("Set a symbol's price band in basis points of its reference price, 0 for none (set_band)", ok(ref("AdminAck")), [sym], {"type": "object", "required": ["band_bps"], "properties": {"band_bps": i64}, "additionalProperties": False}, True, "admin")},
 "/api/v1/admin/symbols/{symbol}/ref_price": {"post": op("Set a symbol's reference price (set_ref_price)", ok(ref("AdminAck")), [sym], {"type": "object", "required": ["price"], "properties": {"price": dec}, "additionalProperties": False}, True, "admin")},
 "/api/v1/admin/users/{user}/suspend": {"post": op("Suspend a user: its orders are cancelled and new ones refused (suspend_user)", ok(ref("AdminAck")), [{"name": "user", "in": "path", "required": True, "schema": i64}], private=True, tag="admin")},
 "/api/v1/admin/users/{user}/resume": {"post": op("Resume a suspended user (resume_user)", ok(ref("AdminAck")), [{"name": "user", "in": "path", "required": True, "schema": i64}], private=True, tag="admin")},
 "/api/v1/admin/snapshot": {"post": op("Take a snapshot now", ok({"type": "object", "properties": {"seq": i64, "state_hash": {"type": "string"}}}), private=True, tag="admin")},
 "/api/v1/admin/balances/{user}": {"get": op("A user's balances and open orders", ok({"type": "object", "properties": {"user": i64, "balances": arr(ref("Balance")), "orders": arr(ref("OpenOrder"))}}), [{"name": "user", "in": "path", "required": True, "schema": i64}], private=True, tag="admin")},
}
word = lambda *w: {"type": "string", "enum": list(w)}
schemas = {
 "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {"code": {"type": "string", "description": "a stable code: an engine reason (unknown_symbol, insufficient_funds, ...) or one of malformed_json, bad_request, method_not_allowed, missing_credentials, unknown_key, bad_signature, stale_request, replayed_request, bad_recv_window, permission_denied, ip_not_allowed, too_many_keys, forbidden, not_found, request_timeout, payload_too_large, rate_limited, too_many_failures, busy, shutting_down, timeout, read_only_replica"}, "message": {"type": "string"}}}}},
 "Symbol": {"type": "object", "properties": {"symbol": {"type": "string"}, "id": {"type": "integer"}, "base": {"type": "string"}, "quote": {"type": "string"}, "base_scale": i64, "quote_scale": i64, "maker_fee": d("quote per lot"), "taker_fee": d("quote per lot"), "price_tick": {"type": "string", "example": "0.01"}, "qty_lot": {"type": "string", "example": "0.001"}}},
 "ExchangeInfo": {"type": "object", "properties": {"seq": i64, "ts": ms, "ts_ns": ns, "symbols": arr(ref("SymbolInfo")), "currencies": arr({"type": "object", "properties": {"currency": {"type": "string"}, "decimals": {"type": "integer", "description": "digits after the point of the currency's amounts"}, "minor_unit": {"type": "string", "example": "0.00001", "description": "what one engine unit of the currency is worth"}}})}},
 "SymbolInfo": {"type": "object", "properties": {"symbol": {"type": "string"}, "id": {"type": "integer"}, "base": {"type": "string"}, "quote": {"type": "string"}, "price_tick": {"type": "string", "example": "0.01"}, "qty_lot": {"type": "string", "example": "0.001"}, "price_decimals": {"type": "integer"}, "qty_decimals": {"type": "integer"}, "base_scale": i64, "quote_scale": i64, "maker_fee": d("quote per lot"), "taker_fee": d("quote per lot"), "phase": word("continuous", "auction", "halted", "closed"), "band_bps": i64, "reference": d("reference price, 0 for none"), "last": d("last trade price, 0 before any"), "limits": {"type": "object", "properties": {"min_price": d("one tick"), "min_qty": d("one lot"), "max_open_orders_per_user": i64}}}},
 "L2Book": {"type": "object", "properties": {"symbol": {"type": "string"}, "seq": i64, "bids": arr(level), "asks": arr(level)}},
 "L3Book": {"type": "object", "properties": {"symbol": {"type": "string"}, "seq": i64, "bids": arr({"type": "array", "items": dec, "description": "[order, price, qty] (the order an integer)"}), "asks": arr({"type": "array", "items": dec, "description": "[order, price, qty] (the order an integer)"}), "truncated": {"type": "boolean", "description": "true when a side had more orders than limit"}}},
 "TradeRecord": {"type": "object", "properties": {"trade_id": {**i64, "description": "seq × 1,000,000 + the trade's index in its command: stable across restarts"}, "ts": ms, "ts_ns": ns, "price": dec, "qty": dec, "taker_side": word("buy", "sell")}},
 "Ticker": {"type": "object", "properties": {"symbol": {"type": "string"}, **{k: {**dec, "nullable": True} for k in ["open", "high", "low", "last", "change"]}, "volume": dec, "quote_volume": dec, "trades": i64, "change_percent": {"type": "string", "nullable": True, "example": "1.250"}, "ts": ms, "ts_ns": ns}},
 "Trade": {"type": "object", "properties": {"trade": i64, "ts": ms, "ts_ns": ns, "price": dec, "qty": dec, "taker_side": word("buy", "sell")}},
 "Candle": {"type": "object", "properties": {"start": ms, "start_ns": ns, "trades": i64, **{k: dec for k in ["open", "high", "low", "close", "volume"]}}},
 "NewOrder": {"type": "object", "required": ["symbol", "side", "qty"], "additionalProperties": False, "properties": {"symbol": {"type": "string"}, "order": {**i64, "description": "the client's id; the server picks one when absent"}, "side": word("buy", "sell"), "type": word("limit", "market", "stop", "stop_limit"), "tif": word("gtc", "ioc", "fok", "gtd", "day"), "price": d("required for limit orders"), "qty": d("the quantity"), "post_only": {"type": "boolean"}, "stp": word("cancel_taker", "cancel_maker", "cancel_both"), "stop_price": d("stop and stop_limit: the trade price that triggers the order"), "display_qty": d("an iceberg's displayed quantity"), "expire_ts": {**i64, "description": "gtd: the expiry time, ns since the Unix epoch"}, "client_order_id": {**cid, "description": "the client's own id: the order id is derived from it, so a resend within the venue's order-id window never trades twice (not with order)"}}},
 "OrderStatus": {"type": "object", "properties": {"order": i64, "client_order_id": {**cid, "nullable": True}, "symbol": {"type": "string"}, "side": word("buy", "sell"), "type": {"type": "string"}, "tif": {"type": "string"}, "price": {**dec, "nullable": True}, "status": word("new", "partially_filled", "filled", "expired", "killed", "cancelled"), "original_qty": {**dec, "nullable": True}, "filled": dec, "remaining": dec, "placed": {**ms, "nullable": True}, "placed_ns": {**ns, "nullable": True}, "updated": {**ms, "nullable": True}, "updated_ns": {**ns, "nullable": True}, "seq": {**i64, "description": "the place answer: the command's seq"}, "ts": ms, "ts_ns": ns, "fills": arr({"type": "object", "properties": {"price": dec, "qty": dec, "fee": dec, "liquidity": word("maker", "taker"), "seq": i64, "ts": ms, "ts_ns": ns}})}},
 "OrderAck": {"type": "object", "properties": {"order": i64, "seq": i64, "ts": ms, "ts_ns": ns, "status": word("accepted")}},
 "OpenOrder": {"type": "object", "properties": {"symbol": {"type": "string"}, "order": i64, "side": word("buy", "sell"), "type": {**word("limit", "stop", "stop_limit"), "description": "stop or stop_limit while the stop is pending; limit for any order in the book (a triggered stop-limit included)"}, "tif": {**word("gtc", "ioc", "fok", "gtd", "day"), "description": "ioc and fok only on a pending stop (what it becomes when triggered)"}, "price": d("the limit price (a stop's protection price); 0 for a stop without one"), "stop_price": d("a pending stop's trigger price; 0 otherwise"), "pending": {"type": "boolean", "description": "a stop waiting for its trigger: it is in no book and shows nothing"}, "remaining": d("what is left, an iceberg's hidden part included"), "shown": d("what the book shows: remaining, but an iceberg's current slice, and 0 for a pending stop"), "filled": d("what executed since the order was accepted"), "expire_ts": {**ns, "description": "gtd and day: the expiry, ns since the Unix epoch (a string; an integer with units=int); 0 for an order that never expires"}}},
 "OrderEvent": {"type": "object", "required": ["type"], "properties": {"type": word("accepted", "rejected", "fill", "cancelled", "amended", "triggered"), "id": {**i64, "description": "seq × 1,000,000 + the event's index in its command: the cursor of from_id (history database only)"}, "trade_id": {**i64, "description": "fill: the trade's lasting id (history database only)"}, "order": i64, "kind": word("place", "cancel", "move", "reduce", "amend", "mass_cancel"), "stop_price": d("amended: 0 for an order that is not a pending stop"), "remaining": d("amended: the new remaining quantity"), "priority": word("kept", "lost"), "reason": {"type": "string"}, "symbol": {"type": "string"}, "side": word("buy", "sell"), "price": dec, "qty": dec, "fee": d("in the quote currency"), "liquidity": word("maker", "taker"), "seq": i64, "ts": ms, "ts_ns": ns}},
 "Amend": {"type": "object", "additionalProperties": False, "minProperties": 1, "properties": {"price": d("the new price"), "qty": d("the new total: what has filled plus what is left"), "stop_price": d("the new stop price of a pending stop order")}},
 "VenueSettings": {"type": "object", "properties": {"seq": i64, "order_id_window_ns": i64, "symbols": arr(ref("SymbolStatus"))}},
 "SymbolStatus": {"type": "object", "properties": {"symbol": {"type": "string"}, "phase": word("continuous", "auction", "halted", "closed"), "last": d("last trade price, 0 before any"), "reference": d("reference price, 0 for none"), "band_bps": {**i64, "description": "price band in basis points, 0 for none"}}},
 "Balance": {"type": "object", "properties": {"currency": {"type": "string"}, "available": d("in the currency's decimals"), "held": d("in the currency's decimals")}},
 "ApiKeyTerms": {"type": "object", "required": ["user"], "additionalProperties": False, "properties": {"user": i64, "permissions": arr({"type": "string", "enum": ["read", "trade", "withdraw"]}), "allow_ips": {**arr({"type": "string"}), "maxItems": 16, "description": "addresses or CIDR networks (10.0.0.0/8); empty: any address"}, "label": {"type": "string", "maxLength": 64}}},
 "ApiKey": {"type": "object", "properties": {"key": {"type": "string"}, "user": i64, "permissions": arr({"type": "string"}), "allow_ips": arr({"type": "string"}), "label": {"type": "string"}, "created_ms": i64}},
 "NewApiKey": {"allOf": [ref("ApiKey"), {"type": "object", "properties": {"secret": {"type": "string", "description": "shown this once; the server keeps only its SHA-256"}}}]},
 "Transfer": {"type": "object", "required": ["user", "currency", "amount", "tx"], "additionalProperties": False, "properties": {"user": i64, "currency": {"type": "string"}, "amount": d("positive, in the currency's decimals"), "tx": {**i64, "description": "unique per transfer: a repeat is refused duplicate_tx"}}},
 "AdminAck": {"type": "object", "properties": {"seq": i64, "status": word("accepted")}},
 "NewSymbol": {"type": "object", "required": ["symbol", "base", "quote", "base_scale", "quote_scale", "maker_fee", "taker_fee"], "additionalProperties": False, "properties": {"symbol": {"type": "string"}, "base": {"type": "string"}, "quote": {"type": "string"}, "base_scale": i64, "quote_scale": i64, "maker_fee": i64, "taker_fee": i64, "price_tick": {"type": "string"}, "qty_lot": {"type": "string"}}},
 "CurrencyTotals": {"type": "object", "properties": {"currency": {"type": "string"}, **{k: dec for k in ["deposits", "withdrawals", "available", "held", "fees"]}}},
}
hdr = lambda n, d: {"type": "apiKey", "in": "header", "name": n, "description": d}
spec = {
 "openapi": "3.0.3",
 "info": {"title": "Rialto REST API", "version": "1", "description": "Prices, quantities, amounts and fees are decimal strings (\"65000.50\"), and times ms plus ns as a string; with ?units=int they are the engine's integers: ticks, lots, minor units and ns. Private calls are signed: Rialto-Signature = hex(HMAC-SHA256(secret, key + \"\\n\" + timestamp + \"\\n\" + recv_window + \"\\n\" + METHOD + \"\\n\" + path_and_query + \"\\n\" + body)). See docs/api.md, which also describes the WebSocket API at /ws."},
 "servers": [{"url": "http://127.0.0.1:8080"}],
 "paths": paths,
 "components": {"schemas": schemas, "securitySchemes": {
   "RialtoKey": hdr("Rialto-Key", "an issued API key (rk and 18 letters or digits), a user id in decimal without sign or leading zeros (the user's default key: 1, not 01 or +1), or admin"),
   "RialtoTimestamp": hdr("Rialto-Timestamp", "ms since the Unix epoch: accepted from timestamp to timestamp + the receive window (the optional Rialto-Recv-Window header, ms, 1 to 60000, default 5000; signed as sent, or as an empty line when absent), and at most 1 s ahead of the server (web.max_clock_skew_ms); the same signed request is accepted once"),
   "RialtoSignature": hdr("Rialto-Signature", "hex HMAC-SHA256 of the signed text")}},
}
print(json.dumps(spec, indent=2))
