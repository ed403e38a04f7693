"""Set a future's mark price from outside, through the admin API (docs/api.md, "Futures").

The mark is, each round, one of:
- the volume-weighted average price of the last ``--trades`` trades of ``--source`` (the future
  itself by default, or e.g. its spot symbol), rounded to the future's tick;
- a fixed index given with ``--index PRICE``.

It sets the mark once (``--once``) or every ``--every`` seconds until interrupted, and only
when it changed. Run beside `rialto serve` with the admin secret in RIALTO_ADMIN_SECRET (or
``--admin-secret-file``; `rialto secret --admin --data data` prints it) and RIALTO_URL:

    python3 mark_from_trades.py --symbol BTC-PERP --source BTC-USD --trades 20 --every 1
    python3 mark_from_trades.py --symbol BTC-PERP --index 64000.50 --once
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

import rialto


def to_tick(price: Decimal, tick: Decimal) -> Decimal:
    """``price`` rounded to a whole number of ticks (half to even), at least one tick."""
    ticks = (price / tick).to_integral_value(rounding=ROUND_HALF_EVEN)
    return max(ticks, Decimal(1)) * tick


def mark_from_trades(client: rialto.Client, source: str, count: int) -> Decimal | None:
    """The volume-weighted average price of ``source``'s last ``count`` trades (None: none)."""
    trades = client.trades(source, limit=count)
    volume = sum((t.qty for t in trades), Decimal(0))
    if not trades or volume == 0:
        return None
    return sum((t.price * t.qty for t in trades), Decimal(0)) / volume


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--symbol", required=True, help="the future whose mark to set")
    parser.add_argument("--source", help="the symbol whose trades make the mark (default: --symbol)")
    parser.add_argument("--trades", type=int, default=10, help="how many recent trades to average (default 10)")
    parser.add_argument("--index", help="a fixed mark price instead of the trades")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between rounds (default 1)")
    parser.add_argument("--once", action="store_true", help="one round, then exit")
    parser.add_argument("--admin-secret-file", help="a file holding the admin secret")
    args = parser.parse_args(argv)
    if not 1 <= args.trades <= 1000:
        parser.error("--trades is 1 to 1000")
    index = None
    if args.index is not None:
        try:
            index = Decimal(args.index)
        except InvalidOperation:
            parser.error(f"--index is a price such as 64000.50, not {args.index!r}")
        if not index.is_finite() or index <= 0:
            parser.error("--index is a positive price")
    url = os.environ.get("RIALTO_URL", "http://127.0.0.1:8080")
    if args.admin_secret_file:
        with open(args.admin_secret_file, encoding="utf-8") as file:
            secret = file.read().strip()
    else:
        secret = os.environ.get("RIALTO_ADMIN_SECRET", "")
    if not secret:
        parser.error("give the admin secret in RIALTO_ADMIN_SECRET or --admin-secret-file")

    with rialto.Client(url, "admin", secret, ca_file=os.environ.get("RIALTO_CA_FILE")) as client:
        tick = client.units().symbol(args.symbol).price_tick
        last: Decimal | None = None
        while True:
            source = args.source or args.symbol
            price = index if index is not None else mark_from_trades(client, source, args.trades)
            if price is None:
                print(f"no trades of {source} yet: mark unchanged", flush=True)
            else:
                mark = to_tick(price, tick)
                if mark != last:
                    seq = client.set_mark_price(args.symbol, mark)
                    print(f"{args.symbol} mark {mark} (seq {seq})", flush=True)
                    last = mark
            if args.once:
                return 0
            time.sleep(args.every)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except rialto.RialtoError as e:
        print(f"refused: {e.code}: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(0)
