use crate::command::{Command, SymbolSpec};
use crate::event::{Balance, CurrencyTotals, EventSink, UserReport};
use crate::types::{Name, OrderId, Reason, Side, SymbolId, UserId};

/// Capacities and limits. Capacities are hints that are allocated at start so that steady-state
/// trading does not allocate; limits are hard and reject with `limit_exceeded`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    pub max_open_orders_per_user: u32,
    pub max_resting_orders: u32,
    pub expected_resting_orders: usize,
    pub expected_users: usize,
    pub expected_levels_per_side: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_open_orders_per_user: 100_000,
            max_resting_orders: 1 << 30,
            expected_resting_orders: 1024,
            expected_users: 1024,
            expected_levels_per_side: 16,
        }
    }
}

/// A resting order as the final state lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestingOrder {
    pub user: UserId,
    pub order: OrderId,
    pub side: Side,
    pub price: i64,
    pub remaining: i64,
}

pub struct Engine {}

impl Engine {
    pub fn new(_config: EngineConfig) -> Engine {
        todo!()
    }

    /// Applies one command. Events go to `sink` as they happen; the return value is the
    /// command's result. A rejected command changes nothing.
    pub fn apply(
        &mut self,
        _seq: u64,
        _timestamp_ns: i64,
        _cmd: &Command,
        _sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        todo!()
    }

    /// The id of a symbol by name, or [`SymbolId::NONE`].
    pub fn symbol_id(&self, _name: &str) -> SymbolId {
        todo!()
    }

    /// The symbol's specification, if it exists.
    pub fn symbol(&self, _id: SymbolId) -> Option<&SymbolSpec> {
        todo!()
    }

    /// All symbols, sorted by name.
    pub fn symbols_by_name(&self) -> Vec<(SymbolId, SymbolSpec)> {
        todo!()
    }

    /// All user ids, ascending.
    pub fn users(&self) -> Vec<UserId> {
        todo!()
    }

    /// A user's balance in one currency (zero when never touched); `None` for an unknown user.
    pub fn balance(&self, _user: UserId, _currency: &str) -> Option<Balance> {
        todo!()
    }

    /// A user's non-zero balances and open orders; `None` for an unknown user.
    pub fn user_report(&self, _user: UserId) -> Option<UserReport> {
        todo!()
    }

    /// Totals per currency, sorted by currency name.
    pub fn venue_totals(&self) -> Vec<CurrencyTotals> {
        todo!()
    }

    /// Resting orders of one symbol in priority order: (bids, asks), best price first, then
    /// oldest first.
    pub fn resting_orders(&self, _symbol: SymbolId) -> (Vec<RestingOrder>, Vec<RestingOrder>) {
        todo!()
    }

    /// The remaining quantity of a live order, if it is live.
    pub fn order_remaining(&self, _user: UserId, _order: OrderId) -> Option<i64> {
        todo!()
    }

    /// Number of resting orders on the whole venue.
    pub fn resting_order_count(&self) -> usize {
        todo!()
    }

    /// The sequence number of the last command applied (0 before any).
    pub fn last_seq(&self) -> u64 {
        todo!()
    }

    /// SHA-256 of the canonical snapshot encoding: equal states share it.
    pub fn state_hash(&self) -> [u8; 32] {
        todo!()
    }

    /// [`Self::state_hash`] as 64 lowercase hex digits.
    pub fn state_hash_hex(&self) -> String {
        todo!()
    }

    /// Canonical binary encoding of the whole state (docs/snapshot-format.md).
    pub fn encode_snapshot(&self) -> Vec<u8> {
        todo!()
    }

    /// Rebuilds an engine from [`Self::encode_snapshot`] output, validating everything.
    pub fn decode_snapshot(
        _bytes: &[u8],
        _config: EngineConfig,
    ) -> Result<Engine, crate::SnapshotError> {
        todo!()
    }
}

#[allow(dead_code)]
fn _unused(_: Name) {}
