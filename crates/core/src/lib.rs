//! Rialto's deterministic core: `apply(state, sequenced command) -> events`.
//!
//! The engine owns the venue's whole state: symbols, users and their balances, order books.
//! It reads no clock, draws no random numbers, does no I/O and starts no threads; the sequence
//! number and time of each command are arguments. The same commands give the same events and
//! the same state hash on every run and every machine.
#![forbid(unsafe_code)]

pub mod command;
pub mod event;
pub mod types;

mod account;
mod book;
mod engine;
mod hasher;
mod index;
mod phases;
mod snapshot;

pub use command::{AmendOrder, Command, OrderExtras, PlaceOrder, SymbolKind, SymbolSpec};
pub use engine::{
    Engine, EngineConfig, MAX_ICEBERG_SLICES, NS_PER_DAY, PREFETCH_DISTANCES, PREFETCH_LOOKAHEAD,
    PREFETCH_PAYS_BYTES, Prefetch, RestingOrder,
};
pub use event::{
    Amended, AuctionResult, Balance, BookSnapshot, Cancelled, CurrencyTotals, Event, EventSink,
    Level, Liquidated, LiveOrder, MarginReport, OpenOrder, OwnedEvent, PendingStop, PhaseChanged,
    Position, SymbolStatus, Trade, Triggered, UserReport,
};
pub use snapshot::SnapshotError;
pub use types::{
    CancelReason, CurrencyId, Name, OrderId, OrderType, Phase, Priority, Reason, Side, Stp,
    SymbolId, Tif, UserId,
};
