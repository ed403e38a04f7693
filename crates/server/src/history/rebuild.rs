//! Filling the history from the journal: the newest snapshot at or before the gap (or an
//! empty venue), then every journaled command after it (archived segments included) replayed
//! on an engine of its own, the rows of the commands in the gap handed to `write`.

use std::path::Path;

use rialto_core::{Engine, EngineConfig};
use rialto_journal::JournalReader;

use super::rows::Rows;

/// Commands per transaction while rebuilding: progress survives a crash in the middle.
const COMMANDS_PER_WRITE: u64 = 50_000;

/// The engine as of the newest usable snapshot at or before `seq`, or a fresh one.
fn engine_at_or_before(data_dir: &Path, config: EngineConfig, seq: u64) -> anyhow::Result<Engine> {
    let snapshots = rialto_journal::list_snapshots(data_dir)?;
    for (snapshot_seq, path) in snapshots.into_iter().rev() {
        if snapshot_seq > seq {
            continue;
        }
        match rialto_journal::load_snapshot(&path, config) {
            Ok((engine, _)) => return Ok(engine),
            Err(e) => tracing::warn!("history rebuild: skipping snapshot: {e}"),
        }
    }
    Ok(Engine::new(config))
}

/// Replays the journal and hands `write` the rows of the commands `after + 1 ..= through`,
/// in order, in batches. Returns the last seq covered (below `through` when the journal's
/// files do not hold it yet).
pub fn replay(
    data_dir: &Path,
    config: EngineConfig,
    after: u64,
    through: u64,
    mut write: impl FnMut(&Rows) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let mut engine = engine_at_or_before(data_dir, config, after)?;
    let mut reader = JournalReader::open(data_dir, true)?;
    let mut rows = Rows::default();
    let mut events = Vec::new();
    let mut covered = after;
    for record in reader.by_ref() {
        let record = record?;
        if record.seq <= engine.last_seq() {
            continue;
        }
        if record.seq > through {
            break;
        }
        if record.seq != engine.last_seq() + 1 {
            // The reader passes over accepted losses only; anything else is an error above.
            engine.pass_over_lost_seqs(record.seq - 1);
        }
        events.clear();
        let result = engine.apply(record.seq, record.ts_ns, &record.command, &mut events);
        if record.seq > after {
            rows.add(record.seq, record.ts_ns, &record.command, result, &events);
            if rows.last_seq - rows.first_seq + 1 >= COMMANDS_PER_WRITE {
                write(&rows)?;
                covered = rows.last_seq;
                rows = Rows::default();
            }
        }
    }
    if !rows.is_empty() {
        write(&rows)?;
        covered = rows.last_seq;
    }
    // Seqs lost and accepted at the journal's end are covered too: nothing happened in them.
    if let Some(next) = reader.expected_seq()
        && next > covered + 1
        && next > through
        && engine.last_seq() < through
    {
        let empty = Rows {
            first_seq: covered + 1,
            last_seq: through,
            ..Rows::default()
        };
        write(&empty)?;
        covered = through;
    }
    Ok(covered)
}
