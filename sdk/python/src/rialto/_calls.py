"""The REST endpoints as data: what to send and how to read the answer, without I/O.

The sync :class:`rialto.Client` and the async :class:`rialto.AsyncClient` both run these, so
an endpoint is described once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote, urlencode

from .errors import RialtoError
from .types import Ack, Balance, Book, Margin, Order, OrderEvent, OrderStatus, Position, Trade
from .units import DecimalLike, Units, plain, to_decimal

T = TypeVar("T")


@dataclass
class Call(Generic[T]):
    method: str
    path: str
    """Under ``/api/v1``, without the query."""
    query: dict[str, Any] | None
    body: Callable[[Units], dict[str, Any]] | None
    signed: bool
    read: Callable[[Any, Units], T]

    def target(self) -> str:
        """The path and query exactly as sent (and signed)."""
        path = "/api/v1" + self.path
        if self.query:
            pairs = {k: v for k, v in self.query.items() if v is not None}
            if pairs:
                path += "?" + urlencode(pairs)
        return path

    def content(self, units: Units) -> bytes:
        if self.body is None:
            return b""
        return json.dumps(self.body(units), separators=(",", ":")).encode()


def _seg(value: str | int) -> str:
    return quote(str(value), safe="")


def _raw(payload: Any, _units: Units) -> Any:
    return payload


def _ack(payload: Any, units: Units) -> Ack:
    return Ack.parse(payload, units)


def _needs_symbol(symbol: str | None, units: Units, what: str) -> str | None:
    if symbol is None and not units.decimal_wire:
        raise RialtoError(
            "symbol_needed",
            f"this server speaks engine integers: {what} needs symbol= to convert the decimals",
        )
    return symbol


def _num(units: Units, symbol: str | None, value: DecimalLike, encode: Callable[[str, DecimalLike], Any]) -> Any:
    if symbol is None:
        # The server reads decimal strings, so no symbol is needed to write one.
        return plain(to_decimal(value, "value"))
    return encode(symbol, value)


# -- public ------------------------------------------------------------------------------


def server_time() -> Call[int]:
    return Call("GET", "/time", None, None, False, lambda p, u: Units.ts_ns(p["ts_ns"]))


def status() -> Call[Any]:
    return Call("GET", "/status", None, None, False, _raw)


def book(symbol: str, depth: int | None = None) -> Call[Book]:
    return Call("GET", f"/book/{_seg(symbol)}", {"depth": depth}, None, False, Book.parse)


def trades(symbol: str, limit: int | None = None) -> Call[list[Trade]]:
    return Call(
        "GET",
        f"/trades/{_seg(symbol)}",
        {"limit": limit},
        None,
        False,
        lambda p, u: [Trade.parse(symbol, t, u) for t in p],
    )


# -- private -----------------------------------------------------------------------------


def place(
    symbol: str,
    side: str,
    qty: DecimalLike,
    price: DecimalLike | None,
    order_type: str,
    tif: str | None,
    order_id: int | None,
    client_order_id: str | None,
    post_only: bool | None,
    stp: str | None,
    stop_price: DecimalLike | None,
    display_qty: DecimalLike | None,
    expire_ts_ns: int | None,
) -> Call[Ack]:
    def body(units: Units) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "symbol": symbol,
            "side": side,
            "type": order_type,
            "qty": units.encode_qty(symbol, qty),
        }
        if price is not None:
            fields["price"] = units.encode_price(symbol, price)
        if tif is not None:
            fields["tif"] = tif
        if order_id is not None:
            fields["order"] = order_id
        if client_order_id is not None:
            fields["client_order_id"] = client_order_id
        if post_only is not None:
            fields["post_only"] = post_only
        if stp is not None:
            fields["stp"] = stp
        if stop_price is not None:
            fields["stop_price"] = units.encode_price(symbol, stop_price)
        if display_qty is not None:
            fields["display_qty"] = units.encode_qty(symbol, display_qty)
        if expire_ts_ns is not None:
            fields["expire_ts"] = expire_ts_ns
        return fields

    return Call("POST", "/orders", None, body, True, _ack)


def cancel(order_id: int) -> Call[Ack]:
    return Call("DELETE", f"/orders/{_seg(order_id)}", None, None, True, _ack)


def move(order_id: int, price: DecimalLike, symbol: str | None) -> Call[Ack]:
    def body(units: Units) -> dict[str, Any]:
        sym = _needs_symbol(symbol, units, "move")
        return {"price": _num(units, sym, price, units.encode_price)}

    return Call("POST", f"/orders/{_seg(order_id)}/move", None, body, True, _ack)


def reduce(order_id: int, qty: DecimalLike, symbol: str | None) -> Call[Ack]:
    def body(units: Units) -> dict[str, Any]:
        sym = _needs_symbol(symbol, units, "reduce")
        return {"qty": _num(units, sym, qty, units.encode_qty)}

    return Call("POST", f"/orders/{_seg(order_id)}/reduce", None, body, True, _ack)


def amend(
    order_id: int,
    price: DecimalLike | None,
    qty: DecimalLike | None,
    stop_price: DecimalLike | None,
    symbol: str | None,
) -> Call[Ack]:
    def body(units: Units) -> dict[str, Any]:
        sym = _needs_symbol(symbol, units, "amend")
        fields: dict[str, Any] = {}
        if price is not None:
            fields["price"] = _num(units, sym, price, units.encode_price)
        if qty is not None:
            fields["qty"] = _num(units, sym, qty, units.encode_qty)
        if stop_price is not None:
            fields["stop_price"] = _num(units, sym, stop_price, units.encode_price)
        return fields

    return Call("PATCH", f"/orders/{_seg(order_id)}", None, body, True, _ack)


def mass_cancel(symbol: str | None) -> Call[Ack]:
    return Call("DELETE", "/orders", {"symbol": symbol}, None, True, _ack)


def open_orders() -> Call[list[Order]]:
    return Call("GET", "/orders", None, None, True, lambda p, u: [Order.parse(o, u) for o in p])


def order(order_id: int) -> Call[OrderStatus]:
    """``GET /api/v1/orders/{order}``: one order, live or ended."""
    return Call("GET", f"/orders/{_seg(order_id)}", None, None, True, OrderStatus.parse)


def order_by_client_id(client_order_id: str) -> Call[OrderStatus]:
    return Call("GET", f"/orders/by-client-id/{_seg(client_order_id)}", None, None, True, OrderStatus.parse)


def history(limit: int | None) -> Call[list[OrderEvent]]:
    return Call(
        "GET", "/orders/history", {"limit": limit}, None, True, lambda p, u: [OrderEvent.parse(e, u) for e in p]
    )


def balances() -> Call[dict[str, Balance]]:
    return Call(
        "GET",
        "/balances",
        None,
        None,
        True,
        lambda p, u: {b["currency"]: Balance.parse(b, u) for b in p},
    )


def positions() -> Call[list[Position]]:
    return Call("GET", "/positions", None, None, True, lambda p, u: [Position.parse(r, u) for r in p])


def margin() -> Call[dict[str, Margin]]:
    return Call("GET", "/margin", None, None, True, lambda p, u: {m["currency"]: Margin.parse(m, u) for m in p})


# -- admin (the ``admin`` key) -----------------------------------------------------------


def _admin_ack(payload: Any, _units: Units) -> int:
    return int(payload["seq"])


def set_mark_price(symbol: str, price: DecimalLike) -> Call[int]:
    def body(units: Units) -> dict[str, Any]:
        return {"price": units.encode_price(symbol, price)}

    return Call("POST", f"/admin/symbols/{_seg(symbol)}/mark_price", None, body, True, _admin_ack)


def fund_insurance(currency: str, amount: DecimalLike, tx: int) -> Call[int]:
    def body(units: Units) -> dict[str, Any]:
        return {"currency": currency, "amount": units.encode_amount(currency, amount), "tx": tx}

    return Call("POST", "/admin/insurance", None, body, True, _admin_ack)


def add_future(
    symbol: str,
    underlying: str,
    quote: str,
    quote_scale: int,
    initial_margin: int,
    maintenance_margin: int,
    mark_price: int,
    maker_fee: int,
    taker_fee: int,
    price_tick: str | None,
    qty_lot: str | None,
) -> Call[int]:
    def body(_units: Units) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "symbol": symbol,
            "base": underlying,
            "quote": quote,
            "base_scale": 1,
            "quote_scale": quote_scale,
            "maker_fee": maker_fee,
            "taker_fee": taker_fee,
            "type": "future",
            "initial_margin": initial_margin,
            "maintenance_margin": maintenance_margin,
            "mark_price": mark_price,
        }
        if price_tick is not None:
            fields["price_tick"] = price_tick
        if qty_lot is not None:
            fields["qty_lot"] = qty_lot
        return fields

    return Call("POST", "/admin/symbols", None, body, True, _admin_ack)


def venue() -> Call[Any]:
    return Call("GET", "/admin/venue", None, None, True, _raw)
