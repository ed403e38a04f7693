"""TLS settings shared by the REST and WebSocket clients."""

from __future__ import annotations

import os
import ssl


def context(ca_file: str | os.PathLike[str] | None, verify: bool) -> ssl.SSLContext:
    """The SSL context for https/wss: the system's trust store, or only ``ca_file`` (e.g. the
    certificate ``rialto serve --demo --tls`` writes to ``data/tls/cert.pem``). ``verify=False``
    checks nothing, for experiments only."""
    if not verify:
        unchecked = ssl.create_default_context()
        unchecked.check_hostname = False
        unchecked.verify_mode = ssl.CERT_NONE
        return unchecked
    if ca_file is not None:
        return ssl.create_default_context(cafile=os.fspath(ca_file))
    return ssl.create_default_context()
