"""One TLS round trip against `rialto serve --demo --tls`, trusting the certificate it wrote."""

from __future__ import annotations

from decimal import Decimal

import pytest

from rialto import BookUpdate, Client, Stream, TransportError


def test_https_and_wss_with_the_demo_certificate(tls_venue) -> None:  # type: ignore[no-untyped-def]
    assert tls_venue.url.startswith("https://"), tls_venue.url
    ca = tls_venue.ca_file
    with Client(tls_venue.url, "8", tls_venue.secrets["8"], ca_file=ca) as user:
        ack = user.place("BTC-USD", "sell", "0.001", "5000.00")
        assert user.get_order(ack.order).price == Decimal("5000.00")
        with Stream(tls_venue.url, ca_file=ca) as stream:
            assert stream.connection is not None
            stream.subscribe("book.BTC-USD")
            event = stream.next_event(timeout=10)
            while not isinstance(event, BookUpdate):
                event = stream.next_event(timeout=10)
            assert event.book.asks == [(Decimal("5000.00"), Decimal("0.001"))]
        user.cancel(ack.order)

    # Without the certificate, the client refuses the server rather than trusting it blindly.
    with Client(tls_venue.url) as untrusting, pytest.raises(TransportError) as refused:
        untrusting.book("BTC-USD")
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
