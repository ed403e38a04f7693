//! The `rialto` command's library: scenario files (JSON Lines commands in, JSON Lines events
//! out, docs/scenario-format.md) and the replay loop that drives the engine with them.

pub mod bench_recovery;
pub mod journal;
pub mod replay;
pub mod scenario;
