"""The examples in examples/ run against the demo venue and do what their docstrings say."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

from util import poll

from rialto import Client

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _env(venue, key: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {
        **os.environ,
        "RIALTO_URL": venue.url,
        "RIALTO_KEY": key,
        "RIALTO_SECRETS": str(venue.data / "demo-secrets.txt"),
    }


def test_place_query_cancel_example(venue) -> None:  # type: ignore[no-untyped-def]
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "place_query_cancel.py")],
        env=_env(venue, "7"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("placed order ") and lines[0].endswith(": new"), lines
    assert lines[1] == "open: buy 0.003 BTC-USD at 4900.00", lines
    assert lines[2] == "USD held: 14.70003", lines  # 4,900 x 0.003 and the taker fee of 3 lots
    assert lines[3] == "cancelled; USD held: 0.00000", lines
    assert lines[4] == "cancelling again is refused: unknown_order", lines


def test_market_maker_quotes_both_sides(venue) -> None:  # type: ignore[no-untyped-def]
    maker = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "market_maker.py")],
        env=_env(venue, "8"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with Client(venue.url, "8", venue.secrets["8"]) as user:

            def quotes() -> list[tuple[str, Decimal, Decimal]]:
                assert maker.poll() is None, maker.stderr.read() if maker.stderr else ""
                return sorted((o.side, o.price, o.remaining) for o in user.open_orders())

            # The book is empty, so it quotes around its starting mid of 5,000.
            expected = [("buy", Decimal("4995.00"), Decimal("0.010")), ("sell", Decimal("5005.00"), Decimal("0.010"))]
            poll(lambda: quotes() == expected, "the market maker's two quotes")
    finally:
        maker.terminate()
        maker.wait(timeout=20)
        with Client(venue.url, "8", venue.secrets["8"]) as user:
            user.cancel_all("BTC-USD")


def test_mark_from_trades_sets_a_mark_from_trades_or_an_index(venue) -> None:  # type: ignore[no-untyped-def]
    import subprocess as sp

    from conftest import rialto_bin

    secret = sp.run(
        [rialto_bin(), "secret", "--admin", "--data", str(venue.data)], check=True, capture_output=True, text=True
    ).stdout.strip()
    env = {**_env(venue, "admin"), "RIALTO_ADMIN_SECRET": secret}

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / "mark_from_trades.py"), "--symbol", "IDM-PERP", "--once", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def mark() -> Decimal:
        with Client(venue.url) as public:
            (status,) = [s for s in public.status()["symbols"] if s["symbol"] == "IDM-PERP"]
            return Decimal(status["mark"])

    with Client(venue.url, "admin", secret) as operator:
        operator.add_future(
            "IDM-PERP", "IDM", "USD", quote_scale=1, initial_margin=100, maintenance_margin=50,
            mark_price=1_000, price_tick="0.01", qty_lot="1",
        )
    assert run() == "no trades of IDM-PERP yet: mark unchanged"
    assert mark() == Decimal("10.00")
    assert run("--index", "12.345").startswith("IDM-PERP mark 12.34 (seq ")  # to the tick, half to even
    assert mark() == Decimal("12.34")
    with Client(venue.url, "5", venue.secrets["5"]) as seller, Client(venue.url, "6", venue.secrets["6"]) as buyer:
        seller.place("IDM-PERP", "sell", "1", "11.00")
        seller.place("IDM-PERP", "sell", "3", "11.20")
        buyer.place("IDM-PERP", "buy", "4", "11.20", tif="ioc")
    # (11.00 × 1 + 11.20 × 3) / 4 = 11.15
    with Client(venue.url) as public:
        poll(lambda: len(public.trades("IDM-PERP")) == 2, "the two trades in the feed")
    assert run("--trades", "5").startswith("IDM-PERP mark 11.15 (seq ")
    assert mark() == Decimal("11.15")
