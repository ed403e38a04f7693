//! A replicated venue's FIX session stores, kept in the cluster so that a session survives a
//! fail-over (docs/replication.md, "FIX sessions across a fail-over").
//!
//! The key-value bucket `rialto_<venue>_fix` (history 1, `log.replicas` copies) holds, per
//! session (its name with `.` written as `=`, as key tokens may not hold a `.` of their own):
//!
//! - `<session>.seqnums`: the 28 bytes of a `.seqnums` file (magic, next sender and target
//!   MsgSeqNum, CRC), written with a compare-and-set on its revision, so that a node that no
//!   longer leads cannot overwrite what the new leader wrote;
//! - `<session>.m.<first MsgSeqNum, 20 digits>`: `.messages` records back to back (each with
//!   its CRC), the messages one flush stored, at most [`CHUNK_MAX_BYTES`] a chunk.
//!
//! **Store, then send.** The leader's gateway writes the chunks (and then the numbers) and
//! waits for JetStream's acknowledgement before it writes those messages to a socket, as it
//! does with the local files: a message a client received is in the cluster, so the new leader
//! resends it (never gap-fills it) and never sends another message under its number. A crash
//! between the store and the send leaves a message stored and unsent: the client sees a gap
//! and asks for it. A failed write closes the session's connection without sending.
//!
//! **Adoption.** When a leader opens a session (its first Logon since the node leads), it reads
//! the session's numbers and chunks from the cluster and writes them into its data directory as
//! the session's files (replacing what the node had there: the cluster's are the venue's), then
//! opens them as a restarted server opens its own.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use async_nats::jetstream::{consumer, kv, stream};
use bytes::Bytes;
use futures_util::StreamExt;
use rialto_fix::session::store::{decode_seqnums, encode_message_record, encode_seqnums};
use rialto_fix::session::{FileStore, MessageStore};

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
}

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
            }),
        })
    }

    /// The session's numbers and every record of its chunks, in the order they were written;
    /// `None` if the cluster holds nothing of it.
    fn fetch(&self, session: &str) -> io::Result<Option<Fetched>> {
        let bucket = &self.inner.bucket;
        let key = key_of(session);
        let numbers = format!("{}{key}.seqnums", bucket.prefix);
        let chunks = format!("{}{key}.m.>", bucket.prefix);
        self.run(async {
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
            let mut records = Vec::new();
            if consumer.cached_info().num_pending > 0 {
                let mut messages = consumer
                    .messages()
                    .await
                    .map_err(|e| nats_error("reading the messages", e))?;
                while let Some(message) = messages.next().await {
                    let message = message.map_err(|e| nats_error("reading the messages", e))?;
                    records.extend_from_slice(&message.payload);
                    let info = message
                        .info()
                        .map_err(|e| nats_error("a message's info", e))?;
                    if info.pending == 0 {
                        break;
                    }
                }
            }
            Ok(Some(Fetched {
                next_sender,
                next_target,
                revision: last.sequence,
                records,
            }))
        })
    }

    /// Runs `work` on the client's runtime, within the connection's timeout.
    fn run<T>(&self, work: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
        let timeout = self.inner.timeout * 4;
        self.inner
            .runtime
            .block_on(async { tokio::time::timeout(timeout, work).await })
            .map_err(|_| nats_error("no answer", format!("within {timeout:?}")))?
    }
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
}

/// A FIX session's store on the leader: the local files, and with a replicated log the
/// cluster's copy, written first.
pub struct SessionStore {
    file: FileStore,
    cluster: Option<Replicated>,
}

impl SessionStore {
    /// Opens the store of `session` in `dir`. With a `mirror`, the cluster's copy replaces the
    /// local files first (an empty store if the cluster holds nothing of the session).
    pub fn open(dir: &Path, session: &str, mirror: Option<&FixMirror>) -> io::Result<SessionStore> {
        let Some(mirror) = mirror else {
            return Ok(SessionStore {
                file: FileStore::open(dir, session)?,
                cluster: None,
            });
        };
        let fetched = mirror.fetch(session)?;
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
            }),
        })
    }

    /// Writes what the cluster has not yet got: purge, chunks, then the numbers, each
    /// acknowledged before the next. Kept for the next flush if anything fails.
    fn write_to_cluster(c: &mut Replicated, numbers: (u64, u64)) -> io::Result<()> {
        if !c.purge && c.chunks.is_empty() && !c.seqnums_dirty {
            return Ok(());
        }
        let inner = &c.mirror.inner;
        if let Some(lease) = &inner.lease {
            lease.check()?;
        }
        let bucket = &inner.bucket;
        let key = &c.key;
        if c.purge {
            let filter = format!("{}{key}.m.>", bucket.prefix);
            c.mirror.run(async {
                bucket
                    .stream
                    .purge()
                    .filter(filter)
                    .await
                    .map_err(|e| nats_error("purging a reset session", e))
            })?;
            c.purge = false;
        }
        if !c.chunks.is_empty() {
            let chunks = &c.chunks;
            c.mirror.run(async {
                let puts = chunks.iter().map(|(first, records)| {
                    let value = Bytes::copy_from_slice(records);
                    bucket.put(format!("{key}.m.{first:020}"), value)
                });
                futures_util::future::try_join_all(puts)
                    .await
                    .map_err(|e| nats_error("storing sent messages", e))
            })?;
            c.chunks.clear();
        }
        if c.seqnums_dirty {
            let value = Bytes::copy_from_slice(&encode_seqnums(numbers.0, numbers.1));
            let entry = format!("{key}.seqnums");
            let revision = c.revision;
            let written = c.mirror.run(async {
                let written = match revision {
                    0 => bucket
                        .create(&entry, value)
                        .await
                        .map_err(|e| e.to_string()),
                    r => bucket
                        .update(&entry, value, r)
                        .await
                        .map_err(|e| e.to_string()),
                };
                Ok(written)
            })?;
            c.revision = written.map_err(|e| {
                io::Error::other(format!(
                    "FIX store in the cluster: the sequence numbers of {key} were written by \
                     another node (or cannot be written: {e}); this node does not send on it"
                ))
            })?;
            c.seqnums_dirty = false;
        }
        Ok(())
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
    fn flush(&mut self) -> io::Result<()> {
        // The cluster first: what a client receives must survive this node.
        if let Some(c) = &mut self.cluster {
            let numbers = (self.file.next_sender_seq(), self.file.next_target_seq());
            SessionStore::write_to_cluster(c, numbers)?;
        }
        self.file.flush()
    }
}
