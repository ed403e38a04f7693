"""Futures through the SDK (docs/api.md, "Futures"): the admin lists a future and moves its
mark, traders hold positions whose unrealised profit follows it, and the insurance fund moves."""

from __future__ import annotations

import subprocess
from decimal import Decimal

import pytest
from conftest import rialto_bin

from rialto import Client, Position, RialtoError


def admin(venue) -> Client:  # type: ignore[no-untyped-def]
    secret = subprocess.run(
        [rialto_bin(), "secret", "--admin", "--data", str(venue.data)], check=True, capture_output=True, text=True
    ).stdout.strip()
    return Client(venue.url, "admin", secret)


def test_positions_margin_and_the_admin_mark_and_insurance_calls(venue) -> None:  # type: ignore[no-untyped-def]
    with admin(venue) as operator:
        # Ticks of 0.5 USD and lots of 0.1 IDX; USD's minor unit is the demo's 0.00001, and a
        # tick of a lot is 5 of them (quote_scale); margins per lot in minor units.
        operator.add_future(
            "IDX-PERP", "IDX", "USD", quote_scale=5, initial_margin=1_000, maintenance_margin=500,
            mark_price=2_000, price_tick="0.5", qty_lot="0.1",
        )
        with Client(venue.url, "6", venue.secrets["6"]) as seller, Client(venue.url, "7", venue.secrets["7"]) as buyer:
            assert buyer.units().symbol("IDX-PERP").price_tick == Decimal("0.5")
            seller.place("IDX-PERP", "sell", "0.3", "1000.5")
            taken = buyer.place("IDX-PERP", "buy", "0.3", "1000.5", tif="ioc")
            assert taken.status == "filled"
            # Other tests share the venue (and may hold other futures): this one's positions.
            def held(client: Client) -> list[Position]:
                return [p for p in client.positions() if p.symbol == "IDX-PERP"]

            (long,) = held(buyer)
            assert (long.symbol, long.side, long.size, long.entry_price) == (
                "IDX-PERP",
                "long",
                Decimal("0.3"),
                Decimal("1000.5"),
            )
            assert (long.mark, long.unrealised_pnl) == (Decimal("1000"), Decimal("-0.00015"))
            # A demo user's balance covers far more than the position: no mark liquidates it.
            assert long.liquidation_price is None
            (short,) = held(seller)
            assert (short.side, short.size, short.unrealised_pnl) == ("short", Decimal("-0.3"), Decimal("0.00015"))
            usd = buyer.margin()["USD"]
            assert (usd.initial, usd.maintenance) == (Decimal("0.03"), Decimal("0.015"))
            assert usd.available == usd.equity - usd.initial

            seq = operator.set_mark_price("IDX-PERP", "1010")
            assert seq > taken.seq
            (long,) = held(buyer)
            # 3 lots × 19 ticks × 5 minor units.
            assert (long.mark, long.unrealised_pnl) == (Decimal("1010"), Decimal("0.00285"))
            with pytest.raises(RialtoError) as refused:
                operator.set_mark_price("BTC-USD", "1010")
            assert refused.value.code == "invalid_symbol"
            with pytest.raises(RialtoError) as refused:
                buyer.set_mark_price("IDX-PERP", "1020")
            assert (refused.value.code, refused.value.status) == ("forbidden", 403)

        def insurance() -> Decimal:
            (usd,) = [c for c in operator.venue() if c["currency"] == "USD"]
            return Decimal(usd["insurance"])

        before = insurance()
        operator.fund_insurance("USD", "12.5", tx=770_001)
        assert insurance() - before == Decimal("12.5")
        with pytest.raises(RialtoError) as refused:
            operator.fund_insurance("USD", "1", tx=770_001)
        assert refused.value.code == "duplicate_tx"
        operator.fund_insurance("USD", "-2.5", tx=770_002)
        assert insurance() - before == Decimal("10")
