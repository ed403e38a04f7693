"""A local L2 book kept from the ``book.<symbol>`` channel, with the sequence checks of
docs/api.md ("The snapshot rule", "Gaps"). No I/O: the stream clients feed it messages."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .types import Book, Level
from .units import Units


class Gap(Exception):
    """The feed skipped updates: the book must be rebuilt from a fresh snapshot."""


class LocalBook:
    """The book of one symbol. ``synced`` is False until a snapshot came (and after a gap)."""

    def __init__(self, symbol: str) -> None:
        self.symbol = symbol
        self.seq = 0
        self.phase = ""
        self.synced = False
        self._bids: dict[Decimal, Decimal] = {}
        self._asks: dict[Decimal, Decimal] = {}
        self._diffed = False

    def reset(self) -> None:
        """Forget everything: the next message that counts is a snapshot."""
        self.synced = False
        self._bids.clear()
        self._asks.clear()

    def apply(self, msg: dict[str, Any], units: Units) -> bool:
        """Applies a snapshot or a diff; returns whether the book changed. Raises :class:`Gap`
        when a diff does not follow on from what the book holds."""
        kind = msg.get("type")
        if kind == "snapshot":
            self._bids = {units.price(self.symbol, p): units.qty(self.symbol, q) for p, q in msg["bids"]}
            self._asks = {units.price(self.symbol, p): units.qty(self.symbol, q) for p, q in msg["asks"]}
            self.seq = int(msg["seq"])
            self.phase = msg.get("phase", self.phase)
            self.synced = True
            self._diffed = False
            return True
        if kind != "diff" or not self.synced:
            return False  # a diff before the (new) snapshot is already in it
        first, last = int(msg["first"]), int(msg["last"])
        if last <= self.seq:
            return False  # already in the snapshot
        # The first diff after a snapshot may overlap it (its levels are final totals); every
        # later one starts right after the previous one.
        expected_ok = first <= self.seq + 1 if not self._diffed else first == self.seq + 1
        if not expected_ok:
            self.reset()
            raise Gap(f"{self.symbol}: diff {first}..{last} after seq {self.seq}")
        for side, levels in ((self._bids, msg.get("bids", [])), (self._asks, msg.get("asks", []))):
            for p, q in levels:
                price, qty = units.price(self.symbol, p), units.qty(self.symbol, q)
                if qty == 0:
                    side.pop(price, None)
                else:
                    side[price] = qty
        self.seq = last
        self._diffed = True
        if "phase" in msg:
            self.phase = msg["phase"]
        return True

    @property
    def bids(self) -> list[Level]:
        return sorted(self._bids.items(), key=lambda level: level[0], reverse=True)

    @property
    def asks(self) -> list[Level]:
        return sorted(self._asks.items(), key=lambda level: level[0])

    def view(self) -> Book:
        """An immutable copy, best levels first."""
        return Book(self.symbol, self.seq, self.phase, self.bids, self.asks)
