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
