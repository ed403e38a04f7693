"""Request signing, in one place (docs/api.md, "Authentication").

A signed request carries ``Rialto-Key``, ``Rialto-Timestamp`` (ms), optionally
``Rialto-Recv-Window`` (ms, 1 to 60000; 5000 when absent) and ``Rialto-Signature``: hex
HMAC-SHA256 of the secret's text over
``key \\n timestamp \\n recv_window \\n METHOD \\n path_and_query \\n body`` (``recv_window`` as
sent, or empty when the header is absent). A WebSocket login signs the same text with method
``WS``, path ``/ws`` and an empty body. The server accepts a request while its timestamp is
within its receive window and refuses the same signed request a second time.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Credentials:
    """An API key and its secret: an issued key (``"rk..."``), a user's default key (the user
    id as text, e.g. ``"1"``), or ``"admin"``. ``recv_window_ms`` is the receive window signed
    into each request (None: the server's default, 5000 ms)."""

    key: str
    secret: str = field(repr=False)
    recv_window_ms: int | None = None

    def __post_init__(self) -> None:
        if not self.key or not self.secret:
            raise ValueError("an API key and its secret are both needed")
        if self.recv_window_ms is not None and not 1 <= self.recv_window_ms <= 60_000:
            raise ValueError("a receive window is 1 to 60000 ms")


class _Stamps:
    """Timestamps that rise per key across every client of this process.

    A timestamp is the clock in milliseconds, or one more than the key's previous one when two
    requests fall in the same millisecond: two identical requests of one millisecond would
    otherwise be one request signed twice, and the second would be refused as a replay.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, int] = {}

    def next(self, key: str, now_ms: int) -> int:
        with self._lock:
            ts = max(now_ms, self._last.get(key, 0) + 1)
            self._last[key] = ts
            return ts


_STAMPS = _Stamps()


def signature(
    secret: str, key: str, ts_ms: int, recv_window_ms: int | None, method: str, target: str, body: bytes
) -> str:
    """The hex signature of one request; ``target`` is the path and query as sent."""
    window = "" if recv_window_ms is None else str(recv_window_ms)
    text = f"{key}\n{ts_ms}\n{window}\n{method}\n{target}\n".encode() + body
    return hmac.new(secret.encode(), text, hashlib.sha256).hexdigest()


def _stamp(credentials: Credentials) -> int:
    return _STAMPS.next(credentials.key, time.time_ns() // 1_000_000)


def rest_headers(credentials: Credentials, method: str, target: str, body: bytes) -> dict[str, str]:
    """The ``Rialto-*`` headers of a signed REST request."""
    ts_ms = _stamp(credentials)
    window = credentials.recv_window_ms
    headers = {
        "Rialto-Key": credentials.key,
        "Rialto-Timestamp": str(ts_ms),
        "Rialto-Signature": signature(credentials.secret, credentials.key, ts_ms, window, method, target, body),
    }
    if window is not None:
        headers["Rialto-Recv-Window"] = str(window)
    return headers


def ws_login(credentials: Credentials) -> dict[str, object]:
    """The fields of a WebSocket ``login`` request (without ``id`` and ``op``)."""
    ts_ms = _stamp(credentials)
    window = credentials.recv_window_ms
    fields: dict[str, object] = {
        "key": credentials.key,
        "ts": ts_ms,
        "sig": signature(credentials.secret, credentials.key, ts_ms, window, "WS", "/ws", b""),
    }
    if window is not None:
        fields["recv_window"] = window
    return fields
