//! Market data: what the venue publishes about its books, derived from the engine's applied
//! commands and their events, never from a second look at the engine.
//!
//! - [`Feed`] (server side) turns each applied command into [`Update`]s: L3 order events with
//!   a per-symbol sequence, L2 level totals with their own per-symbol sequence, best bid/offer,
//!   trades with consecutive ids, and 1-minute candles.
//! - [`L3Book`], [`L2Mirror`] and [`L3Mirror`] (client side) rebuild a book from a snapshot
//!   plus the updates after its sequence number, and report a gap instead of guessing.
//! - [`codec`] is the binary packet format of the UDP feed and its TCP replay service, and
//!   [`receiver::Receiver`] the client that follows it through loss (docs/market-data.md).
#![forbid(unsafe_code)]

pub mod book;
pub mod candles;
pub mod codec;
pub mod feed;
pub mod input;
mod live;
pub mod mirror;
pub mod receiver;
pub mod update;

pub use book::{BookError, L3Book};
pub use candles::{Candle, Candles};
pub use feed::{Feed, SymbolInfo};
pub use input::Input;
pub use mirror::{L2Mirror, L3Mirror, MirrorError};
pub use receiver::Receiver;
pub use update::{L2Snapshot, L3Order, L3Snapshot, Update};
