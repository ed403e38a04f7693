"""The SDK's exceptions: every refusal carries the API's stable error code (docs/api.md, "Errors")."""

from __future__ import annotations

from typing import Any


class RialtoError(Exception):
    """A request the venue (or the SDK, before sending) refused.

    ``code`` is the API's stable code (``insufficient_funds``, ``unknown_order``,
    ``bad_signature``, ``rate_limited``, ...); ``status`` the HTTP status (None for a WebSocket
    answer or a refusal made by the SDK itself); ``retry_after`` the seconds a 429 asks to wait,
    when the server said; ``order`` the first order's status (an ``OrderStatus``) when a resent
    client order id is refused ``duplicate_order_id``.
    """

    def __init__(
        self,
        code: str,
        message: str,
        status: int | None = None,
        retry_after: float | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.body = body
        self.order: Any = None


class TransportError(RialtoError):
    """The venue could not be reached, or the connection broke before an answer came."""

    def __init__(self, message: str) -> None:
        super().__init__("transport", message)


def from_response(status: int, headers: Any, payload: Any) -> RialtoError:
    """The error for a non-2xx answer; ``payload`` is the decoded JSON body or None."""
    retry_after: float | None = None
    raw_retry = headers.get("retry-after") if headers is not None else None
    if raw_retry is not None:
        try:
            retry_after = float(raw_retry)
        except ValueError:
            retry_after = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        error = payload["error"]
        return RialtoError(
            str(error.get("code", f"http_{status}")),
            str(error.get("message", "")),
            status,
            retry_after,
            payload,
        )
    # A few answers carry no JSON (431: the header was too large; docs/api.md).
    return RialtoError(f"http_{status}", "the server answered without a JSON error", status, retry_after, payload)


def from_ws_answer(error: Any) -> RialtoError:
    """The error of a WebSocket answer's ``error`` object."""
    if isinstance(error, dict):
        return RialtoError(str(error.get("code", "error")), str(error.get("message", "")), None, None, error)
    return RialtoError("error", str(error))
