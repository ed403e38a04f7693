"""REST against a real `rialto serve --demo`: each test trades as its own demo user, so the
tests do not see each other's orders."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest
from util import poll

from rialto import AsyncClient, Client, RialtoError


def client(venue, user: str) -> Client:  # type: ignore[no-untyped-def]
    return Client(venue.url, user, venue.secrets[user])


def test_place_query_cancel(venue) -> None:  # type: ignore[no-untyped-def]
    with client(venue, "1") as alice:
        usd_before = alice.balances()["USD"]
        ack = alice.place("BTC-USD", "buy", qty=Decimal("0.003"), price="4900.00")
        assert ack.status == "new" and ack.order > 0

        (order,) = [o for o in alice.open_orders() if o.order == ack.order]
        assert (order.symbol, order.side, order.price, order.remaining) == (
            "BTC-USD",
            "buy",
            Decimal("4900.00"),
            Decimal("0.003"),
        )
        assert alice.get_order(ack.order).remaining == Decimal("0.003")
        # The bid holds its price times its quantity of USD, and the taker fee it might pay on
        # its 3 lots.
        taker_fee_per_lot = alice.units().symbol("BTC-USD").taker_fee
        held = alice.balances()["USD"]
        assert held.held - usd_before.held == Decimal("14.70") + 3 * taker_fee_per_lot
        assert held.available + held.held == usd_before.available + usd_before.held

        assert alice.cancel(ack.order).order == ack.order
        assert ack.order not in [o.order for o in alice.open_orders()]
        assert alice.balances()["USD"] == usd_before
        ended = alice.get_order(ack.order)
        assert (ended.status, ended.original_qty, ended.filled) == ("cancelled", Decimal("0.003"), Decimal("0.000"))


def test_a_resent_client_order_id_trades_once_and_tells_the_first_outcome(venue) -> None:  # type: ignore[no-untyped-def]
    with client(venue, "3") as seller, client(venue, "4") as buyer:
        rest = seller.place("BTC-USD", "sell", "0.001", "5000.00")
        first = buyer.place("BTC-USD", "buy", "0.001", "5000.00", tif="ioc", client_order_id="sdk-retry-1")
        assert (first.status, first.client_order_id) == ("filled", "sdk-retry-1")
        with pytest.raises(RialtoError) as resent:
            buyer.place("BTC-USD", "buy", "0.001", "5000.00", tif="ioc", client_order_id="sdk-retry-1")
        assert resent.value.code == "duplicate_order_id"
        assert resent.value.order is not None
        assert (resent.value.order.order, resent.value.order.status) == (first.order, "filled")
        by_cid = buyer.get_order_by_client_id("sdk-retry-1")
        assert (by_cid.order, by_cid.filled, by_cid.fills[0].price) == (
            first.order,
            Decimal("0.001"),
            Decimal("5000.00"),
        )
        assert rest.order not in [o.order for o in seller.open_orders()]


def test_fill_between_two_users_moves_balances_by_exactly_the_trade(venue) -> None:  # type: ignore[no-untyped-def]
    with client(venue, "3") as seller, client(venue, "4") as buyer:
        taker_fee_per_lot = buyer.units().symbol("BTC-USD").taker_fee
        sold_before, bought_before = seller.balances(), buyer.balances()
        rest = seller.place("BTC-USD", "sell", "0.005", "5000")
        take = buyer.place("BTC-USD", "buy", "0.002", "5100")

        assert take.status == "filled"
        assert [(f.price, f.qty, f.liquidity) for f in take.fills] == [(Decimal("5000.00"), Decimal("0.002"), "taker")]
        fee = taker_fee_per_lot * 2
        assert take.fills[0].fee == fee

        bought = buyer.balances()
        assert bought["BTC"].available - bought_before["BTC"].available == Decimal("0.002")
        assert bought_before["USD"].available - bought["USD"].available == Decimal("10.00") + fee
        # The maker pays no fee on the demo venue; its unfilled 0.003 BTC stays held.
        sold = seller.balances()
        assert sold["USD"].available - sold_before["USD"].available == Decimal("10.00")
        assert sold["BTC"].held - sold_before["BTC"].held == Decimal("0.003")
        assert sold_before["BTC"].available - sold["BTC"].available == Decimal("0.005")

        # The seller's history shows the maker fill, with Decimals.
        fills = poll(
            lambda: [e for e in seller.history() if e.type == "fill" and e.order == rest.order],
            "the seller's fill in its history",
        )
        assert [(e.price, e.qty, e.liquidity) for e in fills] == [(Decimal("5000.00"), Decimal("0.002"), "maker")]
        seller.cancel(rest.order)


def test_balances_are_decimals_in_each_currencys_decimals(venue) -> None:  # type: ignore[no-untyped-def]
    with client(venue, "7") as user:
        balances = user.balances()
        assert set(balances) == {"BTC", "ETH", "USD"}
        for balance in balances.values():
            assert isinstance(balance.available, Decimal) and isinstance(balance.held, Decimal)
        # 10^12 minor units: a USD minor unit is 0.00001 USD on the demo venue, a BTC one 0.000001.
        assert balances["USD"].available == Decimal("10000000")
        assert str(balances["USD"].available) == "10000000.00000"
        assert str(balances["BTC"].available) == "1000000.000000"


def test_refusals_raise_with_the_apis_code(venue) -> None:  # type: ignore[no-untyped-def]
    with client(venue, "7") as user:
        cases = [
            (lambda: user.place("BTC-USD", "buy", "0.0005", "5000"), "invalid_qty", 400),
            (lambda: user.place("BTC-USD", "buy", "0.001", "5000.001"), "invalid_price", 400),
            (lambda: user.place("BTC-USD", "buy", "100000000", "5000"), "insufficient_funds", 400),
            (lambda: user.cancel(123456789), "unknown_order", 400),
            (lambda: user.book("NOPE-USD"), "not_found", 404),
        ]
        for call, code, status in cases:
            with pytest.raises(RialtoError) as refused:
                call()
            assert (refused.value.code, refused.value.status) == (code, status), refused.value
        assert user.open_orders() == []

    with Client(venue.url, "7", "0" * 32) as wrong_secret, pytest.raises(RialtoError) as refused:
        wrong_secret.balances()
    assert (refused.value.code, refused.value.status) == ("bad_signature", 401)
    with Client(venue.url) as anonymous, pytest.raises(RialtoError) as refused:
        anonymous.balances()
    assert refused.value.code == "missing_credentials"
    with Client(venue.url, "7", venue.secrets["7"]) as user, pytest.raises(TypeError):
        user.place("BTC-USD", "buy", 0.001, 5000.0)  # type: ignore[arg-type]


def test_async_client_places_and_cancels(venue) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        async with AsyncClient(venue.url, "2", venue.secrets["2"]) as user:
            ack = await user.place("ETH-USD", "sell", "0.010", "3000.50")
            order = await user.get_order(ack.order)
            assert (order.price, order.remaining) == (Decimal("3000.50"), Decimal("0.010"))
            balances = await user.balances()
            assert balances["ETH"].held == Decimal("0.010")
            await user.cancel(ack.order)
            assert await user.open_orders() == []

    asyncio.run(run())
