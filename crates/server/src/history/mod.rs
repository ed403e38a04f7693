//! Durable history: trades, candles, each user's fills and order events in SQLite
//! (`<data>/history.sqlite`), written by a thread of its own (docs/api.md, "Durable history").
//!
//! ```text
//! journal stage ──records──▶ market data thread (replica) ──Rows──▶ [bounded queue] ──▶ writer
//!                                                                                       │
//!                                   journal files (+ a snapshot at or before) ◀──gap────┘
//! ```
//!
//! The market data thread already replays every journaled command on its replica of the
//! engine; [`HistoryTap`] turns each command's result and events into [`rows::Rows`] there, and
//! hands them to the writer through a queue of [`HistorySettings::queue_batches`] runs: each
//! round's rows while the writer waits for work, runs of several rounds while it is busy.
//! It never waits: runs that find the queue full are kept up to
//! [`HistorySettings::pending_rows`] rows, handed over first once the queue has room, and past
//! that bound all dropped. The writer checks that
//! every batch starts at the seq after the last one it wrote; a gap (a dropped batch, or the
//! start-up, when the database is behind the journal after a crash, or missing) it fills
//! from the journal itself, replaying it from the newest snapshot at or before the gap on an
//! engine of its own ([`rebuild`]). The journal stays the single source of truth; the
//! database's `meta.last_seq` is written in the same transaction as the rows it covers.

pub mod db;
pub mod query;
pub mod rebuild;
pub mod rows;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use rialto_core::{Command, EngineConfig, OwnedEvent, Reason};
use rusqlite::Connection;
use serde::{Deserialize, Serialize};

pub use rows::{ID_PER_SEQ, Rows};

/// The history writer thread's nice value with `writer_priority = "low"` (0 is the other
/// threads').
const HISTORY_WRITER_NICE: i32 = 10;

/// How the history writer thread competes for the CPU with the threads that acknowledge
/// orders (`history.writer_priority`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WriterPriority {
    /// Linux's `SCHED_IDLE`: only CPU time no other thread wants. Under a load that keeps
    /// every core busy the database lags (and catches up from the journal after it).
    Idle,
    /// nice 10: about a tenth of a normal thread's share when both want the CPU.
    #[default]
    Low,
    /// The other threads' priority.
    Normal,
}

impl WriterPriority {
    /// Applies the priority to the calling thread; false if the system refused it.
    fn apply_to_this_thread(self) -> bool {
        match self {
            WriterPriority::Idle => crate::process::make_this_thread_idle_priority(),
            WriterPriority::Low => crate::process::lower_this_thread_priority(HISTORY_WRITER_NICE),
            WriterPriority::Normal => true,
        }
    }
}

/// The database's file name in the data directory.
pub const FILE_NAME: &str = "history.sqlite";

/// `[history]` in the configuration.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistorySettings {
    /// Keep trades, candles, fills and order events in `<data>/history.sqlite`. Off: the order
    /// history is the last 1,000 events per user in memory, trades and 1 m candles are the
    /// feed's recent ones, and `/fills` and `/ticker/24h` answer `history_off`.
    pub enabled: bool,
    /// Runs of rows the queue to the writer holds: a market data round's rows while the writer
    /// keeps up, up to 1,024 rows of several rounds while it is busy.
    pub queue_batches: usize,
    /// Rows the market data thread keeps while the queue is full; past this it drops them and
    /// the writer rebuilds them from the journal.
    pub pending_rows: usize,
    /// The writer's SQLite page cache, MiB. Every active user's newest rows sit on their own
    /// pages of each table and index, so a venue with many users needs far more than SQLite's
    /// default 2 MiB, or most inserts read a page back in.
    pub writer_cache_mib: usize,
    /// How the writer thread competes for the CPU (`idle`, `low`, `normal`).
    pub writer_priority: WriterPriority,
}

impl Default for HistorySettings {
    fn default() -> Self {
        HistorySettings {
            enabled: true,
            queue_batches: 128,
            pending_rows: 1_000_000,
            writer_cache_mib: 64,
            writer_priority: WriterPriority::Low,
        }
    }
}

impl HistorySettings {
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            (1..=1 << 20).contains(&self.queue_batches),
            "history.queue_batches must be from 1 to 1048576"
        );
        anyhow::ensure!(
            (1..=1 << 26).contains(&self.pending_rows),
            "history.pending_rows must be from 1 to 67108864"
        );
        anyhow::ensure!(
            (1..=1 << 16).contains(&self.writer_cache_mib),
            "history.writer_cache_mib must be from 1 to 65536"
        );
        Ok(())
    }
}

/// What the writer and the readers share.
pub struct Store {
    path: PathBuf,
    /// Read connections not in use.
    readers: Mutex<Vec<Connection>>,
    /// The last seq whose rows are all written.
    pub written_seq: AtomicU64,
    /// Batches the market data thread dropped (the writer rebuilt them from the journal).
    pub dropped_batches: AtomicU64,
    /// Commands replayed from the journal to fill gaps.
    pub rebuilt_commands: AtomicU64,
    /// The writer stopped on an error (logged): the history stays where it was.
    pub failed: AtomicBool,
    /// The last seq the engine applied, for readers that want the history as of now.
    venue_seq: std::sync::OnceLock<Arc<crate::pipeline::Shared>>,
}

/// Read connections kept open for reuse.
const IDLE_READERS: usize = 4;

impl Store {
    /// Readers of the database at `path` (for tools; the server makes its own in [`start`]).
    pub fn open_readers(path: &Path) -> Store {
        Store {
            path: path.to_path_buf(),
            readers: Mutex::new(Vec::new()),
            written_seq: AtomicU64::new(0),
            dropped_batches: AtomicU64::new(0),
            rebuilt_commands: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            venue_seq: std::sync::OnceLock::new(),
        }
    }

    /// Follows the engine's applied seq (see [`Self::seq_to_wait_for`]).
    pub fn follow(&self, shared: Arc<crate::pipeline::Shared>) {
        let _ = self.venue_seq.set(shared);
    }

    /// The seq a reader waits for so that the history includes every command the engine had
    /// applied when it asked (0 when not following, or when the writer stopped).
    pub fn seq_to_wait_for(&self) -> u64 {
        match self.venue_seq.get() {
            Some(_) if self.failed.load(Ordering::Relaxed) => 0,
            Some(shared) => shared.applied_seq.load(Ordering::Acquire),
            None => 0,
        }
    }

    /// Runs `f` on a read connection.
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> anyhow::Result<T> {
        let conn = self.readers.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match conn {
            Some(conn) => conn,
            None => db::open(&self.path)?,
        };
        let result = f(&conn);
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        if readers.len() < IDLE_READERS {
            readers.push(conn);
        }
        Ok(result?)
    }
}

/// Emptied batches the writer gives back for the tap to fill again, so that neither thread
/// allocates (and the kernel zeroes) fresh memory for every round; one whose buffers grew past
/// [`SPARE_MAX_ROWS`] rows is freed instead.
struct Spares(ArrayQueue<Rows>);

/// Spares kept: more than the queue holds, so that the runs a writer gives back after a
/// transaction are all kept for the tap to fill again.
const SPARES: usize = 256;
/// A spare whose buffers grew past this (a round of a rare size) is freed, not kept.
const SPARE_MAX_ROWS: usize = 2 * RUN_ROWS;

/// Rows in one run the tap hands over: the runs are this size, each reserved once and
/// recycled. A run that grew by doubling, or a fresh buffer for every round, would be copied
/// and its fresh pages zeroed by the kernel again and again, which cost the market data thread
/// more than deriving the rows did.
const RUN_ROWS: usize = 1 << 10;

impl Spares {
    fn new() -> Spares {
        Spares(ArrayQueue::new(SPARES))
    }

    fn take(&self) -> Rows {
        self.0.pop().unwrap_or_default()
    }

    fn give_back(&self, mut rows: Rows) {
        if rows.capacity() <= SPARE_MAX_ROWS {
            rows.clear();
            let _ = self.0.push(rows);
        }
    }
}

/// The market data thread's side: collects rows, hands them over without ever waiting.
pub struct HistoryTap {
    queue: Arc<ArrayQueue<Rows>>,
    spares: Arc<Spares>,
    /// This round's rows (its buffers stay with the tap).
    pending: Rows,
    /// Runs not handed over yet, oldest first, consecutive, each up to [`RUN_ROWS`] rows (one
    /// round's rows may be more): the last one is being filled.
    waiting: VecDeque<Rows>,
    /// Rows in `waiting`.
    waiting_rows: usize,
    /// `history.pending_rows`: past this many rows waiting, they are dropped.
    pending_rows: usize,
    writer: Thread,
    store: Arc<Store>,
    closed: Arc<AtomicBool>,
}

impl HistoryTap {
    /// Adds one replayed command.
    pub fn record(
        &mut self,
        seq: u64,
        ts_ns: i64,
        cmd: &Command,
        result: Result<(), Reason>,
        events: &[OwnedEvent],
    ) {
        self.pending.add(seq, ts_ns, cmd, result, events);
    }

    /// Hands what was recorded to the writer (at the end of every round, one that replayed
    /// nothing too). The round's rows join the last run waiting (or start one). A run goes into
    /// the queue once a later one has started, or as soon as the queue is empty (the writer
    /// waits for work): so a writer that keeps up gets every round at once, and a busy one
    /// full runs. What the queue has no room for waits, in order, up to `pending_rows` rows;
    /// past that everything waiting is dropped, and the writer, seeing the gap, fills it from
    /// the journal.
    pub fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.keep_round();
        }
        let mut handed = false;
        while self.waiting.len() > 1 || (self.queue.is_empty() && !self.waiting.is_empty()) {
            let run = self.waiting.pop_front().expect("just looked");
            let rows = run.row_count();
            match self.queue.push(run) {
                Ok(()) => {
                    self.waiting_rows -= rows;
                    handed = true;
                }
                Err(run) => {
                    self.waiting.push_front(run);
                    break;
                }
            }
        }
        if self.waiting_rows >= self.pending_rows {
            // The writer sees the gap and replays it from the journal.
            for run in self.waiting.drain(..) {
                self.spares.give_back(run);
            }
            self.waiting_rows = 0;
            self.store.dropped_batches.fetch_add(1, Ordering::Relaxed);
            handed = true;
        }
        if handed {
            self.writer.unpark();
        }
    }

    /// Moves this round's rows to the end of the last run waiting, or of a new one.
    fn keep_round(&mut self) {
        let rows = self.pending.row_count();
        let joined = match self.waiting.back_mut() {
            Some(last) if last.row_count() + rows <= RUN_ROWS => last.take_from(&mut self.pending),
            _ => false,
        };
        if !joined {
            let mut run = self.spares.take();
            run.reserve(RUN_ROWS, RUN_ROWS / 4);
            let moved = run.take_from(&mut self.pending);
            debug_assert!(moved, "an empty run takes any rows");
            self.waiting.push_back(run);
        }
        if self.pending.capacity() > SPARE_MAX_ROWS {
            // A round of a rare size (a mass cancel of many orders): not kept for every round.
            self.pending = Rows::default();
        }
        self.waiting_rows += rows;
    }
}

impl Drop for HistoryTap {
    fn drop(&mut self) {
        // The market data thread is done: what is left goes, waiting for room if need be (it
        // no longer holds anything up).
        let round = std::mem::take(&mut self.pending);
        if !round.is_empty() {
            self.waiting.push_back(round);
        }
        while let Some(run) = self.waiting.pop_front() {
            match self.queue.push(run) {
                Ok(()) => {}
                Err(_) if self.store.failed.load(Ordering::Relaxed) => break,
                Err(back) => {
                    self.waiting.push_front(back);
                    self.writer.unpark();
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        self.closed.store(true, Ordering::Release);
        self.writer.unpark();
    }
}

/// The running history: the tap for the market data thread, the store for readers, the
/// writer thread to join.
pub struct History {
    pub store: Arc<Store>,
    pub tap: HistoryTap,
    pub writer: JoinHandle<()>,
}

/// Opens `<data_dir>/history.sqlite` and starts its writer, which first brings it to
/// `venue_seq` (the seq the venue recovered to) from the journal.
pub fn start(
    settings: &HistorySettings,
    data_dir: &Path,
    engine_config: EngineConfig,
    venue_seq: u64,
) -> anyhow::Result<History> {
    let path = data_dir.join(FILE_NAME);
    let mut conn = match db::open_writer(&path, settings.writer_cache_mib) {
        Ok(conn) => conn,
        Err(e) => {
            // A cache of the journal: a file that cannot be used is put aside and rebuilt.
            let aside = data_dir.join(format!(
                "{FILE_NAME}.unusable-{}",
                crate::pipeline::now_ns()
            ));
            tracing::warn!(
                "the history database {} cannot be used ({e:#}): moved to {}, rebuilding it \
                 from the journal",
                path.display(),
                aside.display()
            );
            std::fs::rename(&path, &aside)?;
            for suffix in ["-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            db::open_writer(&path, settings.writer_cache_mib).map_err(|e| {
                anyhow::anyhow!("cannot open the history database {}: {e:#}", path.display())
            })?
        }
    };
    let mut written = db::last_seq(&conn)?;
    if written > venue_seq {
        // The journal ends before what the database holds (an accepted loss): the journal is
        // the truth, so the history is rebuilt from it.
        tracing::warn!(
            written,
            venue_seq,
            "the history database is ahead of the journal: rebuilding it"
        );
        db::clear(&mut conn)?;
        written = 0;
    }
    let store = Arc::new(Store::open_readers(&path));
    store.written_seq.store(written, Ordering::Release);
    let queue = Arc::new(ArrayQueue::new(settings.queue_batches));
    let spares = Arc::new(Spares::new());
    let closed = Arc::new(AtomicBool::new(false));
    let mut writer = Writer {
        conn,
        store: store.clone(),
        queue: queue.clone(),
        spares: spares.clone(),
        closed: closed.clone(),
        data_dir: data_dir.to_path_buf(),
        engine_config,
    };
    let priority = settings.writer_priority;
    let handle = std::thread::Builder::new()
        .name("rialto-history".into())
        .spawn(move || {
            // Behind the threads that acknowledge orders: the database may lag a burst and
            // catch up after it (the tap holds what waits, docs/api.md).
            if !priority.apply_to_this_thread() {
                tracing::warn!(?priority, "the history writer runs at normal priority");
            }
            if let Err(e) = writer.run(venue_seq) {
                writer.store.failed.store(true, Ordering::Relaxed);
                tracing::error!("history writer stopped: {e:#}");
                // Keep taking batches so that the tap never waits on a stopped writer.
                while !writer.closed.load(Ordering::Acquire) || !writer.queue.is_empty() {
                    while writer.queue.pop().is_some() {}
                    std::thread::park_timeout(Duration::from_millis(10));
                }
            }
        })?;
    let tap = HistoryTap {
        queue,
        spares,
        pending: Rows::default(),
        waiting: VecDeque::new(),
        waiting_rows: 0,
        pending_rows: settings.pending_rows,
        writer: handle.thread().clone(),
        store: store.clone(),
        closed,
    };
    Ok(History {
        store,
        tap,
        writer: handle,
    })
}

/// Rows the writer gathers from the queue into one transaction, at most (about).
const ROWS_PER_TRANSACTION: usize = 100_000;

struct Writer {
    conn: Connection,
    store: Arc<Store>,
    queue: Arc<ArrayQueue<Rows>>,
    spares: Arc<Spares>,
    closed: Arc<AtomicBool>,
    data_dir: PathBuf,
    engine_config: EngineConfig,
}

impl Writer {
    fn written(&self) -> u64 {
        self.store.written_seq.load(Ordering::Acquire)
    }

    fn run(&mut self, venue_seq: u64) -> anyhow::Result<()> {
        if self.written() < venue_seq {
            let from = self.written();
            self.fill_gap(venue_seq)?;
            tracing::info!(from, to = venue_seq, "history rebuilt from the journal");
        }
        let mut runs = Vec::new();
        loop {
            match self.queue.pop() {
                Some(rows) => {
                    // What queued up meanwhile goes in the same transaction, up to a bound.
                    let mut count = rows.row_count();
                    runs.push(rows);
                    while count < ROWS_PER_TRANSACTION
                        && let Some(next) = self.queue.pop()
                    {
                        count += next.row_count();
                        runs.push(next);
                    }
                    self.write(&mut runs)?;
                }
                None if self.closed.load(Ordering::Acquire) && self.queue.is_empty() => {
                    return Ok(());
                }
                None => std::thread::park_timeout(Duration::from_millis(50)),
            }
        }
    }

    /// Writes `runs` (in seq order) in one transaction, filling any gap before one of them
    /// from the journal first; gives their buffers back and leaves `runs` empty.
    fn write(&mut self, runs: &mut Vec<Rows>) -> anyhow::Result<()> {
        let mut through = self.written();
        let mut ready = 0;
        let mut i = 0;
        while i < runs.len() {
            let (first, last) = (runs[i].first_seq, runs[i].last_seq);
            if last <= through {
                // Already written (a gap filled from the journal went past it).
                self.spares.give_back(runs.remove(i));
                continue;
            }
            if first > through + 1 {
                self.commit(&mut runs[..i], ready)?;
                ready = i;
                self.fill_gap(first - 1)?;
                through = self.written();
            }
            if first <= through {
                anyhow::bail!(
                    "a history batch from seq {first} overlaps what is written (through {through})"
                );
            }
            let rows = &mut runs[i];
            if rows.left_out > 0 {
                tracing::error!(
                    left_out = rows.left_out,
                    "a command had more than {} trades or events: the rest are not in the history",
                    ID_PER_SEQ - 1
                );
                rows.left_out = 0;
            }
            through = last;
            i += 1;
        }
        self.commit(runs, ready)?;
        for rows in runs.drain(..) {
            self.spares.give_back(rows);
        }
        Ok(())
    }

    /// Writes `runs[from..]` in one transaction (nothing if that is empty).
    fn commit(&mut self, runs: &mut [Rows], from: usize) -> anyhow::Result<()> {
        let Some(last) = runs.get(from..).and_then(|r| r.last()) else {
            return Ok(());
        };
        let last_seq = last.last_seq;
        db::write_runs(&mut self.conn, &runs[from..])?;
        self.store.written_seq.store(last_seq, Ordering::Release);
        Ok(())
    }

    /// Writes the history of `written + 1 ..= through` from the journal. The records may
    /// not be in the journal's files yet (under `durability = "none"` they wait in the
    /// writer's buffer): it waits for them, and meanwhile the queue fills and the tap drops,
    /// which later gaps fill the same way.
    fn fill_gap(&mut self, through: u64) -> anyhow::Result<()> {
        let mut waited = Duration::ZERO;
        while self.written() < through {
            let after = self.written();
            let store = self.store.clone();
            let conn = &mut self.conn;
            let reached =
                rebuild::replay(&self.data_dir, self.engine_config, after, through, |rows| {
                    db::write(conn, rows)?;
                    store.written_seq.store(rows.last_seq, Ordering::Release);
                    store
                        .rebuilt_commands
                        .fetch_add(rows.last_seq - rows.first_seq + 1, Ordering::Relaxed);
                    Ok(())
                })?;
            if reached < through {
                if waited >= Duration::from_secs(60) && self.closed.load(Ordering::Acquire) {
                    anyhow::bail!(
                        "the journal ends at seq {reached}, before seq {through} that market \
                         data replayed"
                    );
                }
                // Each try replays from a snapshot: back off.
                let pause = Duration::from_millis(20)
                    .max(waited / 4)
                    .min(Duration::from_secs(1));
                std::thread::sleep(pause);
                waited += pause;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rialto_core::{Engine, PlaceOrder, Side, SymbolId};
    use rialto_journal::{JournalConfig, JournalWriter};

    /// A journal of the demo set-up and `trades` crossing pairs; returns each command's rows.
    fn journal(dir: &Path, trades: i64) -> Vec<Rows> {
        let mut journal = JournalWriter::open(dir, JournalConfig::default(), 1).unwrap();
        let mut engine = Engine::new(EngineConfig::default());
        let mut commands = crate::demo::demo_commands();
        for i in 0..trades {
            let (sym, price) = (SymbolId(0), 500_000 + i);
            commands.push(Command::Place(PlaceOrder::limit(
                1,
                100 + i,
                sym,
                Side::Sell,
                price,
                1,
            )));
            commands.push(Command::Place(PlaceOrder::limit(
                2,
                100 + i,
                sym,
                Side::Buy,
                price,
                1,
            )));
        }
        let mut all = Vec::new();
        for (i, cmd) in commands.iter().enumerate() {
            let (seq, ts_ns) = (i as u64 + 1, 1_000_000_000 * (i as i64 + 1));
            journal.append(seq, ts_ns, cmd);
            let mut events = Vec::new();
            let result = engine.apply(seq, ts_ns, cmd, &mut events);
            let mut rows = Rows::default();
            rows.add(seq, ts_ns, cmd, result, &events);
            all.push(rows);
        }
        journal.commit().unwrap();
        journal.sync().unwrap();
        all
    }

    fn settings(queue_batches: usize, pending_rows: usize) -> HistorySettings {
        HistorySettings {
            queue_batches,
            pending_rows,
            ..HistorySettings::default()
        }
    }

    fn trade_count(store: &Store) -> i64 {
        store
            .read(|c| c.query_row("SELECT count(*) FROM trades", [], |r| r.get(0)))
            .unwrap()
    }

    fn tap(queue_batches: usize, pending_rows: usize, store: &Arc<Store>) -> HistoryTap {
        HistoryTap {
            queue: Arc::new(ArrayQueue::new(queue_batches)),
            spares: Arc::new(Spares::new()),
            pending: Rows::default(),
            waiting: VecDeque::new(),
            waiting_rows: 0,
            pending_rows,
            writer: std::thread::current(),
            store: store.clone(),
            closed: Arc::new(AtomicBool::new(false)),
        }
    }

    #[test]
    fn a_full_queue_keeps_rows_then_drops_them_and_never_waits() {
        let dir = tempfile::tempdir().unwrap();
        let rows = journal(dir.path(), 3);
        let store = Arc::new(Store::open_readers(&dir.path().join(FILE_NAME)));
        let mut tap = tap(1, 3, &store);
        let mut batches = rows.into_iter();
        tap.pending = batches.next().unwrap();
        tap.flush();
        assert!(
            tap.pending.is_empty() && tap.waiting.is_empty(),
            "the first batch is queued"
        );
        // Nobody takes from the queue: the next rows wait in the tap, then are dropped.
        let trade = batches.by_ref().find(|r| !r.trades.is_empty()).unwrap();
        tap.pending = trade;
        tap.flush();
        assert!(tap.pending.is_empty());
        assert_eq!(tap.waiting_rows, 2, "kept while under pending_rows");
        assert_eq!(store.dropped_batches.load(Ordering::Relaxed), 0);
        tap.pending = batches.next().unwrap();
        tap.flush();
        assert!(tap.waiting.is_empty());
        assert_eq!(tap.waiting_rows, 0);
        assert_eq!(store.dropped_batches.load(Ordering::Relaxed), 1);
        tap.queue.pop();
        drop(tap);
    }

    #[test]
    fn rows_kept_while_the_queue_is_full_reach_it_in_order_once_it_has_room() {
        let dir = tempfile::tempdir().unwrap();
        let rows = journal(dir.path(), 20);
        let (first, last) = (rows[0].first_seq, rows.last().unwrap().last_seq);
        let store = Arc::new(Store::open_readers(&dir.path().join(FILE_NAME)));
        let mut tap = tap(2, 1_000, &store);
        let mut taken = Vec::new();
        for (i, round) in rows.into_iter().enumerate() {
            tap.pending = round;
            tap.flush();
            // The writer takes a batch now and then, slower than the rounds come.
            if i % 7 == 6 {
                taken.extend(tap.queue.pop());
            }
        }
        assert!(!tap.waiting.is_empty(), "some rows waited");
        // At the end the tap hands over what waits, waiting for room (the writer takes it).
        let queue = tap.queue.clone();
        let closing = std::thread::spawn(move || drop(tap));
        while !closing.is_finished() || !queue.is_empty() {
            match queue.pop() {
                Some(run) => taken.push(run),
                None => std::thread::yield_now(),
            }
        }
        let mut expected = first;
        for run in &taken {
            assert_eq!(run.first_seq, expected, "runs arrive consecutive, in order");
            expected = run.last_seq + 1;
        }
        assert_eq!(expected, last + 1, "every command arrived");
        let trades: usize = taken.iter().map(|r| r.trades.len()).sum();
        assert_eq!(trades, 20);
        assert_eq!(store.dropped_batches.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_writer_fills_a_gap_before_a_batch_from_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let rows = journal(dir.path(), 4);
        let last = rows.last().unwrap().last_seq;
        let history = start(&settings(4, 10), dir.path(), EngineConfig::default(), 0).unwrap();
        // Only the last command's rows arrive: everything before is a gap.
        history
            .tap
            .queue
            .push(rows.last().unwrap().clone())
            .unwrap();
        let store = history.store.clone();
        drop(history.tap);
        history.writer.join().unwrap();
        assert_eq!(store.written_seq.load(Ordering::Acquire), last);
        assert!(store.rebuilt_commands.load(Ordering::Relaxed) >= last - 1);
        assert_eq!(trade_count(&store), 4);
    }

    /// The scheduling policies (Linux's `/proc/.../stat` field 41) of this process's threads
    /// named `name` (other tests may run writers of their own meanwhile).
    #[cfg(target_os = "linux")]
    fn policies_of_threads(name: &str) -> Vec<u32> {
        let policy = |path: &std::path::Path| -> Option<u32> {
            let comm = std::fs::read_to_string(path.join("comm")).ok()?;
            if comm.trim_end() != name {
                return None;
            }
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            // Fields after the command name, which ends at the last ')': state is field 3.
            let rest = &stat[stat.rfind(')')? + 2..];
            rest.split(' ').nth(41 - 3)?.parse().ok()
        };
        std::fs::read_dir("/proc/self/task")
            .map(|tasks| tasks.flatten().filter_map(|t| policy(&t.path())).collect())
            .unwrap_or_default()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_writer_runs_in_the_priority_the_settings_ask() {
        const SCHED_OTHER: u32 = 0;
        const SCHED_IDLE: u32 = 5;
        let dir = tempfile::tempdir().unwrap();
        for (priority, policy) in [
            (WriterPriority::Idle, SCHED_IDLE),
            (WriterPriority::Normal, SCHED_OTHER),
        ] {
            let settings = HistorySettings {
                writer_priority: priority,
                ..HistorySettings::default()
            };
            let history = start(&settings, dir.path(), EngineConfig::default(), 0).unwrap();
            // The writer sets its priority first thing; its first batch is after that.
            history.tap.queue.push(Rows::default()).unwrap();
            let store = history.store.clone();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let seen = loop {
                let seen = policies_of_threads("rialto-history");
                if seen.contains(&policy) || std::time::Instant::now() > deadline {
                    break seen;
                }
                std::thread::yield_now();
            };
            assert!(seen.contains(&policy), "{priority:?}: {seen:?}");
            drop(history.tap);
            history.writer.join().unwrap();
            assert!(!store.failed.load(Ordering::Relaxed));
        }
    }
}
