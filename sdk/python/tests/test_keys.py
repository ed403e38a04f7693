"""Issued API keys through the SDK (docs/api.md, "API keys"): a key the admin creates signs
like any other; a read-only one is refused order entry."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest
from conftest import rialto_bin

from rialto import Client, RialtoError
from rialto.signing import Credentials, rest_headers


def _admin_call(venue, method: str, target: str, body: object) -> dict:  # type: ignore[no-untyped-def]
    secret = subprocess.run(
        [rialto_bin(), "secret", "--admin", "--data", str(venue.data)], check=True, capture_output=True, text=True
    ).stdout.strip()
    content = json.dumps(body).encode()
    headers = rest_headers(Credentials("admin", secret), method, target, content)
    headers["Content-Type"] = "application/json"
    answer = httpx.request(method, venue.url + target, content=content, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_issued_key_signs_and_its_permissions_hold(venue) -> None:  # type: ignore[no-untyped-def]
    trading = _admin_call(venue, "POST", "/api/v1/admin/keys", {"user": 8, "permissions": ["trade"]})
    reading = _admin_call(venue, "POST", "/api/v1/admin/keys", {"user": 8, "label": "read only"})
    with Client(venue.url, trading["key"], trading["secret"]) as trader:
        ack = trader.place("BTC-USD", "buy", qty="0.001", price="4500.00")
        assert ack.order > 0
        assert ack.order in [o.order for o in trader.open_orders()] or ack.status != "new"
    with Client(venue.url, reading["key"], reading["secret"]) as reader:
        assert reader.balances()
        with pytest.raises(RialtoError) as refused:
            reader.place("BTC-USD", "buy", qty="0.001", price="4500.00")
        assert (refused.value.code, refused.value.status) == ("permission_denied", 403)
