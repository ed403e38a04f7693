"""Place an order, look it up, cancel it, and show the balances it held.
Run beside `rialto serve --demo` (RIALTO_URL, RIALTO_KEY, RIALTO_SECRETS, RIALTO_CA_FILE for
`--tls`: data/tls/cert.pem)."""

import os

import rialto

url = os.environ.get("RIALTO_URL", "http://127.0.0.1:8080")
key = os.environ.get("RIALTO_KEY", "1")
secret = rialto.load_demo_secrets(os.environ.get("RIALTO_SECRETS", "data/demo-secrets.txt"))[key]

with rialto.Client(url, key, secret, ca_file=os.environ.get("RIALTO_CA_FILE")) as client:
    ack = client.place("BTC-USD", "buy", qty="0.003", price="4900.00")
    print(f"placed order {ack.order}: {ack.status}")
    order = client.get_order(ack.order)
    print(f"open: {order.side} {order.remaining} {order.symbol} at {order.price}")
    print(f"USD held: {client.balances()['USD'].held}")
    client.cancel(ack.order)
    print(f"cancelled; USD held: {client.balances()['USD'].held}")
    try:
        client.cancel(ack.order)
    except rialto.RialtoError as e:
        print(f"cancelling again is refused: {e.code}")
