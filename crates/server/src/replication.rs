//! The command log on NATS JetStream, a leader's lease and hot standbys (docs/replication.md).
//!
//! The sequencer's log is one of two backends behind [`CommandLog`]: the local journal, or a
//! JetStream stream (`RIALTO_<venue>`, R3, file storage) to which the leader appends each
//! group-commit batch as one message, its records encoded exactly as in a journal segment
//! (a CRC per record), with `Nats-Expected-Last-Sequence` on every append: a node whose
//! append finds the stream longer than it knew was deposed, and stops.
//!
//! Which node leads is decided by a lease, the key `leader` of the key-value bucket
//! `rialto_<venue>_lease` (TTL = `log.lease_ms`, taken with create, renewed with
//! compare-and-set on its revision). The lease gives liveness (one node at a time tries to
//! lead); safety comes from the expected-sequence fence alone.

use std::collections::VecDeque;
use std::future::IntoFuture as _;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_nats::HeaderMap;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, consumer, kv, stream};
use bytes::Bytes;
use futures_util::StreamExt;
use rialto_core::{Command, Engine, EngineConfig};
use rialto_journal::JournalWriter;
use rialto_journal::format::{RECORD_MAX_BYTES, encode_record, parse_record};

use crate::config::{LogSettings, Role};
use crate::nats_access;

/// The largest batch message: NATS's default `max_payload` is 1 MiB; headers need room too.
pub const MAX_BATCH_BYTES: usize = 1_000_000;
/// The most commands a batch message can hold (each at its largest).
pub const MAX_BATCH_COMMANDS: usize = MAX_BATCH_BYTES / RECORD_MAX_BYTES;
/// The header that marks a checkpoint message: `<seq> <state hash, 64 hex digits>`.
pub const CHECKPOINT_HEADER: &str = "Rialto-Checkpoint";
/// The header of the message a leader appends when its market data feed starts, before it
/// appends anything else: `<seq> <epoch ns>`, the engine seq the feed is built at and the
/// feed's epoch. A read replica starts its feed afresh at the same seq with the same epoch, so
/// its sequence numbers are the leader's (docs/replication.md).
pub const FEED_EPOCH_HEADER: &str = "Rialto-Feed-Epoch";
/// The header of a new leader's claim on the log's end (an empty message): the node's id.
pub const LEADER_HEADER: &str = "Rialto-Leader";
/// Claims a new leader tries before it gives up (each refused one means another writer's late
/// append landed first; that can only be a message sent before this node took the lease).
const CLAIMS_TRIED: u32 = 10;
/// The lease's key in its bucket.
const LEASE_KEY: &str = "leader";
/// State hashes a node remembers for checkpoints still to come.
const HASHES_KEPT: usize = 64;

/// The stream, subject and lease bucket of a venue.
#[derive(Clone, Debug)]
pub struct Names {
    pub venue: String,
    pub stream: String,
    pub subject: String,
    pub bucket: String,
    /// The key-value bucket of what every node must share: the venue key and the settings
    /// that decide behaviour.
    pub venue_bucket: String,
    /// The object store bucket of the venue's snapshots.
    pub snapshot_bucket: String,
    /// The key-value bucket of the venue's FIX session stores (fixstore.rs).
    pub fix_bucket: String,
}

impl Names {
    pub fn of(venue: &str) -> Names {
        Names {
            venue: venue.to_owned(),
            stream: format!("RIALTO_{venue}"),
            subject: format!("rialto.{venue}.log"),
            bucket: format!("rialto_{venue}_lease"),
            venue_bucket: format!("rialto_{venue}_venue"),
            snapshot_bucket: format!("rialto_{venue}_snapshots"),
            fix_bucket: format!("rialto_{venue}_fix"),
        }
    }
}

// ----- the backend the sequencer appends to --------------------------------------------------

/// Where the journal stage appends stamped commands: the same sequencing code drives both.
// One value per server, owned by the journal stage: its size does not matter, and boxing the
// local journal would put a pointer chase on its hot path.
#[allow(clippy::large_enum_variant)]
pub enum CommandLog {
    Local(JournalWriter),
    JetStream(JetStreamLog),
    /// The simulator's log: records in the journal's encoding on a simulated disk that
    /// injects faults (server/src/simlog.rs, docs/simulation.md).
    Simulated(crate::simlog::SimulatedLog),
}

impl From<JournalWriter> for CommandLog {
    fn from(journal: JournalWriter) -> CommandLog {
        CommandLog::Local(journal)
    }
}

impl CommandLog {
    pub fn append(&mut self, seq: u64, ts_ns: i64, cmd: &Command) {
        match self {
            CommandLog::Local(j) => j.append(seq, ts_ns, cmd),
            CommandLog::JetStream(j) => j.append(seq, ts_ns, cmd),
            CommandLog::Simulated(j) => j.append(seq, ts_ns, cmd),
        }
    }

    /// The records appended since the last commit, as encoded.
    pub fn uncommitted(&mut self) -> &[u8] {
        match self {
            CommandLog::Local(j) => j.uncommitted(),
            CommandLog::JetStream(j) => &j.batch,
            CommandLog::Simulated(j) => j.uncommitted(),
        }
    }

    /// Makes the appended records durable as the backend promises (local: the durability
    /// mode; JetStream: acknowledged by the stream, so stored on a majority of its replicas),
    /// and with them every batch submitted before.
    pub fn commit(&mut self) -> io::Result<()> {
        match self {
            CommandLog::Local(j) => j.commit().map(|_| ()),
            CommandLog::JetStream(j) => j.commit(),
            CommandLog::Simulated(j) => j.commit(),
        }
    }

    /// Hands the appended records to the log as one batch. The local journal and the
    /// simulator's log commit it at once (as [`Self::commit`]); JetStream sends it and
    /// resolves it later ([`Self::poll`]), with up to [`Self::max_in_flight`] appends sent
    /// and not answered.
    pub fn submit(&mut self) -> io::Result<()> {
        match self {
            CommandLog::Local(j) => j.commit().map(|_| ()),
            CommandLog::JetStream(j) => j.submit(),
            CommandLog::Simulated(j) => j.commit(),
        }
    }

    /// Resolves the batches whose appends were answered, in order (with `wait`: waits for
    /// the oldest one's answer first). An error: an append failed, and neither it nor
    /// anything submitted after it is committed.
    pub fn poll(&mut self, wait: bool) -> io::Result<()> {
        match self {
            CommandLog::Local(_) | CommandLog::Simulated(_) => Ok(()),
            CommandLog::JetStream(j) => j.poll(wait),
        }
    }

    /// Batches submitted and not committed yet: those submitted before them are committed.
    pub fn batches_in_flight(&self) -> usize {
        match self {
            CommandLog::Local(_) | CommandLog::Simulated(_) => 0,
            CommandLog::JetStream(j) => j.batches_in_flight(),
        }
    }

    /// Appends (batches and checkpoints) sent and not answered yet.
    pub fn in_flight(&self) -> usize {
        match self {
            CommandLog::Local(_) | CommandLog::Simulated(_) => 0,
            CommandLog::JetStream(j) => j.in_flight(),
        }
    }

    /// The most appends in flight at once (`log.appends_in_flight` with JetStream).
    pub fn max_in_flight(&self) -> usize {
        match self {
            CommandLog::Local(_) | CommandLog::Simulated(_) => 1,
            CommandLog::JetStream(j) => j.max_in_flight(),
        }
    }

    /// Called when the sequencer is quiet.
    pub fn on_quiet(&mut self, now: Instant) -> io::Result<()> {
        match self {
            CommandLog::Local(j) => j.checkpoint_if_quiet(now).map(|_| ()),
            CommandLog::JetStream(j) => j.check_lease(),
            CommandLog::Simulated(j) => j.check(),
        }
    }

    /// Everything appended, durable (at shutdown, and after the start-up commands).
    pub fn sync(&mut self) -> io::Result<()> {
        match self {
            CommandLog::Local(j) => j.sync().map(|_| ()),
            CommandLog::JetStream(j) => j.commit(),
            CommandLog::Simulated(j) => j.commit(),
        }
    }

    /// How far the local journal is synced, for a snapshot to wait on (`None`: a snapshot need
    /// not wait, as under durability `none` or with JetStream, whose commit is synchronous).
    pub fn synced_progress(&self) -> Option<rialto_journal::SyncedProgress> {
        match self {
            CommandLog::Local(j) => match j.config().durability {
                rialto_journal::Durability::None => None,
                _ => Some(j.synced_progress()),
            },
            CommandLog::JetStream(_) | CommandLog::Simulated(_) => None,
        }
    }

    /// Whether snapshots may archive journal segments (there are none with JetStream).
    pub fn is_local(&self) -> bool {
        matches!(self, CommandLog::Local(_))
    }

    /// With JetStream and `log.snapshots_kept` above 0: what puts the leader's snapshots
    /// into the venue's snapshot bucket and trims the stream below them.
    pub fn snapshot_uploader(&self) -> Option<crate::snapstore::Uploader> {
        let CommandLog::JetStream(j) = self else {
            return None;
        };
        if j.snapshots_kept == 0 {
            return None;
        }
        match crate::snapstore::SnapshotStore::open(j.connection.clone()) {
            Ok(store) => Some(crate::snapstore::Uploader {
                store,
                commits: j.commits.clone(),
                keep: j.snapshots_kept,
            }),
            Err(e) => {
                tracing::error!("snapshots stay local only: {e:#}");
                None
            }
        }
    }

    /// Writes a checkpoint (the state hash after `seq`) into the log; the local journal has
    /// no such record.
    pub fn checkpoint(&mut self, seq: u64, state_hash: &[u8; 32]) -> io::Result<()> {
        match self {
            CommandLog::Local(_) | CommandLog::Simulated(_) => Ok(()),
            CommandLog::JetStream(j) => j.publish_checkpoint(seq, state_hash),
        }
    }
}

// ----- connecting ----------------------------------------------------------------------------

/// A connection to the cluster, with the runtime its client runs on.
pub struct Connection {
    pub runtime: Arc<tokio::runtime::Runtime>,
    pub js: jetstream::Context,
    pub names: Names,
    timeout: Duration,
    /// The node's stop flag (SIGINT/SIGTERM): a look at the cluster gives up once it is set,
    /// so a node whose NATS servers are gone stops at once rather than after a timeout.
    stop: Arc<AtomicBool>,
    /// Since when the cluster has answered only "no stream found" (`None`: it has not).
    no_stream_since: std::sync::Mutex<Option<Instant>>,
}

impl Connection {
    /// Connects to `settings.nats` and makes sure the venue's stream and lease bucket exist
    /// (created with `settings.replicas` copies if not), retrying for up to `within` while the
    /// cluster elects its leaders.
    pub fn open(settings: &LogSettings, within: Duration) -> anyhow::Result<Connection> {
        Connection::open_until_stopped(settings, within, Arc::new(AtomicBool::new(false)))
    }

    /// [`Self::open`] for a node that may be told to stop while it waits for NATS: once
    /// `stop` is set the retries give up with [`StoppedAsStandby`], and the connection's own
    /// looks at the cluster do too ([`Self::until_stopped`]).
    pub fn open_until_stopped(
        settings: &LogSettings,
        within: Duration,
        stop: Arc<AtomicBool>,
    ) -> anyhow::Result<Connection> {
        let runtime = Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("rialto-nats")
                .enable_all()
                .build()
                .context("cannot start the NATS client's runtime")?,
        );
        let names = Names::of(&settings.venue);
        let timeout = Duration::from_millis(settings.ack_timeout_ms);
        let addrs = nats_access::server_addrs(settings)?;
        let connecting = async {
            let options = nats_access::connect_options(settings, timeout).await?;
            let deadline = Instant::now() + within;
            // NATS may be starting too: try again until the deadline.
            let client = loop {
                let connected = options.clone().connect(addrs.as_slice()).await;
                match connected {
                    Ok(client) => break client,
                    // Credentials or TLS that NATS refuses will not improve by waiting.
                    Err(e) if nats_access::is_refusal(&e) => {
                        return Err(anyhow::Error::new(e).context(format!(
                            "NATS at {} refused this node (log.nats_* settings, \
                             docs/replication.md \"Securing NATS\")",
                            nats_access::printable_servers(settings)
                        )));
                    }
                    Err(e) if Instant::now() < deadline => {
                        tracing::debug!("NATS not reachable yet: {e}");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Err(e) => {
                        return Err(anyhow::Error::new(e).context(format!(
                            "cannot connect to NATS at {} within {within:?}",
                            nats_access::printable_servers(settings)
                        )));
                    }
                }
            };
            let js = jetstream::ContextBuilder::new()
                .timeout(timeout)
                .build(client);
            loop {
                match ensure_stream_and_bucket(&js, &names, settings).await {
                    Ok(()) => break,
                    Err(e) if Instant::now() < deadline => {
                        tracing::debug!("JetStream not ready yet: {e:#}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => return Err(e),
                }
            }
            anyhow::Ok(js)
        };
        let watched = stop.clone();
        let js = runtime.block_on(async move {
            tokio::select! {
                js = connecting => js,
                _ = stopped(&watched) => Err(StoppedAsStandby.into()),
            }
        })?;
        Ok(Connection {
            runtime,
            js,
            names,
            timeout,
            stop,
            no_stream_since: std::sync::Mutex::new(None),
        })
    }

    /// A request to the cluster succeeded: the "no stream found" watchdog starts afresh.
    pub fn answered(&self) {
        let mut since = self
            .no_stream_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *since = None;
    }

    /// A request to the cluster failed with `error`. A nats-server that lost its JetStream
    /// state answers "no stream found" to every request while the others hold the stream:
    /// once nothing else was answered for [`NO_STREAM_RECONNECT`], the client is made to
    /// reconnect, to whichever server of `log.nats` it picks next.
    pub fn failed(&self, error: &str) {
        if !(error.contains("no stream found") || error.contains("stream not found")) {
            return;
        }
        let mut since = self
            .no_stream_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let first = *since.get_or_insert_with(Instant::now);
        if first.elapsed() < NO_STREAM_RECONNECT {
            return;
        }
        *since = Some(Instant::now());
        drop(since);
        tracing::warn!(
            "the NATS server this node is connected to has answered \"no stream found\" for \
             {NO_STREAM_RECONNECT:?}: reconnecting to another one"
        );
        let client = self.js.client();
        let reconnected = self
            .runtime
            .block_on(async { tokio::time::timeout(self.timeout, client.force_reconnect()).await });
        if !matches!(reconnected, Ok(Ok(()))) {
            tracing::warn!("the forced reconnect did not complete; the client goes on trying");
        }
    }

    /// Runs `f` on the client's runtime unless the node is told to stop first: then
    /// [`StoppedAsStandby`]. For what a node that does not lead asks the cluster (the leader's
    /// appends are never cut short: it drains them before it stops).
    pub fn until_stopped<T>(
        &self,
        f: impl std::future::Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        let stop = self.stop.clone();
        self.runtime.block_on(async move {
            tokio::select! {
                result = f => result,
                _ = stopped(&stop) => Err(StoppedAsStandby.into()),
            }
        })
    }

    /// How long a request to the cluster may take (`log.ack_timeout_ms`).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The stream's last message sequence (0: empty).
    pub fn last_stream_seq(&self) -> anyhow::Result<u64> {
        self.until_stopped(async {
            let stream = self.js.get_stream(&self.names.stream).await?;
            let info = stream.get_info().await?;
            anyhow::Ok(info.state.last_sequence)
        })
    }

    pub fn lease_bucket(&self) -> anyhow::Result<kv::Store> {
        self.until_stopped(async { Ok(self.js.get_key_value(&self.names.bucket).await?) })
            .with_context(|| format!("cannot open the lease bucket {}", self.names.bucket))
    }

    /// The stream's first message sequence (above 1 once it was trimmed) and its last.
    pub fn stream_seqs(&self) -> anyhow::Result<(u64, u64)> {
        self.until_stopped(async {
            let stream = self.js.get_stream(&self.names.stream).await?;
            let info = stream.get_info().await?;
            anyhow::Ok((info.state.first_sequence, info.state.last_sequence))
        })
    }

    /// Reads the stream from its first message, for [`Follower::apply`].
    pub fn reader(&self) -> anyhow::Result<StreamReader> {
        self.reader_from(1)
    }

    /// Reads the stream from message `start` (or the first one after it still there).
    pub fn reader_from(&self, start: u64) -> anyhow::Result<StreamReader> {
        let deliver_policy = match start {
            0 | 1 => consumer::DeliverPolicy::All,
            start_sequence => consumer::DeliverPolicy::ByStartSequence { start_sequence },
        };
        let messages = self.until_stopped(async {
            let stream = self.js.get_stream(&self.names.stream).await?;
            let consumer = stream
                .create_consumer(consumer::pull::OrderedConfig {
                    deliver_policy,
                    ..Default::default()
                })
                .await?;
            anyhow::Ok(consumer.messages().await?)
        })?;
        Ok(StreamReader { messages })
    }
}

async fn ensure_stream_and_bucket(
    js: &jetstream::Context,
    names: &Names,
    settings: &LogSettings,
) -> anyhow::Result<()> {
    js.get_or_create_stream(stream::Config {
        name: names.stream.clone(),
        subjects: vec![names.subject.clone()],
        num_replicas: settings.replicas,
        storage: stream::StorageType::File,
        max_message_size: MAX_BATCH_BYTES as i32 + 4096,
        ..Default::default()
    })
    .await
    .with_context(|| format!("cannot create or open the stream {}", names.stream))?;
    if js.get_key_value(&names.bucket).await.is_err() {
        js.create_key_value(kv::Config {
            bucket: names.bucket.clone(),
            history: 1,
            max_age: Duration::from_millis(settings.lease_ms),
            num_replicas: settings.replicas,
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .with_context(|| format!("cannot create the lease bucket {}", names.bucket))?;
    }
    if js.get_key_value(&names.venue_bucket).await.is_err() {
        js.create_key_value(kv::Config {
            bucket: names.venue_bucket.clone(),
            history: 1,
            num_replicas: settings.replicas,
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .with_context(|| format!("cannot create the venue bucket {}", names.venue_bucket))?;
    }
    crate::snapstore::ensure_bucket(js, names, settings.replicas).await?;
    crate::fixstore::ensure_bucket(js, &names.fix_bucket, settings.replicas).await?;
    Ok(())
}

/// The stream's messages in order, from the first.
pub struct StreamReader {
    messages: consumer::pull::Ordered,
}

/// One message of the stream.
pub struct LogMessage {
    pub stream_seq: u64,
    pub headers: Option<HeaderMap>,
    pub payload: Bytes,
}

impl StreamReader {
    /// The next message, or `None` if none came within `wait`.
    pub fn next(
        &mut self,
        connection: &Connection,
        wait: Duration,
    ) -> anyhow::Result<Option<LogMessage>> {
        connection.runtime.block_on(async {
            match tokio::time::timeout(wait, self.messages.next()).await {
                Err(_) => Ok(None),
                Ok(None) => anyhow::bail!("the stream's consumer ended"),
                Ok(Some(Err(e))) => Err(anyhow::anyhow!("reading the stream: {e}")),
                Ok(Some(Ok(message))) => {
                    let stream_seq = message
                        .info()
                        .map_err(|e| anyhow::anyhow!("a stream message without its info: {e}"))?
                        .stream_sequence;
                    Ok(Some(LogMessage {
                        stream_seq,
                        headers: message.headers.clone(),
                        payload: message.payload.clone(),
                    }))
                }
            }
        })
    }
}

/// The longest a follower waits before it tries the cluster again after an error.
const RETRY_MAX: Duration = Duration::from_secs(1);
/// How often a look at the cluster looks at the stop flag while it waits for an answer.
const STOP_LOOK: Duration = Duration::from_millis(20);

/// Returns once `stop` is set (looked at every [`STOP_LOOK`]).
async fn stopped(stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(STOP_LOOK).await;
    }
}
/// How long the cluster may answer only "no stream found" before the client reconnects.
pub const NO_STREAM_RECONNECT: Duration = Duration::from_secs(2);

/// How long to wait before try number `failures` (1, 2, ...): 50 ms doubling to a second.
fn backoff(failures: u32) -> Duration {
    let ms = 50u64.saturating_mul(1 << failures.saturating_sub(1).min(5));
    Duration::from_millis(ms).min(RETRY_MAX)
}

/// How long a node that starts tries a request to the cluster again before it gives up.
pub const START_RETRY: Duration = Duration::from_secs(30);

/// Runs `f` until it succeeds, for up to [`START_RETRY`], waiting with backoff between tries:
/// a node that starts while a nats-server restarts (or a stream elects its leader) waits for
/// it rather than exit.
pub fn retrying<T>(what: &str, mut f: impl FnMut() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let deadline = Instant::now() + START_RETRY;
    let mut failures = 0;
    loop {
        match f() {
            Ok(value) => return Ok(value),
            Err(e) if e.is::<StoppedAsStandby>() => return Err(e),
            Err(e) if Instant::now() < deadline => {
                failures += 1;
                tracing::warn!(failures, "{what} failed, trying again: {e:#}");
                std::thread::sleep(backoff(failures));
            }
            Err(e) => return Err(e.context(format!("{what} failed for {START_RETRY:?}"))),
        }
    }
}

/// Reads the stream on from a position, and rides out transient trouble with the cluster (a
/// request that times out, a nats-server that restarts, a stream whose leader is being
/// elected): after an error it waits (with backoff) and opens the stream again after the last
/// message applied. Only the log itself (a hole, damage, a divergence) stops a follower, and
/// that is the follower's to find.
pub struct Follow {
    reader: Option<StreamReader>,
    failures: u32,
    /// When a message last came (or the stream's end was last looked at).
    heard_at: Instant,
}

impl Follow {
    /// Follows from stream message `start` on.
    pub fn from(connection: &Connection, start: u64) -> Follow {
        let mut follow = Follow {
            reader: None,
            failures: 0,
            heard_at: Instant::now(),
        };
        match connection.reader_from(start) {
            Ok(reader) => follow.reader = Some(reader),
            Err(e) => follow.failed(&e),
        }
        follow
    }

    /// The next message after stream message `after` (the last one applied), or `None` if
    /// none came within `wait` or the cluster failed to answer (tried again at the next call).
    pub fn next(
        &mut self,
        connection: &Connection,
        after: u64,
        wait: Duration,
    ) -> Option<LogMessage> {
        let reader = match &mut self.reader {
            Some(reader) => reader,
            None => match connection.reader_from(after + 1) {
                Ok(reader) => self.reader.insert(reader),
                // The node stops: its caller sees the flag.
                Err(e) if e.is::<StoppedAsStandby>() => return None,
                Err(e) => {
                    self.failed(&e);
                    connection.failed(&format!("{e:#}"));
                    std::thread::sleep(backoff(self.failures).min(wait.max(RETRY_MAX / 20)));
                    return None;
                }
            },
        };
        match reader.next(connection, wait) {
            Ok(Some(message)) => {
                connection.answered();
                if self.failures > 0 {
                    tracing::info!("reading the log again after {} failures", self.failures);
                    self.failures = 0;
                }
                self.heard_at = Instant::now();
                Some(message)
            }
            Ok(None) => {
                // A consumer that went quiet across a nats-server's restart while the stream
                // grew is read afresh (a node that exited on it used to start a new one).
                if self.heard_at.elapsed() >= connection.timeout {
                    self.heard_at = Instant::now();
                    if let Ok(last) = connection.last_stream_seq()
                        && last > after
                    {
                        tracing::warn!(
                            after,
                            last,
                            "the log's consumer delivered nothing while the stream holds more: \
                             reading it again"
                        );
                        self.reader = None;
                    }
                }
                None
            }
            Err(e) => {
                self.reader = None;
                self.failed(&e);
                connection.failed(&format!("{e:#}"));
                std::thread::sleep(backoff(self.failures));
                None
            }
        }
    }

    fn failed(&mut self, e: &anyhow::Error) {
        self.failures += 1;
        tracing::warn!(
            failures = self.failures,
            "reading the log failed, trying again: {e:#}"
        );
    }
}

// ----- following the log ---------------------------------------------------------------------

/// An engine kept up with the log: recovery, a hot standby, `rialto journal verify --nats`.
pub struct Follower {
    pub engine: Engine,
    /// The latest sequencer time seen.
    pub last_ts_ns: i64,
    /// The last stream message applied (0: none).
    pub stream_seq: u64,
    /// The stream message holding the engine's last command (0: not known; a snapshot's
    /// command whose message was not read).
    pub last_seq_stream_seq: u64,
    /// Commands applied from the log.
    pub applied: u64,
    /// The engine's seq when following began (0: from the venue's first command; else a
    /// snapshot's).
    pub from_seq: u64,
    /// Checkpoints found equal to this node's own state hash.
    pub checkpoints_matched: u64,
    checkpoint_every: u64,
    /// This node's state hash at recent checkpoint seqs, oldest first.
    hashes: VecDeque<(u64, [u8; 32])>,
}

impl Follower {
    pub fn new(engine: Engine, checkpoint_every: u64) -> Follower {
        let from_seq = engine.last_seq();
        Follower {
            engine,
            last_ts_ns: 0,
            stream_seq: 0,
            last_seq_stream_seq: 0,
            applied: 0,
            from_seq,
            checkpoints_matched: 0,
            checkpoint_every,
            hashes: VecDeque::with_capacity(HASHES_KEPT),
        }
    }

    /// Applies one stream message: a batch of records (those at or below the engine's seq,
    /// which a snapshot covers, are passed over) or a checkpoint, compared with this node's
    /// state hash at its seq. An error is a log this node cannot follow: stop loudly.
    pub fn apply(&mut self, message: &LogMessage) -> Result<(), String> {
        self.apply_each(message, &mut |_, _, _, _| {})
    }

    /// [`Self::apply`], calling `each` with the engine, the seq, the time and the command of
    /// every record just before the record is applied (`rialto journal dump --nats`).
    pub fn apply_each(
        &mut self,
        message: &LogMessage,
        each: &mut dyn FnMut(&Engine, u64, i64, &Command),
    ) -> Result<(), String> {
        if message.stream_seq <= self.stream_seq {
            return Ok(());
        }
        let checkpoint = message
            .headers
            .as_ref()
            .and_then(|h| h.get(CHECKPOINT_HEADER))
            .map(|v| v.as_str().to_owned());
        match checkpoint {
            Some(text) => self.check(&text)?,
            None => self
                .apply_records(message.stream_seq, &message.payload, each)
                .map_err(|e| format!("stream message {} of the log: {e}", message.stream_seq))?,
        }
        self.stream_seq = message.stream_seq;
        Ok(())
    }

    /// Applies a batch's records, exactly as recovery applies a journal's.
    fn apply_records(
        &mut self,
        stream_seq: u64,
        payload: &[u8],
        each: &mut dyn FnMut(&Engine, u64, i64, &Command),
    ) -> Result<(), String> {
        let mut pos = 0;
        while pos < payload.len() {
            let record = parse_record(payload, pos).map_err(|p| format!("{p:?}"))?;
            pos += record.size;
            let last = self.engine.last_seq();
            if record.seq == last {
                self.last_seq_stream_seq = stream_seq;
            }
            if record.seq <= last {
                continue;
            }
            if record.seq != last + 1 {
                return Err(format!(
                    "seq {} follows seq {last}: the log has a hole",
                    record.seq
                ));
            }
            self.last_ts_ns = self.last_ts_ns.max(record.ts_ns);
            each(&self.engine, record.seq, record.ts_ns, &record.command);
            // A rejection is part of the history: it changed nothing then and changes nothing now.
            let _ = self
                .engine
                .apply(record.seq, record.ts_ns, &record.command, &mut ());
            self.applied += 1;
            self.last_seq_stream_seq = stream_seq;
            if self.checkpoint_every > 0 && record.seq.is_multiple_of(self.checkpoint_every) {
                if self.hashes.len() == HASHES_KEPT {
                    self.hashes.pop_front();
                }
                self.hashes
                    .push_back((record.seq, self.engine.state_hash()));
            }
        }
        Ok(())
    }

    /// Compares a checkpoint (`<seq> <hash>`) with this node's own hash at that seq.
    fn check(&mut self, text: &str) -> Result<(), String> {
        let (seq, hash) = parse_checkpoint(text)
            .ok_or_else(|| format!("a malformed checkpoint in the log: {text:?}"))?;
        if seq > self.engine.last_seq() {
            return Err(format!(
                "a checkpoint at seq {seq} before the command itself (this node is at seq {})",
                self.engine.last_seq()
            ));
        }
        // Seqs a snapshot covers, or older than the hashes kept, cannot be compared.
        let Some((_, own)) = self.hashes.iter().find(|(s, _)| *s == seq) else {
            return Ok(());
        };
        if *own != hash {
            return Err(format!(
                "DIVERGED at seq {seq}: the leader's state hash is {}, this node's is {}; this \
                 node's state is not the venue's and it stops",
                crate::auth::hex(&hash),
                crate::auth::hex(own)
            ));
        }
        self.checkpoints_matched += 1;
        Ok(())
    }
}

/// `<seq> <epoch ns>` ([`FEED_EPOCH_HEADER`]).
pub fn parse_feed_epoch(text: &str) -> Option<(u64, i64)> {
    let (seq, epoch) = text.trim().split_once(' ')?;
    Some((seq.parse().ok()?, epoch.parse().ok()?))
}

/// The feed epoch a message announces, if it is a [`FEED_EPOCH_HEADER`] message.
pub fn feed_epoch_of(message: &LogMessage) -> Option<Result<(u64, i64), String>> {
    let text = message.headers.as_ref()?.get(FEED_EPOCH_HEADER)?.as_str();
    Some(
        parse_feed_epoch(text)
            .ok_or_else(|| format!("a malformed feed epoch in the log: {text:?}")),
    )
}

/// `<seq> <64 hex digits>`.
pub fn parse_checkpoint(text: &str) -> Option<(u64, [u8; 32])> {
    let (seq, hex) = text.trim().split_once(' ')?;
    let seq = seq.parse().ok()?;
    if hex.len() != 64 {
        return None;
    }
    let mut hash = [0u8; 32];
    for (i, byte) in hash.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some((seq, hash))
}

// ----- what every node shares ---------------------------------------------------------------

/// The venue key's entry in the venue bucket (64 hex digits).
const VENUE_KEY_ENTRY: &str = "venue_key";
/// The shared settings' entry (`ServerConfig::shared_settings`).
const SETTINGS_ENTRY: &str = "settings";

/// Makes this node one of the venue's: the venue bucket's settings must be this node's
/// `settings` (the first node stores its own), and its venue key becomes this node's
/// `data_dir/venue.key` (the first node stores its own, or a new one). A node whose settings
/// or venue key differ from the venue's refuses to join: it would decide differently, or
/// refuse every user's secret.
pub fn join_venue(connection: &Connection, data_dir: &Path, settings: &str) -> anyhow::Result<()> {
    let names = &connection.names;
    let bucket = connection
        .runtime
        .block_on(connection.js.get_key_value(&names.venue_bucket))
        .with_context(|| format!("cannot open the venue bucket {}", names.venue_bucket))?;
    let venue_settings = first_or_stored(connection, &bucket, SETTINGS_ENTRY, settings)?;
    if venue_settings != settings {
        let ours: Vec<&str> = settings.lines().collect();
        let differ: Vec<String> = venue_settings
            .lines()
            .filter(|l| !ours.contains(l))
            .map(|l| format!("the venue has `{l}`"))
            .chain(
                ours.iter()
                    .filter(|l| !venue_settings.lines().any(|v| v == **l))
                    .map(|l| format!("this node has `{l}`")),
            )
            .collect();
        anyhow::bail!(
            "this node's settings are not those of venue {} (every node of a venue must share \
             them): {}; this node refuses to join",
            connection.names.stream,
            differ.join(", ")
        );
    }
    let local = crate::auth::read_key(data_dir)?;
    let stored = connection
        .runtime
        .block_on(bucket.get(VENUE_KEY_ENTRY))
        .context("reading the venue key from the cluster")?;
    let proposed = match (&stored, local) {
        (Some(_), _) => None,
        (None, Some(key)) => Some(key),
        // A venue that has commands already has a key somewhere: a new one would make every
        // user's secret wrong.
        (None, None) if connection.last_stream_seq()? > 0 => anyhow::bail!(
            "venue {} has commands but no venue key in the cluster (it was started before the \
             key was kept there): start a node whose data directory holds the venue's \
             venue.key first, and it will store it",
            connection.names.venue
        ),
        (None, None) => Some(crate::auth::random_key()?),
    };
    let text = match proposed {
        Some(key) => first_or_stored(
            connection,
            &bucket,
            VENUE_KEY_ENTRY,
            &crate::auth::hex(&key),
        )?,
        None => String::from_utf8_lossy(&stored.unwrap_or_default()).into_owned(),
    };
    let venue_key = crate::auth::parse_hex_key(text.trim()).ok_or_else(|| {
        anyhow::anyhow!(
            "the venue key in bucket {} is not 64 hex digits",
            names.venue_bucket
        )
    })?;
    match local {
        Some(key) if key == venue_key => {}
        Some(_) => anyhow::bail!(
            "{} holds another venue key than venue {}'s: this node refuses to join (users' \
             secrets would differ between nodes); give it an empty data directory, or the \
             venue's own venue.key",
            data_dir.join("venue.key").display(),
            connection.names.venue
        ),
        None => {
            crate::auth::write_key(data_dir, &venue_key)?;
            tracing::info!("adopted the venue's key from the cluster");
        }
    }
    Ok(())
}

/// The entry's value: `ours` if this node stores it first, else the one stored.
fn first_or_stored(
    connection: &Connection,
    bucket: &kv::Store,
    entry: &str,
    ours: &str,
) -> anyhow::Result<String> {
    connection.runtime.block_on(async {
        if let Some(value) = bucket.get(entry).await? {
            return anyhow::Ok(String::from_utf8_lossy(&value).into_owned());
        }
        match bucket.create(entry, Bytes::from(ours.to_owned())).await {
            Ok(_) => Ok(ours.to_owned()),
            // Another node stored it a moment before.
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                let value = bucket.get(entry).await?.unwrap_or_default();
                Ok(String::from_utf8_lossy(&value).into_owned())
            }
            Err(e) => Err(anyhow::anyhow!("storing {entry} in the venue bucket: {e}")),
        }
    })
}

/// The issued API keys' entry: `api-keys.json` as the leader last wrote it (salts and hashes,
/// never a secret).
const API_KEYS_ENTRY: &str = "api_keys";

/// Makes `data_dir/api-keys.json` the venue's before this node serves: the cluster's copy when
/// there is one; else this node's own file, if any, becomes the cluster's (a venue whose keys
/// were made before they were kept there).
pub fn adopt_api_keys(connection: &Connection, data_dir: &Path) -> anyhow::Result<()> {
    let path = data_dir.join(crate::web::keys::FILE_NAME);
    let bucket = connection
        .runtime
        .block_on(connection.js.get_key_value(&connection.names.venue_bucket))
        .context("cannot open the venue bucket")?;
    let stored = connection
        .runtime
        .block_on(bucket.get(API_KEYS_ENTRY))
        .context("reading the API keys from the cluster")?;
    match stored {
        Some(bytes) => {
            crate::web::keys::write_atomically(&path, &bytes)
                .with_context(|| format!("cannot write {}", path.display()))?;
            tracing::info!("took the venue's API keys from the cluster");
        }
        None => {
            if let Ok(bytes) = std::fs::read(&path) {
                api_key_mirror(connection)(&bytes)?;
            }
        }
    }
    Ok(())
}

/// What the key store calls with the whole key file before it writes it: the file goes into
/// the venue bucket first, so a key is never made or revoked on the leader alone.
pub fn api_key_mirror(connection: &Connection) -> crate::web::keys::Mirror {
    let (runtime, js, bucket) = (
        connection.runtime.clone(),
        connection.js.clone(),
        connection.names.venue_bucket.clone(),
    );
    Box::new(move |bytes: &[u8]| {
        let bytes = Bytes::copy_from_slice(bytes);
        runtime.block_on(async {
            let store = js.get_key_value(&bucket).await?;
            store.put(API_KEYS_ENTRY, bytes).await?;
            anyhow::Ok(())
        })
    })
}

// ----- the lease -----------------------------------------------------------------------------

/// The leader's hold on the lease, renewed by a task on the client's runtime.
struct LeaseHold {
    /// Set when a renewal found the lease taken: another node may lead.
    lost: AtomicBool,
    /// Until when (ms after `epoch`) the lease surely holds: the start of the last successful
    /// renewal plus 80% of the TTL.
    valid_until_ms: AtomicU64,
    revision: AtomicU64,
    /// The lease entry's revision when this node took it: every later holder took it at a
    /// higher one, so it numbers the terms of leadership.
    term: u64,
    epoch: Instant,
}

impl LeaseHold {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

/// A view of the leader's lease for what else writes to the cluster on its behalf (the FIX
/// session stores): it refuses once the lease was lost or may have lapsed.
#[derive(Clone)]
pub struct LeaseGuard(Arc<LeaseHold>);

impl LeaseGuard {
    /// Refuses once the lease was lost or may have lapsed: this node must not write.
    pub fn check(&self) -> io::Result<()> {
        let lease = &self.0;
        if lease.lost.load(Ordering::SeqCst) {
            return Err(io::Error::other(
                "the lease was taken by another node: this node no longer leads",
            ));
        }
        if lease.now_ms() > lease.valid_until_ms.load(Ordering::SeqCst) {
            return Err(io::Error::other(
                "the lease could not be renewed in time and may have lapsed: this node no \
                 longer leads",
            ));
        }
        Ok(())
    }

    /// This node's term of leadership: higher than every earlier leader's.
    pub fn term(&self) -> u64 {
        self.0.term
    }
}

/// A node's identity in the lease: its pid and a random number.
fn node_id() -> String {
    let mut random = [0u8; 6];
    let _ = getrandom::getrandom(&mut random);
    format!("{}-{}", std::process::id(), crate::auth::hex(&random))
}

/// What the lease holds now: `Some(holder)` while a node holds it.
pub fn lease_holder(connection: &Connection, bucket: &kv::Store) -> anyhow::Result<Option<String>> {
    let entry = connection.until_stopped(async { Ok(bucket.entry(LEASE_KEY).await?) })?;
    Ok(entry
        .filter(|e| e.operation == kv::Operation::Put)
        .map(|e| String::from_utf8_lossy(&e.value).into_owned()))
}

/// Tries to take the lease; its revision if taken.
fn try_take_lease(
    connection: &Connection,
    bucket: &kv::Store,
    node: &str,
) -> anyhow::Result<Option<u64>> {
    let value = Bytes::from(node.to_owned());
    connection.until_stopped(async {
        match bucket.create(LEASE_KEY, value).await {
            Ok(revision) => Ok(Some(revision)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(anyhow::anyhow!("taking the lease: {e}")),
        }
    })
}

/// Starts renewing a lease just taken at `revision` (taken at `taken_at`).
fn hold_lease(
    connection: &Connection,
    bucket: kv::Store,
    node: String,
    revision: u64,
    taken_at: Instant,
    ttl: Duration,
) -> Arc<LeaseHold> {
    let epoch = taken_at;
    let margin = ttl / 5;
    let hold = Arc::new(LeaseHold {
        lost: AtomicBool::new(false),
        valid_until_ms: AtomicU64::new((ttl - margin).as_millis() as u64),
        revision: AtomicU64::new(revision),
        term: revision,
        epoch,
    });
    let task_hold = hold.clone();
    connection.runtime.spawn(async move {
        let hold = task_hold;
        let value = Bytes::from(node);
        loop {
            tokio::time::sleep(ttl / 4).await;
            if hold.lost.load(Ordering::SeqCst) {
                return;
            }
            let sent_ms = hold.now_ms();
            let revision = hold.revision.load(Ordering::SeqCst);
            match bucket.update(LEASE_KEY, value.clone(), revision).await {
                Ok(next) => {
                    hold.revision.store(next, Ordering::SeqCst);
                    let until = sent_ms + (ttl - margin).as_millis() as u64;
                    hold.valid_until_ms.store(until, Ordering::SeqCst);
                }
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                    tracing::error!("the lease was taken by another node: this node stops leading");
                    hold.lost.store(true, Ordering::SeqCst);
                    return;
                }
                // Perhaps a moment's trouble: the next renewal may work; the sequencer stops
                // appending once the lease may have lapsed.
                Err(e) => tracing::warn!("renewing the lease failed: {e}"),
            }
        }
    });
    hold
}

// ----- the leader's writer -------------------------------------------------------------------

/// The leader's appender: one message per batch, fenced by the stream's last sequence, with
/// up to `log.appends_in_flight` appends sent before the oldest is answered. Append N+1
/// expects the stream sequence N is to get, so JetStream stores them in order or refuses them
/// all from the first one another writer got ahead of; they are resolved in order, and a
/// batch counts as committed only once its append and every earlier one were acknowledged.
pub struct JetStreamLog {
    connection: Arc<Connection>,
    /// The stream's last sequence as this node knows it from answered appends: the oldest
    /// append in flight expects it, the next one expects it plus one, and so on.
    last_stream_seq: u64,
    batch: Vec<u8>,
    /// The first and last command of `batch` (meaningful while it is not empty).
    batch_seqs: (u64, u64),
    /// Appends sent and not resolved yet, oldest first.
    in_flight: VecDeque<InFlight>,
    /// How many of `in_flight` carry a batch (the others: checkpoints, a feed epoch).
    batches_in_flight: usize,
    /// `log.appends_in_flight`: the most appends sent and not answered at once.
    max_in_flight: usize,
    /// Appends numbered up to this one were in flight when an earlier one went unanswered:
    /// a refusal by the fence may be that earlier append's doing, so they are tried again
    /// before this node calls itself deposed.
    doubtful_through: u64,
    /// Why this writer stopped: every later call fails with it.
    failed: Option<String>,
    /// Which stream message holds which commands, for the snapshot bucket.
    commits: crate::snapstore::CommitMap,
    /// `log.snapshots_kept` (0: snapshots are not put into the bucket).
    snapshots_kept: usize,
    lease: Option<Arc<LeaseHold>>,
    bucket: Option<Box<kv::Store>>,
    /// This writer's name in its appends' `Nats-Msg-Id` (with a count of its appends).
    writer_id: String,
    appends: u64,
}

/// One append sent and not resolved yet.
struct InFlight {
    /// The acknowledgement, awaited by a task on the client's runtime.
    ack: tokio::task::JoinHandle<
        Result<jetstream::publish::PublishAck, jetstream::context::PublishError>,
    >,
    /// The message as sent (fence and id included), to send again.
    message: PublishMessage,
    id: String,
    /// The append's number among this writer's (1, 2, ...).
    number: u64,
    /// The stream's last sequence it expects.
    expected: u64,
    /// The commands it holds (`None`: a checkpoint or a feed epoch).
    seqs: Option<(u64, u64)>,
}

/// The most appends `log.appends_in_flight` allows in flight.
pub const MAX_APPENDS_IN_FLIGHT: usize = 64;

impl JetStreamLog {
    /// A writer that appends after stream message `last_stream_seq`, one append in flight
    /// (see [`Self::set_max_in_flight`]); `None` for a lease means the fence alone guards the
    /// log (tests of the fence).
    pub fn new(connection: Arc<Connection>, last_stream_seq: u64) -> JetStreamLog {
        JetStreamLog {
            connection,
            last_stream_seq,
            batch: Vec::with_capacity(MAX_BATCH_BYTES),
            batch_seqs: (0, 0),
            in_flight: VecDeque::with_capacity(MAX_APPENDS_IN_FLIGHT),
            batches_in_flight: 0,
            max_in_flight: 1,
            doubtful_through: 0,
            failed: None,
            commits: crate::snapstore::CommitMap::default(),
            snapshots_kept: 0,
            lease: None,
            bucket: None,
            writer_id: node_id(),
            appends: 0,
        }
    }

    /// Allows up to `n` appends in flight (1 to [`MAX_APPENDS_IN_FLIGHT`]).
    pub fn set_max_in_flight(&mut self, n: usize) {
        self.max_in_flight = n.clamp(1, MAX_APPENDS_IN_FLIGHT);
    }

    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// Appends sent and not resolved yet (batches, checkpoints and feed epochs).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Batches sent and not resolved yet.
    pub fn batches_in_flight(&self) -> usize {
        self.batches_in_flight
    }

    /// The stream's last sequence as the answered appends tell it.
    pub fn last_stream_seq(&self) -> u64 {
        self.last_stream_seq
    }

    pub fn append(&mut self, seq: u64, ts_ns: i64, cmd: &Command) {
        debug_assert!(self.batch.len() + RECORD_MAX_BYTES <= MAX_BATCH_BYTES);
        if self.batch.is_empty() {
            self.batch_seqs.0 = seq;
        }
        self.batch_seqs.1 = seq;
        encode_record(&mut self.batch, seq, ts_ns, cmd);
    }

    /// Refuses once the lease was lost or may have lapsed: this node must not acknowledge.
    pub fn check_lease(&self) -> io::Result<()> {
        match &self.lease {
            Some(lease) => LeaseGuard(lease.clone()).check(),
            None => Ok(()),
        }
    }

    /// The lease this writer holds, for the other writers of a leader (`None`: no lease, as in
    /// tests of the fence).
    pub fn lease_guard(&self) -> Option<LeaseGuard> {
        self.lease.clone().map(LeaseGuard)
    }

    /// Appends the batch as one message and waits until it, and every append before it, is
    /// acknowledged.
    pub fn commit(&mut self) -> io::Result<()> {
        self.submit()?;
        self.drain()
    }

    /// Sends the batch as one message without waiting for its answer (after waiting for room
    /// if `max_in_flight` appends are in flight); [`Self::poll`] resolves it.
    pub fn submit(&mut self) -> io::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let payload = Bytes::copy_from_slice(&self.batch);
        self.batch.clear();
        self.send(
            PublishMessage::build().payload(payload),
            Some(self.batch_seqs),
        )
    }

    /// Resolves the appends at the front that were answered, in order; with `wait`, waits for
    /// the oldest one's answer first. An append refused or left unanswered for good fails the
    /// writer: nothing after it counts as committed.
    pub fn poll(&mut self, wait: bool) -> io::Result<()> {
        self.resolve(if wait { 1 } else { 0 })
    }

    /// Waits until every append sent is resolved.
    pub fn drain(&mut self) -> io::Result<()> {
        self.resolve(usize::MAX)
    }

    /// Tells the replicas that this node's market data feed starts at engine seq `seq` with
    /// epoch `epoch_ns` ([`FEED_EPOCH_HEADER`]); returns once it is stored.
    pub fn publish_feed_epoch(&mut self, seq: u64, epoch_ns: i64) -> io::Result<()> {
        let text = format!("{seq} {epoch_ns}");
        self.send(
            PublishMessage::build().header(FEED_EPOCH_HEADER, text.as_str()),
            None,
        )?;
        self.drain()
    }

    /// Appends a checkpoint behind the appends in flight (resolved with them).
    pub fn publish_checkpoint(&mut self, seq: u64, state_hash: &[u8; 32]) -> io::Result<()> {
        let text = format!("{seq} {}", crate::auth::hex(state_hash));
        self.send(
            PublishMessage::build().header(CHECKPOINT_HEADER, text.as_str()),
            None,
        )
    }

    fn fail(&mut self, message: String) -> io::Error {
        self.failed = Some(message.clone());
        io::Error::other(message)
    }

    /// Sends `message` fenced after the appends in flight, once there is room for it.
    fn send(&mut self, message: PublishMessage, seqs: Option<(u64, u64)>) -> io::Result<()> {
        while self.in_flight.len() >= self.max_in_flight {
            self.poll(true)?;
        }
        if let Some(why) = &self.failed {
            return Err(io::Error::other(why.clone()));
        }
        self.check_lease()?;
        let expected = self.last_stream_seq + self.in_flight.len() as u64;
        self.appends += 1;
        let id = format!("{}-{}", self.writer_id, self.appends);
        let message = message
            .expected_last_sequence(expected)
            .message_id(id.as_str());
        // Behind an append not answered yet, the sequence alone does not fence: were that one
        // refused because another writer got ahead, this one's expected sequence would be the
        // other writer's message's. So it also names the message it must follow (JetStream
        // checks that as it stores it). A retry needs only the sequence: it is sent once every
        // append before it landed.
        let first_try = match self.in_flight.back() {
            Some(previous) => message
                .clone()
                .expected_last_message_id(previous.id.as_str()),
            None => message.clone(),
        };
        let connection = &self.connection;
        // Sent here, in order (the client writes its messages to the socket in the order they
        // were handed to it); only the acknowledgement is awaited on the client's runtime.
        let sent = connection.runtime.block_on(
            connection
                .js
                .send_publish(connection.names.subject.clone(), first_try),
        );
        let ack = match sent {
            Ok(ack) => connection.runtime.spawn(ack.into_future()),
            Err(e) => connection.runtime.spawn(async move { Err(e) }),
        };
        self.batches_in_flight += usize::from(seqs.is_some());
        self.in_flight.push_back(InFlight {
            ack,
            message,
            id,
            number: self.appends,
            expected,
            seqs,
        });
        Ok(())
    }

    /// Resolves appends at the front, in order, while their answers have come, waiting for
    /// the answers of the first `wait_for` of them.
    fn resolve(&mut self, wait_for: usize) -> io::Result<()> {
        if let Some(why) = &self.failed {
            return Err(io::Error::other(why.clone()));
        }
        let mut waited = 0;
        while let Some(front) = self.in_flight.front_mut() {
            if waited >= wait_for && !front.ack.is_finished() {
                break;
            }
            waited += 1;
            let answer = self.connection.runtime.block_on(&mut front.ack);
            let Some(front) = self.in_flight.pop_front() else {
                break;
            };
            let answer = answer.unwrap_or_else(|e| {
                Err(jetstream::context::PublishError::with_source(
                    jetstream::context::PublishErrorKind::Other,
                    e,
                ))
            });
            match answer {
                Ok(ack) if ack.sequence == front.expected + 1 => self.connection.answered(),
                Ok(ack) => {
                    return Err(self.fail(format!(
                        "JetStream stored the batch at stream seq {} where {} was expected",
                        ack.sequence,
                        front.expected + 1
                    )));
                }
                Err(e)
                    if e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence
                        && front.number > self.doubtful_through =>
                {
                    if let Some(lease) = &self.lease {
                        lease.lost.store(true, Ordering::SeqCst);
                    }
                    return Err(self.fail(format!(
                        "DEPOSED: another writer extended the log past stream seq {}; this \
                         node stops and acknowledges nothing more",
                        front.expected
                    )));
                }
                // Refused as not following the append before it (which landed): another
                // writer got in between, or the stream forgot which message was last (a new
                // stream leader); the retry tells them apart by the sequence alone.
                Err(e) => {
                    // Unanswered (or refused because an earlier append of this writer was):
                    // what was sent after it may be refused for its sake, so those are
                    // tried again too before anything is called a deposition.
                    self.doubtful_through = self.appends;
                    if let Err(e) = self.retry(&front, e) {
                        return Err(self.fail(e.to_string()));
                    }
                }
            }
            // Landed: only now does its batch stop counting as in flight (a failed one
            // never does, so nothing at or after it counts as committed).
            self.batches_in_flight -= usize::from(front.seqs.is_some());
            self.last_stream_seq = front.expected + 1;
            if let Some((first, last)) = front.seqs {
                self.commits.record(first, last, self.last_stream_seq);
            }
        }
        Ok(())
    }

    /// Sends an append again that was not answered (a timeout, a nats-server restarting, the
    /// stream electing its leader) or was refused for an earlier append's sake, with backoff,
    /// for as long as the lease surely holds; each try carries the same `Nats-Msg-Id`, and a
    /// refusal by the fence looks at the message after the expected one: if it is this
    /// append's (an earlier try was stored, its answer lost), the append succeeded; if not,
    /// another writer extended the log (`DEPOSED`).
    fn retry(&self, append: &InFlight, first: jetstream::context::PublishError) -> io::Result<()> {
        let expected = append.expected;
        let mut failures = 0;
        let mut err = first;
        loop {
            if matches!(
                err.kind(),
                jetstream::context::PublishErrorKind::WrongLastSequence
                    | jetstream::context::PublishErrorKind::WrongLastMessageId
            ) {
                if self.stored_as(expected + 1, &append.id) {
                    return Ok(());
                }
                if failures > 0 {
                    if let Some(lease) = &self.lease {
                        lease.lost.store(true, Ordering::SeqCst);
                    }
                    return Err(io::Error::other(format!(
                        "DEPOSED: another writer extended the log past stream seq {expected}; \
                         this node stops and acknowledges nothing more"
                    )));
                }
            } else {
                // Without a lease (tests of the fence) one failure is final.
                if self.lease.is_none() {
                    return Err(io::Error::other(format!(
                        "JetStream did not acknowledge the batch: {err}"
                    )));
                }
                tracing::warn!(
                    failures = failures + 1,
                    "JetStream did not acknowledge the batch, trying again while the lease \
                     holds: {err}"
                );
                self.connection.failed(&err.to_string());
                std::thread::sleep(backoff(failures + 1));
            }
            failures += 1;
            self.check_lease().map_err(|lost| {
                io::Error::other(format!(
                    "{lost} (JetStream did not acknowledge the batch: {err})"
                ))
            })?;
            let connection = &self.connection;
            let acked = connection.runtime.block_on(async {
                let ack = connection
                    .js
                    .send_publish(connection.names.subject.clone(), append.message.clone())
                    .await?;
                ack.await
            });
            err = match acked {
                Ok(ack) if ack.sequence == expected + 1 => return Ok(()),
                Ok(ack) => {
                    return Err(io::Error::other(format!(
                        "JetStream stored the batch at stream seq {} where {} was expected",
                        ack.sequence,
                        expected + 1
                    )));
                }
                Err(e) => e,
            };
        }
    }

    /// Whether stream message `stream_seq` is the append with `Nats-Msg-Id` `id`.
    fn stored_as(&self, stream_seq: u64, id: &str) -> bool {
        let connection = &self.connection;
        let found = connection.runtime.block_on(async {
            let stream = connection.js.get_stream(&connection.names.stream).await?;
            anyhow::Ok(stream.get_raw_message(stream_seq).await?)
        });
        match found {
            Ok(message) => message
                .headers
                .get(async_nats::header::NATS_MESSAGE_ID)
                .is_some_and(|v| v.as_str() == id),
            Err(e) => {
                tracing::warn!("cannot read stream seq {stream_seq} back: {e:#}");
                false
            }
        }
    }
}

impl Drop for JetStreamLog {
    /// A leader that stops cleanly gives the lease up at once, so a standby need not wait for
    /// it to lapse.
    fn drop(&mut self) {
        let (Some(lease), Some(bucket)) = (&self.lease, &self.bucket) else {
            return;
        };
        if lease.lost.load(Ordering::SeqCst) {
            return;
        }
        lease.lost.store(true, Ordering::SeqCst);
        let revision = lease.revision.load(Ordering::SeqCst);
        let released = self.connection.runtime.block_on(async {
            tokio::time::timeout(
                self.connection.timeout,
                bucket.delete_expect_revision(LEASE_KEY, Some(revision)),
            )
            .await
        });
        match released {
            Ok(Ok(())) => tracing::info!("gave up the lease"),
            _ => tracing::warn!("could not give up the lease; it lapses by itself"),
        }
    }
}

// ----- starting a node -----------------------------------------------------------------------

/// How often a node that does not lead looks at the lease: every quarter of the lease, at
/// most every [`LEASE_LOOK_MAX_MS`] (a lapsed lease is found within that of lapsing).
pub fn lease_look(ttl: Duration) -> Duration {
    (ttl / 4).min(Duration::from_millis(LEASE_LOOK_MAX_MS))
}

/// The longest a node that does not lead waits between two looks at the lease.
pub const LEASE_LOOK_MAX_MS: u64 = 50;

/// A node that stopped (SIGINT/SIGTERM) while it was a standby: it never led.
#[derive(Debug, thiserror::Error)]
#[error("stopped while a standby (this node did not lead)")]
pub struct StoppedAsStandby;

/// What a node that is to lead starts from: the engine at the end of the log, the sequencer's
/// last time, and the writer holding the lease.
pub struct Leading {
    pub engine: Engine,
    pub last_ts_ns: i64,
    pub log: JetStreamLog,
}

/// Recovers from the newest local snapshot and the stream after it, follows the log as a
/// standby until this node takes the lease (as `settings.role` allows), applies the log to its
/// end, and returns a writer that appends after it. Errors with [`StoppedAsStandby`] if `stop`
/// turns true first.
pub fn start_node(
    connection: Arc<Connection>,
    settings: &LogSettings,
    data_dir: &Path,
    engine_config: EngineConfig,
    stop: &AtomicBool,
) -> anyhow::Result<Leading> {
    let bucket = retrying("opening the lease bucket", || connection.lease_bucket())?;
    let local = rialto_journal::load_newest_snapshot(data_dir, engine_config)?;
    let local_seq = local.as_ref().map_or(0, |(_, seq)| *seq);
    // A node without a snapshot of its own (or with an older one) starts from the bucket's
    // newest and reads the stream only from the message holding its last command.
    let snapshots = retrying("opening the snapshot bucket", || {
        crate::snapstore::SnapshotStore::open(connection.clone())
    })?;
    let newest = retrying("reading the snapshot bucket", || {
        snapshots.load_newest(engine_config, local_seq)
    })?;
    let (engine, start_stream_seq) = match newest {
        Some(from) => {
            tracing::info!(
                seq = from.seq,
                stream_seq = from.stream_seq,
                "starting from the snapshot bucket's newest usable snapshot"
            );
            (from.engine, from.stream_seq)
        }
        None => match local {
            Some((engine, seq)) => {
                tracing::info!(seq, "starting from the local snapshot");
                (engine, 1)
            }
            None => (Engine::new(engine_config), 1),
        },
    };
    let mut follower = Follower::new(engine, settings.checkpoint_every);
    if start_stream_seq > 1 {
        follower.stream_seq = start_stream_seq - 1;
        follower.last_seq_stream_seq = start_stream_seq;
    }
    let mut follow = Follow::from(&connection, start_stream_seq);
    let node = node_id();
    let ttl = Duration::from_millis(settings.lease_ms);
    let mut seen_another_leader = false;
    let mut announced = false;
    // Whether the standby caught up with the log, and the stream's end it has to reach.
    let mut warm = false;
    let mut warm_at: Option<u64> = None;
    let (revision, taken_at) = loop {
        if stop.load(Ordering::SeqCst) {
            return Err(StoppedAsStandby.into());
        }
        let may_lead = match settings.role {
            Role::Auto | Role::Leader => true,
            Role::Standby => seen_another_leader,
            Role::Replica => anyhow::bail!("a read replica never leads (start_replica)"),
        };
        // A failed look at the lease (NATS restarting, a timeout) is tried again at the next
        // look: only a node that holds the lease leads.
        if may_lead {
            let taken_at = Instant::now();
            match try_take_lease(&connection, &bucket, &node) {
                Ok(Some(revision)) => break (revision, taken_at),
                Ok(None) => {}
                Err(e) => tracing::warn!("looking at the lease failed, trying again: {e:#}"),
            }
        }
        // Who holds it matters only until another holder was seen (and to name it).
        let holder = match seen_another_leader && settings.role != Role::Leader {
            true => None,
            false => lease_holder(&connection, &bucket).unwrap_or_else(|e| {
                tracing::warn!("reading the lease failed, trying again: {e:#}");
                None
            }),
        };
        if let Some(holder) = &holder {
            seen_another_leader = true;
            if settings.role == Role::Leader {
                anyhow::bail!(
                    "--role leader: node {holder} holds the lease of venue {}; start this node \
                     with --role auto to follow it as a standby",
                    settings.venue
                );
            }
            if !announced {
                tracing::info!(leader = %holder, "following the log as a hot standby");
                announced = true;
            }
        }
        // Follow for a moment, then look at the lease again.
        let until = Instant::now() + lease_look(ttl);
        while let Some(wait) = until.checked_duration_since(Instant::now()) {
            match follow.next(&connection, follower.stream_seq, wait) {
                Some(message) => follower.apply(&message).map_err(anyhow::Error::msg)?,
                None => break,
            }
        }
        // Said once, for operators (and the fault test): once the standby has applied the
        // log as far as it reached when the standby began to follow, a take-over applies
        // only what committed since, not the log a restart left behind.
        if announced && !warm {
            if warm_at.is_none() {
                warm_at = connection.last_stream_seq().ok();
            }
            if warm_at.is_some_and(|end| follower.stream_seq >= end) {
                warm = true;
                tracing::info!(
                    seq = follower.engine.last_seq(),
                    stream_seq = follower.stream_seq,
                    "the hot standby is warm: it has applied the log as far as it reached \
                     when the standby began to follow"
                );
            }
        }
    };
    let lease = hold_lease(
        &connection,
        bucket.clone(),
        node.clone(),
        revision,
        taken_at,
        ttl,
    );
    // Only now is the end of the log known. A node that lost the lease checks it before each
    // append, but an append it had sent just before (a leader paused between its lease check
    // and its publish, say) can still reach the stream now: so this node claims the end with
    // an append of its own (an empty message, which every reader passes over) before it
    // answers anyone. Such a late append lands before the claim, and is applied here first,
    // or after it, and the fence refuses it: no older leader extends the log past the claim.
    // Trouble with the cluster is tried again for as long as the lease surely holds.
    let guard = LeaseGuard(lease.clone());
    let still_leads = || {
        guard
            .check()
            .context("lost the lease while catching up with the log")
    };
    let last_stream_seq = || -> anyhow::Result<u64> {
        let mut failures = 0;
        loop {
            match connection.last_stream_seq() {
                Ok(last) => return Ok(last),
                Err(e) => {
                    failures += 1;
                    tracing::warn!("reading the log's end failed, trying again: {e:#}");
                    std::thread::sleep(backoff(failures));
                    still_leads()?;
                }
            }
        }
    };
    let mut last = last_stream_seq()?;
    let mut claims = 0;
    let mut failures = 0;
    let last = loop {
        let mut progress_at = Instant::now();
        while follower.stream_seq < last {
            still_leads()?;
            if let Some(message) = follow.next(&connection, follower.stream_seq, connection.timeout)
            {
                follower.apply(&message).map_err(anyhow::Error::msg)?;
                progress_at = Instant::now();
            }
            anyhow::ensure!(
                progress_at.elapsed() < START_RETRY,
                "the log's messages up to stream seq {last} did not arrive within {START_RETRY:?}"
            );
        }
        still_leads()?;
        match claim_end(&connection, last, &node) {
            Ok(claimed) => break claimed,
            Err(e)
                if e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence
                    && claims < CLAIMS_TRIED =>
            {
                claims += 1;
                tracing::warn!(
                    "another writer appended after stream seq {last} while this node took over: \
                     applying it before leading"
                );
                last = last_stream_seq()?;
            }
            Err(e) if e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence => {
                anyhow::bail!("cannot claim the log's end after stream seq {last}: {e}")
            }
            // Not answered: it may have been stored all the same (then the next claim is
            // refused, and this node applies its own claim, which holds nothing, first).
            Err(e) => {
                failures += 1;
                tracing::warn!("claiming the log's end failed, trying again: {e}");
                std::thread::sleep(backoff(failures));
                last = last_stream_seq()?;
            }
        }
    };
    tracing::info!(
        node = %node,
        stream_seq = last,
        seq = follower.engine.last_seq(),
        applied = follower.applied,
        checkpoints_matched = follower.checkpoints_matched,
        state_hash = %crate::auth::hex(&follower.engine.state_hash()),
        "took the lease and applied the log to its end: leading"
    );
    let mut log = JetStreamLog::new(connection, last);
    log.snapshots_kept = settings.snapshots_kept;
    log.set_max_in_flight(settings.appends_in_flight);
    let seq = follower.engine.last_seq();
    if seq > 0 && follower.last_seq_stream_seq > 0 {
        log.commits.record(seq, seq, follower.last_seq_stream_seq);
    }
    log.lease = Some(lease);
    log.bucket = Some(Box::new(bucket));
    Ok(Leading {
        engine: follower.engine,
        last_ts_ns: follower.last_ts_ns,
        log,
    })
}

/// Appends a leader's claim (an empty message with the header [`LEADER_HEADER`] naming the
/// node) after stream message `last`, fenced; the claim's stream seq.
fn claim_end(
    connection: &Connection,
    last: u64,
    node: &str,
) -> Result<u64, jetstream::context::PublishError> {
    connection.runtime.block_on(async {
        let message = PublishMessage::build()
            .header(LEADER_HEADER, node)
            .expected_last_sequence(last);
        let ack = connection
            .js
            .send_publish(connection.names.subject.clone(), message)
            .await?;
        ack.await.map(|ack| ack.sequence)
    })
}

// ----- a read replica ------------------------------------------------------------------------

/// What a read replica does with the log as it follows it.
pub trait ReplicaSink {
    /// A batch was applied: its encoded records, and the engine's seq after it.
    fn batch(&mut self, records: &[u8], seq: u64);
    /// The leader's market data feed starts at engine seq `seq` with epoch `epoch_ns`.
    fn feed_epoch(&mut self, seq: u64, epoch_ns: i64);
}

/// A read replica's hold on the log: it reads every message, applies batches to its own
/// engine (so checkpoints are compared, as on every node), and never takes the lease or
/// appends.
pub struct Replica {
    connection: Arc<Connection>,
    follow: Follow,
    /// Locked only while a message is applied: the web side reads the engine between.
    follower: Arc<std::sync::Mutex<Follower>>,
}

impl Replica {
    /// Opens the stream from its first message with a fresh engine (a replica keeps no
    /// snapshot of its own, so that it sees every feed epoch the leaders announced), or, once
    /// the stream was trimmed, from the snapshot bucket's oldest usable snapshot and every
    /// message still in the stream after it.
    pub fn open(
        connection: Arc<Connection>,
        settings: &LogSettings,
        engine_config: EngineConfig,
    ) -> anyhow::Result<Replica> {
        let (first, _) = retrying("reading the stream's bounds", || connection.stream_seqs())?;
        let mut follower = Follower::new(Engine::new(engine_config), settings.checkpoint_every);
        let mut start = 1;
        if first > 1 {
            let snapshots = retrying("opening the snapshot bucket", || {
                crate::snapstore::SnapshotStore::open(connection.clone())
            })?;
            let oldest = retrying("reading the snapshot bucket", || {
                snapshots.load_oldest(engine_config)
            })?;
            let Some(from) = oldest else {
                anyhow::bail!(
                    "stream {} was trimmed (it begins at stream seq {first}) and the snapshot \
                     bucket has no usable snapshot to start from",
                    connection.names.stream
                );
            };
            anyhow::ensure!(
                from.stream_seq >= first,
                "the oldest usable snapshot (seq {}) needs stream seq {}, but the stream begins \
                 at {first}",
                from.seq,
                from.stream_seq
            );
            tracing::info!(
                seq = from.seq,
                stream_seq = from.stream_seq,
                "the stream was trimmed: the replica starts from the snapshot bucket's oldest \
                 usable snapshot"
            );
            follower = Follower::new(from.engine, settings.checkpoint_every);
            follower.stream_seq = from.stream_seq - 1;
            follower.last_seq_stream_seq = from.stream_seq;
            start = from.stream_seq;
        }
        let follow = Follow::from(&connection, start);
        Ok(Replica {
            connection,
            follow,
            follower: Arc::new(std::sync::Mutex::new(follower)),
        })
    }

    /// The stream's last message sequence now.
    pub fn last_stream_seq(&self) -> anyhow::Result<u64> {
        self.connection.last_stream_seq()
    }

    /// The follower, for read-only queries of its engine between messages.
    pub fn follower(&self) -> Arc<std::sync::Mutex<Follower>> {
        self.follower.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Follower> {
        self.follower.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last stream message applied.
    pub fn stream_seq(&self) -> u64 {
        self.lock().stream_seq
    }

    /// The engine's last seq.
    pub fn seq(&self) -> u64 {
        self.lock().engine.last_seq()
    }

    /// Reads and applies the next message, waiting up to `wait`; whether one came (trouble
    /// reaching the cluster is tried again at the next step). An error is a log this node
    /// cannot follow (a hole, damage, a divergence): it stops.
    pub fn step(&mut self, wait: Duration, sink: &mut dyn ReplicaSink) -> anyhow::Result<bool> {
        let after = self.stream_seq();
        let Some(message) = self.follow.next(&self.connection, after, wait) else {
            return Ok(false);
        };
        let mut follower = self.follower.lock().unwrap_or_else(|e| e.into_inner());
        if message.stream_seq <= follower.stream_seq {
            return Ok(true);
        }
        if let Some(epoch) = feed_epoch_of(&message) {
            let (seq, epoch_ns) = epoch.map_err(anyhow::Error::msg)?;
            sink.feed_epoch(seq, epoch_ns);
        }
        let before = follower.engine.last_seq();
        follower.apply(&message).map_err(anyhow::Error::msg)?;
        let after = follower.engine.last_seq();
        drop(follower);
        if after > before {
            // Only the records after `before`: the first message after a snapshot also holds
            // commands the snapshot covers.
            sink.batch(records_after(&message.payload, before), after);
        }
        Ok(true)
    }
}

/// The records of a batch's `payload` after seq `seq` (the follower applied the batch, so its
/// records parse).
fn records_after(payload: &[u8], seq: u64) -> &[u8] {
    let mut pos = 0;
    while pos < payload.len() {
        match parse_record(payload, pos) {
            Ok(record) if record.seq <= seq => pos += record.size,
            _ => break,
        }
    }
    &payload[pos..]
}

/// Reads the whole stream into a fresh engine (`rialto journal verify --nats`, tests): the
/// follower at the log's end. A stream trimmed below the snapshot bucket's snapshots is read
/// from the oldest usable one of them.
pub fn rebuild(settings: &LogSettings, engine_config: EngineConfig) -> anyhow::Result<Follower> {
    rebuild_from(settings, engine_config, true, &mut |_, _, _, _| {})
}

/// [`rebuild`] from seq 1, calling `each` with the engine, seq, time and command of every
/// record just before it is applied (`rialto journal dump --nats`); a trimmed stream is
/// refused.
pub fn rebuild_each(
    settings: &LogSettings,
    engine_config: EngineConfig,
    each: &mut dyn FnMut(&Engine, u64, i64, &Command),
) -> anyhow::Result<Follower> {
    rebuild_from(settings, engine_config, false, each)
}

fn rebuild_from(
    settings: &LogSettings,
    engine_config: EngineConfig,
    may_start_from_snapshot: bool,
    each: &mut dyn FnMut(&Engine, u64, i64, &Command),
) -> anyhow::Result<Follower> {
    let connection = Arc::new(Connection::open(settings, Duration::from_secs(10))?);
    let (first, last) = connection.stream_seqs()?;
    let mut follower = Follower::new(Engine::new(engine_config), settings.checkpoint_every);
    let mut start = 1;
    if first > 1 {
        anyhow::ensure!(
            may_start_from_snapshot,
            "stream {} was trimmed: it begins at stream seq {first}, after the commands from \
             seq 1 (docs/replication.md, \"Snapshots and trimming\")",
            connection.names.stream
        );
        let snapshots = crate::snapstore::SnapshotStore::open(connection.clone())?;
        let Some(from) = snapshots.load_oldest(engine_config)? else {
            anyhow::bail!(
                "stream {} was trimmed (it begins at stream seq {first}) and the snapshot \
                 bucket has no usable snapshot to start from",
                connection.names.stream
            );
        };
        anyhow::ensure!(
            from.stream_seq >= first,
            "the oldest usable snapshot (seq {}) needs stream seq {}, but the stream begins at \
             {first}",
            from.seq,
            from.stream_seq
        );
        follower = Follower::new(from.engine, settings.checkpoint_every);
        follower.stream_seq = from.stream_seq - 1;
        start = from.stream_seq;
    }
    let mut reader = connection.reader_from(start)?;
    while follower.stream_seq < last {
        match reader.next(&connection, connection.timeout)? {
            Some(message) => follower
                .apply_each(&message, each)
                .map_err(anyhow::Error::msg)?,
            None => anyhow::bail!("the log's messages up to stream seq {last} did not arrive"),
        }
    }
    Ok(follower)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(records: &[(u64, Command)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (seq, cmd) in records {
            encode_record(&mut out, *seq, 1_000 + *seq as i64, cmd);
        }
        out
    }

    fn message(stream_seq: u64, payload: Vec<u8>) -> LogMessage {
        LogMessage {
            stream_seq,
            headers: None,
            payload: payload.into(),
        }
    }

    fn checkpoint(stream_seq: u64, seq: u64, hash: &[u8; 32]) -> LogMessage {
        let mut headers = HeaderMap::new();
        let text = format!("{seq} {}", crate::auth::hex(hash));
        headers.insert(CHECKPOINT_HEADER, text.as_str());
        LogMessage {
            stream_seq,
            headers: Some(headers),
            payload: Bytes::new(),
        }
    }

    fn add_user(user: i64) -> Command {
        Command::AddUser { user }
    }

    #[test]
    fn a_follower_applies_batches_in_order_and_refuses_a_hole_or_damage() {
        let mut f = Follower::new(Engine::new(EngineConfig::default()), 2);
        f.apply(&message(1, batch(&[(1, add_user(1)), (2, add_user(2))])))
            .unwrap();
        assert_eq!(
            (f.engine.last_seq(), f.stream_seq, f.last_ts_ns),
            (2, 1, 1_002)
        );
        // A message already applied is passed over.
        f.apply(&message(1, batch(&[(3, add_user(3))]))).unwrap();
        assert_eq!(f.engine.last_seq(), 2);
        let hole = f.apply(&message(2, batch(&[(4, add_user(4))])));
        assert!(hole.unwrap_err().contains("hole"));
        let mut damaged = batch(&[(3, add_user(3))]);
        let last = damaged.len() - 1;
        damaged[last] ^= 0xff;
        assert!(f.apply(&message(2, damaged)).is_err());
        assert_eq!(f.engine.last_seq(), 2);
    }

    #[test]
    fn a_checkpoint_that_differs_stops_the_follower_and_an_equal_one_counts() {
        let mut f = Follower::new(Engine::new(EngineConfig::default()), 2);
        f.apply(&message(1, batch(&[(1, add_user(1)), (2, add_user(2))])))
            .unwrap();
        let own = f.engine.state_hash();
        f.apply(&checkpoint(2, 2, &own)).unwrap();
        assert_eq!(f.checkpoints_matched, 1);
        let mut other = own;
        other[0] ^= 1;
        let diverged = f.apply(&checkpoint(3, 2, &other)).unwrap_err();
        assert!(diverged.contains("DIVERGED at seq 2"), "{diverged}");
        let ahead = f.apply(&checkpoint(3, 9, &own)).unwrap_err();
        assert!(ahead.contains("before the command"), "{ahead}");
    }

    #[test]
    fn checkpoints_parse_only_when_well_formed() {
        let hash = [0xabu8; 32];
        let text = format!("42 {}", crate::auth::hex(&hash));
        assert_eq!(parse_checkpoint(&text), Some((42, hash)));
        assert_eq!(parse_checkpoint("42 abc"), None);
        assert_eq!(parse_checkpoint("x 00"), None);
        assert_eq!(parse_checkpoint(""), None);
    }
}
