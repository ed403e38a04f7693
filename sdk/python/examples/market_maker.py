"""A market maker: quotes both sides of BTC-USD around the mid, and again when the mid moves by
more than its half spread.
Run beside `rialto serve --demo` as user 3 (RIALTO_URL, RIALTO_KEY, RIALTO_SECRETS to change that)."""

import os
from decimal import Decimal

import rialto

url, key = os.environ.get("RIALTO_URL", "http://127.0.0.1:8080"), os.environ.get("RIALTO_KEY", "3")
secret = rialto.load_demo_secrets(os.environ.get("RIALTO_SECRETS", "data/demo-secrets.txt"))[key]
SYMBOL, HALF_SPREAD, SIZE, TICK = "BTC-USD", Decimal("0.001"), Decimal("0.010"), Decimal("0.01")
with rialto.Client(url, key, secret) as rest, rialto.Stream(url) as stream:
    stream.subscribe(f"book.{SYMBOL}")
    quoted_mid = None
    for event in stream:
        if isinstance(event, rialto.BookUpdate):
            bid, ask = event.book.best_bid, event.book.best_ask
            mid = (bid[0] + ask[0]) / 2 if bid and ask else quoted_mid or Decimal("5000")
            if quoted_mid is None or abs(mid - quoted_mid) > mid * HALF_SPREAD:  # not our own quotes
                rest.cancel_all(SYMBOL)
                rest.place(SYMBOL, "buy", SIZE, (mid * (1 - HALF_SPREAD)).quantize(TICK))
                rest.place(SYMBOL, "sell", SIZE, (mid * (1 + HALF_SPREAD)).quantize(TICK))
                quoted_mid = mid
                print(f"quoting {SIZE} around {mid}", flush=True)
