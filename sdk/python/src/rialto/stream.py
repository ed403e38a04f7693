"""WebSocket clients: :class:`Stream` (blocking) and :class:`AsyncStream` (asyncio).

Both keep their subscriptions across disconnections: on a reconnect they log in again,
subscribe again, and rebuild each book from its new snapshot; on a gap in a book's or a
trade tape's sequence numbers, or on the ``user`` channel's ``gap`` event (the server's web
side fell behind and lost some of the user's events), they resubscribe that channel for a fresh
snapshot (docs/api.md, "Gaps"). The protocol lives in :class:`_Core`, without I/O; the two classes
only move its messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import websockets
from websockets.asyncio.client import ClientConnection as AsyncConnection
from websockets.asyncio.client import connect as async_connect
from websockets.sync.client import ClientConnection as SyncConnection
from websockets.sync.client import connect as sync_connect

from . import _calls as calls
from . import _tls
from .book import Gap, LocalBook
from .client import AsyncClient, Client
from .errors import RialtoError, TransportError, from_ws_answer
from .signing import Credentials, ws_login
from .types import Ack, Balance, Book, Liquidation, Margin, Order, OrderEvent, OrderStatus, Position, Trade
from .units import DecimalLike, Units


@dataclass(frozen=True)
class BookUpdate:
    """The book of ``symbol`` after a snapshot (``snapshot`` True: first, after a reconnect or
    a gap) or a diff."""

    symbol: str
    book: Book
    snapshot: bool


@dataclass(frozen=True)
class TradesUpdate:
    symbol: str
    trades: list[Trade]
    snapshot: bool


@dataclass(frozen=True)
class UserUpdate:
    """A message of the private ``user`` channel: ``balances``, ``orders`` and (on a venue with
    futures) ``positions`` snapshots (``positions`` and ``margins``), an order event
    (``fill``, ``cancelled``, ``liquidated``, ...) in ``event`` (a ``liquidated`` one's figures
    also in ``liquidation``), or ``gap``: events up to
    ``seq`` were lost on the server; the stream has resubscribed and fresh snapshots follow."""

    type: str
    seq: int
    balances: dict[str, Balance] | None = None
    orders: list[Order] | None = None
    event: OrderEvent | None = None
    positions: list[Position] | None = None
    margins: dict[str, Margin] | None = None
    liquidation: Liquidation | None = None


@dataclass(frozen=True)
class Reconnected:
    """The connection broke and was made again; subscriptions follow with fresh snapshots."""

    reason: str


@dataclass(frozen=True)
class Message:
    """Any other stream message (``status``, ``bbo.*``, ``candles.*``, ``orders.*``,
    ``error``), as the server wrote it."""

    ch: str
    raw: dict[str, Any] = field(repr=False)


Event = BookUpdate | TradesUpdate | UserUpdate | Reconnected | Message


def _urls(url: str) -> tuple[str, str]:
    """(the REST base URL, the WebSocket URL) from either."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    ws_scheme = {"http": "ws", "https": "wss"}.get(scheme, scheme)
    http = urlunsplit((scheme, parts.netloc, "", "", ""))
    ws = urlunsplit((ws_scheme, parts.netloc, "/ws", parts.query, ""))
    return http, ws


class _Core:
    """Requests, answers and stream messages of one logical stream, across connections."""

    def __init__(self, credentials: Credentials | None) -> None:
        self.credentials = credentials
        self.units: Units | None = None
        self.channels: list[str] = []
        self.books: dict[str, LocalBook] = {}
        self.last_trade: dict[str, int] = {}
        self.events: deque[Event] = deque()
        self.answers: dict[int, dict[str, Any]] = {}
        self._internal: set[int] = set()
        self._next_id = 0

    def request(self, op: str, fields: dict[str, Any], internal: bool = False) -> tuple[int, dict[str, Any]]:
        self._next_id += 1
        if internal:
            self._internal.add(self._next_id)
        return self._next_id, {"id": self._next_id, "op": op, **fields}

    def on_open(self) -> list[dict[str, Any]]:
        """What a new connection sends first: the login, then every subscription."""
        self.answers.clear()
        self._internal.clear()
        for book in self.books.values():
            book.reset()
        self.last_trade.clear()
        out = []
        if self.credentials is not None:
            out.append(self.request("login", ws_login(self.credentials), internal=True)[1])
        for ch in self.channels:
            out.append(self.request("subscribe", {"ch": ch}, internal=True)[1])
        return out

    def add_channel(self, ch: str) -> None:
        if ch in self.channels:
            raise RialtoError("bad_request", f"already subscribed to {ch}")
        self.channels.append(ch)
        if ch.startswith("book."):
            self.books[ch[5:]] = LocalBook(ch[5:])

    def remove_channel(self, ch: str) -> None:
        self.channels.remove(ch)
        if ch.startswith("book."):
            self.books.pop(ch[5:], None)
        if ch.startswith("trades."):
            self.last_trade.pop(ch[7:], None)

    def _resubscribe(self, ch: str) -> list[dict[str, Any]]:
        return [
            self.request("unsubscribe", {"ch": ch}, internal=True)[1],
            self.request("subscribe", {"ch": ch}, internal=True)[1],
        ]

    def handle(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        """Takes one message from the server; returns what to send in reply (resubscriptions)."""
        assert self.units is not None
        if "id" in msg and "ch" not in msg:
            ident = msg["id"]
            if ident in self._internal:
                self._internal.discard(ident)
                if "error" in msg:
                    raise from_ws_answer(msg["error"])
            else:
                self.answers[ident] = msg
            return []
        ch = str(msg.get("ch", ""))
        if ch.startswith("book.") and ch in self.channels:
            symbol = ch[5:]
            book = self.books[symbol]
            try:
                if book.apply(msg, self.units):
                    self.events.append(BookUpdate(symbol, book.view(), msg.get("type") == "snapshot"))
            except Gap:
                return self._resubscribe(ch)
            return []
        if ch.startswith("trades.") and ch in self.channels:
            return self._trades(ch, msg)
        if ch == "user":
            return self._user(msg)
        self.events.append(Message(ch, msg))
        if ch == "status" and msg.get("type") == "gap" and ch in self.channels:
            return self._resubscribe(ch)
        return []

    def _trades(self, ch: str, msg: dict[str, Any]) -> list[dict[str, Any]]:
        assert self.units is not None
        symbol = ch[7:]
        if msg.get("type") == "snapshot":
            self.last_trade[symbol] = int(msg["last_trade"])
            trades = [Trade.parse(symbol, t, self.units) for t in msg["trades"]]
            self.events.append(TradesUpdate(symbol, trades, True))
            return []
        if symbol not in self.last_trade:
            return []  # before the (new) snapshot
        fresh = []
        for row in msg.get("trades", []):
            trade = Trade.parse(symbol, row, self.units)
            if trade.trade <= self.last_trade[symbol]:
                continue
            if trade.trade != self.last_trade[symbol] + 1:
                del self.last_trade[symbol]
                return self._resubscribe(ch)
            self.last_trade[symbol] = trade.trade
            fresh.append(trade)
        if fresh:
            self.events.append(TradesUpdate(symbol, fresh, False))
        return []

    def _user(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        assert self.units is not None
        kind = msg.get("type", "")
        seq = int(msg.get("seq", 0))
        if kind == "gap":
            self.events.append(UserUpdate(kind, seq))
            return self._resubscribe("user") if "user" in self.channels else []
        if kind == "balances":
            balances = {b["currency"]: Balance.parse(b, self.units) for b in msg["balances"]}
            self.events.append(UserUpdate(kind, seq, balances=balances))
        elif kind == "orders":
            orders = [Order.parse(o, self.units) for o in msg["orders"]]
            self.events.append(UserUpdate(kind, seq, orders=orders))
        elif kind == "positions":
            positions = [Position.parse(p, self.units) for p in msg["positions"]]
            margins = {m["currency"]: Margin.parse(m, self.units) for m in msg["margins"]}
            self.events.append(UserUpdate(kind, seq, positions=positions, margins=margins))
        elif kind == "liquidated":
            event = OrderEvent.parse(msg, self.units)
            liquidation = Liquidation.parse(msg, self.units)
            self.events.append(UserUpdate(kind, seq, event=event, liquidation=liquidation))
        else:
            self.events.append(UserUpdate(kind, seq, event=OrderEvent.parse(msg, self.units)))
        return []

    def result(self, ident: int) -> dict[str, Any]:
        msg = self.answers.pop(ident)
        if "error" in msg:
            raise from_ws_answer(msg["error"])
        result = msg.get("result", {})
        return result if isinstance(result, dict) else {}

    def answer(self, ident: int) -> Ack:
        assert self.units is not None
        return Ack.parse(self.result(ident), self.units)

    def order_status(self, ident: int) -> OrderStatus:
        assert self.units is not None
        return OrderStatus.parse(self.result(ident), self.units)


def _place_fields(
    units: Units, symbol: str, side: str, qty: DecimalLike, price: DecimalLike | None, **kw: Any
) -> dict[str, Any]:
    call = calls.place(
        symbol,
        side,
        qty,
        price,
        kw.pop("type", "limit"),
        kw.pop("tif", None),
        kw.pop("order_id", None),
        kw.pop("client_order_id", None),
        kw.pop("post_only", None),
        kw.pop("stp", None),
        kw.pop("stop_price", None),
        kw.pop("display_qty", None),
        kw.pop("expire_ts_ns", None),
    )
    if kw:
        raise TypeError(f"unknown order fields: {sorted(kw)}")
    assert call.body is not None
    return call.body(units)


def _body(call: calls.Call[Ack], core: _Core) -> dict[str, Any]:
    """The fields of a REST call's body, for the WebSocket op of the same name."""
    assert call.body is not None and core.units is not None
    return call.body(core.units)


RECONNECT_DELAYS_S = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
"""How long to wait before each reconnect attempt; the last repeats."""


class Stream:
    """The WebSocket API, blocking: subscriptions that survive reconnects, and order entry.

    >>> with Stream("http://127.0.0.1:8080", key="1", secret="...") as stream:
    ...     stream.subscribe("book.BTC-USD")
    ...     for event in stream:
    ...         print(event)

    ``reconnect_timeout`` bounds how long the stream tries to reconnect before it raises
    :class:`TransportError` (None: forever).
    """

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        key: str | int | None = None,
        secret: str | None = None,
        *,
        ca_file: str | os.PathLike[str] | None = None,
        verify: bool = True,
        timeout: float = 10.0,
        reconnect_timeout: float | None = 60.0,
    ) -> None:
        http, self._url = _urls(url)
        self._rest = Client(http, key, secret, ca_file=ca_file, verify=verify, timeout=timeout)
        self._ssl = _tls.context(ca_file, verify) if self._url.startswith("wss:") else None
        self._timeout = timeout
        self._reconnect_timeout = reconnect_timeout
        self._core = _Core(self._rest.credentials)
        self._ws: SyncConnection | None = None

    def __enter__(self) -> Stream:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connection(self) -> SyncConnection | None:
        """The current WebSocket connection (None before :meth:`connect`)."""
        return self._ws

    def connect(self) -> None:
        """Connects, retrying a refused or broken handshake for up to ``timeout`` seconds as a
        reconnect would (a TLS server has been seen closing a fresh connection at start-up)."""
        self._core.units = self._rest.units()
        try:
            self._open()
        except TransportError as e:
            self._retry_open(str(e), self._timeout, announce=False)

    def _open(self) -> None:
        try:
            # Entered as a context manager (closed in close()): websockets 17 warns about a
            # connection opened without one, and older versions return the same object.
            self._ws = sync_connect(self._url, ssl=self._ssl, open_timeout=self._timeout, proxy=None).__enter__()
        except (OSError, websockets.WebSocketException, TimeoutError) as e:
            raise TransportError(f"cannot connect to {self._url}: {e} ({e.__cause__!r})") from e
        for msg in self._core.on_open():
            self._send(msg)

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
        self._rest.close()

    def _send(self, msg: dict[str, Any]) -> None:
        assert self._ws is not None
        try:
            self._ws.send(json.dumps(msg, separators=(",", ":")))
        except (websockets.ConnectionClosed, OSError) as e:
            raise TransportError(f"the connection broke while sending: {e}") from e

    def _reconnect(self, reason: str) -> None:
        self._retry_open(reason, self._reconnect_timeout, announce=True)

    def _retry_open(self, reason: str, timeout: float | None, announce: bool) -> None:
        started = time.monotonic()
        for attempt in range(1_000_000):
            delay = RECONNECT_DELAYS_S[min(attempt, len(RECONNECT_DELAYS_S) - 1)]
            if timeout is not None and time.monotonic() - started + delay > timeout:
                break
            time.sleep(delay)
            try:
                self._open()
            except TransportError as e:
                reason = str(e)
                continue
            if announce:
                self._core.events.append(Reconnected(reason))
            return
        raise TransportError(f"could not connect to {self._url} ({reason})")

    def _pump(self, deadline: float | None) -> None:
        """Reads one message (or reconnects after a break); TimeoutError past ``deadline``."""
        assert self._ws is not None
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            text = self._ws.recv(timeout=wait)
        except websockets.ConnectionClosed as e:
            self._reconnect(f"connection closed: {e}")
            return
        except OSError as e:
            self._reconnect(f"connection broke: {e}")
            return
        try:
            for reply in self._core.handle(json.loads(text)):
                self._send(reply)
        except TransportError as e:
            self._reconnect(str(e))

    def next_event(self, timeout: float | None = None) -> Event:
        """The next event; TimeoutError when none came within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._core.events:
            self._pump(deadline)
        return self._core.events.popleft()

    def __iter__(self) -> Iterator[Event]:
        while True:
            yield self.next_event()

    def book(self, symbol: str) -> Book | None:
        """The book as kept from ``book.<symbol>`` (None until its snapshot came)."""
        local = self._core.books.get(symbol)
        return local.view() if local is not None and local.synced else None

    def _call(self, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        ident, msg = self._core.request(op, fields)
        self._send(msg)
        deadline = time.monotonic() + self._timeout
        while ident not in self._core.answers:
            assert self._ws is not None
            ws = self._ws
            self._pump(deadline)
            if self._ws is not ws:
                raise TransportError(f"the connection broke before the answer to {op}")
        return self._core.answers[ident]

    def subscribe(self, ch: str) -> None:
        self._core.add_channel(ch)
        answer = self._call("subscribe", {"ch": ch})
        self._core.answers.pop(answer["id"])
        if "error" in answer:
            self._core.remove_channel(ch)
            raise from_ws_answer(answer["error"])

    def unsubscribe(self, ch: str) -> None:
        self._core.remove_channel(ch)
        answer = self._call("unsubscribe", {"ch": ch})
        self._core.answers.pop(answer["id"])
        if "error" in answer:
            raise from_ws_answer(answer["error"])

    def _order(self, op: str, fields: dict[str, Any]) -> Ack:
        answer = self._call(op, fields)
        return self._core.answer(answer["id"])

    def place(self, symbol: str, side: str, qty: DecimalLike, price: DecimalLike | None = None, **kw: Any) -> Ack:
        """Places an order over the WebSocket (the fields of :meth:`Client.place`)."""
        assert self._core.units is not None
        return self._order("place", _place_fields(self._core.units, symbol, side, qty, price, **kw))

    def cancel(self, order_id: int) -> Ack:
        return self._order("cancel", {"order": order_id})

    def order_status(self, order_id: int | None = None, *, client_order_id: str | None = None) -> OrderStatus:
        """One order's status (the op ``order_status``), by the engine's or the client's id."""
        fields = {"order": order_id} if client_order_id is None else {"client_order_id": client_order_id}
        answer = self._call("order_status", fields)
        return self._core.order_status(answer["id"])

    def cancel_all(self, symbol: str | None = None) -> Ack:
        return self._order("mass_cancel", {} if symbol is None else {"symbol": symbol})

    def move(self, order_id: int, price: DecimalLike, *, symbol: str | None = None) -> Ack:
        return self._order("move", {"order": order_id, **_body(calls.move(order_id, price, symbol), self._core)})

    def reduce(self, order_id: int, qty: DecimalLike, *, symbol: str | None = None) -> Ack:
        return self._order("reduce", {"order": order_id, **_body(calls.reduce(order_id, qty, symbol), self._core)})

    def amend(
        self,
        order_id: int,
        *,
        price: DecimalLike | None = None,
        qty: DecimalLike | None = None,
        stop_price: DecimalLike | None = None,
        symbol: str | None = None,
    ) -> Ack:
        call = calls.amend(order_id, price, qty, stop_price, symbol)
        return self._order("amend", {"order": order_id, **_body(call, self._core)})


class AsyncStream:
    """The WebSocket API for asyncio: the same as :class:`Stream`, awaited.

    >>> async with AsyncStream("http://127.0.0.1:8080") as stream:
    ...     await stream.subscribe("book.BTC-USD")
    ...     async for event in stream:
    ...         print(event)
    """

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        key: str | int | None = None,
        secret: str | None = None,
        *,
        ca_file: str | os.PathLike[str] | None = None,
        verify: bool = True,
        timeout: float = 10.0,
        reconnect_timeout: float | None = 60.0,
    ) -> None:
        http, self._url = _urls(url)
        self._rest = AsyncClient(http, key, secret, ca_file=ca_file, verify=verify, timeout=timeout)
        self._ssl = _tls.context(ca_file, verify) if self._url.startswith("wss:") else None
        self._timeout = timeout
        self._reconnect_timeout = reconnect_timeout
        self._core = _Core(self._rest.credentials)
        self._ws: AsyncConnection | None = None

    async def __aenter__(self) -> AsyncStream:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def connection(self) -> AsyncConnection | None:
        return self._ws

    async def connect(self) -> None:
        """Connects, retrying for up to ``timeout`` seconds (as :meth:`Stream.connect`)."""
        self._core.units = await self._rest.units()
        try:
            await self._open()
        except TransportError as e:
            await self._retry_open(str(e), self._timeout, announce=False)

    async def _open(self) -> None:
        try:
            self._ws = await async_connect(self._url, ssl=self._ssl, open_timeout=self._timeout, proxy=None)
        except (OSError, websockets.WebSocketException, TimeoutError) as e:
            raise TransportError(f"cannot connect to {self._url}: {e} ({e.__cause__!r})") from e
        for msg in self._core.on_open():
            await self._send(msg)

    async def aclose(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        await self._rest.aclose()

    async def _send(self, msg: dict[str, Any]) -> None:
        assert self._ws is not None
        try:
            await self._ws.send(json.dumps(msg, separators=(",", ":")))
        except (websockets.ConnectionClosed, OSError) as e:
            raise TransportError(f"the connection broke while sending: {e}") from e

    async def _reconnect(self, reason: str) -> None:
        await self._retry_open(reason, self._reconnect_timeout, announce=True)

    async def _retry_open(self, reason: str, timeout: float | None, announce: bool) -> None:
        started = time.monotonic()
        for attempt in range(1_000_000):
            delay = RECONNECT_DELAYS_S[min(attempt, len(RECONNECT_DELAYS_S) - 1)]
            if timeout is not None and time.monotonic() - started + delay > timeout:
                break
            await asyncio.sleep(delay)
            try:
                await self._open()
            except TransportError as e:
                reason = str(e)
                continue
            if announce:
                self._core.events.append(Reconnected(reason))
            return
        raise TransportError(f"could not connect to {self._url} ({reason})")

    async def _pump(self, deadline: float | None) -> None:
        assert self._ws is not None
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            text = await asyncio.wait_for(self._ws.recv(), wait)
        except websockets.ConnectionClosed as e:
            await self._reconnect(f"connection closed: {e}")
            return
        except OSError as e:
            await self._reconnect(f"connection broke: {e}")
            return
        try:
            for reply in self._core.handle(json.loads(text)):
                await self._send(reply)
        except TransportError as e:
            await self._reconnect(str(e))

    async def next_event(self, timeout: float | None = None) -> Event:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._core.events:
            await self._pump(deadline)
        return self._core.events.popleft()

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            yield await self.next_event()

    def book(self, symbol: str) -> Book | None:
        local = self._core.books.get(symbol)
        return local.view() if local is not None and local.synced else None

    async def _call(self, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        ident, msg = self._core.request(op, fields)
        await self._send(msg)
        deadline = time.monotonic() + self._timeout
        while ident not in self._core.answers:
            ws = self._ws
            await self._pump(deadline)
            if self._ws is not ws:
                raise TransportError(f"the connection broke before the answer to {op}")
        return self._core.answers[ident]

    async def subscribe(self, ch: str) -> None:
        self._core.add_channel(ch)
        answer = await self._call("subscribe", {"ch": ch})
        self._core.answers.pop(answer["id"])
        if "error" in answer:
            self._core.remove_channel(ch)
            raise from_ws_answer(answer["error"])

    async def unsubscribe(self, ch: str) -> None:
        self._core.remove_channel(ch)
        answer = await self._call("unsubscribe", {"ch": ch})
        self._core.answers.pop(answer["id"])
        if "error" in answer:
            raise from_ws_answer(answer["error"])

    async def _order(self, op: str, fields: dict[str, Any]) -> Ack:
        answer = await self._call(op, fields)
        return self._core.answer(answer["id"])

    async def place(self, symbol: str, side: str, qty: DecimalLike, price: DecimalLike | None = None, **kw: Any) -> Ack:
        assert self._core.units is not None
        return await self._order("place", _place_fields(self._core.units, symbol, side, qty, price, **kw))

    async def cancel(self, order_id: int) -> Ack:
        return await self._order("cancel", {"order": order_id})

    async def order_status(self, order_id: int | None = None, *, client_order_id: str | None = None) -> OrderStatus:
        fields = {"order": order_id} if client_order_id is None else {"client_order_id": client_order_id}
        answer = await self._call("order_status", fields)
        return self._core.order_status(answer["id"])

    async def cancel_all(self, symbol: str | None = None) -> Ack:
        return await self._order("mass_cancel", {} if symbol is None else {"symbol": symbol})

    async def move(self, order_id: int, price: DecimalLike, *, symbol: str | None = None) -> Ack:
        return await self._order("move", {"order": order_id, **_body(calls.move(order_id, price, symbol), self._core)})

    async def reduce(self, order_id: int, qty: DecimalLike, *, symbol: str | None = None) -> Ack:
        return await self._order(
            "reduce", {"order": order_id, **_body(calls.reduce(order_id, qty, symbol), self._core)}
        )

    async def amend(
        self,
        order_id: int,
        *,
        price: DecimalLike | None = None,
        qty: DecimalLike | None = None,
        stop_price: DecimalLike | None = None,
        symbol: str | None = None,
    ) -> Ack:
        call = calls.amend(order_id, price, qty, stop_price, symbol)
        return await self._order("amend", {"order": order_id, **_body(call, self._core)})
