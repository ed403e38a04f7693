//! Recovery: the newest valid snapshot, then every journal record after it
//! (docs/journal-format.md, "Recovery").

use std::path::Path;
use std::time::{Duration, Instant};

use rialto_core::{Engine, EngineConfig};

use crate::error::{JournalError, Result};
use crate::loss::{AcceptedLoss, is_accepted, record_accepted_loss};
use crate::reader::{JournalReader, TailTruncation};
use crate::snapshot::load_newest_snapshot_info;
use crate::writer::{Durability, truncate_durable};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoverOptions {
    /// Truncate a torn tail and record an accepted loss (start-up). Off for `verify`, which
    /// changes nothing and only reports.
    pub repair: bool,
    /// The mode the writer will run in. Under [`Durability::None`] a journal that ends before
    /// the newest snapshot is what the mode allows: the loss is recorded and recovery goes on.
    pub durability: Durability,
    /// Accept (and record) a journal that ends before the newest snapshot under any mode
    /// (`rialto serve --accept-journal-loss`). Without it, and not under `None`, such a
    /// journal is [`JournalError::LostSuffix`].
    pub accept_loss: bool,
}

impl Default for RecoverOptions {
    fn default() -> Self {
        RecoverOptions {
            repair: true,
            durability: Durability::Fsync,
            accept_loss: false,
        }
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
    /// A loss this recovery accepted and recorded in `journal/accepted-losses` (the journal
    /// ended before the snapshot); `None` when there was none or it had been accepted before.
    pub accepted_loss: Option<AcceptedLoss>,
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

/// The journal ends before what it is known to have held (the newest snapshot's seq, the
/// last segment's checkpoint), and no accepted loss says so: the [`JournalError::LostSuffix`]
/// that says what is missing and how it is known.
fn lost_suffix(reader: &JournalReader, base: u64) -> Option<JournalError> {
    // The seq after the journal's last record (its first segment's first seq if it is empty).
    let next = reader.expected_seq()?;
    let journal_last = next - 1;
    let mut lost_through = journal_last;
    let mut evidence = Vec::new();
    if base > journal_last && !is_accepted(reader.accepted_losses(), next, base) {
        lost_through = base;
        evidence.push(format!(
            "the newest snapshot is at seq {base} (and any command acknowledged after it was \
             lost too)"
        ));
    }
    if let Some(short) = reader.short_of_checkpoint() {
        lost_through = lost_through.max(short.durable_through);
        evidence.push(format!(
            "the checkpoint of {} says every record up to seq {} was on disk",
            short.path.display(),
            short.durable_through
        ));
    }
    (lost_through > journal_last).then(|| JournalError::LostSuffix {
        journal_last,
        lost_through,
        evidence: evidence.join(", and "),
    })
}

/// Loads the newest valid snapshot (or starts a fresh engine at seq 0), then applies every
/// record of `<data>/journal` with a seq after the snapshot's. The journal must hold
/// `snapshot_seq + 1` onward, or nothing after the snapshot. Archived segments are not read.
///
/// A journal that ends before the snapshot, or before its last segment's checkpoint, lost
/// commands. That is an error ([`JournalError::LostSuffix`]) unless the loss was accepted
/// before, or `options` accept it (`accept_loss`, or `Durability::None` for a loss only the
/// snapshot shows) and `repair` is on: then it is appended to `journal/accepted-losses`,
/// `last_seq` is the end of the loss, and the writer starts a new segment after it beside the
/// old one. No segment is moved or changed in that case, not even a torn tail:
/// the old segment is the evidence of what was lost.
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
    let losses = reader.accepted_losses().to_vec();
    for record in reader.by_ref() {
        let record = record?;
        last_ts_ns = last_ts_ns.max(record.ts_ns);
        if record.seq <= base {
            continue;
        }
        // A hole accepted as lost (the writer went on after it) is passed over.
        if record.seq != last_seq + 1 && !is_accepted(&losses, last_seq + 1, record.seq - 1) {
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
    // The newest segment may start after an accepted loss and hold nothing yet: the venue is
    // past the loss all the same.
    if let Some(next) = reader.expected_seq()
        && next - 1 > last_seq
    {
        debug_assert!(reader.gaps_passed().iter().any(|l| l.to == next - 1));
        last_seq = next - 1;
        engine.pass_over_lost_seqs(last_seq);
    }
    let lost = lost_suffix(&reader, base);
    // Before a loss the torn tail stays: the old segment is the evidence, and the reader
    // allows a torn tail before an accepted loss.
    let truncated_tail = reader.torn_tail().filter(|_| lost.is_none()).cloned();
    let mut accepted_loss = None;
    if let Some(lost) = lost {
        let JournalError::LostSuffix {
            journal_last,
            lost_through,
            ..
        } = lost
        else {
            unreachable!("lost_suffix returns LostSuffix")
        };
        // Under `none` a kill loses what was still buffered, which the snapshot may be past.
        // A checkpoint only ever claims what was synced, so its loss is never the mode's.
        let only_the_mode_allows = reader.short_of_checkpoint().is_none();
        let why = match (options.accept_loss, options.durability) {
            (true, _) => "by --accept-journal-loss",
            (false, Durability::None) if only_the_mode_allows => "as durability none allows",
            (false, _) => return Err(lost),
        };
        if !options.repair {
            return Err(lost);
        }
        tracing::warn!("{lost}; starting anyway, the loss is accepted {why}");
        let mode = options.durability.to_string();
        accepted_loss = Some(record_accepted_loss(
            data_dir,
            journal_last + 1,
            lost_through,
            &mode,
            why,
        )?);
        // The writer goes on after the loss, in a new segment: seqs are never reused.
        last_seq = lost_through;
        engine.pass_over_lost_seqs(lost_through);
    }
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
        accepted_loss,
        state_hash,
        last_ts_ns,
        snapshot_load,
        replay,
    })
}
