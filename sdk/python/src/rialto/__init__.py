"""Python SDK for Rialto's REST and WebSocket API (docs/api.md).

- :class:`Client` / :class:`AsyncClient`: REST, signed for you, every number a Decimal.
- :class:`Stream` / :class:`AsyncStream`: WebSocket subscriptions that reconnect and rebuild
  each book from a snapshot after a gap or a reconnect, and order entry.
- :class:`RialtoError`: every refusal, with the API's error ``code``.
"""

from .book import Gap, LocalBook
from .client import AsyncClient, Client
from .errors import RialtoError, TransportError
from .signing import Credentials
from .stream import AsyncStream, BookUpdate, Event, Message, Reconnected, Stream, TradesUpdate, UserUpdate
from .types import Ack, Balance, Book, Fill, Liquidation, Margin, Order, OrderEvent, OrderStatus, Position, Trade
from .units import CurrencyInfo, SymbolInfo, Units

__all__ = [
    "Ack",
    "AsyncClient",
    "AsyncStream",
    "Balance",
    "Book",
    "BookUpdate",
    "Client",
    "Credentials",
    "CurrencyInfo",
    "Event",
    "Fill",
    "Gap",
    "Liquidation",
    "LocalBook",
    "Margin",
    "Message",
    "Order",
    "OrderEvent",
    "OrderStatus",
    "Position",
    "Reconnected",
    "RialtoError",
    "Stream",
    "SymbolInfo",
    "Trade",
    "TradesUpdate",
    "TransportError",
    "Units",
    "UserUpdate",
    "load_demo_secrets",
]


def load_demo_secrets(path: str) -> dict[str, str]:
    """The secrets ``rialto serve --demo`` writes to ``data/demo-secrets.txt``, by key."""
    secrets: dict[str, str] = {}
    with open(path, encoding="utf-8") as file:
        for line in file:
            words = line.split()
            if len(words) == 4 and words[0] == "user" and words[2] == "secret":
                secrets[words[1]] = words[3]
    return secrets
