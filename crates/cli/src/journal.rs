//! `rialto journal dump` and `rialto journal verify`.

use std::io::Write;
use std::path::Path;

use rialto_core::Engine;
use rialto_journal::{
    JournalError, JournalReader, RecoverOptions, list_snapshots, load_newest_snapshot,
    load_snapshot, recover_with,
};

use crate::scenario::write_command;

/// The venue whose log is read: its settings (`--config`, `--set`), and where its log is (the
/// data directory, or NATS JetStream with `--nats` or `log.backend = "jetstream"`).
#[derive(clap::Args, Debug, Default)]
pub struct VenueArgs {
    /// Read the command log on NATS JetStream at these servers (comma-separated) instead of
    /// the data directory (docs/replication.md)
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    pub nats: Vec<String>,
    /// The venue's `rialto serve` configuration file: the log is replayed with its engine
    /// limits (`[engine]`: max orders, users, symbols, the order-id window's ids), and with
    /// `log.backend = "jetstream"` read on NATS as its `[log]` section says (servers, venue,
    /// checkpoints, NATS credentials and TLS; --nats, --venue and --checkpoint-every override it)
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Any setting of the venue, as `rialto serve --set` takes it (repeatable), e.g.
    /// `--set engine.max_users=1000000`
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// The venue's name in NATS (`log.venue`) [default: main]
    #[arg(long, value_name = "NAME")]
    pub venue: Option<String>,
    /// The venue's `log.checkpoint_every`, to compare its checkpoints [default: 100000]
    #[arg(long, value_name = "N")]
    pub checkpoint_every: Option<u64>,
}

impl VenueArgs {
    /// The venue's settings: the defaults, `--config`, `--set`, then `--nats`, `--venue` and
    /// `--checkpoint-every`. Its `log.backend` says where to read the log.
    pub fn settings(&self) -> anyhow::Result<rialto_server::config::ServerConfig> {
        use rialto_server::config::LogBackend;
        let mut config = crate::serve::file_settings(self.config.as_deref(), &self.overrides)?;
        if !self.nats.is_empty() {
            config.log.backend = LogBackend::Jetstream;
            config.log.nats = self.nats.clone();
        }
        anyhow::ensure!(
            config.log.backend == LogBackend::Jetstream
                || (self.venue.is_none() && self.checkpoint_every.is_none()),
            "--venue and --checkpoint-every are for the log on NATS: give --nats or --config \
             with log.backend = \"jetstream\" too"
        );
        if let Some(venue) = &self.venue {
            config.log.venue = venue.clone();
        }
        if let Some(every) = self.checkpoint_every {
            config.log.checkpoint_every = every;
        }
        if config.log.backend == LogBackend::Jetstream {
            anyhow::ensure!(
                !config.log.nats.is_empty(),
                "no NATS servers: give --nats URLS or log.nats in the --config file"
            );
        }
        config.validate()?;
        Ok(config)
    }
}

/// The error of a replay, with what to pass when one of the engine's capacities was too small
/// for the venue (the tools replay with the default capacities unless told the venue's).
pub fn with_capacity_hint(e: impl std::fmt::Display) -> String {
    let text = e.to_string();
    if !text.contains("more than this engine's capacity") {
        return text;
    }
    format!(
        "{text}; this tool replays with the engine limits it is given, the defaults unless \
         told otherwise: give it the venue's settings with --config FILE (the venue's `rialto \
         serve` configuration) or --set engine.NAME=VALUE, as `rialto serve` takes them"
    )
}

/// [`dump`] of the log on NATS JetStream: every record of the stream, from seq 1, as scenario
/// lines. Fails on a damaged record, a hole or a checkpoint that differs.
pub fn dump_stream(
    settings: &rialto_server::config::ServerConfig,
    out: &mut impl Write,
) -> anyhow::Result<u64> {
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut written = 0u64;
    let mut failed: Option<std::io::Error> = None;
    let mut each = |engine: &Engine, _seq: u64, ts_ns: i64, cmd: &rialto_core::Command| {
        if failed.is_some() {
            return;
        }
        write_command(&mut buf, engine, cmd, Some(ts_ns));
        written += 1;
        if buf.len() >= 60 * 1024 {
            if let Err(e) = out.write_all(&buf) {
                failed = Some(e);
            }
            buf.clear();
        }
    };
    let result = rialto_server::replication::rebuild_each(
        &settings.log,
        settings.engine_config(),
        &mut each,
    );
    if let Some(e) = failed {
        return Err(e.into());
    }
    out.write_all(&buf)?;
    out.flush()?;
    result.map_err(|e| anyhow::anyhow!(with_capacity_hint(format!("{e:#}"))))?;
    Ok(written)
}

/// [`verify`] of the log on NATS JetStream: reads every message, checks every record's CRC,
/// the seqs' continuity and the leader's checkpoints, and prints a summary.
pub fn verify_stream(
    config: &rialto_server::config::ServerConfig,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let settings = &config.log;
    writeln!(
        out,
        "stream: {} on {}",
        rialto_server::replication::Names::of(&settings.venue).stream,
        rialto_server::nats_access::printable_servers(settings)
    )?;
    match rialto_server::replication::rebuild(settings, config.engine_config()) {
        Ok(follower) => {
            writeln!(out, "messages: {}", follower.stream_seq)?;
            writeln!(out, "records: {}", follower.applied)?;
            match (follower.from_seq, follower.engine.last_seq()) {
                (_, 0) => writeln!(out, "seq: none")?,
                (0, last) => writeln!(out, "seq: 1..={last}")?,
                (from, last) => writeln!(
                    out,
                    "seq: {}..={last} (the stream was trimmed: from the snapshot bucket's \
                     snapshot at seq {from})",
                    from + 1
                )?,
            }
            writeln!(out, "checkpoints matched: {}", follower.checkpoints_matched)?;
            writeln!(out, "state_hash: {}", follower.engine.state_hash_hex())?;
            Ok(true)
        }
        Err(e) => {
            writeln!(out, "error: {}", with_capacity_hint(format!("{e:#}")))?;
            Ok(false)
        }
    }
}

/// Writes the journal as scenario lines, one command a line from seq 1, so that
/// `rialto replay` (which numbers lines from 1) applies each with its journaled seq. Symbol ids
/// are written as the names an engine applying the same commands alongside knows them by, so
/// they resolve exactly as they did live. Fails if the journal does not start at seq 1 (its
/// first segments archived without `include_archive`, or deleted). A torn tail is left out
/// (and reported on `diag`): recovery would truncate it. Returns the commands written.
///
/// A history with a hole is never passed off as whole. An accepted loss (journal/accepted-
/// losses) fails the dump before anything is written; a journal that ends before the newest
/// snapshot fails it after the commands it holds are written. With `allow_gaps` both are
/// warnings on `diag` instead, and the dump stops at the first hole: what it writes replays to
/// the state at the seq before the hole, not to the venue's.
pub fn dump(
    data_dir: &Path,
    engine_config: rialto_core::EngineConfig,
    include_archive: bool,
    allow_gaps: bool,
    out: &mut impl Write,
    diag: &mut impl Write,
) -> anyhow::Result<u64> {
    let mut reader = JournalReader::open(data_dir, include_archive)?;
    let losses: Vec<String> = reader
        .accepted_losses()
        .iter()
        .map(|l| format!("seqs {}..={} ({})", l.from, l.to, l.note))
        .collect();
    if !allow_gaps && !losses.is_empty() {
        anyhow::bail!(
            "the journal has a hole, lost and accepted: {}; its commands cannot replay to the \
             venue's state (--allow-gaps writes the history up to the first hole)",
            losses.join("; ")
        );
    }
    // A snapshot over the limits given says they are not the venue's: the replay below
    // would reach another state (a rejected `limit_exceeded` where the venue went on).
    if let Some((_, newest)) = list_snapshots(data_dir)?.last()
        && let Err(e) = load_snapshot(newest, engine_config)
    {
        let text = with_capacity_hint(&e);
        anyhow::ensure!(text == e.to_string(), "{text}");
    }
    let mut engine = Engine::new(engine_config);
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut written = 0u64;
    // Records after a hole: read (so that corruption is still reported), not written.
    let mut left_out = 0u64;
    let mut journal_last = 0u64;
    for record in reader.by_ref() {
        let record = record?;
        journal_last = record.seq;
        if written == 0 && record.seq != 1 {
            anyhow::bail!(
                "the journal starts at seq {}, not 1: {}",
                record.seq,
                if include_archive {
                    "its first segments are missing from journal/archive"
                } else {
                    "its first segments were archived (add --include-archive)"
                }
            );
        }
        if left_out > 0 || record.seq != written + 1 {
            left_out += 1;
            continue;
        }
        write_command(&mut buf, &engine, &record.command, Some(record.ts_ns));
        let _ = engine.apply(record.seq, record.ts_ns, &record.command, &mut ());
        written += 1;
        if buf.len() >= 60 * 1024 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    out.flush()?;
    for tail in reader.torn_before_gaps().iter().chain(reader.torn_tail()) {
        writeln!(
            diag,
            "warning: {}: torn tail at byte {} ({} bytes left out): {}",
            tail.path.display(),
            tail.offset,
            tail.discarded_bytes,
            tail.problem
        )?;
    }
    if !losses.is_empty() {
        writeln!(
            diag,
            "warning: the history has a hole (lost and accepted: {}): wrote seq 1..={written}, \
             left out the {left_out} commands after the hole (seq up to {journal_last}); the \
             output replays to the state at seq {written}, not to the venue's",
            losses.join("; ")
        )?;
    }
    // What the journal is known to have held past its end: the newest snapshot's seq, and
    // the last segment's checkpoint.
    let mut missing = Vec::new();
    let snapshot_seq = load_newest_snapshot(data_dir, engine_config)
        .map_err(|e| anyhow::anyhow!(with_capacity_hint(e)))?
        .map(|(_, s)| s);
    if let Some(s) = snapshot_seq
        && journal_last < s
        && !rialto_journal::loss::is_accepted(reader.accepted_losses(), journal_last + 1, s)
    {
        missing.push(format!(
            "the journal ends at seq {journal_last}, but the newest snapshot is at seq {s}: \
             seqs {}..={s} are missing (lost; `rialto journal verify` says more)",
            journal_last + 1
        ));
    }
    if let Some(short) = reader.short_of_checkpoint() {
        missing.push(format!(
            "the journal ends at seq {}, but the checkpoint of {} says every record up to seq \
             {} was on disk: seqs {}..={} are missing (lost; `rialto journal verify` says more)",
            short.journal_last,
            short.path.display(),
            short.durable_through,
            short.journal_last + 1,
            short.durable_through
        ));
    }
    for missing in missing {
        if !allow_gaps {
            anyhow::bail!(
                "{missing}; the {written} commands written replay to the state at seq \
                 {written}, not to the venue's (--allow-gaps accepts a partial history)"
            );
        }
        writeln!(
            diag,
            "warning: {missing}; the output replays to the state at seq {written}, not to the \
             venue's"
        )?;
    }
    Ok(written)
}

/// Checks every segment (archived ones included) and every snapshot, then recovers without
/// changing anything. Writes a summary to `out`; returns false if anything is corrupt.
pub fn verify(
    data_dir: &Path,
    engine_config: rialto_core::EngineConfig,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let mut ok = true;
    // A running server appends as we read: a record it is writing looks torn, and is not.
    let live = rialto_journal::held_by_a_server(data_dir)?;
    if live {
        writeln!(
            out,
            "server: running (it holds {}/LOCK): the journal's tail is live, checked up to \
             its last whole record",
            data_dir.display()
        )?;
    }
    let mut reader = JournalReader::open(data_dir, true)?;
    let segments = reader.segments().count();
    let mut first = None;
    let mut last = None;
    let mut journal_error: Option<JournalError> = None;
    for record in reader.by_ref() {
        match record {
            Ok(r) => {
                first.get_or_insert(r.seq);
                last = Some(r.seq);
            }
            Err(e) => journal_error = Some(e),
        }
    }
    writeln!(out, "segments: {segments} (archived ones included)")?;
    writeln!(out, "records: {}", reader.records_read())?;
    match (first, last) {
        (Some(f), Some(l)) => writeln!(out, "seq: {f}..={l}")?,
        _ => writeln!(out, "seq: none")?,
    }
    match reader.torn_tail() {
        Some(t) if live => writeln!(
            out,
            "torn tail: none counted ({} bytes being written at byte {} of {})",
            t.discarded_bytes,
            t.offset,
            t.path.display()
        )?,
        Some(t) => writeln!(
            out,
            "torn tail: {} at byte {} ({} bytes): {} (recovery truncates it)",
            t.path.display(),
            t.offset,
            t.discarded_bytes,
            t.problem
        )?,
        None => writeln!(out, "torn tail: none")?,
    }
    for loss in reader.accepted_losses() {
        let met = reader
            .gaps_passed()
            .iter()
            .any(|l| l.from == loss.from && l.to == loss.to);
        writeln!(
            out,
            "accepted loss: seqs {}..={} ({}){}",
            loss.from,
            loss.to,
            loss.note,
            if met {
                ""
            } else {
                " (not met by the journal read)"
            }
        )?;
    }
    for t in reader.torn_before_gaps() {
        writeln!(
            out,
            "torn tail before an accepted loss: {} at byte {} ({} bytes): {} (left in place)",
            t.path.display(),
            t.offset,
            t.discarded_bytes,
            t.problem
        )?;
    }
    if let Some(e) = journal_error {
        ok = false;
        writeln!(out, "CORRUPT journal: {e}")?;
    }
    let snapshots = list_snapshots(data_dir)?;
    writeln!(out, "snapshots: {}", snapshots.len())?;
    for (seq, path) in &snapshots {
        match load_snapshot(path, engine_config) {
            Ok((_, info)) => writeln!(
                out,
                "  seq {seq}: valid ({} bytes, {} compressed)",
                info.uncompressed_len, info.compressed_len
            )?,
            Err(e) => {
                ok = false;
                writeln!(out, "  seq {seq}: CORRUPT: {}", with_capacity_hint(e))?;
            }
        }
    }
    match recover_with(
        data_dir,
        engine_config,
        RecoverOptions {
            repair: false,
            ..RecoverOptions::default()
        },
    ) {
        Ok(r) => {
            let from = match r.snapshot_seq {
                Some(s) => format!("snapshot at seq {s}"),
                None => "no snapshot".to_owned(),
            };
            writeln!(
                out,
                "recovery: {from} + {} journal records -> seq {}",
                r.replayed, r.last_seq
            )?;
            writeln!(out, "state_hash: {}", r.engine.state_hash_hex())?;
        }
        Err(e @ JournalError::LostSuffix { .. }) => {
            ok = false;
            writeln!(out, "LOST: {e}")?;
            writeln!(
                out,
                "  the server refuses to start until the loss is accepted: `rialto serve \
                 --accept-journal-loss` records it in journal/accepted-losses and goes on after \
                 it (under --durability none a loss that only the snapshot shows is accepted \
                 without the flag)"
            )?;
        }
        Err(e) => {
            ok = false;
            writeln!(out, "recovery: FAILS: {}", with_capacity_hint(e))?;
        }
    }
    writeln!(out, "result: {}", if ok { "ok" } else { "CORRUPT" })?;
    Ok(ok)
}
