#!/usr/bin/env python3
"""Fuzz a running `rialto serve` through its signed REST and WebSocket APIs (docs/api.md).

Public endpoints are covered by schemathesis against /openapi.json without keys; this sends
what a key holder could send:
- REST: correctly signed requests to every private and admin endpoint with bodies, path
  parameters and queries of the wrong shape, type and size. Every answer must be JSON, below
  500, with an error code when it is a refusal.
- WebSocket: a logged-in connection sends requests of every op with arguments of the wrong
  shape, type and size, and raw text that is not JSON. Every request with an id must get an
  answer with that id (a result or an error code), and the connection must stay open.
Afterwards the server must still answer, and the venue's totals must still balance
(available + held + fees = deposits - withdrawals, per currency).

    rialto serve --demo --data /tmp/fuzz-data --web-listen 127.0.0.1:19403 ... &
    python3 scripts/fuzz-api.py --url http://127.0.0.1:19403 --data /tmp/fuzz-data \
        --rialto target/release/rialto --examples 3000

Needs `hypothesis` and `websockets` (pip install hypothesis websockets).
"""

import argparse
import hashlib
import hmac
import itertools
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

from websockets.sync.client import connect as ws_connect

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# A receive window per request (1 to 59 s), so that requests alike in one millisecond differ.
WINDOWS = itertools.count()


def window():
    return str(1000 + next(WINDOWS) % 58000)


def secret(rialto, data, who):
    flag = ["--admin"] if who == "admin" else ["--user", str(who)]
    out = subprocess.run([rialto, "secret", *flag, "--data", data], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def call(base, key, secret_text, method, target, body=b""):
    ts = str(int(time.time() * 1000))
    recv_window = window()
    text = "\n".join([key, ts, recv_window, method, target]).encode() + b"\n" + body
    sig = hmac.new(secret_text.encode(), text, hashlib.sha256).hexdigest()
    request = urllib.request.Request(base + target, data=body or None, method=method, headers={
        "Rialto-Key": key, "Rialto-Timestamp": ts, "Rialto-Recv-Window": recv_window,
        "Rialto-Signature": sig, "Content-Type": "application/json",
    })
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


BIG = [0, -1, 1, 2**31, 2**53 + 1, 2**63 - 1, -2**63, 2**63, 2**64, -2**64 - 1, 10**30]
numbers = st.one_of(st.integers(), st.sampled_from(BIG), st.floats(allow_nan=False, allow_infinity=False),
                    st.integers(min_value=-5, max_value=700_000))
words = st.one_of(st.text(max_size=40), st.sampled_from(
    ["BTC-USD", "ETH-USD", "USD", "BTC", "buy", "sell", "limit", "market", "gtc", "ioc", "fok",
     "cancel_taker", "cancel_maker", "cancel_both", "", "NOPE", "\u0000", "é" * 30,
     # Decimal strings, the API's default units, on and off the tick and lot, and out of range.
     "5000.00", "5000.005", "0.001", "0.0001", "-1.5", "1e3", "99999999999999999999.99", "."]))
scalars = st.one_of(st.none(), st.booleans(), numbers, words)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(words, inner, max_size=4)), max_leaves=8)
FIELDS = ["symbol", "order", "side", "price", "qty", "type", "tif", "post_only", "stp", "user",
          "currency", "amount", "tx", "base", "quote", "base_scale", "quote_scale",
          "maker_fee", "taker_fee", "price_tick", "qty_lot", "client_order_id", "stop_price",
          "display_qty", "expire_ts"]
bodies = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), st.one_of(scalars, values), max_size=10),
    values.map(lambda v: v),
)
raw_bodies = st.one_of(bodies.map(lambda b: json.dumps(b).encode()),
                       st.binary(max_size=64),
                       st.sampled_from([b"{", b"[]", b"null", b'{"qty":1e999}',
                                        b'{"price":123456789012345678901234567890}']))
path_words = st.one_of(st.integers().map(str), st.sampled_from(
    ["0", "-1", "9223372036854775808", "1e3", "abc", "%00", "%2F..%2F", "1;2", " 1"]))
ENDPOINTS = [
    ("POST", "/api/v1/orders", True),
    ("GET", "/api/v1/orders", False),
    ("DELETE", "/api/v1/orders?symbol={w}", False),
    ("DELETE", "/api/v1/orders/{p}", False),
    ("POST", "/api/v1/orders/{p}/move", True),
    ("POST", "/api/v1/orders/{p}/reduce", True),
    ("GET", "/api/v1/orders/{p}", False),
    ("PATCH", "/api/v1/orders/{p}", True),
    ("GET", "/api/v1/orders/by-client-id/{w}", False),
    ("GET", "/api/v1/orders/history?limit={p}", False),
    ("GET", "/api/v1/fills?symbol={w}&from_id={p}", False),
    ("GET", "/api/v1/balances", False),
    ("POST", "/api/v1/admin/deposits", True),
    ("POST", "/api/v1/admin/withdrawals", True),
    ("POST", "/api/v1/admin/users", True),
    ("POST", "/api/v1/admin/symbols", True),
    ("GET", "/api/v1/admin/balances/{p}", False),
    ("GET", "/api/v1/admin/users", False),
    ("GET", "/api/v1/admin/venue", False),
]


WS_OPS = ["place", "cancel", "move", "reduce", "mass_cancel", "subscribe", "unsubscribe",
          "login", "fly", ""]


def ws_answer(ws, request_id):
    """Reads until the answer to `request_id`; stream messages on the way are skipped."""
    deadline = time.time() + 10
    while time.time() < deadline:
        message = json.loads(ws.recv(timeout=10))
        if message.get("id") == request_id:
            return message
    raise AssertionError(f"no answer to {request_id}")


def check_answer(status, body, what):
    assert status < 500, f"{what} -> {status} {body[:300]!r}"
    try:
        parsed = json.loads(body)
    except ValueError:
        raise AssertionError(f"{what} -> {status}, not JSON: {body[:300]!r}")
    if status >= 400:
        assert isinstance(parsed, dict) and isinstance(parsed.get("error", {}).get("code"), str), \
            f"{what} -> {status} without an error code: {parsed}"


def balanced(base, admin_secret):
    # The fuzzed logins' failures throttle this address for a while (docs/security.md): wait.
    deadline = time.time() + 300
    while True:
        status, body = call(base, "admin", admin_secret, "GET", "/api/v1/admin/venue?units=int")
        if status != 429 or time.time() > deadline:
            break
        time.sleep(1)
    assert status == 200, body
    for row in json.loads(body):
        left = row["available"] + row["held"] + row["fees"]
        right = row["deposits"] - row["withdrawals"]
        assert left == right, f"the venue's totals no longer balance: {row}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--data", required=True, help="the server's data directory")
    parser.add_argument("--rialto", default="target/release/rialto")
    parser.add_argument("--examples", type=int, default=2000)
    args = parser.parse_args()
    secrets = {"1": secret(args.rialto, args.data, 1),
               "admin": secret(args.rialto, args.data, "admin")}
    seen = {}

    @settings(max_examples=args.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(ENDPOINTS), st.integers(0, 9), path_words,
           words.map(lambda w: urllib.request.quote(w, safe="")), raw_bodies,
           st.sampled_from(["", "units=int", "units=decimal", "units=float"]))
    def fuzz(endpoint, swap, p, w, body, units):
        method, template, has_body = endpoint
        # The key the endpoint is for, and now and then the other one.
        key = "admin" if ("/admin/" in template) != (swap == 0) else "1"
        target = template.replace("{p}", urllib.request.quote(p, safe="%")).replace("{w}", w)
        if units:
            target += ("&" if "?" in target else "?") + units
        status, answer = call(args.url, key, secrets[key], method, target,
                              body if has_body else b"")
        seen[status] = seen.get(status, 0) + 1
        check_answer(status, answer, f"{key} {method} {target} {body[:200]!r}")

    fuzz()
    print("REST answers by status:", dict(sorted(seen.items())))

    ws_url = args.url.replace("http://", "ws://") + "/ws"
    with ws_connect(ws_url, max_size=None, open_timeout=10) as ws:
        ts, recv_window = str(int(time.time() * 1000)), window()
        text = "\n".join(["1", ts, recv_window, "WS", "/ws"]).encode() + b"\n"
        sig = hmac.new(secrets["1"].encode(), text, hashlib.sha256).hexdigest()
        ws.send(json.dumps({"id": "login", "op": "login", "key": "1", "ts": ts,
                            "recv_window": recv_window, "sig": sig}))
        assert ws_answer(ws, "login").get("result", {}).get("user") == 1
        ws_seen = {}
        ids = itertools.count(1)

        @settings(max_examples=args.examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.sampled_from(WS_OPS), st.dictionaries(st.sampled_from(FIELDS + ["ch"]),
                                                         st.one_of(scalars, values), max_size=6),
               st.one_of(st.none(), st.binary(max_size=40)))
        def fuzz_ws(op, fields, raw):
            if raw is not None:
                # Not JSON (or JSON without an id): an error message, and the socket stays.
                ws.send(raw.decode("utf-8", "replace"))
            request_id = next(ids)
            ws.send(json.dumps({**fields, "id": request_id, "op": op}))
            answer = ws_answer(ws, request_id)
            kind = "result" if "result" in answer else answer.get("error", {}).get("code")
            assert isinstance(kind, str), f"{op} {fields} -> {answer}"
            ws_seen[kind] = ws_seen.get(kind, 0) + 1

        fuzz_ws()
        print("WebSocket answers:", dict(sorted(ws_seen.items())))
    balanced(args.url, secrets["admin"])
    print("the server still answers and the venue's totals balance")


if __name__ == "__main__":
    sys.exit(main())
