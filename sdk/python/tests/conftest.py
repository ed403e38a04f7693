"""Runs the tests against a real ``rialto serve --demo``.

The binary comes from ``RIALTO_BIN`` (the Rust test crates/cli/tests/python_sdk.rs sets it to
the one cargo built). Each server gets a temporary data directory and free loopback ports, is
waited for by polling (never a fixed sleep), and is stopped by its PID at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from rialto import load_demo_secrets

READY_DEADLINE_S = 60.0
FREE_PORTS = [
    "--listen",
    "127.0.0.1:0",
    "--admin-listen",
    "127.0.0.1:0",
    "--fix-listen",
    "127.0.0.1:0",
    "--web-listen",
    "127.0.0.1:0",
]


@dataclass
class Venue:
    url: str
    data: Path
    secrets: dict[str, str]
    pid: int

    @property
    def ca_file(self) -> Path:
        return self.data / "tls" / "cert.pem"


def rialto_bin() -> str:
    binary = os.environ.get("RIALTO_BIN")
    if not binary or not Path(binary).is_file():
        pytest.exit(
            "RIALTO_BIN must name the rialto binary (cargo test -p rialto-cli --test python_sdk sets it;"
            " by hand: cargo build -p rialto-cli && RIALTO_BIN=target/debug/rialto pytest)",
            returncode=2,
        )
    return binary


def _die_with_parent() -> None:
    """In the server's process before exec (Linux): SIGTERM it when pytest dies, so a killed
    run leaves no server behind."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _serve(extra: list[str]) -> Iterator[Venue]:
    with tempfile.TemporaryDirectory(prefix="rialto-sdk-") as tmp:
        data = Path(tmp) / "data"
        log = open(Path(tmp) / "stderr.log", "wb")
        proc = subprocess.Popen(
            [rialto_bin(), "serve", "--demo", *extra, *FREE_PORTS, "--data", str(data)],
            stdout=subprocess.PIPE,
            stderr=log,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline().decode()
            # Keep reading stdout, so the server never writes into a full pipe.
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            if "web on " not in first:
                proc.kill()
                proc.wait()
                log.flush()
                raise RuntimeError(f"rialto serve did not start: {first!r}\n{(Path(tmp) / 'stderr.log').read_text()}")
            url = first.split("web on ", 1)[1].split()[0].rstrip(",/")
            venue = Venue(url, data, load_demo_secrets(str(data / "demo-secrets.txt")), proc.pid)
            _wait_ready(venue)
            yield venue
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def _wait_ready(venue: Venue) -> None:
    verify = str(venue.ca_file) if venue.url.startswith("https:") else False
    deadline = time.monotonic() + READY_DEADLINE_S
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            import ssl

            ctx = ssl.create_default_context(cafile=verify) if isinstance(verify, str) else False
            if httpx.get(venue.url + "/api/v1/time", verify=ctx, timeout=2).status_code == 200:
                return
        except httpx.HTTPError as e:
            last_error = e
        time.sleep(0.05)
    raise RuntimeError(f"{venue.url} did not answer within {READY_DEADLINE_S} s: {last_error}")


@pytest.fixture(scope="session")
def venue() -> Iterator[Venue]:
    yield from _serve([])


@pytest.fixture(scope="session")
def tls_venue() -> Iterator[Venue]:
    yield from _serve(["--tls"])
