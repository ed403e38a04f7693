"""Decimals on the SDK's side, engine integers or decimal strings on the wire: the one place
that converts.

The venue's API writes prices, quantities, amounts and fees as decimal strings (docs/api.md,
"Units"); a server from before that change writes the engine's integers (ticks, lots, minor
units). Every value the SDK reads goes through :meth:`Units.price`, :meth:`Units.qty` or
:meth:`Units.amount`: a JSON string is read as a decimal as it stands, a JSON integer is scaled
by the symbol's tick or lot or the currency's minor unit. Every value the SDK sends goes through
the ``encode_*`` methods, in the form the server reads. Floats are refused everywhere: a
``0.1`` float is not 0.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .errors import RialtoError

DecimalLike = Decimal | str | int
"""What the SDK takes for a price, quantity or amount: a Decimal, a decimal string or an int."""


def to_decimal(value: DecimalLike, what: str) -> Decimal:
    """``value`` as a Decimal; floats and non-numbers are refused with a TypeError/ValueError."""
    if isinstance(value, (bool, float)):
        raise TypeError(f"{what} must be a Decimal, a decimal string or an int, not {type(value).__name__}")
    if isinstance(value, Decimal):
        result = value
    elif isinstance(value, (int, str)):
        try:
            result = Decimal(value)
        except ArithmeticError:
            raise ValueError(f"{what} is not a decimal: {value!r}") from None
    else:
        raise TypeError(f"{what} must be a Decimal, a decimal string or an int, not {type(value).__name__}")
    if not result.is_finite():
        raise ValueError(f"{what} is not a finite decimal: {value!r}")
    return result


def plain(value: Decimal) -> str:
    """A decimal written without an exponent (``Decimal("1E+3")`` is ``"1000"``)."""
    return format(value, "f")


def _decimals(unit: Decimal) -> int:
    """The digits after the point of ``unit`` (0.00001: 5)."""
    exponent = unit.normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


@dataclass(frozen=True)
class SymbolInfo:
    """One symbol of the venue, as exchange-info (or ``/symbols``) describes it."""

    symbol: str
    id: int
    base: str
    quote: str
    price_tick: Decimal
    qty_lot: Decimal
    maker_fee: Decimal
    """Per lot, in the quote currency."""
    taker_fee: Decimal
    """Per lot, in the quote currency."""


@dataclass(frozen=True)
class CurrencyInfo:
    currency: str
    decimals: int
    minor_unit: Decimal
    """What one engine unit of the currency is worth."""


class Units:
    """The venue's symbols and currencies, and how its wire writes numbers.

    ``decimal_wire`` is True for a server that speaks decimal strings (it has
    ``GET /api/v1/exchange-info``); False for one that speaks the engine's integers.
    """

    def __init__(self, symbols: list[SymbolInfo], currencies: list[CurrencyInfo], decimal_wire: bool) -> None:
        self.symbols = {s.symbol: s for s in symbols}
        self.currencies = {c.currency: c for c in currencies}
        self.decimal_wire = decimal_wire

    # -- building it from the server's answers ---------------------------------------------

    @classmethod
    def from_exchange_info(cls, info: dict[str, Any]) -> Units:
        symbols = [
            SymbolInfo(
                symbol=s["symbol"],
                id=int(s["id"]),
                base=s["base"],
                quote=s["quote"],
                price_tick=Decimal(s["price_tick"]),
                qty_lot=Decimal(s["qty_lot"]),
                maker_fee=Decimal(str(s["maker_fee"])),
                taker_fee=Decimal(str(s["taker_fee"])),
            )
            for s in info["symbols"]
        ]
        currencies = [
            CurrencyInfo(c["currency"], int(c["decimals"]), Decimal(c["minor_unit"])) for c in info["currencies"]
        ]
        return cls(symbols, currencies, decimal_wire=True)

    @classmethod
    def from_legacy_symbols(cls, rows: list[dict[str, Any]]) -> Units:
        """From ``GET /api/v1/symbols`` of a server that speaks integers.

        A currency's minor unit follows from the first symbol (by id) that trades it, as the
        decimal API defines it: a base minor unit is ``qty_lot / base_scale``, a quote minor
        unit ``price_tick * qty_lot / quote_scale``.
        """
        minor: dict[str, Decimal] = {}
        raw = sorted(rows, key=lambda s: int(s["id"]))
        for s in raw:
            tick = Decimal(str(s.get("price_tick", "1")))
            lot = Decimal(str(s.get("qty_lot", "1")))
            minor.setdefault(s["base"], lot / int(s["base_scale"]))
            minor.setdefault(s["quote"], tick * lot / int(s["quote_scale"]))
        currencies = [CurrencyInfo(c, _decimals(unit), unit) for c, unit in minor.items()]
        symbols = []
        for s in raw:
            quote_unit = minor[s["quote"]]
            symbols.append(
                SymbolInfo(
                    symbol=s["symbol"],
                    id=int(s["id"]),
                    base=s["base"],
                    quote=s["quote"],
                    price_tick=Decimal(str(s.get("price_tick", "1"))),
                    qty_lot=Decimal(str(s.get("qty_lot", "1"))),
                    maker_fee=int(s["maker_fee"]) * quote_unit,
                    taker_fee=int(s["taker_fee"]) * quote_unit,
                )
            )
        return cls(symbols, currencies, decimal_wire=False)

    # -- reading ---------------------------------------------------------------------------

    def symbol(self, name: str) -> SymbolInfo:
        try:
            return self.symbols[name]
        except KeyError:
            raise RialtoError("unknown_symbol", f"the venue has no symbol {name!r}") from None

    def _scaled(self, value: Any, unit: Decimal) -> Decimal:
        if isinstance(value, str):
            return Decimal(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value * unit
        raise RialtoError("unexpected_answer", f"expected a number, got {value!r}")

    def price(self, symbol: str, value: Any) -> Decimal:
        return self._scaled(value, self.symbol(symbol).price_tick)

    def qty(self, symbol: str, value: Any) -> Decimal:
        return self._scaled(value, self.symbol(symbol).qty_lot)

    def amount(self, currency: str, value: Any) -> Decimal:
        info = self.currencies.get(currency)
        return self._scaled(value, info.minor_unit if info else Decimal(1))

    def fee(self, symbol: str, value: Any) -> Decimal:
        return self.amount(self.symbol(symbol).quote, value)

    @staticmethod
    def ts_ns(value: Any) -> int:
        """Nanoseconds: a JSON string (decimal API) or integer (integer API)."""
        return int(value) if value is not None else 0

    # -- writing ---------------------------------------------------------------------------

    def _encode(self, value: DecimalLike, unit: Decimal, what: str, code: str) -> str | int:
        number = to_decimal(value, what)
        if self.decimal_wire:
            return plain(number)
        units, rest = divmod(number, unit)
        if rest != 0:
            raise RialtoError(code, f"{what} {plain(number)} is not a whole number of {plain(unit)}")
        return int(units)

    def encode_price(self, symbol: str, value: DecimalLike) -> str | int:
        return self._encode(value, self.symbol(symbol).price_tick, "price", "invalid_price")

    def encode_qty(self, symbol: str, value: DecimalLike) -> str | int:
        return self._encode(value, self.symbol(symbol).qty_lot, "quantity", "invalid_qty")

    def encode_amount(self, currency: str, value: DecimalLike) -> str | int:
        info = self.currencies.get(currency)
        return self._encode(value, info.minor_unit if info else Decimal(1), "amount", "invalid_qty")
