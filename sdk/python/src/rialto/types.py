"""What the API answers, as typed values: every price, quantity, amount and fee a Decimal, every
time an int of nanoseconds. Each type keeps the answer it came from in ``raw``."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from .units import Units

Side = Literal["buy", "sell"]
OrderType = Literal["limit", "market", "stop", "stop_limit"]
TimeInForce = Literal["gtc", "ioc", "fok", "gtd", "day"]
SelfTradePrevention = Literal["cancel_taker", "cancel_maker", "cancel_both"]

Level = tuple[Decimal, Decimal]
"""A book level: (price, quantity)."""


@dataclass(frozen=True)
class Balance:
    currency: str
    available: Decimal
    held: Decimal

    @classmethod
    def parse(cls, row: dict[str, Any], units: Units) -> Balance:
        currency = row["currency"]
        return cls(currency, units.amount(currency, row["available"]), units.amount(currency, row["held"]))


@dataclass(frozen=True)
class Position:
    """A futures position (docs/api.md, "Futures"): ``size`` is signed (> 0 long, < 0 short);
    ``entry_price`` is the cost over the size, as a price (truncated toward zero at 8 decimals
    past the tick's when it does not end sooner); ``liquidation_price`` is None when it is not
    exact (positions in two or more futures of the currency) or no mark liquidates a long."""

    symbol: str
    quote: str
    side: str
    size: Decimal
    cost: Decimal
    entry_price: Decimal | None
    mark: Decimal | None
    unrealised_pnl: Decimal | None
    liquidation_price: Decimal | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, row: dict[str, Any], units: Units) -> Position:
        symbol, quote = row["symbol"], row["quote"]

        def opt(value: Any, read: Any) -> Decimal | None:
            return None if value is None else read(value)  # type: ignore[no-any-return]

        entry = row.get("entry_price")
        if entry is not None and not units.decimal_wire:
            # An integer-speaking server writes the entry price in ticks.
            entry_price: Decimal | None = Decimal(entry) * units.symbol(symbol).price_tick
        else:
            entry_price = None if entry is None else Decimal(entry)
        return cls(
            symbol=symbol,
            quote=quote,
            side=row["side"],
            size=units.qty(symbol, row["size"]),
            cost=units.amount(quote, row["cost"]),
            entry_price=entry_price,
            mark=opt(row.get("mark"), lambda v: units.price(symbol, v)),
            unrealised_pnl=opt(row.get("unrealised_pnl"), lambda v: units.amount(quote, v)),
            liquidation_price=opt(row.get("liquidation_price"), lambda v: units.price(symbol, v)),
            raw=row,
        )


@dataclass(frozen=True)
class Margin:
    """A user's margin in one currency that has futures: ``available`` is equity less the
    initial margin (what new futures orders may use; negative: none)."""

    currency: str
    equity: Decimal
    initial: Decimal
    maintenance: Decimal
    available: Decimal

    @classmethod
    def parse(cls, row: dict[str, Any], units: Units) -> Margin:
        c = row["currency"]
        return cls(
            c,
            units.amount(c, row["equity"]),
            units.amount(c, row["initial"]),
            units.amount(c, row["maintenance"]),
            units.amount(c, row["available"]),
        )


@dataclass(frozen=True)
class Liquidation:
    """A ``liquidated`` event of the user channel (docs/api.md, "Futures"): the user's equity
    and maintenance margin in ``currency`` before its futures orders were cancelled and its
    positions closed, and what the insurance fund paid (``shortfall``, 0 when nothing)."""

    currency: str
    equity: Decimal
    maintenance: Decimal
    shortfall: Decimal
    seq: int
    ts_ns: int

    @classmethod
    def parse(cls, row: dict[str, Any], units: Units) -> Liquidation:
        c = row["currency"]
        return cls(
            c,
            units.amount(c, row["equity"]),
            units.amount(c, row["maintenance"]),
            units.amount(c, row["shortfall"]),
            int(row.get("seq", 0)),
            units.ts_ns(row.get("ts_ns")),
        )


@dataclass(frozen=True)
class Fill:
    order: int
    symbol: str
    side: str
    price: Decimal
    qty: Decimal
    fee: Decimal
    liquidity: str
    seq: int
    ts_ns: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, row: dict[str, Any], units: Units, parent: dict[str, Any] | None = None) -> Fill:
        """``parent``: the order a place answer's fill belongs to (it gives the fields the
        fill leaves out: order, symbol, side)."""
        whole = {**(parent or {}), **row}
        symbol = whole["symbol"]
        return cls(
            order=int(whole["order"]),
            symbol=symbol,
            side=whole["side"],
            price=units.price(symbol, row["price"]),
            qty=units.qty(symbol, row["qty"]),
            fee=units.fee(symbol, row["fee"]),
            liquidity=row.get("liquidity", ""),
            seq=int(row.get("seq", 0)),
            ts_ns=units.ts_ns(row.get("ts_ns")),
            raw=row,
        )


@dataclass(frozen=True)
class Ack:
    """The answer to an order command: the engine applied it (``status``), as of ``seq``.

    A server with the richer place answers says what happened in ``status`` (``new``,
    ``filled``, ``partially_filled``, ``expired``, ...) and lists the order's ``fills``; an
    older one says ``accepted`` and the fills follow on the user stream and in the history.
    """

    order: int
    seq: int
    status: str
    ts_ns: int
    fills: list[Fill]
    filled: Decimal | None
    """What has executed (a place answer that says it), else None."""
    remaining: Decimal | None
    client_order_id: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, row: dict[str, Any], units: Units) -> Ack:
        symbol = row.get("symbol")
        parent = {"order": row.get("order"), "symbol": symbol, "side": row.get("side")}
        fills = [Fill.parse(f, units, parent) for f in row.get("fills", []) if symbol is not None]

        def qty(name: str) -> Decimal | None:
            value = row.get(name)
            return None if value is None or symbol is None else units.qty(symbol, value)

        return cls(
            order=int(row.get("order", 0)),
            seq=int(row.get("seq", 0)),
            status=str(row.get("status", "")),
            ts_ns=units.ts_ns(row.get("ts_ns")),
            fills=fills,
            filled=qty("filled"),
            remaining=qty("remaining"),
            client_order_id=row.get("client_order_id"),
            raw=row,
        )


@dataclass(frozen=True)
class Order:
    """An open order (or a pending stop), as ``GET /api/v1/orders`` lists it."""

    symbol: str
    order: int
    side: str
    type: str
    tif: str
    price: Decimal
    stop_price: Decimal
    pending: bool
    remaining: Decimal
    shown: Decimal
    filled: Decimal
    expire_ts_ns: int
    client_order_id: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, row: dict[str, Any], units: Units) -> Order:
        symbol = row["symbol"]
        return cls(
            symbol=symbol,
            order=int(row["order"]),
            side=row["side"],
            type=row["type"],
            tif=row["tif"],
            price=units.price(symbol, row.get("price", 0)),
            stop_price=units.price(symbol, row.get("stop_price", 0)),
            pending=bool(row.get("pending", False)),
            remaining=units.qty(symbol, row.get("remaining", 0)),
            shown=units.qty(symbol, row.get("shown", 0)),
            filled=units.qty(symbol, row.get("filled", 0)),
            expire_ts_ns=units.ts_ns(row.get("expire_ts", 0)),
            client_order_id=row.get("client_order_id"),
            raw=row,
        )


@dataclass(frozen=True)
class OrderStatus:
    """What became of one order (``GET /api/v1/orders/{order}``, by client order id, or the
    ``order`` of a ``duplicate_order_id`` refusal): ``status`` is ``new``,
    ``partially_filled``, ``filled``, ``expired``, ``killed`` or ``cancelled``."""

    order: int
    client_order_id: str | None
    symbol: str
    side: str
    type: str
    tif: str
    price: Decimal
    status: str
    original_qty: Decimal
    filled: Decimal
    remaining: Decimal
    placed_ns: int
    updated_ns: int
    fills: list[Fill]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, row: dict[str, Any], units: Units) -> OrderStatus:
        symbol = row["symbol"]
        parent = {"order": row.get("order"), "symbol": symbol, "side": row.get("side")}
        return cls(
            order=int(row["order"]),
            client_order_id=row.get("client_order_id"),
            symbol=symbol,
            side=row.get("side", ""),
            type=row.get("type", ""),
            tif=row.get("tif", ""),
            price=units.price(symbol, row.get("price", 0)),
            status=row.get("status", ""),
            original_qty=units.qty(symbol, row.get("original_qty", 0)),
            filled=units.qty(symbol, row.get("filled", 0)),
            remaining=units.qty(symbol, row.get("remaining", 0)),
            placed_ns=units.ts_ns(row.get("placed_ns", 0)),
            updated_ns=units.ts_ns(row.get("updated_ns", 0)),
            fills=[Fill.parse(f, units, parent) for f in row.get("fills", [])],
            raw=row,
        )

    @classmethod
    def from_open(cls, order: Order) -> OrderStatus:
        """The status of an open order as ``GET /api/v1/orders`` lists it (for a server
        without the order status endpoints: no fills, no times)."""
        return cls(
            order=order.order,
            client_order_id=order.client_order_id,
            symbol=order.symbol,
            side=order.side,
            type=order.type,
            tif=order.tif,
            price=order.price,
            status="partially_filled" if order.filled else "new",
            original_qty=order.filled + order.remaining,
            filled=order.filled,
            remaining=order.remaining,
            placed_ns=0,
            updated_ns=0,
            fills=[],
            raw=order.raw,
        )


@dataclass(frozen=True)
class OrderEvent:
    """One event of a user's order history or user stream (docs/api.md): ``type`` is
    ``accepted``, ``rejected``, ``fill``, ``cancelled``, ``triggered``, ``amended`` or
    ``liquidated`` (its figures are in ``raw``; the user stream also gives them typed, as a
    :class:`Liquidation`). The fields an event type does not have are None."""

    type: str
    order: int
    seq: int
    ts_ns: int
    symbol: str | None
    side: str | None
    kind: str | None
    reason: str | None
    price: Decimal | None
    qty: Decimal | None
    fee: Decimal | None
    liquidity: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, row: dict[str, Any], units: Units) -> OrderEvent:
        symbol = row.get("symbol")

        def opt(name: str, read: Any) -> Decimal | None:
            value = row.get(name)
            if value is None or symbol is None:
                return None
            return read(symbol, value)  # type: ignore[no-any-return]

        return cls(
            type=row["type"],
            order=int(row.get("order", 0)),
            seq=int(row.get("seq", 0)),
            ts_ns=units.ts_ns(row.get("ts_ns")),
            symbol=symbol,
            side=row.get("side"),
            kind=row.get("kind"),
            reason=row.get("reason"),
            price=opt("price", units.price),
            qty=opt("qty", units.qty),
            fee=opt("fee", units.fee),
            liquidity=row.get("liquidity"),
            raw=row,
        )


@dataclass(frozen=True)
class Trade:
    trade: int
    ts_ns: int
    price: Decimal
    qty: Decimal
    taker_side: str

    @classmethod
    def parse(cls, symbol: str, row: dict[str, Any], units: Units) -> Trade:
        return cls(
            int(row["trade"]),
            units.ts_ns(row.get("ts_ns")),
            units.price(symbol, row["price"]),
            units.qty(symbol, row["qty"]),
            row.get("taker_side", ""),
        )


@dataclass(frozen=True)
class Book:
    """An L2 book as of ``seq`` (the symbol's L2 sequence number), best levels first."""

    symbol: str
    seq: int
    phase: str
    bids: list[Level]
    asks: list[Level]

    @classmethod
    def parse(cls, row: dict[str, Any], units: Units) -> Book:
        symbol = row["symbol"]
        return cls(
            symbol,
            int(row["seq"]),
            row.get("phase", ""),
            [(units.price(symbol, p), units.qty(symbol, q)) for p, q in row["bids"]],
            [(units.price(symbol, p), units.qty(symbol, q)) for p, q in row["asks"]],
        )

    @property
    def best_bid(self) -> Level | None:
        return self.bids[0] if self.bids else None

    @property
    def best_ask(self) -> Level | None:
        return self.asks[0] if self.asks else None
