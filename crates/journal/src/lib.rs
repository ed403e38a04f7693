//! Rialto's journal: a segmented write-ahead log of sequenced commands with a CRC per record,
//! group commit, LZ4-compressed snapshots, and recovery (snapshot + journal tail).
//!
//! On-disk layouts, durability promises and the torn-tail rules: docs/journal-format.md.
//!
//! ```text
//! <data>/journal/segment-<first_seq:020>.log    records, in seq order, contiguous from 1
//! <data>/journal/archive/segment-*.log          segments a snapshot covers (read by dump only)
//! <data>/journal/accepted-losses                seq ranges lost and accepted (loss.rs)
//! <data>/snapshots/snapshot-<seq:020>.snap      LZ4-compressed Engine::encode_snapshot()
//! ```

pub mod codec;
mod crc;
mod error;
pub mod format;
pub mod lock;
pub mod loss;
pub mod reader;
pub mod recovery;
pub mod snapshot;
pub mod writer;

pub use codec::{MAX_COMMAND_BYTES, decode_command, encode_command};
pub use error::{JournalError, Result};
pub use lock::{DataDirLock, held_by_a_server};
pub use loss::{AcceptedLoss, read_accepted_losses};
pub use reader::{JournalReader, Record, TailTruncation};
pub use recovery::{RecoverOptions, Recovered, recover, recover_with};
pub use snapshot::{
    DEFAULT_SNAPSHOTS_KEPT, Retention, SnapshotInfo, archive_segments_before, list_snapshots,
    load_newest_snapshot, load_snapshot, load_snapshot_bytes, prune_snapshots, retain,
    snapshot_file_bytes, snapshot_name, write_snapshot,
};
pub use writer::{
    CHECKPOINT_WHEN_IDLE, Durability, Durable, JournalConfig, JournalWriter, SyncObserver,
    SyncedProgress,
};
