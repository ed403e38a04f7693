"""WebSocket streams: a book kept across a forced reconnect, gaps, and the user channel."""

from __future__ import annotations

import asyncio
import socket
from decimal import Decimal

from util import poll

from rialto import (
    AsyncStream,
    BookUpdate,
    Client,
    Gap,
    Liquidation,
    LocalBook,
    Reconnected,
    Stream,
    SymbolInfo,
    Units,
    UserUpdate,
)
from rialto.stream import _Core

WAIT_S = 10.0


def next_book(stream: Stream, symbol: str, want=lambda update: True) -> BookUpdate:  # type: ignore[no-untyped-def]
    """The next BookUpdate of ``symbol`` that ``want`` accepts (other events are skipped)."""
    while True:
        event = stream.next_event(timeout=WAIT_S)
        if isinstance(event, BookUpdate) and event.symbol == symbol and want(event):
            return event


def test_book_resyncs_from_a_snapshot_after_a_forced_reconnect(venue) -> None:  # type: ignore[no-untyped-def]
    with Client(venue.url, "5", venue.secrets["5"]) as maker, Stream(venue.url) as stream:
        stream.subscribe("book.ETH-USD")
        first = next_book(stream, "ETH-USD")
        assert first.snapshot

        bid = maker.place("ETH-USD", "buy", "0.004", "2990.00")
        seen = next_book(stream, "ETH-USD", lambda u: (Decimal("2990.00"), Decimal("0.004")) in u.book.bids)
        assert not seen.snapshot

        # Break the connection under the stream, then change the book while nobody listens:
        # the diffs of these changes are never read on the old connection.
        assert stream.connection is not None
        stream.connection.socket.shutdown(socket.SHUT_RDWR)
        maker.cancel(bid.order)
        ask = maker.place("ETH-USD", "sell", "0.007", "3010.00")

        events = []
        while not (events and isinstance(events[-1], BookUpdate) and events[-1].snapshot):
            events.append(stream.next_event(timeout=WAIT_S))
        assert any(isinstance(e, Reconnected) for e in events), events
        # The new snapshot may predate the newest change; then diffs follow. Either way the kept
        # book converges on the venue's.
        expected = maker.book("ETH-USD")

        def caught_up():  # type: ignore[no-untyped-def]
            book = _drain_book(stream, "ETH-USD")
            return book if book is not None and (book.bids, book.asks) == (expected.bids, expected.asks) else None

        book = poll(caught_up, "the resynchronised book to match the venue's")
        assert book.bids == [] and book.asks == [(Decimal("3010.00"), Decimal("0.007"))]
        maker.cancel(ask.order)


def _drain_book(stream: Stream, symbol: str):  # type: ignore[no-untyped-def]
    try:
        stream.next_event(timeout=0.05)
    except TimeoutError:
        pass
    return stream.book(symbol)


def _units() -> Units:
    eth = SymbolInfo("ETH-USD", 1, "ETH", "USD", Decimal("0.01"), Decimal("0.001"), Decimal(0), Decimal("0.00001"))
    return Units([eth], [], decimal_wire=True)


def test_a_gap_in_the_diffs_resubscribes_for_a_fresh_snapshot() -> None:
    units = _units()
    book = LocalBook("ETH-USD")
    book.apply({"type": "snapshot", "seq": 10, "bids": [["100.00", "0.002"]], "asks": []}, units)
    # Overlapping the snapshot is allowed for the first diff (it carries final totals).
    book.apply({"type": "diff", "first": 9, "last": 11, "bids": [["100.00", "0.001"]], "asks": []}, units)
    assert book.bids == [(Decimal("100.00"), Decimal("0.001"))] and book.seq == 11
    # Already held: dropped.
    assert not book.apply({"type": "diff", "first": 10, "last": 11, "bids": [["100.00", "5"]], "asks": []}, units)
    try:
        book.apply({"type": "diff", "first": 13, "last": 13, "bids": [], "asks": [["101.00", "0.001"]]}, units)
    except Gap:
        pass
    else:
        raise AssertionError("a skipped seq 12 was not a gap")
    assert not book.synced and book.bids == []

    core = _Core(None)
    core.units = units
    core.add_channel("book.ETH-USD")
    core.handle({"ch": "book.ETH-USD", "type": "snapshot", "seq": 5, "bids": [], "asks": []})
    replies = core.handle({"ch": "book.ETH-USD", "type": "diff", "first": 7, "last": 7, "bids": [], "asks": []})
    assert [(r["op"], r["ch"]) for r in replies] == [("unsubscribe", "book.ETH-USD"), ("subscribe", "book.ETH-USD")]
    # Diffs before the new snapshot are not applied; the snapshot restores the book.
    core.handle({"ch": "book.ETH-USD", "type": "diff", "first": 8, "last": 8, "bids": [["1.00", "1"]], "asks": []})
    assert not core.books["ETH-USD"].synced
    core.handle({"ch": "book.ETH-USD", "type": "snapshot", "seq": 9, "bids": [["2.00", "0.001"]], "asks": []})
    assert core.books["ETH-USD"].bids == [(Decimal("2.00"), Decimal("0.001"))]


def test_a_gap_on_the_user_channel_resubscribes_it_for_fresh_snapshots() -> None:
    core = _Core(None)
    core.units = _units()
    core.add_channel("user")
    replies = core.handle({"ch": "user", "type": "gap", "seq": 41, "lost": 3})
    assert [(r["op"], r["ch"]) for r in replies] == [("unsubscribe", "user"), ("subscribe", "user")]
    event = core.events.popleft()
    assert isinstance(event, UserUpdate) and (event.type, event.seq) == ("gap", 41)
    # The same on the status channel, whose gap comes as a Message.
    core.add_channel("status")
    replies = core.handle({"ch": "status", "type": "gap", "seq": 42})
    assert [(r["op"], r["ch"]) for r in replies] == [("unsubscribe", "status"), ("subscribe", "status")]


def test_a_liquidation_on_the_user_channel_comes_typed() -> None:
    core = _Core(None)
    core.units = _units()
    core.add_channel("user")
    # As docs/api.md shows it, on the user channel.
    core.handle(
        {"ch": "user", "type": "liquidated", "currency": "USD", "equity": "60.00000",
         "maintenance": "100.00000", "shortfall": "50.00000", "seq": 812, "ts_ns": "1795831088245021253"}
    )
    event = core.events.popleft()
    assert isinstance(event, UserUpdate) and (event.type, event.seq) == ("liquidated", 812)
    assert event.liquidation == Liquidation(
        "USD", Decimal("60.00000"), Decimal("100.00000"), Decimal("50.00000"), 812, 1795831088245021253
    )
    assert event.event is not None and event.event.type == "liquidated"
    # Any other order event has none.
    core.handle({"ch": "user", "type": "cancelled", "order": 7, "symbol": "ETH-USD", "side": "buy",
                 "qty": "0.001", "reason": "user", "seq": 813, "ts_ns": "1"})
    assert core.events.popleft().liquidation is None


def test_async_stream_logs_in_trades_and_sees_its_fill(venue) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        with Client(venue.url, "6", venue.secrets["6"]) as other:
            rest = other.place("ETH-USD", "sell", "0.003", "3000.00")
        async with AsyncStream(venue.url, "5", venue.secrets["5"]) as stream:
            await stream.subscribe("user")
            ack = await stream.place("ETH-USD", "buy", "0.001", "3000.00")
            assert ack.status == "filled"
            while True:
                event = await stream.next_event(timeout=WAIT_S)
                if isinstance(event, UserUpdate) and event.type == "fill" and event.event is not None:
                    assert event.event.order == ack.order
                    assert (event.event.price, event.event.qty) == (Decimal("3000.00"), Decimal("0.001"))
                    break
            while True:
                event = await stream.next_event(timeout=WAIT_S)
                if isinstance(event, UserUpdate) and event.balances is not None:
                    assert all(isinstance(b.available, Decimal) for b in event.balances.values())
                    break
            # Order entry over the WebSocket: rest a bid, amend it, cancel it.
            bid = await stream.place("ETH-USD", "buy", "0.004", "2900.00")
            await stream.amend(bid.order, price="2950.00", qty="0.002")
            with Client(venue.url, "5", venue.secrets["5"]) as api:
                amended = api.get_order(bid.order)
                assert (amended.price, amended.remaining) == (Decimal("2950.00"), Decimal("0.002"))
                await stream.cancel(bid.order)
                assert api.open_orders() == []
        with Client(venue.url, "6", venue.secrets["6"]) as other:
            other.cancel(rest.order)

    asyncio.run(run())
