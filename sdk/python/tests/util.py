"""Helpers for the tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(check: Callable[[], T], what: str, deadline_s: float = 10.0) -> T:
    """Calls ``check`` until it returns something true; fails after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {result!r}")
        time.sleep(0.02)
