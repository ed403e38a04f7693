//! The vocabulary of the venue: ids, sides, order kinds, reason codes, short names.
//!
//! Every word here has a stable snake_case spelling (`as_str` / `parse`) because outside tools
//! read and write it in scenario files (docs/scenario-format.md).

use std::fmt;

/// A user id as the venue's clients know it.
pub type UserId = i64;
/// An order id, chosen by its user; unique among that user's live orders.
pub type OrderId = i64;

/// Index of a symbol in the engine, assigned in the order symbols were added (0, 1, 2, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SymbolId(pub u32);

impl SymbolId {
    /// Names no symbol: what a gateway passes for a symbol name it could not resolve, so that the
    /// engine reports `unknown_symbol` in its proper place in the rejection order.
    pub const NONE: SymbolId = SymbolId(u32::MAX);
}

/// Index of a currency in the engine, assigned in the order currencies were first seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CurrencyId(pub u32);

macro_rules! word_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stable wire spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }

            /// Parses the wire spelling; `None` for any other word.
            pub fn parse(word: &str) -> Option<$name> {
                match word { $($word => Some($name::$variant),)+ _ => None }
            }

            /// A compact code for binary encodings (the declaration index).
            pub fn code(self) -> u8 {
                self as u8
            }

            /// The inverse of [`Self::code`].
            pub fn from_code(code: u8) -> Option<$name> {
                Self::ALL.get(code as usize).copied()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

word_enum!(
    /// The side of an order.
    Side { Buy => "buy", Sell => "sell" }
);

impl Side {
    pub fn opposite(self) -> Side {
        match self {
            Side::Buy => Side::Sell,
            Side::Sell => Side::Buy,
        }
    }
}

word_enum!(
    /// Limit orders carry a price; market orders never rest; stop and stop-limit orders wait,
    /// outside the book, for a trade at or through their stop price, then enter as a market or a
    /// limit order (docs/rules.md, "Stop and stop-limit orders").
    OrderType { Limit => "limit", Market => "market", Stop => "stop", StopLimit => "stop_limit" }
);

word_enum!(
    /// Time in force. `gtd` and `day` rest like `gtc` until their expiry time (docs/rules.md,
    /// "GTD and DAY").
    Tif { Gtc => "gtc", Ioc => "ioc", Fok => "fok", Gtd => "gtd", Day => "day" }
);

word_enum!(
    /// Self-trade prevention: what happens when an incoming order would match its own user's
    /// resting order.
    Stp { CancelTaker => "cancel_taker", CancelMaker => "cancel_maker", CancelBoth => "cancel_both" }
);

word_enum!(
    /// Why quantity left the book or was never executed.
    CancelReason {
        User => "user",
        Ioc => "ioc",
        Fok => "fok",
        Stp => "stp",
        Market => "market",
        Reduce => "reduce",
        Expired => "expired",
        Band => "band",
        Suspended => "suspended",
        Liquidation => "liquidation",
        // Appended: a reason's code is its declaration index. A futures fill whose settlement
        // would leave i64 (docs/rules.md, "Futures").
        Overflow => "overflow",
    }
);

word_enum!(
    /// A symbol's trading phase (docs/rules.md, "Trading phases, halts and auctions").
    Phase { Continuous => "continuous", Auction => "auction", Halted => "halted", Closed => "closed" }
);

word_enum!(
    /// Whether an amended order kept its place in its level's queue (docs/rules.md, "Amend").
    Priority { Kept => "kept", Lost => "lost" }
);

word_enum!(
    /// Why a command was rejected. A rejected command changes nothing.
    Reason {
        UnknownSymbol => "unknown_symbol",
        UnknownUser => "unknown_user",
        DuplicateUser => "duplicate_user",
        DuplicateSymbol => "duplicate_symbol",
        DuplicateOrderId => "duplicate_order_id",
        UnknownOrder => "unknown_order",
        InvalidPrice => "invalid_price",
        InvalidQty => "invalid_qty",
        InvalidOrder => "invalid_order",
        InsufficientFunds => "insufficient_funds",
        WouldTake => "would_take",
        DuplicateTx => "duplicate_tx",
        Overflow => "overflow",
        // Added by Rialto (docs/rules.md): an add_symbol with bad scales, fees or currencies.
        InvalidSymbol => "invalid_symbol",
        // Added by Rialto (docs/rules.md): a configured limit (orders, levels, users) is reached.
        LimitExceeded => "limit_exceeded",
        // Rulebook part 2 (docs/rules.md). Appended: a reason's code is its declaration index.
        UserSuspended => "user_suspended",
        SymbolHalted => "symbol_halted",
        SymbolClosed => "symbol_closed",
        SymbolInAuction => "symbol_in_auction",
        PriceOutOfBand => "price_out_of_band",
        WouldTrigger => "would_trigger",
        InsufficientMargin => "insufficient_margin",
        InvalidPhase => "invalid_phase",
    }
);

/// A short name (symbol or currency), stored inline so that commands stay `Copy` and allocation
/// free. At most [`Name::MAX_LEN`] bytes of UTF-8, not empty. Ordered as text.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Name {
    len: u8,
    bytes: [u8; Name::MAX_LEN],
}

impl Name {
    pub const MAX_LEN: usize = 23;

    /// `None` when the name is empty or longer than [`Name::MAX_LEN`] bytes.
    pub fn new(name: &str) -> Option<Name> {
        let len = name.len();
        if len == 0 || len > Self::MAX_LEN {
            return None;
        }
        let mut bytes = [0u8; Self::MAX_LEN];
        bytes[..len].copy_from_slice(name.as_bytes());
        Some(Name {
            len: len as u8,
            bytes,
        })
    }

    pub fn as_str(&self) -> &str {
        // Only ever built from a &str, cut at its own length: always valid UTF-8.
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // UTF-8 byte order is text order.
        self.bytes[..self.len as usize].cmp(&other.bytes[..other.len as usize])
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        for r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(*r));
            assert_eq!(Reason::from_code(r.code()), Some(*r));
        }
        assert_eq!(Side::parse("sideways"), None);
        assert_eq!(Stp::parse("cancel_both"), Some(Stp::CancelBoth));
    }

    #[test]
    fn names_are_bounded() {
        assert!(Name::new("").is_none());
        assert!(Name::new(&"X".repeat(24)).is_none());
        assert_eq!(Name::new("BTC-USD").unwrap().as_str(), "BTC-USD");
    }

    #[test]
    fn names_sort_as_text_not_by_length() {
        assert!(Name::new("AAPL").unwrap() < Name::new("USD").unwrap());
        assert!(Name::new("AAPL-USD").unwrap() < Name::new("BTC-USD").unwrap());
    }
}
