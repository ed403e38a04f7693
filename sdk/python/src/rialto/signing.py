"""Request signing, in one place (docs/api.md, "Authentication").

Today a signed request carries ``Rialto-Key``, ``Rialto-Timestamp`` (ms), ``Rialto-Nonce`` (rising
per key) and ``Rialto-Signature``: hex HMAC-SHA256 of the secret's text over
``key \\n timestamp \\n nonce \\n METHOD \\n path_and_query \\n body``. A WebSocket login signs
the same text with method ``WS``, path ``/ws`` and an empty body. When the venue moves to a
timestamp and a receive window, only this module changes.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Credentials:
    """An API key (a user id as text, e.g. ``"1"``, or ``"admin"``) and its secret."""

    key: str
    secret: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.key or not self.secret:
            raise ValueError("an API key and its secret are both needed")


class _NonceSource:
    """Nonces that rise per key across every client of this process.

    A nonce is the clock in milliseconds, or one more than the key's previous nonce when two
    requests fall in the same millisecond: the web console signs with milliseconds too, so a
    script never pushes a key's nonce far ahead of the console's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, int] = {}

    def next(self, key: str, now_ms: int) -> int:
        with self._lock:
            nonce = max(now_ms, self._last.get(key, 0) + 1)
            self._last[key] = nonce
            return nonce


_NONCES = _NonceSource()


def signature(secret: str, key: str, ts_ms: int, nonce: int, method: str, target: str, body: bytes) -> str:
    """The hex signature of one request; ``target`` is the path and query as sent."""
    text = f"{key}\n{ts_ms}\n{nonce}\n{method}\n{target}\n".encode() + body
    return hmac.new(secret.encode(), text, hashlib.sha256).hexdigest()


def rest_headers(credentials: Credentials, method: str, target: str, body: bytes) -> dict[str, str]:
    """The four ``Rialto-*`` headers of a signed REST request."""
    ts_ms = time.time_ns() // 1_000_000
    nonce = _NONCES.next(credentials.key, ts_ms)
    return {
        "Rialto-Key": credentials.key,
        "Rialto-Timestamp": str(ts_ms),
        "Rialto-Nonce": str(nonce),
        "Rialto-Signature": signature(credentials.secret, credentials.key, ts_ms, nonce, method, target, body),
    }


def ws_login(credentials: Credentials) -> dict[str, object]:
    """The fields of a WebSocket ``login`` request (without ``id`` and ``op``)."""
    ts_ms = time.time_ns() // 1_000_000
    nonce = _NONCES.next(credentials.key, ts_ms)
    return {
        "key": credentials.key,
        "ts": ts_ms,
        "nonce": nonce,
        "sig": signature(credentials.secret, credentials.key, ts_ms, nonce, "WS", "/ws", b""),
    }
