//! A replicated venue's snapshots in a JetStream object store bucket, and trimming the stream
//! below them (docs/replication.md, "Snapshots and trimming").
//!
//! The leader puts every snapshot it writes into the bucket `rialto_<venue>_snapshots` as
//! `snapshot-<seq:020>`: the snapshot file's bytes exactly as in a data directory (header with
//! the state hash, CRC, LZ4 payload), with the metadata `seq`, `stream_seq` (the stream message
//! that holds the record `seq`) and `state_hash`. It keeps the newest `log.snapshots_kept` and,
//! once that many are there, purges the stream below the `stream_seq` of the oldest one kept,
//! never above. A node
//! that joins without a snapshot of its own (or with an older one) starts from the newest
//! snapshot in the bucket that passes every check, and reads the stream from its `stream_seq`.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use async_nats::jetstream::object_store::{self, ObjectMetadata, ObjectStore};
use futures_util::StreamExt;
use rialto_core::{Engine, EngineConfig};
use tokio::io::AsyncReadExt;

use crate::replication::{Connection, Names};

/// Batches remembered for finding a snapshot's stream message (a snapshot normally follows
/// within `journal.snapshot_every` commands; older batches are forgotten first).
const COMMITS_KEPT: usize = 1 << 20;
/// The largest snapshot fetched from the bucket (a corrupt size must not exhaust memory).
const MAX_SNAPSHOT_BYTES: usize = 16 << 30;

/// Which stream message holds which commands, as the leader committed them: `(first seq, last
/// seq, stream seq)`, oldest first. The journal stage writes, the snapshot writer reads.
#[derive(Clone, Default)]
pub struct CommitMap {
    batches: Arc<Mutex<VecDeque<(u64, u64, u64)>>>,
}

impl CommitMap {
    /// Records that stream message `stream_seq` holds the commands `first..=last`.
    pub fn record(&self, first: u64, last: u64, stream_seq: u64) {
        let mut batches = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        if batches.len() == COMMITS_KEPT {
            batches.pop_front();
        }
        batches.push_back((first, last, stream_seq));
    }

    /// The stream message that holds command `seq`, if known; forgets the batches before it
    /// (snapshots only move forward).
    pub fn stream_seq_of(&self, seq: u64) -> Option<u64> {
        let mut batches = self.batches.lock().unwrap_or_else(|e| e.into_inner());
        while batches.front().is_some_and(|&(_, last, _)| last < seq) {
            batches.pop_front();
        }
        match batches.front() {
            Some(&(first, last, stream_seq)) if first <= seq && seq <= last => Some(stream_seq),
            _ => None,
        }
    }
}

/// A snapshot in the bucket, as its metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub name: String,
    pub seq: u64,
    pub stream_seq: u64,
    pub state_hash: String,
}

/// An engine started from a snapshot of the bucket.
pub struct FromBucket {
    pub engine: Engine,
    pub seq: u64,
    /// The stream message holding command `seq`: reading starts there.
    pub stream_seq: u64,
}

/// The venue's snapshot bucket.
pub struct SnapshotStore {
    connection: Arc<Connection>,
    bucket: ObjectStore,
}

fn object_name(seq: u64) -> String {
    format!("snapshot-{seq:020}")
}

impl SnapshotStore {
    /// Opens the bucket (the connection created it).
    pub fn open(connection: Arc<Connection>) -> anyhow::Result<SnapshotStore> {
        let name = connection.names.snapshot_bucket.clone();
        let bucket = connection
            .runtime
            .block_on(connection.js.get_object_store(&name))
            .with_context(|| format!("cannot open the snapshot bucket {name}"))?;
        Ok(SnapshotStore { connection, bucket })
    }

    /// Puts a snapshot file's bytes as the snapshot after command `seq`, held by stream
    /// message `stream_seq`.
    pub fn put(
        &self,
        seq: u64,
        stream_seq: u64,
        state_hash: &[u8; 32],
        file_bytes: &[u8],
    ) -> anyhow::Result<()> {
        let metadata = HashMap::from([
            ("seq".to_owned(), seq.to_string()),
            ("stream_seq".to_owned(), stream_seq.to_string()),
            ("state_hash".to_owned(), crate::auth::hex(state_hash)),
        ]);
        let meta = ObjectMetadata {
            name: object_name(seq),
            metadata,
            ..Default::default()
        };
        let mut reader = file_bytes;
        self.connection
            .runtime
            .block_on(self.bucket.put(meta, &mut reader))
            .with_context(|| format!("putting the snapshot at seq {seq} into the bucket"))?;
        Ok(())
    }

    /// The snapshots in the bucket, oldest first (objects without readable metadata are left
    /// out: they are no snapshot of Rialto's).
    pub fn list(&self) -> anyhow::Result<Vec<Stored>> {
        let mut found: Vec<Stored> = self.connection.runtime.block_on(async {
            let mut list = self.bucket.list().await?;
            let mut found = Vec::new();
            while let Some(info) = list.next().await {
                let info = info?;
                let number = |key: &str| info.metadata.get(key).and_then(|v| v.parse().ok());
                if let (Some(seq), Some(stream_seq)) = (number("seq"), number("stream_seq")) {
                    found.push(Stored {
                        name: info.name.clone(),
                        seq,
                        stream_seq,
                        state_hash: info.metadata.get("state_hash").cloned().unwrap_or_default(),
                    });
                }
            }
            anyhow::Ok(found)
        })?;
        found.sort_by_key(|s| s.seq);
        Ok(found)
    }

    /// Deletes all but the `keep` newest snapshots, then, once `keep` are there, purges the
    /// stream's messages before the oldest one kept's `stream_seq` (and never past
    /// `newest_stream_seq`, the snapshot this node just put). Returns the stream seq purged
    /// below (0: none).
    pub fn prune_and_trim(&self, keep: usize, newest_stream_seq: u64) -> anyhow::Result<u64> {
        if keep == 0 {
            return Ok(0);
        }
        let stored = self.list()?;
        let excess = stored.len().saturating_sub(keep);
        for old in &stored[..excess] {
            self.connection
                .runtime
                .block_on(self.bucket.delete(&old.name))
                .with_context(|| format!("deleting {} from the snapshot bucket", old.name))?;
        }
        // Fewer than `keep`: the stream keeps everything (a young venue's whole log).
        if stored.len() < keep {
            return Ok(0);
        }
        let Some(oldest) = stored[excess..].iter().map(|s| s.stream_seq).min() else {
            return Ok(0);
        };
        let below = oldest.min(newest_stream_seq);
        if below <= 1 {
            return Ok(0);
        }
        let names = &self.connection.names;
        self.connection
            .runtime
            .block_on(async {
                let stream = self.connection.js.get_stream(&names.stream).await?;
                stream.purge().sequence(below).await?;
                anyhow::Ok(())
            })
            .with_context(|| format!("purging stream {} below seq {below}", names.stream))?;
        Ok(below)
    }

    /// The newest snapshot after command `newer_than` that passes every check (the snapshot
    /// file's header and payload CRCs, decoding, the recomputed state hash, and the bucket's
    /// metadata agreeing with them); a snapshot that fails is refused loudly and the next
    /// older one tried. `None` if none is usable.
    pub fn load_newest(
        &self,
        config: EngineConfig,
        newer_than: u64,
    ) -> anyhow::Result<Option<FromBucket>> {
        let stored = self.list()?;
        let newest_first = stored.iter().rev().filter(|s| s.seq > newer_than);
        self.first_usable(newest_first, config, "older")
    }

    /// The oldest usable snapshot (`rialto journal verify` of a trimmed stream).
    pub fn load_oldest(&self, config: EngineConfig) -> anyhow::Result<Option<FromBucket>> {
        let stored = self.list()?;
        self.first_usable(stored.iter(), config, "newer")
    }

    /// The first of `snapshots` that loads; each refused one is logged (`then` says which way
    /// the next one tried is). A fetch that fails for a transient reason (a nats-server
    /// restarting, a timeout) is tried again, for up to `replication::START_RETRY`, rather
    /// than taken for a bad snapshot; one deleted meanwhile (pruned) is passed over.
    fn first_usable<'a>(
        &self,
        snapshots: impl Iterator<Item = &'a Stored>,
        config: EngineConfig,
        then: &str,
    ) -> anyhow::Result<Option<FromBucket>> {
        for snapshot in snapshots {
            let fetched = crate::replication::retrying("fetching a snapshot", || {
                match self.fetch(snapshot) {
                    Err(Fetch::Transient(e)) => Err(e),
                    other => Ok(other),
                }
            })?;
            let bytes = match fetched {
                Ok(bytes) => bytes,
                Err(Fetch::Gone) => {
                    tracing::warn!(
                        snapshot = %snapshot.name,
                        "a snapshot of the bucket was deleted before it was read; trying the \
                         next {then} one"
                    );
                    continue;
                }
                Err(Fetch::Refused(e) | Fetch::Transient(e)) => {
                    tracing::error!(
                        snapshot = %snapshot.name,
                        "REFUSED a snapshot of the bucket: {e:#}; trying the next {then} one"
                    );
                    continue;
                }
            };
            match self.check(snapshot, &bytes, config) {
                Ok(engine) => {
                    return Ok(Some(FromBucket {
                        engine,
                        seq: snapshot.seq,
                        stream_seq: snapshot.stream_seq,
                    }));
                }
                Err(e) => tracing::error!(
                    snapshot = %snapshot.name,
                    "REFUSED a snapshot of the bucket: {e:#}; trying the next {then} one"
                ),
            }
        }
        Ok(None)
    }

    /// A snapshot's bytes from the bucket.
    fn fetch(&self, snapshot: &Stored) -> Result<Vec<u8>, Fetch> {
        self.connection.runtime.block_on(async {
            let mut object = match self.bucket.get(&snapshot.name).await {
                Ok(object) => object,
                Err(e) if e.kind() == object_store::GetErrorKind::NotFound => {
                    return Err(Fetch::Gone);
                }
                Err(e) => return Err(Fetch::Transient(e.into())),
            };
            let size = object.info().size;
            if size > MAX_SNAPSHOT_BYTES {
                return Err(Fetch::Refused(anyhow::anyhow!(
                    "{size} bytes, more than a snapshot may have"
                )));
            }
            let mut bytes = Vec::with_capacity(size);
            match object.read_to_end(&mut bytes).await {
                Ok(_) => Ok(bytes),
                Err(e) => Err(Fetch::Transient(e.into())),
            }
        })
    }

    /// Loads fetched bytes into an engine if every check passes.
    fn check(
        &self,
        snapshot: &Stored,
        bytes: &[u8],
        config: EngineConfig,
    ) -> anyhow::Result<Engine> {
        let origin = Path::new(&snapshot.name);
        let (engine, info) = rialto_journal::load_snapshot_bytes(bytes, origin, config)?;
        anyhow::ensure!(
            info.seq == snapshot.seq,
            "its header is at seq {}, its name and metadata say {}",
            info.seq,
            snapshot.seq
        );
        anyhow::ensure!(
            crate::auth::hex(&info.state_hash) == snapshot.state_hash,
            "its state hash is {}, its metadata says {}",
            crate::auth::hex(&info.state_hash),
            snapshot.state_hash
        );
        Ok(engine)
    }
}

/// Why a snapshot's bytes could not be fetched.
enum Fetch {
    /// The object is no longer in the bucket (pruned since it was listed).
    Gone,
    /// It is, but it is not a snapshot this node may load.
    Refused(anyhow::Error),
    /// The cluster did not answer as it should: worth trying again.
    Transient(anyhow::Error),
}

/// Creates the venue's snapshot bucket if it is missing.
pub(crate) async fn ensure_bucket(
    js: &async_nats::jetstream::Context,
    names: &Names,
    replicas: usize,
) -> anyhow::Result<()> {
    let name = names.snapshot_bucket.clone();
    if js.get_object_store(&name).await.is_err() {
        js.create_object_store(object_store::Config {
            bucket: name.clone(),
            num_replicas: replicas,
            storage: async_nats::jetstream::stream::StorageType::File,
            ..Default::default()
        })
        .await
        .with_context(|| format!("cannot create the snapshot bucket {name}"))?;
    }
    Ok(())
}

/// What the leader's snapshot writer does with a snapshot it wrote: put it into the bucket,
/// keep the newest `keep`, and trim the stream below the oldest kept.
pub struct Uploader {
    pub store: SnapshotStore,
    pub commits: CommitMap,
    pub keep: usize,
}

impl Uploader {
    pub fn upload(&self, seq: u64, state_hash: &[u8; 32], file_bytes: &[u8]) {
        let Some(stream_seq) = self.commits.stream_seq_of(seq) else {
            tracing::warn!(
                seq,
                "the snapshot stays local only: which stream message holds its last command \
                 is not known here"
            );
            return;
        };
        let done = self
            .store
            .put(seq, stream_seq, state_hash, file_bytes)
            .and_then(|()| self.store.prune_and_trim(self.keep, stream_seq));
        match done {
            Ok(below) => {
                tracing::info!(
                    seq,
                    stream_seq,
                    trimmed_below = below,
                    "snapshot in the bucket"
                )
            }
            // The stream still holds everything after the older snapshots: nothing is lost.
            Err(e) => tracing::error!(seq, "putting the snapshot into the bucket failed: {e:#}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_map_finds_the_message_holding_a_seq_and_forgets_older_ones() {
        let map = CommitMap::default();
        map.record(1, 10, 1);
        map.record(11, 11, 3);
        map.record(12, 20, 4);
        assert_eq!(map.stream_seq_of(5), Some(1));
        assert_eq!(map.stream_seq_of(11), Some(3));
        assert_eq!(map.stream_seq_of(20), Some(4));
        // Forgotten: the batches before seq 20 were dropped.
        assert_eq!(map.stream_seq_of(5), None);
        assert_eq!(map.stream_seq_of(21), None);
    }
}
