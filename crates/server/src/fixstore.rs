//! A replicated venue's FIX session stores, kept in the cluster so that a session survives a
//! fail-over (docs/replication.md, "FIX sessions across a fail-over").
//!
//! The key-value bucket `rialto_<venue>_fix` (history 1, `log.replicas` copies) holds, per
//! session (its name with `.` written as `=`, as key tokens may not hold a `.` of their own):
//!
//! - `<session>.seqnums`: the 28 bytes of a `.seqnums` file (magic, next sender and target
//!   MsgSeqNum, CRC), written with a compare-and-set on its revision, so that a node that no
//!   longer leads cannot overwrite what the new leader wrote;
//! - `<session>.m.<term, 20 digits>.<first MsgSeqNum, 20 digits>`: `.messages` records back
//!   to back (each with its CRC), the messages one flush stored, at most [`CHUNK_MAX_BYTES`] a
//!   chunk. The term is the writer's term of leadership ([`LeaseGuard::term`]): a leader that
//!   was deposed while a write was in flight (paused, say) may still land chunks after the new
//!   leader read the store, but under its own, older term, so they never replace the new
//!   leader's chunks. A reader takes the chunks term by term, oldest first, each term's in the
//!   order written, and a record overrides every record of its number and above taken before
//!   it (as in a `.messages` file): for every number the newest term's message wins, and an
//!   older term's messages numbered at or above the first one a newer term wrote are dropped.
//!
//! **Store, then send.** The leader's gateway hands the chunks (and then the numbers) to a task
//! on the NATS client's runtime and holds the session's output written since until JetStream
//! has acknowledged them (fix/mod.rs, `FixGateway::flush`): a message a client received is in
//! the cluster, so the new leader resends it (never gap-fills it) and never sends another
//! message under its number. The gateway's thread never waits: other sessions go on while one
//! session's write is in flight, and a session's writes go one at a time, in order (what it
//! stores meanwhile waits for the next). A crash between the store and the send leaves a
//! message stored and unsent: the client sees a gap and asks for it. A failed write closes the
//! session's connection without sending what it held.
//!
//! **Adoption.** When a leader opens a session (its first Logon since the node leads), it reads
//! the session's numbers and chunks from the cluster and writes them into its data directory as
//! the session's files (replacing what the node had there: the cluster's are the venue's), then
//! opens them as a restarted server opens its own. The read is a task on the NATS client's
//! runtime too ([`FixMirror::poll_read`]): the Logon waits for it (its connection is paused,
//! and the gateway's bell rings when the read ends), other sessions go on meanwhile; a read
//! that fails or takes longer than four times `log.ack_timeout_ms` refuses that Logon.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;
use std::time::Duration;

use anyhow::Context as _;
use async_nats::jetstream::{consumer, kv, stream};
use bytes::Bytes;
use futures_util::StreamExt;
use rialto_fix::session::store::{decode_seqnums, encode_message_record, encode_seqnums};
use rialto_fix::session::{FileStore, MessageStore};

use crate::idle::Bell;
use crate::replication::{Connection, LeaseGuard};

/// The most bytes of records one chunk holds (NATS's default `max_payload` is 1 MiB).
pub const CHUNK_MAX_BYTES: usize = 900_000;

/// The venue's FIX bucket, shared by every session of the leader's gateway.
#[derive(Clone)]
pub struct FixMirror {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Arc<tokio::runtime::Runtime>,
    bucket: kv::Store,
    timeout: Duration,
    /// The leader's lease: nothing is written once it was lost or may have lapsed.
    lease: Option<LeaseGuard>,
    /// The lease's term (0 without a lease), in the key of every chunk written.
    term: u64,
    /// The gateway's bell, rung when a write is acknowledged (or fails) and when a read ends.
    bell: OnceLock<Arc<Bell>>,
    /// Test seam: the key of a session whose reads and writes wait before they start (a slow
    /// or stalled cluster for that session).
    stalled: tokio::sync::watch::Sender<Option<String>>,
    /// The reads of sessions' stores started by [`FixMirror::poll_read`], by session name:
    /// `None` while in flight, then the outcome until the session opens (or a refused Logon
    /// takes the error).
    reads: Mutex<HashMap<String, Option<ReadOutcome>>>,
}

/// A finished read of a session's store: `None` if the cluster holds nothing of it.
type ReadOutcome = io::Result<Option<Fetched>>;

/// A session's store as the cluster holds it.
struct Fetched {
    next_sender: u64,
    next_target: u64,
    revision: u64,
    records: Vec<u8>,
}

/// Creates the bucket if it is missing (with the stream and the other buckets).
pub async fn ensure_bucket(
    js: &async_nats::jetstream::Context,
    name: &str,
    replicas: usize,
) -> anyhow::Result<()> {
    if js.get_key_value(name).await.is_err() {
        js.create_key_value(kv::Config {
            bucket: name.to_owned(),
            history: 1,
            num_replicas: replicas,
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .with_context(|| format!("cannot create the FIX bucket {name}"))?;
    }
    Ok(())
}

/// A session's key prefix: its name, every `.` written as `=` (a session name never holds a
/// `=`, so two sessions never share a prefix).
fn key_of(session: &str) -> String {
    session.replace('.', "=")
}

fn nats_error(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("FIX store in the cluster: {what}: {e}"))
}

impl FixMirror {
    /// Opens the venue's FIX bucket (the connection created it). `lease`: the leader's.
    pub fn open(connection: &Connection, lease: Option<LeaseGuard>) -> anyhow::Result<FixMirror> {
        let term = lease.as_ref().map_or(0, LeaseGuard::term);
        FixMirror::open_with(connection, lease, term)
    }

    /// Test seam: a mirror that writes as the holder of `term` without holding a lease (two
    /// of them stand for a deposed leader and its successor).
    #[doc(hidden)]
    pub fn open_as_term(connection: &Connection, term: u64) -> anyhow::Result<FixMirror> {
        FixMirror::open_with(connection, None, term)
    }

    fn open_with(
        connection: &Connection,
        lease: Option<LeaseGuard>,
        term: u64,
    ) -> anyhow::Result<FixMirror> {
        let name = connection.names.fix_bucket.clone();
        let bucket = connection
            .runtime
            .block_on(connection.js.get_key_value(&name))
            .with_context(|| format!("cannot open the FIX bucket {name}"))?;
        Ok(FixMirror {
            inner: Arc::new(Inner {
                runtime: connection.runtime.clone(),
                bucket,
                timeout: connection.timeout(),
                lease,
                term,
                bell: OnceLock::new(),
                stalled: tokio::sync::watch::Sender::new(None),
                reads: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The bell of the gateway's loop, rung when a session's write completes.
    pub fn set_bell(&self, bell: Arc<Bell>) {
        let _ = self.inner.bell.set(bell);
    }

    /// Holds the reads and writes of one session's store back until [`FixMirror::release`]
    /// (for tests of a cluster slow for one session). A held read still ends at its timeout.
    #[doc(hidden)]
    pub fn stall(&self, session: &str) {
        self.inner.stalled.send_replace(Some(key_of(session)));
    }

    #[doc(hidden)]
    pub fn release(&self) {
        self.inner.stalled.send_replace(None);
    }

    fn reads(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<ReadOutcome>>> {
        self.inner.reads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the session's store may be opened ([`SessionStore::open`]): starts its read
    /// from the cluster (a task on the client's runtime, which rings the gateway's bell when it
    /// ends) unless one was started; `Pending` until it ends. A failed read is given out once
    /// (the next call starts another).
    pub fn poll_read(&self, session: &str) -> Poll<io::Result<()>> {
        let mut reads = self.reads();
        match reads.get(session) {
            Some(None) => return Poll::Pending,
            Some(Some(Ok(_))) => return Poll::Ready(Ok(())),
            Some(Some(Err(_))) => {
                return match reads.remove(session) {
                    Some(Some(Err(e))) => Poll::Ready(Err(e)),
                    _ => unreachable!("an error was there"),
                };
            }
            None => {}
        }
        reads.insert(session.to_owned(), None);
        drop(reads);
        let inner = self.inner.clone();
        let name = session.to_owned();
        let timeout = inner.timeout * 4;
        self.inner.runtime.spawn(async move {
            let key = key_of(&name);
            let mut stalled = inner.stalled.subscribe();
            let read = async {
                let _ = stalled.wait_for(|s| s.as_deref() != Some(&key)).await;
                fetch(&inner.bucket, &name).await
            };
            let outcome = tokio::time::timeout(timeout, read)
                .await
                .unwrap_or_else(|_| Err(nats_error("no answer", format!("within {timeout:?}"))));
            inner
                .reads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name, Some(outcome));
            if let Some(bell) = inner.bell.get() {
                bell.ring();
            }
        });
        Poll::Pending
    }

    /// Whether the read of the session's store started by [`FixMirror::poll_read`] has ended
    /// (or none was started): a Logon waiting for it may be handled again.
    pub fn read_ended(&self, session: &str) -> bool {
        !matches!(self.reads().get(session), Some(None))
    }

    /// The ended read of the session's store, taken.
    fn take_read(&self, session: &str) -> ReadOutcome {
        match self.reads().remove(session) {
            Some(Some(outcome)) => outcome,
            _ => Err(nats_error(
                &format!("session {session}"),
                "its store was not read from the cluster yet",
            )),
        }
    }
}

/// The session's numbers and every record of its chunks, in the order they were written;
/// `None` if the cluster holds nothing of it.
async fn fetch(bucket: &kv::Store, session: &str) -> io::Result<Option<Fetched>> {
    let key = key_of(session);
    let numbers = format!("{}{key}.seqnums", bucket.prefix);
    let chunks = format!("{}{key}.m.>", bucket.prefix);
    // From the stream's leader (a direct get may be answered by a replica that lags).
    let last = match bucket
        .stream
        .get_last_raw_message_by_subject(&numbers)
        .await
    {
        Ok(message) => message,
        Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => {
            return Ok(None);
        }
        Err(e) => return Err(nats_error("reading the sequence numbers", e)),
    };
    let (next_sender, next_target) = decode_seqnums(&last.payload)
        .map_err(|what| nats_error(&format!("session {session}"), what))?;
    let consumer = bucket
        .stream
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: chunks,
            ..Default::default()
        })
        .await
        .map_err(|e| nats_error("reading the messages", e))?;
    // Each chunk with its term, in the order written.
    let mut chunks: Vec<(u64, Bytes)> = Vec::new();
    if consumer.cached_info().num_pending > 0 {
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| nats_error("reading the messages", e))?;
        let chunk_prefix = format!("{}{key}.m.", bucket.prefix);
        while let Some(message) = messages.next().await {
            let message = message.map_err(|e| nats_error("reading the messages", e))?;
            let term = message
                .subject
                .strip_prefix(chunk_prefix.as_str())
                .and_then(term_of_chunk)
                .ok_or_else(|| {
                    nats_error(
                        &format!("session {session}"),
                        format!("a chunk under an unknown key {}", message.subject),
                    )
                })?;
            let info = message
                .info()
                .map_err(|e| nats_error("a message's info", e))?;
            let pending = info.pending;
            chunks.push((term, message.payload.clone()));
            if pending == 0 {
                break;
            }
        }
    }
    // Oldest term first (a stable sort keeps each term's chunks in the order written): the
    // newest term's records come last, so they override an older term's (module docs).
    chunks.sort_by_key(|(term, _)| *term);
    let records = chunks
        .iter()
        .map(|(_, payload)| &payload[..])
        .collect::<Vec<_>>()
        .concat();
    Ok(Some(Fetched {
        next_sender,
        next_target,
        revision: last.sequence,
        records,
    }))
}

/// The term of a chunk from its key's end, `<term>.<first>` (20 digits each).
fn term_of_chunk(tail: &str) -> Option<u64> {
    let (term, first) = tail.split_once('.')?;
    first.parse::<u64>().ok()?;
    term.parse().ok()
}

/// What a session of a replicated venue has not yet written to the cluster.
struct Replicated {
    mirror: FixMirror,
    key: String,
    /// The revision of the numbers' entry as this node last wrote or read it (0: none).
    revision: u64,
    /// Chunks to write: first MsgSeqNum and records.
    chunks: Vec<(u64, Vec<u8>)>,
    seqnums_dirty: bool,
    /// A sequence reset: the session's chunks are purged before anything else is written.
    purge: bool,
    /// The write in flight, if any: its ticket, and where its task leaves the outcome.
    in_flight: Option<(u64, Arc<Mutex<Option<Outcome>>>)>,
    /// Writes started so far (each a ticket), and the last acknowledged one.
    launched: u64,
    acknowledged: u64,
}

/// One write to the cluster: what it carries, taken from [`Replicated`].
struct Work {
    purge: bool,
    chunks: Vec<(u64, Vec<u8>)>,
    /// The numbers to write, with the revision they replace (0: create).
    numbers: Option<(u64, u64)>,
    revision: u64,
}

/// A finished write: the numbers' new revision (if written), or the error and the work, to
/// try again.
type Outcome = Result<Option<u64>, (io::Error, Work)>;

impl Replicated {
    fn has_work(&self) -> bool {
        self.purge || !self.chunks.is_empty() || self.seqnums_dirty
    }

    /// Takes the outcome of the write in flight, if it has finished.
    fn collect(&mut self) -> io::Result<()> {
        let Some((ticket, slot)) = &self.in_flight else {
            return Ok(());
        };
        let Some(outcome) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Ok(());
        };
        let ticket = *ticket;
        self.in_flight = None;
        match outcome {
            Ok(revision) => {
                if let Some(revision) = revision {
                    self.revision = revision;
                }
                self.acknowledged = ticket;
                Ok(())
            }
            Err((e, work)) => {
                // Kept for the next write, before what was stored since.
                self.purge |= work.purge;
                let mut chunks = work.chunks;
                chunks.append(&mut self.chunks);
                self.chunks = chunks;
                self.seqnums_dirty |= work.numbers.is_some();
                Err(e)
            }
        }
    }

    /// Starts a write of what waits, unless one is in flight: purge, chunks, then the
    /// numbers (current `numbers`), each acknowledged before the next.
    fn launch(&mut self, numbers: (u64, u64)) -> io::Result<()> {
        if self.in_flight.is_some() || !self.has_work() {
            return Ok(());
        }
        let inner = self.mirror.inner.clone();
        if let Some(lease) = &inner.lease {
            lease.check()?;
        }
        let work = Work {
            purge: std::mem::take(&mut self.purge),
            chunks: std::mem::take(&mut self.chunks),
            numbers: std::mem::take(&mut self.seqnums_dirty).then_some(numbers),
            revision: self.revision,
        };
        self.launched += 1;
        let slot = Arc::new(Mutex::new(None));
        self.in_flight = Some((self.launched, slot.clone()));
        let key = self.key.clone();
        let timeout = inner.timeout * 4;
        inner.runtime.clone().spawn(async move {
            let mut stalled = inner.stalled.subscribe();
            let _ = stalled.wait_for(|s| s.as_deref() != Some(&key)).await;
            let write = write(&inner.bucket, &key, inner.term, &work);
            let written = tokio::time::timeout(timeout, write).await;
            let outcome = match written {
                Ok(Ok(revision)) => Ok(revision),
                Ok(Err(e)) => Err((e, work)),
                Err(_) => Err((nats_error("no answer", format!("within {timeout:?}")), work)),
            };
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
            if let Some(bell) = inner.bell.get() {
                bell.ring();
            }
        });
        Ok(())
    }

    /// Writes what waits and waits for it (at shutdown).
    fn settle(&mut self, numbers: (u64, u64)) -> io::Result<()> {
        loop {
            self.collect()?;
            self.launch(numbers)?;
            let Some((_, slot)) = &self.in_flight else {
                return Ok(());
            };
            let timeout = self.mirror.inner.timeout * 5;
            let deadline = std::time::Instant::now() + timeout;
            while slot.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
                if std::time::Instant::now() > deadline {
                    return Err(nats_error("no answer", format!("within {timeout:?}")));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// One write: purge, chunks (under `term`), then the numbers (compare-and-set on
/// `work.revision`).
async fn write(bucket: &kv::Store, key: &str, term: u64, work: &Work) -> io::Result<Option<u64>> {
    if work.purge {
        let filter = format!("{}{key}.m.>", bucket.prefix);
        bucket
            .stream
            .purge()
            .filter(filter)
            .await
            .map_err(|e| nats_error("purging a reset session", e))?;
    }
    if !work.chunks.is_empty() {
        let puts = work.chunks.iter().map(|(first, records)| {
            let value = Bytes::copy_from_slice(records);
            bucket.put(format!("{key}.m.{term:020}.{first:020}"), value)
        });
        futures_util::future::try_join_all(puts)
            .await
            .map_err(|e| nats_error("storing sent messages", e))?;
    }
    let Some((sender, target)) = work.numbers else {
        return Ok(None);
    };
    let value = Bytes::copy_from_slice(&encode_seqnums(sender, target));
    let entry = format!("{key}.seqnums");
    let written = match work.revision {
        0 => bucket
            .create(&entry, value)
            .await
            .map_err(|e| e.to_string()),
        r => bucket
            .update(&entry, value, r)
            .await
            .map_err(|e| e.to_string()),
    };
    written.map(Some).map_err(|e| {
        io::Error::other(format!(
            "FIX store in the cluster: the sequence numbers of {key} were written by another \
             node (or cannot be written: {e}); this node does not send on it"
        ))
    })
}

/// A FIX session's store on the leader: the local files, and with a replicated log the
/// cluster's copy, written first.
pub struct SessionStore {
    file: FileStore,
    cluster: Option<Replicated>,
}

impl SessionStore {
    /// Opens the store of `session` in `dir`. With a `mirror`, the cluster's copy replaces the
    /// local files first (an empty store if the cluster holds nothing of the session): its
    /// read must have ended ([`FixMirror::poll_read`] was `Ready(Ok)`).
    pub fn open(dir: &Path, session: &str, mirror: Option<&FixMirror>) -> io::Result<SessionStore> {
        let Some(mirror) = mirror else {
            return Ok(SessionStore {
                file: FileStore::open(dir, session)?,
                cluster: None,
            });
        };
        let fetched = mirror.take_read(session)?;
        let (numbers, revision) = match &fetched {
            Some(f) => {
                FileStore::replace_files(dir, session, f.next_sender, f.next_target, &f.records)?;
                ((f.next_sender, f.next_target), f.revision)
            }
            None => {
                FileStore::replace_files(dir, session, 1, 1, &[])?;
                ((1, 1), 0)
            }
        };
        let file = FileStore::open(dir, session)?;
        if let Some(f) = &fetched {
            tracing::info!(
                session,
                next_sender = file.next_sender_seq(),
                next_target = file.next_target_seq(),
                messages = file.stored_messages(),
                "took the FIX session's store from the cluster"
            );
            debug_assert!(f.records.is_empty() || file.stored_messages() > 0);
        }
        // A chunk written before a crash kept its numbers from being written: the file
        // counts it, and so will the cluster.
        let seqnums_dirty = (file.next_sender_seq(), file.next_target_seq()) != numbers;
        Ok(SessionStore {
            file,
            cluster: Some(Replicated {
                mirror: mirror.clone(),
                key: key_of(session),
                revision,
                chunks: Vec::new(),
                seqnums_dirty,
                purge: false,
                in_flight: None,
                launched: 0,
                acknowledged: 0,
            }),
        })
    }

    /// Which write to the cluster holds everything stored so far, and the last write the
    /// cluster acknowledged: output written before this call may go to the socket once the
    /// second reaches the first. `(0, 0)` without a cluster.
    pub fn tickets(&self) -> (u64, u64) {
        self.cluster.as_ref().map_or((0, 0), |c| {
            (c.launched + u64::from(c.has_work()), c.acknowledged)
        })
    }

    /// Whether a write to the cluster has finished and waits for a flush to collect it (its
    /// task rings the gateway's bell when it finishes; this covers a finish just before the
    /// gateway announced that it sleeps).
    pub fn write_finished(&self) -> bool {
        self.cluster
            .as_ref()
            .and_then(|c| c.in_flight.as_ref())
            .is_some_and(|(_, slot)| slot.lock().unwrap_or_else(|e| e.into_inner()).is_some())
    }

    /// Writes everything to the cluster and waits for it (the server stops).
    pub fn settle(&mut self) -> io::Result<()> {
        let numbers = (self.file.next_sender_seq(), self.file.next_target_seq());
        if let Some(c) = &mut self.cluster {
            c.settle(numbers)?;
        }
        self.file.flush()
    }

    /// Keeps `message` for the cluster too, in the current chunk or a new one.
    fn chunk(c: &mut Replicated, seq: u64, sending_time_ns: i64, message: &[u8]) {
        let fits = c
            .chunks
            .last()
            .is_some_and(|(_, records)| records.len() + message.len() + 24 <= CHUNK_MAX_BYTES);
        if !fits {
            c.chunks.push((seq, Vec::new()));
        }
        let (_, records) = c.chunks.last_mut().expect("a chunk");
        encode_message_record(records, seq, sending_time_ns, message);
    }
}

impl MessageStore for SessionStore {
    fn next_sender_seq(&self) -> u64 {
        self.file.next_sender_seq()
    }
    fn next_target_seq(&self) -> u64 {
        self.file.next_target_seq()
    }
    fn set_next_sender_seq(&mut self, seq: u64) -> io::Result<()> {
        if let Some(c) = &mut self.cluster {
            c.seqnums_dirty = true;
        }
        self.file.set_next_sender_seq(seq)
    }
    fn set_next_target_seq(&mut self, seq: u64) -> io::Result<()> {
        if let Some(c) = &mut self.cluster {
            c.seqnums_dirty = true;
        }
        self.file.set_next_target_seq(seq)
    }
    fn store(&mut self, seq: u64, sending_time_ns: i64, message: &[u8]) -> io::Result<()> {
        self.file.store(seq, sending_time_ns, message)?;
        if let Some(c) = &mut self.cluster {
            SessionStore::chunk(c, seq, sending_time_ns, message);
        }
        Ok(())
    }
    fn read_next(
        &mut self,
        from: u64,
        to: u64,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<(u64, i64)>> {
        self.file.read_next(from, to, buf)
    }
    fn reset(&mut self) -> io::Result<()> {
        if let Some(c) = &mut self.cluster {
            c.chunks.clear();
            c.purge = true;
            c.seqnums_dirty = true;
        }
        self.file.reset()
    }
    /// Never waits for the cluster: collects the outcome of the write in flight and starts
    /// the next one; the caller holds the output until [`SessionStore::tickets`] says the
    /// cluster has it.
    fn flush(&mut self) -> io::Result<()> {
        if let Some(c) = &mut self.cluster {
            let numbers = (self.file.next_sender_seq(), self.file.next_target_seq());
            c.collect()?;
            c.launch(numbers)?;
        }
        self.file.flush()
    }
}
