//! Recovery: the newest valid snapshot, then every journal record after it
//! (docs/journal-format.md, "Recovery").

use std::path::Path;
use std::time::{Duration, Instant};

use rialto_core::{Engine, EngineConfig};

use crate::error::{JournalError, Result};
use crate::reader::{JournalReader, TailTruncation};
use crate::snapshot::{archive_all_covered, load_newest_snapshot_info};
use crate::writer::truncate_durable;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoverOptions {
    /// Truncate a torn tail (start-up). Off for `verify`, which only reports it.
    pub repair: bool,
}

impl Default for RecoverOptions {
    fn default() -> Self {
        RecoverOptions { repair: true }
    }
}

pub struct Recovered {
    pub engine: Engine,
    /// The last seq applied: the writer continues at `last_seq + 1`.
    pub last_seq: u64,
    /// The seq of the snapshot recovery started from, if any.
    pub snapshot_seq: Option<u64>,
    /// Journal records applied on top of the snapshot.
    pub replayed: u64,
    /// A torn write found at the end of the journal (truncated when repairing).
    pub truncated_tail: Option<TailTruncation>,
    pub state_hash: [u8; 32],
    /// The latest sequencer time in the journal (0 if it is empty): the sequencer continues
    /// from it, so that time never runs backwards in the log across a restart.
    pub last_ts_ns: i64,
    /// Time to read, check and decode the snapshot.
    pub snapshot_load: Duration,
    /// Time to read, check and apply the journal records (not the final state hash).
    pub replay: Duration,
}

/// Start-up recovery: [`recover_with`] with a torn tail truncated.
pub fn recover(data_dir: &Path, config: EngineConfig) -> Result<Recovered> {
    recover_with(data_dir, config, RecoverOptions::default())
}

/// Loads the newest valid snapshot (or starts a fresh engine at seq 0), then applies every
/// record of `<data>/journal` with a seq after the snapshot's. The journal must hold
/// `snapshot_seq + 1` onward, or nothing after the snapshot. Archived segments are not read.
///
/// A journal that ends before the snapshot (possible only if commands were lost, e.g. under
/// `Durability::None`) is archived when repairing, so that the writer can start a fresh
/// segment at `snapshot_seq + 1`.
pub fn recover_with(
    data_dir: &Path,
    config: EngineConfig,
    options: RecoverOptions,
) -> Result<Recovered> {
    let started = Instant::now();
    let (mut engine, snapshot_seq, snapshot_hash) =
        match load_newest_snapshot_info(data_dir, config)? {
            Some((engine, info)) => (engine, Some(info.seq), Some(info.state_hash)),
            None => (Engine::new(config), None, None),
        };
    let snapshot_load = started.elapsed();
    let started = Instant::now();
    let base = snapshot_seq.unwrap_or(0);
    let mut last_seq = base;
    let mut replayed = 0u64;
    let mut last_ts_ns = 0i64;
    let mut reader = JournalReader::open(data_dir, false)?;
    for record in reader.by_ref() {
        let record = record?;
        last_ts_ns = last_ts_ns.max(record.ts_ns);
        if record.seq <= base {
            continue;
        }
        if record.seq != last_seq + 1 {
            return Err(JournalError::MissingRange {
                problem: format!(
                    "recovery needs seq {} next ({}), the journal has seq {} first",
                    last_seq + 1,
                    match snapshot_seq {
                        Some(s) => format!("after the snapshot at seq {s}"),
                        None => "there is no usable snapshot".to_owned(),
                    },
                    record.seq
                ),
            });
        }
        // A rejection is part of the history: it changed nothing then and changes nothing now.
        let _ = engine.apply(record.seq, record.ts_ns, &record.command, &mut ());
        last_seq = record.seq;
        replayed += 1;
    }
    let truncated_tail = reader.torn_tail().cloned();
    if options.repair
        && let Some(tail) = &truncated_tail
    {
        tracing::warn!(
            path = %tail.path.display(),
            offset = tail.offset,
            bytes = tail.discarded_bytes,
            "truncating the torn tail of the journal"
        );
        truncate_durable(&tail.path, tail.offset)?;
    }
    // The seq after the journal's last record (its first segment's first seq if it is empty).
    if let Some(journal_next) = reader.expected_seq()
        && journal_next <= base
    {
        tracing::warn!(
            "the journal ends before seq {journal_next}, before the snapshot at seq {base}: \
             commands after it were lost (durability none?)"
        );
        if options.repair {
            archive_all_covered(data_dir, base)
                .map_err(|e| JournalError::io(data_dir.join("journal"), e))?;
        }
    }
    let replay = started.elapsed();
    let state_hash = match (snapshot_hash, replayed) {
        (Some(hash), 0) => hash,
        _ => engine.state_hash(),
    };
    Ok(Recovered {
        engine,
        last_seq,
        snapshot_seq,
        replayed,
        truncated_tail,
        state_hash,
        last_ts_ns,
        snapshot_load,
        replay,
    })
}
