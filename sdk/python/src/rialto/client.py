"""REST clients: :class:`Client` (blocking) and :class:`AsyncClient` (asyncio), over httpx."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx

from . import _calls as calls
from . import _tls
from .errors import RialtoError, TransportError, from_response
from .signing import Credentials, rest_headers
from .types import Ack, Balance, Book, Margin, Order, OrderEvent, OrderStatus, Position, Trade
from .units import DecimalLike, Units

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8080"


def _credentials(key: str | int | None, secret: str | None) -> Credentials | None:
    if key is None and secret is None:
        return None
    if key is None or secret is None:
        raise ValueError("give both key= and secret=, or neither")
    return Credentials(str(key), secret)


def _decode(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return json.loads(response.content)
    except ValueError:
        return None


def _check(response: httpx.Response) -> Any:
    payload = _decode(response)
    if response.status_code >= 300:
        raise from_response(response.status_code, response.headers, payload)
    if payload is None:
        raise RialtoError("unexpected_answer", "the answer is not JSON", response.status_code)
    return payload


def _request_parts(
    call: calls.Call[Any], units: Units, credentials: Credentials | None
) -> tuple[str, bytes, dict[str, str]]:
    target = call.target()
    content = call.content(units)
    headers = {"Content-Type": "application/json"} if call.body is not None else {}
    if call.signed:
        if credentials is None:
            raise RialtoError("missing_credentials", "this endpoint needs key= and secret=")
        headers.update(rest_headers(credentials, call.method, target, content))
    return target, content, headers


def _units_from(info: httpx.Response, symbols: httpx.Response | None) -> Units:
    if info.status_code == 200:
        return Units.from_exchange_info(_check(info))
    if symbols is None:
        raise from_response(info.status_code, info.headers, _decode(info))
    return Units.from_legacy_symbols(_check(symbols))


def _order_from_open(orders: list[Order], order_id: int) -> OrderStatus:
    for order in orders:
        if order.order == order_id:
            return OrderStatus.from_open(order)
    raise RialtoError("not_found", f"no open order {order_id}")


def _with_order_checked(response: httpx.Response, units: Units) -> Any:
    try:
        return _check(response)
    except RialtoError as e:
        raise _with_order(e, units) from None


def _with_order(error: RialtoError, units: Units) -> RialtoError:
    """A ``duplicate_order_id`` refusal carries the first order's status: parse it."""
    details = error.body.get("error") if isinstance(error.body, dict) else None
    if isinstance(details, dict) and isinstance(details.get("order"), dict) and "symbol" in details["order"]:
        try:
            error.order = OrderStatus.parse(details["order"], units)
        except (KeyError, ValueError, RialtoError):
            pass
    return error


class Client:
    """The REST API, blocking.

    >>> client = Client("http://127.0.0.1:8080", key="1", secret="...")
    >>> client.place("BTC-USD", "buy", qty="0.003", price="5000.00")

    For https, ``ca_file`` names the certificate (or CA) to trust, e.g. the one
    ``rialto serve --demo --tls`` writes to ``data/tls/cert.pem``.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        key: str | int | None = None,
        secret: str | None = None,
        *,
        ca_file: str | os.PathLike[str] | None = None,
        verify: bool = True,
        timeout: float = 10.0,
    ) -> None:
        self.credentials = _credentials(key, secret)
        self._http = httpx.Client(base_url=base_url.rstrip("/"), verify=_tls.context(ca_file, verify), timeout=timeout)
        self._units: Units | None = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def units(self) -> Units:
        """The venue's symbols and currencies (fetched once)."""
        if self._units is None:
            info = self._send("GET", "/api/v1/exchange-info", b"", {})
            symbols = self._send("GET", "/api/v1/symbols", b"", {}) if info.status_code == 404 else None
            self._units = _units_from(info, symbols)
        return self._units

    def _send(self, method: str, target: str, content: bytes, headers: Mapping[str, str]) -> httpx.Response:
        try:
            return self._http.request(method, target, content=content, headers=dict(headers))
        except httpx.HTTPError as e:
            raise TransportError(f"{method} {target}: {e}") from e

    def _run(self, call: calls.Call[T]) -> T:
        units = self.units()
        for attempt in range(2):
            target, content, headers = _request_parts(call, units, self.credentials)
            response = self._send(call.method, target, content, headers)
            try:
                return call.read(_with_order_checked(response, units), units)
            except RialtoError as e:
                # Another process signed the very same request with the same key in the same
                # millisecond: this one was refused unseen, so it is safe to sign it again once.
                if e.code != "replayed_request" or attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def get_order(self, order_id: int) -> OrderStatus:
        """One order, live or ended, by the engine's id (``GET /api/v1/orders/{order}``); on a
        server without that endpoint (405), the open order of that id (else ``not_found``)."""
        try:
            return self._run(calls.order(order_id))
        except RialtoError as e:
            if e.status != 405:
                raise
        return _order_from_open(self._run(calls.open_orders()), order_id)

    def get_order_by_client_id(self, client_order_id: str) -> OrderStatus:
        """One order by its client order id (``GET /api/v1/orders/by-client-id/{id}``)."""
        return self._run(calls.order_by_client_id(client_order_id))

    def server_time_ns(self) -> int:
        """The venue's clock, ns since the Unix epoch."""
        return self._run(calls.server_time())

    def status(self) -> Any:
        """Each symbol's phase, last and reference price and band, as the server writes them."""
        return self._run(calls.status())

    def book(self, symbol: str, depth: int | None = None) -> Book:
        """The L2 book, best levels first."""
        return self._run(calls.book(symbol, depth))

    def trades(self, symbol: str, limit: int | None = None) -> list[Trade]:
        """The symbol's recent trades, oldest first."""
        return self._run(calls.trades(symbol, limit))

    def place(
        self,
        symbol: str,
        side: str,
        qty: DecimalLike,
        price: DecimalLike | None = None,
        *,
        type: str = "limit",
        tif: str | None = None,
        order_id: int | None = None,
        client_order_id: str | None = None,
        post_only: bool | None = None,
        stp: str | None = None,
        stop_price: DecimalLike | None = None,
        display_qty: DecimalLike | None = None,
        expire_ts_ns: int | None = None,
    ) -> Ack:
        """Places an order. Prices and quantities are Decimals (or decimal strings).

        ``order_id`` is the engine's order id (the server picks one when it is None);
        ``client_order_id`` a string id of up to 36 characters, on servers that have them."""
        return self._run(
            calls.place(
                symbol,
                side,
                qty,
                price,
                type,
                tif,
                order_id,
                client_order_id,
                post_only,
                stp,
                stop_price,
                display_qty,
                expire_ts_ns,
            )
        )

    def cancel(self, order_id: int) -> Ack:
        """Cancels an order."""
        return self._run(calls.cancel(order_id))

    def move(self, order_id: int, price: DecimalLike, *, symbol: str | None = None) -> Ack:
        """Moves an order to ``price`` (``symbol`` is needed only by an integer-speaking server)."""
        return self._run(calls.move(order_id, price, symbol))

    def reduce(self, order_id: int, qty: DecimalLike, *, symbol: str | None = None) -> Ack:
        """Takes ``qty`` off an order."""
        return self._run(calls.reduce(order_id, qty, symbol))

    def amend(
        self,
        order_id: int,
        *,
        price: DecimalLike | None = None,
        qty: DecimalLike | None = None,
        stop_price: DecimalLike | None = None,
        symbol: str | None = None,
    ) -> Ack:
        """Amends an order: ``qty`` is the new total (docs/api.md, "Amend")."""
        return self._run(calls.amend(order_id, price, qty, stop_price, symbol))

    def cancel_all(self, symbol: str | None = None) -> Ack:
        """Mass cancel: every open order of ``symbol``, or of every symbol."""
        return self._run(calls.mass_cancel(symbol))

    def open_orders(self) -> list[Order]:
        """Open orders and pending stops."""
        return self._run(calls.open_orders())

    def history(self, limit: int | None = None) -> list[OrderEvent]:
        """The key's recent order events, newest last."""
        return self._run(calls.history(limit))

    def balances(self) -> dict[str, Balance]:
        """Balances by currency, every amount a Decimal."""
        return self._run(calls.balances())

    def positions(self) -> list[Position]:
        """Futures positions, by symbol: size, entry price, mark, unrealised profit and, where
        it is exact, the liquidation price."""
        return self._run(calls.positions())

    def margin(self) -> dict[str, Margin]:
        """Margin by currency (each that has futures): equity, initial, maintenance, available."""
        return self._run(calls.margin())

    # -- admin (key="admin") ---------------------------------------------------------------

    def set_mark_price(self, symbol: str, price: DecimalLike) -> int:
        """Sets a future's mark price (an admin call); answers the command's seq. Users below
        maintenance margin are liquidated by it."""
        return self._run(calls.set_mark_price(symbol, price))

    def fund_insurance(self, currency: str, amount: DecimalLike, tx: int) -> int:
        """Adds to (amount > 0) or takes from (< 0) a currency's insurance fund (an admin
        call); ``tx`` is unique, shared with deposits and withdrawals."""
        return self._run(calls.fund_insurance(currency, amount, tx))

    def add_future(
        self,
        symbol: str,
        underlying: str,
        quote: str,
        *,
        quote_scale: int,
        initial_margin: int,
        maintenance_margin: int,
        mark_price: int,
        maker_fee: int = 0,
        taker_fee: int = 0,
        price_tick: str | None = None,
        qty_lot: str | None = None,
    ) -> int:
        """Lists a future (an admin call). Margins and fees are quote minor units per lot and
        the mark is in ticks, engine integers as ``POST /api/v1/admin/symbols`` takes them.
        The client's cached symbols are refreshed."""
        seq = self._run(
            calls.add_future(
                symbol, underlying, quote, quote_scale, initial_margin, maintenance_margin,
                mark_price, maker_fee, taker_fee, price_tick, qty_lot,
            )
        )
        self._units = None
        return seq

    def venue(self) -> Any:
        """Venue totals per currency, insurance fund and position cost included (an admin
        call), as the server writes them."""
        return self._run(calls.venue())


class AsyncClient:
    """The REST API for asyncio: the same methods as :class:`Client`, each awaited.

    >>> async with AsyncClient("http://127.0.0.1:8080", key="1", secret="...") as client:
    ...     ack = await client.place("BTC-USD", "sell", qty="0.001", price="5000")
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        key: str | int | None = None,
        secret: str | None = None,
        *,
        ca_file: str | os.PathLike[str] | None = None,
        verify: bool = True,
        timeout: float = 10.0,
    ) -> None:
        self.credentials = _credentials(key, secret)
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), verify=_tls.context(ca_file, verify), timeout=timeout
        )
        self._units: Units | None = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def units(self) -> Units:
        if self._units is None:
            info = await self._send("GET", "/api/v1/exchange-info", b"", {})
            symbols = await self._send("GET", "/api/v1/symbols", b"", {}) if info.status_code == 404 else None
            self._units = _units_from(info, symbols)
        return self._units

    async def _send(self, method: str, target: str, content: bytes, headers: Mapping[str, str]) -> httpx.Response:
        try:
            return await self._http.request(method, target, content=content, headers=dict(headers))
        except httpx.HTTPError as e:
            raise TransportError(f"{method} {target}: {e}") from e

    async def _run(self, call: calls.Call[T]) -> T:
        units = await self.units()
        for attempt in range(2):
            target, content, headers = _request_parts(call, units, self.credentials)
            response = await self._send(call.method, target, content, headers)
            try:
                return call.read(_with_order_checked(response, units), units)
            except RialtoError as e:
                if e.code != "replayed_request" or attempt == 1:
                    raise
        raise AssertionError("unreachable")

    async def get_order(self, order_id: int) -> OrderStatus:
        try:
            return await self._run(calls.order(order_id))
        except RialtoError as e:
            if e.status != 405:
                raise
        return _order_from_open(await self._run(calls.open_orders()), order_id)

    async def get_order_by_client_id(self, client_order_id: str) -> OrderStatus:
        return await self._run(calls.order_by_client_id(client_order_id))

    async def server_time_ns(self) -> int:
        """The venue's clock, ns since the Unix epoch."""
        return await self._run(calls.server_time())

    async def status(self) -> Any:
        """Each symbol's phase, last and reference price and band, as the server writes them."""
        return await self._run(calls.status())

    async def book(self, symbol: str, depth: int | None = None) -> Book:
        """The L2 book, best levels first."""
        return await self._run(calls.book(symbol, depth))

    async def trades(self, symbol: str, limit: int | None = None) -> list[Trade]:
        """The symbol's recent trades, oldest first."""
        return await self._run(calls.trades(symbol, limit))

    async def place(
        self,
        symbol: str,
        side: str,
        qty: DecimalLike,
        price: DecimalLike | None = None,
        *,
        type: str = "limit",
        tif: str | None = None,
        order_id: int | None = None,
        client_order_id: str | None = None,
        post_only: bool | None = None,
        stp: str | None = None,
        stop_price: DecimalLike | None = None,
        display_qty: DecimalLike | None = None,
        expire_ts_ns: int | None = None,
    ) -> Ack:
        """Places an order. Prices and quantities are Decimals (or decimal strings).

        ``order_id`` is the engine's order id (the server picks one when it is None);
        ``client_order_id`` a string id of up to 36 characters, on servers that have them."""
        return await self._run(
            calls.place(
                symbol,
                side,
                qty,
                price,
                type,
                tif,
                order_id,
                client_order_id,
                post_only,
                stp,
                stop_price,
                display_qty,
                expire_ts_ns,
            )
        )

    async def cancel(self, order_id: int) -> Ack:
        """Cancels an order."""
        return await self._run(calls.cancel(order_id))

    async def move(self, order_id: int, price: DecimalLike, *, symbol: str | None = None) -> Ack:
        """Moves an order to ``price`` (``symbol`` is needed only by an integer-speaking server)."""
        return await self._run(calls.move(order_id, price, symbol))

    async def reduce(self, order_id: int, qty: DecimalLike, *, symbol: str | None = None) -> Ack:
        """Takes ``qty`` off an order."""
        return await self._run(calls.reduce(order_id, qty, symbol))

    async def amend(
        self,
        order_id: int,
        *,
        price: DecimalLike | None = None,
        qty: DecimalLike | None = None,
        stop_price: DecimalLike | None = None,
        symbol: str | None = None,
    ) -> Ack:
        """Amends an order: ``qty`` is the new total (docs/api.md, "Amend")."""
        return await self._run(calls.amend(order_id, price, qty, stop_price, symbol))

    async def cancel_all(self, symbol: str | None = None) -> Ack:
        """Mass cancel: every open order of ``symbol``, or of every symbol."""
        return await self._run(calls.mass_cancel(symbol))

    async def open_orders(self) -> list[Order]:
        """Open orders and pending stops."""
        return await self._run(calls.open_orders())

    async def history(self, limit: int | None = None) -> list[OrderEvent]:
        """The key's recent order events, newest last."""
        return await self._run(calls.history(limit))

    async def balances(self) -> dict[str, Balance]:
        """Balances by currency, every amount a Decimal."""
        return await self._run(calls.balances())

    async def positions(self) -> list[Position]:
        """Futures positions, by symbol: size, entry price, mark, unrealised profit and, where
        it is exact, the liquidation price."""
        return await self._run(calls.positions())

    async def margin(self) -> dict[str, Margin]:
        """Margin by currency (each that has futures): equity, initial, maintenance, available."""
        return await self._run(calls.margin())

    # -- admin (key="admin") ---------------------------------------------------------------

    async def set_mark_price(self, symbol: str, price: DecimalLike) -> int:
        """Sets a future's mark price (an admin call); answers the command's seq. Users below
        maintenance margin are liquidated by it."""
        return await self._run(calls.set_mark_price(symbol, price))

    async def fund_insurance(self, currency: str, amount: DecimalLike, tx: int) -> int:
        """Adds to (amount > 0) or takes from (< 0) a currency's insurance fund (an admin
        call); ``tx`` is unique, shared with deposits and withdrawals."""
        return await self._run(calls.fund_insurance(currency, amount, tx))

    async def add_future(
        self,
        symbol: str,
        underlying: str,
        quote: str,
        *,
        quote_scale: int,
        initial_margin: int,
        maintenance_margin: int,
        mark_price: int,
        maker_fee: int = 0,
        taker_fee: int = 0,
        price_tick: str | None = None,
        qty_lot: str | None = None,
    ) -> int:
        """Lists a future (an admin call). Margins and fees are quote minor units per lot and
        the mark is in ticks, engine integers as ``POST /api/v1/admin/symbols`` takes them.
        The client's cached symbols are refreshed."""
        seq = await self._run(
            calls.add_future(
                symbol, underlying, quote, quote_scale, initial_margin, maintenance_margin,
                mark_price, maker_fee, taker_fee, price_tick, qty_lot,
            )
        )
        self._units = None
        return seq

    async def venue(self) -> Any:
        """Venue totals per currency, insurance fund and position cost included (an admin
        call), as the server writes them."""
        return await self._run(calls.venue())


__all__ = ["AsyncClient", "Client"]
