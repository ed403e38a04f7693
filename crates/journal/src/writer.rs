//! The journal writer: `append` encodes into a batch buffer, `commit` writes the batch with one
//! `write` and makes it as durable as the [`Durability`] mode says (group commit).
//!
//! The writer belongs to one thread (the journal agent). After a failed write or sync it is
//! poisoned: every later call fails, because after a failed fsync the kernel may have dropped
//! the dirty pages and a retry could report success for data that is gone.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rialto_core::Command;

use crate::error::{JournalError, Result};
use crate::format::{
    Checkpoint, RECORD_MAX_BYTES, RecordProblem, SEGMENT_HEADER_LEN, SegmentEnd, SegmentHeader,
    checkpoint_slot, create_dir_durable, encode_checkpoint, encode_record_unsealed,
    encode_segment_header, fsync_dir, journal_dir, judge_bad_record, list_segments, parse_record,
    parse_segment_header, read_checkpoint, seal_records, segment_name,
};

/// How durable a committed batch is before `commit` returns (docs/journal-format.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `fdatasync` at every commit: a committed batch survives a process crash and a power loss.
    #[default]
    Fsync,
    /// Written to the OS at every commit (survives a process crash); a background thread
    /// `fdatasync`s every `interval_us` (and [`JournalWriter::sync_if_due`] can force it when
    /// due), so a power loss loses at most about that much acknowledged work, and the writing
    /// thread never waits for the disk.
    Batch { interval_us: u64 },
    /// Kept in the writer's buffer until it holds [`JournalConfig::buffer_bytes`], then written;
    /// synced only by [`JournalWriter::sync`] and at segment roll. UNSAFE: a process crash
    /// loses acknowledged commands. For tests and benchmarks.
    None,
}

impl Durability {
    pub const DEFAULT_BATCH_INTERVAL_US: u64 = 1000;
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Durability::Fsync => f.write_str("fsync"),
            Durability::Batch { interval_us } => write!(f, "batch:{interval_us}"),
            Durability::None => f.write_str("none"),
        }
    }
}

impl FromStr for Durability {
    type Err = String;

    /// `fsync`, `batch` (interval 1000 µs), `batch:<interval_us>`, or `none`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "fsync" => Ok(Durability::Fsync),
            "batch" => Ok(Durability::Batch {
                interval_us: Self::DEFAULT_BATCH_INTERVAL_US,
            }),
            "none" => Ok(Durability::None),
            _ => match s.strip_prefix("batch:").map(str::parse::<u64>) {
                Some(Ok(interval_us)) => Ok(Durability::Batch { interval_us }),
                _ => Err(format!(
                    "unknown durability {s:?} (expected fsync, batch, batch:<interval_us> or none)"
                )),
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalConfig {
    /// A segment is closed and a new one started before a record would take it past this size
    /// (a segment always holds at least one record).
    pub segment_bytes: u64,
    pub durability: Durability,
    /// Capacity of the batch buffer, allocated at open. `append` grows it if a batch is larger
    /// (an allocation, not an error); in `none` mode a commit writes once it holds this much.
    pub buffer_bytes: usize,
}

impl JournalConfig {
    pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;
    pub const DEFAULT_BUFFER_BYTES: usize = 1 << 20;
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            segment_bytes: Self::DEFAULT_SEGMENT_BYTES,
            durability: Durability::default(),
            buffer_bytes: Self::DEFAULT_BUFFER_BYTES,
        }
    }
}

/// What a commit (or sync) made safe. Every seq up to `ack_through` may be acknowledged under
/// the writer's durability mode; the other two say what that rests on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Durable {
    /// Highest seq the caller may acknowledge as the mode promises (0: none yet).
    pub ack_through: u64,
    /// Highest seq handed to the OS: survives a crash of this process.
    pub written_through: u64,
    /// Highest seq `fdatasync`ed: survives a power loss.
    pub synced_through: u64,
}

/// The highest seq of the journal that is `fdatasync`ed, as it advances
/// ([`JournalWriter::synced_progress`]).
#[derive(Clone, Debug)]
pub struct SyncedProgress(Arc<AtomicU64>);

impl SyncedProgress {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// Told how long each `fdatasync` of the journal took, on whichever thread ran it (the
/// writer's in `fsync` mode and at a roll, the background thread's in `batch` mode).
pub type SyncObserver = Arc<dyn Fn(Duration) + Send + Sync>;

/// Where the writer and its background thread find the observer, once one is set.
type SyncObserverSlot = Arc<OnceLock<SyncObserver>>;

/// Runs one `fdatasync` and tells the observer how long it took.
fn timed_sync(file: &File, observer: &OnceLock<SyncObserver>) -> io::Result<()> {
    let started = Instant::now();
    let result = file.sync_data();
    if let Some(observe) = observer.get() {
        observe(started.elapsed());
    }
    result
}

/// How long the journal must be quiet, in `fsync` mode, before [`JournalWriter::sync_if_due`]
/// brings the checkpoint up to the last commit (one more `fdatasync`, only when idle).
pub const CHECKPOINT_WHEN_IDLE: Duration = Duration::from_millis(10);

/// What syncing works on: the current segment and its checkpoint slots. Shared with batch
/// mode's background thread, and swapped at each roll under the lock, so a sync never
/// checkpoints one segment with another's seqs.
struct SyncTarget {
    file: File,
    first_seq: u64,
    /// Records up to this seq are in `file` or an earlier segment: what a sync now covers.
    /// Set by the writer after each write without taking the lock (in batch mode the
    /// background thread holds it while it syncs, and the writer must not wait for that).
    written_through: Arc<AtomicU64>,
    /// The checkpoint last written to the segment (`count` 0: none yet).
    checkpoint: Checkpoint,
}

impl SyncTarget {
    fn new(
        file: File,
        first_seq: u64,
        written_through: Arc<AtomicU64>,
        written: Option<Checkpoint>,
    ) -> SyncTarget {
        SyncTarget {
            file,
            first_seq,
            written_through,
            checkpoint: written.unwrap_or(Checkpoint {
                durable_through: first_seq - 1,
                count: 0,
                sealed: false,
            }),
        }
    }

    /// `fdatasync`s the segment, with a checkpoint claiming `durable_through` written just
    /// before if that claims more than the last one. `durable_through` must already be on disk
    /// (an earlier sync returned): a power loss during this sync may persist the checkpoint
    /// and not the records written since, and the checkpoint then claims nothing that is not
    /// there. So the checkpoint lags one sync behind; [`CHECKPOINT_WHEN_IDLE`] and the
    /// background thread's idle syncs catch it up.
    fn sync(&mut self, durable_through: u64, observer: &OnceLock<SyncObserver>) -> io::Result<()> {
        if durable_through > self.checkpoint.durable_through {
            self.write_checkpoint(durable_through, false)?;
        }
        timed_sync(&self.file, observer)?;
        sync_log::synced(self);
        Ok(())
    }

    /// Writes the next checkpoint into the slot the previous one is not in. A power loss
    /// during the write can damage only this slot; the other keeps the previous checkpoint.
    fn write_checkpoint(&mut self, durable_through: u64, sealed: bool) -> io::Result<()> {
        debug_assert!(durable_through >= self.checkpoint.durable_through);
        let next = Checkpoint {
            durable_through,
            count: self.checkpoint.count + 1,
            sealed,
        };
        std::os::unix::fs::FileExt::write_all_at(
            &self.file,
            &encode_checkpoint(self.first_seq, &next),
            checkpoint_slot(next.count) as u64,
        )?;
        self.checkpoint = next;
        Ok(())
    }
}

/// For the crash test's power-loss model (crates/cli/tests/crash.rs): with
/// `RIALTO_JOURNAL_SYNC_LOG=<file>` in the environment, a line is appended to that file after
/// every `fdatasync` of a segment, saying what it made durable: `<segment file> <records
/// synced through seq> <checkpoint count> <checkpoint durable_through> <sealed 0/1>`. The
/// model then drops or tears what no sync covered. Unset (always, outside that test): nothing.
mod sync_log {
    use std::fs::{File, OpenOptions};
    use std::io::Write;
    use std::sync::{Mutex, OnceLock};

    use super::SyncTarget;
    use crate::format::segment_name;

    static LOG: OnceLock<Option<Mutex<File>>> = OnceLock::new();

    pub(super) fn synced(target: &SyncTarget) {
        let log = LOG.get_or_init(|| {
            let path = std::env::var_os("RIALTO_JOURNAL_SYNC_LOG")?;
            let file = OpenOptions::new().create(true).append(true).open(path);
            Some(Mutex::new(
                file.expect("RIALTO_JOURNAL_SYNC_LOG names a writable file"),
            ))
        });
        if let Some(log) = log {
            let c = &target.checkpoint;
            let line = format!(
                "{} {} {} {} {}\n",
                segment_name(target.first_seq),
                target
                    .written_through
                    .load(std::sync::atomic::Ordering::Acquire),
                c.count,
                c.durable_through,
                u8::from(c.sealed)
            );
            let mut file = log.lock().unwrap_or_else(|e| e.into_inner());
            file.write_all(line.as_bytes())
                .expect("the sync log takes a line");
        }
    }
}

type SharedTarget = Arc<Mutex<SyncTarget>>;

fn lock(target: &SharedTarget) -> std::sync::MutexGuard<'_, SyncTarget> {
    target.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct JournalWriter {
    dir: PathBuf,
    config: JournalConfig,
    /// The current segment, for writing records (`pwrite` at `file_len`).
    file: File,
    /// The current segment, for syncing and checkpoints.
    target: SharedTarget,
    /// `written_through`, as the syncing side reads it.
    shared_written_through: Arc<AtomicU64>,
    /// The highest seq synced, for other threads ([`JournalWriter::synced_progress`]); batch
    /// mode's background thread advances it too.
    synced_progress: Arc<AtomicU64>,
    path: PathBuf,
    /// Bytes in the current segment file.
    file_len: u64,
    /// Encoded records not yet written, in `buf[..buf_len]`. `buf` is zeroed once at open and
    /// its whole length is usable: records are written over old ones, never appended to a `Vec`
    /// (no length checks per field). Their CRCs are filled in a batch at a time, just before
    /// the write or when [`JournalWriter::uncommitted`] hands them out: `buf[..sealed]` has them.
    buf: Vec<u8>,
    buf_len: usize,
    sealed: usize,
    /// Where in `buf` the records appended since the last commit begin.
    uncommitted_from: usize,
    /// Offsets in `buf` where a new segment starts, with that segment's first seq.
    rolls: Vec<(usize, u64)>,
    /// Segment size and record count as they will be once `buf` is written.
    projected_len: u64,
    projected_records: u64,
    next_seq: u64,
    written_through: u64,
    synced_through: u64,
    last_sync: Instant,
    poisoned: bool,
    /// Batch mode's periodic fsyncs, off the journal thread.
    background: Option<BackgroundSync>,
    /// In `fsync` and `batch` mode the current segment file is sized to the full segment at
    /// once and records are written in place, so a commit never grows the file: growing it
    /// dirties the inode, which waits for the filesystem's journal commit that an fsync
    /// starts (measured: docs/benchmarks-history.md), and makes every fdatasync commit metadata
    /// too. The zeros past the last record are cut off at roll and on drop, and read as a torn
    /// tail after a crash.
    preallocated: bool,
    sync_observer: SyncObserverSlot,
}

/// Opens a segment to write to with `pwrite` (not `O_APPEND`: on Linux `pwrite` to an
/// `O_APPEND` file appends, and checkpoints are written in place). Preallocated: sized to
/// `len` at once.
fn open_segment(path: &Path, preallocated: bool, len: u64) -> io::Result<File> {
    let file = OpenOptions::new().write(true).open(path)?;
    if preallocated && file.metadata()?.len() < len {
        file.set_len(len)?;
    }
    Ok(file)
}

/// In batch mode a thread of its own fsyncs the journal every interval, so that the thread
/// that writes (and acknowledges) never waits for the disk. It syncs the shared
/// [`SyncTarget`], swapped at each roll (the old segment is synced by the roll itself), and
/// syncs once more when idle to bring the checkpoint up to date.
struct BackgroundSync {
    shared: Arc<SyncShared>,
    thread: Option<JoinHandle<()>>,
}

struct SyncShared {
    target: SharedTarget,
    synced_through: Arc<AtomicU64>,
    stop: AtomicBool,
    error: Mutex<Option<String>>,
    sync_observer: SyncObserverSlot,
}

impl BackgroundSync {
    fn start(
        target: SharedTarget,
        interval_us: u64,
        synced_through: Arc<AtomicU64>,
        sync_observer: SyncObserverSlot,
    ) -> io::Result<BackgroundSync> {
        let shared = Arc::new(SyncShared {
            target,
            synced_through,
            stop: AtomicBool::new(false),
            error: Mutex::new(None),
            sync_observer,
        });
        let worker = shared.clone();
        let interval = Duration::from_micros(interval_us.max(1));
        let thread = std::thread::Builder::new()
            .name("rialto-journal-sync".into())
            .spawn(move || {
                while !worker.stop.load(Ordering::Acquire) {
                    std::thread::park_timeout(interval);
                    // Read the written mark under the lock: a roll swaps the file under it, so
                    // the mark never covers records in a file other than the one synced.
                    let mut target = lock(&worker.target);
                    let written = target.written_through.load(Ordering::Acquire);
                    let synced = worker.synced_through.load(Ordering::Acquire);
                    if written > synced || target.checkpoint.durable_through < synced {
                        if let Err(e) = target.sync(synced, &worker.sync_observer) {
                            *worker.error.lock().unwrap_or_else(|e| e.into_inner()) =
                                Some(e.to_string());
                            return;
                        }
                        worker.synced_through.fetch_max(written, Ordering::AcqRel);
                    }
                }
            })?;
        Ok(BackgroundSync {
            shared,
            thread: Some(thread),
        })
    }

    fn failure(&self) -> Option<io::Error> {
        let error = self.shared.error.lock().unwrap_or_else(|e| e.into_inner());
        error
            .as_ref()
            .map(|e| io::Error::other(format!("background journal fsync failed: {e}")))
    }
}

impl Drop for BackgroundSync {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl JournalWriter {
    /// Opens `<data>/journal` to append from `next_seq`: continues the last segment if there is
    /// one (truncating a torn tail, refusing corruption or a seq that does not follow), or
    /// starts `segment-<next_seq>.log`. Normally called after [`crate::recover`], with
    /// `next_seq = recovered.last_seq + 1`. When the last segment ends just before an accepted
    /// loss that ends at `next_seq - 1`, it is left as it is (torn tail included: it is the
    /// evidence of the loss) and `segment-<next_seq>.log` is started beside it.
    pub fn open(data_dir: &Path, config: JournalConfig, next_seq: u64) -> Result<JournalWriter> {
        assert!(next_seq >= 1, "seqs start at 1");
        assert!(config.segment_bytes > 0 && config.buffer_bytes > 0);
        let dir = journal_dir(data_dir);
        create_dir_durable(&dir).map_err(|e| JournalError::io(&dir, e))?;
        remove_temp_files(&dir)?;
        let segments = list_segments(&dir).map_err(|e| JournalError::io(&dir, e))?;
        let new_segment = || -> Result<LastSegment> {
            let path = create_segment(&dir, next_seq).map_err(|e| JournalError::io(&dir, e))?;
            Ok(LastSegment::empty(path, next_seq))
        };
        let last = match segments.last() {
            Some((_, path)) if ends_before_an_accepted_loss(data_dir, path, next_seq)? => {
                new_segment()?
            }
            Some((_, path)) => {
                let last = check_last_segment(path)?;
                if last.last_seq + 1 != next_seq {
                    return Err(JournalError::SeqMismatch {
                        path: path.clone(),
                        last: last.last_seq,
                        next: next_seq,
                    });
                }
                if let Some(c) = last.checkpoint.filter(|c| c.sealed) {
                    return Err(JournalError::MissingSegment {
                        path: path.clone(),
                        sealed_at: c.durable_through,
                    });
                }
                if !last.header.has_checkpoints() {
                    // Written before checkpoints (version 1): left as it is, and the journal
                    // goes on in a version 2 segment (one that replaces it, if it is empty).
                    new_segment()?
                } else {
                    if last.records == 0
                        && let [.., (_, previous), _] = segments.as_slice()
                    {
                        seal_after_an_interrupted_roll(previous, next_seq)?;
                    }
                    last
                }
            }
            None => new_segment()?,
        };
        let preallocated = matches!(
            config.durability,
            Durability::Batch { .. } | Durability::Fsync
        );
        let full = config.segment_bytes + RECORD_MAX_BYTES as u64;
        let path = last.path;
        let io_error = |e| JournalError::io(&path, e);
        let file = open_segment(&path, preallocated, full).map_err(io_error)?;
        let written_through = Arc::new(AtomicU64::new(next_seq - 1));
        let synced_progress = Arc::new(AtomicU64::new(next_seq - 1));
        let target = Arc::new(Mutex::new(SyncTarget::new(
            file.try_clone().map_err(io_error)?,
            last.header.first_seq,
            written_through.clone(),
            last.checkpoint,
        )));
        let sync_observer = SyncObserverSlot::default();
        let background = match config.durability {
            Durability::Batch { interval_us } => Some(
                BackgroundSync::start(
                    target.clone(),
                    interval_us,
                    synced_progress.clone(),
                    sync_observer.clone(),
                )
                .map_err(io_error)?,
            ),
            _ => None,
        };
        let (file_len, file_records) = (last.len, last.records);
        Ok(JournalWriter {
            dir,
            config,
            file,
            target,
            shared_written_through: written_through,
            synced_progress,
            path,
            file_len,
            // Room for a record past `buffer_bytes`: in `none` mode a commit writes once that
            // much is buffered, so a commit per append never grows the buffer.
            buf: vec![0; config.buffer_bytes + RECORD_MAX_BYTES],
            buf_len: 0,
            sealed: 0,
            uncommitted_from: 0,
            rolls: Vec::with_capacity(4),
            projected_len: file_len,
            projected_records: file_records,
            next_seq,
            written_through: next_seq - 1,
            synced_through: next_seq - 1,
            last_sync: Instant::now(),
            poisoned: false,
            background,
            preallocated,
            sync_observer,
        })
    }

    pub fn config(&self) -> &JournalConfig {
        &self.config
    }

    /// The highest seq `fdatasync`ed, readable from any thread as it advances (in batch mode
    /// the background thread advances it). A snapshot writer waits for it, so that a snapshot
    /// is never on disk ahead of the journal it follows.
    pub fn synced_progress(&self) -> SyncedProgress {
        SyncedProgress(self.synced_progress.clone())
    }

    /// The seq the next `append` must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The segment being written.
    pub fn current_segment(&self) -> &Path {
        &self.path
    }

    /// Encodes one record into the batch buffer. No syscall.
    ///
    /// # Panics
    /// If `seq` is not the next seq: the sequencer assigns them, a gap is a bug upstream.
    #[inline]
    pub fn append(&mut self, seq: u64, ts_ns: i64, cmd: &Command) {
        assert_eq!(seq, self.next_seq, "journal append out of sequence");
        let start = self.buf_len;
        if self.buf.len() - start < RECORD_MAX_BYTES {
            self.grow_buffer();
        }
        let slot: &mut [u8; RECORD_MAX_BYTES] = (&mut self.buf[start..start + RECORD_MAX_BYTES])
            .try_into()
            .expect("a slot of RECORD_MAX_BYTES");
        let size = encode_record_unsealed(slot, seq, ts_ns, cmd);
        self.buf_len += size;
        let size = size as u64;
        if self.projected_records > 0 && self.projected_len + size > self.config.segment_bytes {
            self.rolls.push((start, seq));
            self.projected_len = SEGMENT_HEADER_LEN as u64;
            self.projected_records = 0;
        }
        self.projected_len += size;
        self.projected_records += 1;
        self.next_seq += 1;
    }

    /// A batch larger than the buffer: an allocation, not an error (`JournalConfig::buffer_bytes`).
    #[cold]
    fn grow_buffer(&mut self) {
        self.buf.resize(self.buf.len() * 2, 0);
    }

    /// The records appended since the last commit, encoded exactly as they will be on disk
    /// (a sequence of records as [`crate::format::parse_record`] reads them). For a replica
    /// that follows the log from memory. `&mut`: the records' CRCs are filled in here, for the
    /// whole batch at once, if the commit has not done it yet.
    pub fn uncommitted(&mut self) -> &[u8] {
        self.seal();
        &self.buf[self.uncommitted_from..self.buf_len]
    }

    /// Reports the duration of every later `fdatasync` of the journal to `observer` (for
    /// metrics). Only the first observer set is kept.
    pub fn observe_syncs(&mut self, observer: SyncObserver) {
        let _ = self.sync_observer.set(observer);
    }

    /// Writes the batch (one `write`, or one per segment it spans) and syncs as the mode says.
    /// Returns what may now be acknowledged. An `Err` poisons the writer.
    pub fn commit(&mut self) -> io::Result<Durable> {
        let result = self.commit_inner();
        self.uncommitted_from = self.buf_len;
        result
    }

    fn commit_inner(&mut self) -> io::Result<Durable> {
        self.check_poisoned()?;
        match self.config.durability {
            Durability::Fsync => {
                self.write_buffered()?;
                if self.synced_through < self.written_through {
                    self.sync_file(Instant::now())?;
                }
            }
            Durability::Batch { .. } => {
                // The background thread fsyncs; this thread only writes.
                self.write_buffered()?;
            }
            Durability::None => {
                if self.buf_len >= self.config.buffer_bytes {
                    self.write_buffered()?;
                }
            }
        }
        Ok(self.durable())
    }

    /// Batch mode: syncs if something written is unsynced and the interval has passed since the
    /// last sync. For an idle journal thread, so that a quiet period does not leave
    /// acknowledged commands unsynced. Other modes: nothing to do.
    pub fn sync_if_due(&mut self, now: Instant) -> io::Result<Durable> {
        self.check_poisoned()?;
        if let Durability::Batch { interval_us } = self.config.durability
            && self.synced_through < self.written_through
            && now.saturating_duration_since(self.last_sync) >= Duration::from_micros(interval_us)
        {
            self.sync_file(now)?;
        }
        Ok(self.durable())
    }

    /// When `sync_if_due` will next have work (batch mode with unsynced data), else `None`.
    pub fn sync_due_at(&self) -> Option<Instant> {
        match self.config.durability {
            Durability::Batch { interval_us } if self.synced_through < self.written_through => {
                Some(self.last_sync + Duration::from_micros(interval_us))
            }
            _ => None,
        }
    }

    /// `fsync` mode, for an idle journal thread: once the journal has been quiet for
    /// [`CHECKPOINT_WHEN_IDLE`] with its checkpoint behind the last commit (it lags one sync:
    /// docs/journal-format.md), one more sync brings it up to date. Other modes: nothing (in
    /// batch mode the background thread does it). Returns whether it synced.
    pub fn checkpoint_if_quiet(&mut self, now: Instant) -> io::Result<bool> {
        self.check_poisoned()?;
        let due = self.config.durability == Durability::Fsync
            && now.saturating_duration_since(self.last_sync) >= CHECKPOINT_WHEN_IDLE
            && lock(&self.target).checkpoint.durable_through < self.synced_through;
        if due {
            self.sync_file(now)?;
        }
        Ok(due)
    }

    /// Writes everything appended and `fdatasync`s it, in every mode, then brings the
    /// checkpoint up to the last record (a second sync). For clean shutdown.
    pub fn sync(&mut self) -> io::Result<Durable> {
        self.check_poisoned()?;
        self.write_buffered()?;
        self.durable();
        if self.synced_through < self.written_through {
            self.sync_file(Instant::now())?;
        }
        if lock(&self.target).checkpoint.durable_through < self.synced_through {
            self.sync_file(Instant::now())?;
        }
        Ok(self.durable())
    }

    fn durable(&mut self) -> Durable {
        if let Some(bg) = &self.background {
            let synced = bg.shared.synced_through.load(Ordering::Acquire);
            self.synced_through = self.synced_through.max(synced);
        }
        let ack_through = match self.config.durability {
            Durability::Fsync => self.synced_through,
            Durability::Batch { .. } => self.written_through,
            // Documented as unsafe: acknowledged before it is even written.
            Durability::None => self.next_seq - 1,
        };
        Durable {
            ack_through,
            written_through: self.written_through,
            synced_through: self.synced_through,
        }
    }

    fn check_poisoned(&mut self) -> io::Result<()> {
        if let Some(e) = self.background.as_ref().and_then(BackgroundSync::failure) {
            self.poisoned = true;
            return Err(e);
        }
        if self.poisoned {
            return Err(io::Error::other(
                "journal writer failed earlier; reopen it after recovery",
            ));
        }
        Ok(())
    }

    fn write_buffered(&mut self) -> io::Result<()> {
        if self.buf_len == 0 {
            return Ok(());
        }
        let result = self.write_buffered_inner();
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn write_buffered_inner(&mut self) -> io::Result<()> {
        // Every record's CRC, computed over the whole batch at once (faster: format.rs).
        self.seal();
        let mut from = 0;
        let mut roll_index = 0;
        while roll_index < self.rolls.len() {
            let (at, first_seq) = self.rolls[roll_index];
            self.write_part(from, at)?;
            self.roll(first_seq)?;
            from = at;
            roll_index += 1;
        }
        self.write_part(from, self.buf_len)?;
        self.buf_len = 0;
        self.uncommitted_from = 0;
        self.sealed = 0;
        self.rolls.clear();
        self.written_through = self.next_seq - 1;
        self.shared_written_through
            .store(self.written_through, Ordering::Release);
        Ok(())
    }

    /// Fills in the CRCs of the records appended since the last seal, all at once (faster than
    /// one at a time in `append`: format.rs, `seal_records`).
    fn seal(&mut self) {
        seal_records(&mut self.buf[self.sealed..self.buf_len]);
        self.sealed = self.buf_len;
    }

    fn write_part(&mut self, from: usize, to: usize) -> io::Result<()> {
        if from == to {
            return Ok(());
        }
        std::os::unix::fs::FileExt::write_all_at(&self.file, &self.buf[from..to], self.file_len)?;
        self.file_len += (to - from) as u64;
        Ok(())
    }

    /// Closes the current segment durably (all modes: a later sync only covers the new file)
    /// and starts the next one. The closed segment's records are synced first, then the next
    /// segment is created, then the closed one is sealed (and synced): so a seal is never on
    /// disk without the records it claims, and a sealed segment always has a successor.
    fn roll(&mut self, first_seq: u64) -> io::Result<()> {
        if self.preallocated {
            // A closed segment ends with its last record.
            self.file.set_len(self.file_len)?;
        }
        let mut target = lock(&self.target);
        if let Some(bg) = &self.background {
            self.synced_through = self
                .synced_through
                .max(bg.shared.synced_through.load(Ordering::Acquire));
        }
        self.shared_written_through
            .store(first_seq - 1, Ordering::Release);
        target.sync(self.synced_through, &self.sync_observer)?;
        let path = create_segment(&self.dir, first_seq)?;
        target.write_checkpoint(first_seq - 1, true)?;
        timed_sync(&target.file, &self.sync_observer)?;
        sync_log::synced(&target);
        let full = self.config.segment_bytes + RECORD_MAX_BYTES as u64;
        self.file = open_segment(&path, self.preallocated, full)?;
        *target = SyncTarget::new(
            self.file.try_clone()?,
            first_seq,
            self.shared_written_through.clone(),
            None,
        );
        drop(target);
        if let Some(bg) = &self.background {
            bg.shared
                .synced_through
                .fetch_max(first_seq - 1, Ordering::AcqRel);
        }
        self.path = path;
        self.file_len = SEGMENT_HEADER_LEN as u64;
        self.synced_through = first_seq - 1;
        self.synced_progress
            .fetch_max(self.synced_through, Ordering::AcqRel);
        self.last_sync = Instant::now();
        Ok(())
    }

    /// Syncs the segment, with a checkpoint of what the previous sync made durable.
    fn sync_file(&mut self, now: Instant) -> io::Result<()> {
        let durable_before = self.synced_through;
        if let Err(e) = lock(&self.target).sync(durable_before, &self.sync_observer) {
            self.poisoned = true;
            return Err(e);
        }
        self.synced_through = self.written_through;
        self.synced_progress
            .fetch_max(self.synced_through, Ordering::AcqRel);
        self.last_sync = now;
        Ok(())
    }
}

impl Drop for JournalWriter {
    fn drop(&mut self) {
        if self.preallocated && !self.poisoned {
            // Best effort: zeros left behind read as a torn tail, which recovery cuts off.
            let _ = self.file.set_len(self.file_len);
        }
    }
}

/// Creates `segment-<first_seq>.log` holding only its header, durably: written to a temp name,
/// synced, renamed, directory synced. A segment file therefore always has a whole header.
fn create_segment(dir: &Path, first_seq: u64) -> io::Result<PathBuf> {
    let name = segment_name(first_seq);
    let path = dir.join(&name);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = File::create(&tmp)?;
    file.write_all(&encode_segment_header(first_seq))?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, &path)?;
    fsync_dir(dir)?;
    Ok(path)
}

/// Leftovers of a crash during `create_segment`: never holding records, always safe to remove.
fn remove_temp_files(dir: &Path) -> Result<()> {
    let entries = fs::read_dir(dir).map_err(|e| JournalError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| JournalError::io(dir, e))?;
        let name = entry.file_name();
        if name
            .to_str()
            .is_some_and(|n| n.starts_with("segment-") && n.ends_with(".tmp"))
        {
            fs::remove_file(entry.path()).map_err(|e| JournalError::io(entry.path(), e))?;
        }
    }
    Ok(())
}

/// A segment's bytes, its header and its checkpoint.
fn read_segment(path: &Path) -> Result<(Vec<u8>, SegmentHeader, Option<Checkpoint>)> {
    let bytes = fs::read(path).map_err(|e| JournalError::io(path, e))?;
    let bad_header = |problem| JournalError::BadSegmentHeader {
        path: path.to_owned(),
        problem,
    };
    let header = parse_segment_header(&bytes).map_err(bad_header)?;
    let checkpoint = read_checkpoint(&bytes, &header).map_err(bad_header)?;
    Ok((bytes, header, checkpoint))
}

/// The records of a segment from its start, up to the first that is damaged or out of seq:
/// where they end and the seq after the last.
fn good_records(bytes: &[u8], header: &SegmentHeader) -> (usize, u64) {
    let mut pos = header.records_at;
    let mut next = header.first_seq;
    while let Ok(r) = parse_record(bytes, pos) {
        if r.seq != next {
            break;
        }
        pos += r.size;
        next += 1;
    }
    (pos, next)
}

/// A crash between creating a segment and sealing the one before (`roll`) leaves that one
/// unsealed and the new one empty. Seals it now, if its records run up to the new one's.
fn seal_after_an_interrupted_roll(previous: &Path, next_seq: u64) -> Result<()> {
    let (bytes, header, checkpoint) = read_segment(previous)?;
    if !header.has_checkpoints() || checkpoint.is_some_and(|c| c.sealed) {
        return Ok(());
    }
    let (_, next) = good_records(&bytes, &header);
    if next != next_seq {
        // Not an interrupted roll (a hole the reader judges), so nothing to seal.
        return Ok(());
    }
    let io_error = |e| JournalError::io(previous, e);
    let file = OpenOptions::new()
        .write(true)
        .open(previous)
        .map_err(io_error)?;
    let written = Arc::new(AtomicU64::new(next_seq - 1));
    let mut target = SyncTarget::new(file, header.first_seq, written, checkpoint);
    target
        .write_checkpoint(next_seq - 1, true)
        .map_err(io_error)?;
    target.file.sync_data().map_err(io_error)
}

/// Whether an accepted loss runs from just after the last good record of `path` to
/// `next_seq - 1`. Reads only.
fn ends_before_an_accepted_loss(data_dir: &Path, path: &Path, next_seq: u64) -> Result<bool> {
    let losses = crate::loss::read_accepted_losses(data_dir)?;
    let Some(loss) = losses
        .iter()
        .find(|l| l.to.checked_add(1) == Some(next_seq))
    else {
        return Ok(false);
    };
    let (bytes, header, _) = read_segment(path)?;
    let (_, next) = good_records(&bytes, &header);
    Ok(next == loss.from)
}

/// The segment the writer goes on with.
struct LastSegment {
    path: PathBuf,
    header: SegmentHeader,
    checkpoint: Option<Checkpoint>,
    /// The good length of the file.
    len: u64,
    /// Its last seq (first seq - 1 when empty).
    last_seq: u64,
    records: u64,
}

impl LastSegment {
    fn empty(path: PathBuf, first_seq: u64) -> LastSegment {
        LastSegment {
            path,
            header: SegmentHeader {
                first_seq,
                version: crate::format::SEGMENT_VERSION,
                records_at: SEGMENT_HEADER_LEN,
            },
            checkpoint: None,
            len: SEGMENT_HEADER_LEN as u64,
            last_seq: first_seq - 1,
            records: 0,
        }
    }
}

/// Checks the last segment before appending to it: its header, every record, seq continuity.
/// A torn tail is truncated (with a warning); corruption is refused. (Recovery has checked it
/// against its checkpoint already.)
fn check_last_segment(path: &Path) -> Result<LastSegment> {
    let (bytes, header, checkpoint) = read_segment(path)?;
    let first_seq = header.first_seq;
    let mut pos = header.records_at;
    let mut expected = first_seq;
    while pos < bytes.len() {
        match parse_record(&bytes, pos) {
            Ok(r) if r.seq == expected => {
                pos += r.size;
                expected += 1;
            }
            Ok(r) => {
                return Err(JournalError::SeqGap {
                    path: path.to_owned(),
                    offset: pos as u64,
                    expected,
                    found: r.seq,
                });
            }
            Err(RecordProblem::BadCommand(problem)) => {
                return Err(JournalError::Corrupt {
                    path: path.to_owned(),
                    offset: pos as u64,
                    problem,
                });
            }
            Err(RecordProblem::Damaged(problem)) => {
                match judge_bad_record(&bytes, pos, expected, problem) {
                    SegmentEnd::Torn { offset, problem } => {
                        tracing::warn!(path = %path.display(), offset, "truncating a torn write: {problem}");
                        truncate_durable(path, offset)?;
                        break;
                    }
                    SegmentEnd::Corrupt { offset, problem } => {
                        return Err(JournalError::Corrupt {
                            path: path.to_owned(),
                            offset,
                            problem,
                        });
                    }
                    SegmentEnd::Clean => break,
                }
            }
        }
    }
    Ok(LastSegment {
        path: path.to_owned(),
        header,
        checkpoint,
        len: pos as u64,
        last_seq: expected - 1,
        records: expected - first_seq,
    })
}

/// Cuts `path` to `len` bytes and syncs it.
pub(crate) fn truncate_durable(path: &Path, len: u64) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| JournalError::io(path, e))?;
    file.set_len(len).map_err(|e| JournalError::io(path, e))?;
    file.sync_all().map_err(|e| JournalError::io(path, e))
}
