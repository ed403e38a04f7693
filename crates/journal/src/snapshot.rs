//! Snapshot files, their retention, and archiving the journal segments they cover
//! (docs/journal-format.md, "Snapshot file").

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use rialto_core::{Engine, EngineConfig};
use sha2::{Digest, Sha256};

use crate::error::{JournalError, Result};
use crate::format::{
    archive_dir, create_dir_durable, fsync_dir, journal_dir, list_numbered, list_segments,
    parse_numbered, snapshot_dir, u32_at, u64_at,
};

pub const SNAPSHOT_MAGIC: &[u8; 8] = b"RIALTOSN";
pub const SNAPSHOT_VERSION: u32 = 1;
/// magic 8 | version u32 | header_len u32 | seq u64 | state_hash 32 | uncompressed_len u64 |
/// compressed_len u64 | payload_crc32c u32 | header_crc32c u32
pub const SNAPSHOT_HEADER_LEN: usize = 80;
/// magic 8 | version u32 | last_seq u64 | body_len u64 (docs/snapshot-format.md).
const ENGINE_SNAPSHOT_HEADER_LEN: usize = 28;
/// Snapshots kept by [`retain`] unless told otherwise.
pub const DEFAULT_SNAPSHOTS_KEPT: usize = 3;
/// Refuse to inflate a payload claiming more than this (a corrupt length must not make us
/// allocate absurd memory; LZ4 cannot expand more than 255x either).
const MAX_UNCOMPRESSED_BYTES: u64 = 64 << 30;

pub fn snapshot_name(seq: u64) -> String {
    format!("snapshot-{seq:020}.snap")
}

fn parse_snapshot_name(name: &str) -> Option<u64> {
    parse_numbered(name, "snapshot-", ".snap")
}

/// Snapshot files of `<data>/snapshots` as `(seq, path)`, ascending by seq.
pub fn list_snapshots(data_dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    list_numbered(&snapshot_dir(data_dir), parse_snapshot_name)
}

/// Writes `snapshot_bytes` (from `Engine::encode_snapshot`, taken after applying `seq`) as
/// `<data>/snapshots/snapshot-<seq>.snap`: temp file, fsync, rename, directory fsync. Runs on a
/// background thread; the engine thread only encodes.
pub fn write_snapshot(
    data_dir: &Path,
    seq: u64,
    state_hash: [u8; 32],
    snapshot_bytes: &[u8],
) -> io::Result<PathBuf> {
    let dir = snapshot_dir(data_dir);
    create_dir_durable(&dir)?;
    let file_bytes = snapshot_file_bytes(seq, state_hash, snapshot_bytes);
    let name = snapshot_name(seq);
    let path = dir.join(&name);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = File::create(&tmp)?;
    file.write_all(&file_bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, &path)?;
    fsync_dir(&dir)?;
    Ok(path)
}

/// A snapshot file's bytes (header and compressed payload, docs/journal-format.md): what
/// [`write_snapshot`] writes, and what a replicated venue keeps in its snapshot bucket.
pub fn snapshot_file_bytes(seq: u64, state_hash: [u8; 32], snapshot_bytes: &[u8]) -> Vec<u8> {
    let payload = lz4_flex::block::compress(snapshot_bytes);
    let mut out = Vec::with_capacity(SNAPSHOT_HEADER_LEN + payload.len());
    out.extend_from_slice(SNAPSHOT_MAGIC);
    out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
    out.extend_from_slice(&(SNAPSHOT_HEADER_LEN as u32).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&state_hash);
    out.extend_from_slice(&(snapshot_bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    let header_crc = crc32c::crc32c(&out[..76]);
    out.extend_from_slice(&header_crc.to_le_bytes());
    debug_assert_eq!(out.len(), SNAPSHOT_HEADER_LEN);
    out.extend_from_slice(&payload);
    out
}

/// What a snapshot file's header says, once its payload has been checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub path: PathBuf,
    pub seq: u64,
    pub state_hash: [u8; 32],
    pub uncompressed_len: u64,
    pub compressed_len: u64,
}

/// Reads and fully checks one snapshot file: header, payload CRC, decompression, engine
/// decoding, the engine's own last seq, and the recomputed state hash against the header's.
pub fn load_snapshot(path: &Path, config: EngineConfig) -> Result<(Engine, SnapshotInfo)> {
    let bytes = fs::read(path).map_err(|e| JournalError::io(path, e))?;
    load_snapshot_bytes(&bytes, path, config)
}

/// [`load_snapshot`] of a snapshot file's bytes read from elsewhere (a replicated venue's
/// snapshot bucket); `origin` names them in errors and in the info.
pub fn load_snapshot_bytes(
    bytes: &[u8],
    origin: &Path,
    config: EngineConfig,
) -> Result<(Engine, SnapshotInfo)> {
    let path = origin;
    let bad = |problem: String| JournalError::BadSnapshot {
        path: path.to_owned(),
        problem,
    };
    let Some(h) = bytes.get(..SNAPSHOT_HEADER_LEN) else {
        return Err(bad(format!(
            "{} bytes, shorter than the header",
            bytes.len()
        )));
    };
    if &h[0..8] != SNAPSHOT_MAGIC {
        return Err(bad("bad magic (not a Rialto snapshot file)".into()));
    }
    if crc32c::crc32c(&h[..76]) != u32_at(h, 76) {
        return Err(bad("header CRC mismatch".into()));
    }
    let version = u32_at(h, 8);
    if version != SNAPSHOT_VERSION || u32_at(h, 12) as usize != SNAPSHOT_HEADER_LEN {
        return Err(bad(format!("unsupported version {version}")));
    }
    let mut state_hash = [0u8; 32];
    state_hash.copy_from_slice(&h[24..56]);
    let info = SnapshotInfo {
        path: path.to_owned(),
        seq: u64_at(h, 16),
        state_hash,
        uncompressed_len: u64_at(h, 56),
        compressed_len: u64_at(h, 64),
    };
    let payload = &bytes[SNAPSHOT_HEADER_LEN..];
    if payload.len() as u64 != info.compressed_len {
        return Err(bad(format!(
            "payload is {} bytes, the header says {}",
            payload.len(),
            info.compressed_len
        )));
    }
    if crc32c::crc32c(payload) != u32_at(h, 72) {
        return Err(bad("payload CRC mismatch".into()));
    }
    if info.uncompressed_len > MAX_UNCOMPRESSED_BYTES
        || info.uncompressed_len > info.compressed_len.saturating_mul(255) + 64
    {
        return Err(bad(format!(
            "implausible uncompressed length {}",
            info.uncompressed_len
        )));
    }
    let raw = lz4_flex::block::decompress(payload, info.uncompressed_len as usize)
        .map_err(|e| bad(format!("LZ4: {e}")))?;
    if raw.len() as u64 != info.uncompressed_len {
        return Err(bad("uncompressed length differs from the header".into()));
    }
    let engine = Engine::decode_snapshot(&raw, config).map_err(|e| bad(format!("{e:?}")))?;
    if engine.last_seq() != info.seq {
        return Err(bad(format!(
            "engine state is at seq {}, the header says {}",
            engine.last_seq(),
            info.seq
        )));
    }
    // The state hash is SHA-256 of the snapshot body (docs/snapshot-format.md), which follows
    // the engine's 28-byte header. Decoding accepts only canonical bodies (sorted, no repeats),
    // so hashing the bytes read equals re-encoding the decoded engine, at half the cost.
    let body = raw.get(ENGINE_SNAPSHOT_HEADER_LEN..).unwrap_or(&[]);
    let hash: [u8; 32] = Sha256::digest(body).into();
    if hash != info.state_hash {
        return Err(bad("recomputed state hash differs from the header".into()));
    }
    Ok((engine, info))
}

/// The newest snapshot that passes every check of [`load_snapshot`]; a failing one is skipped
/// with a warning and the next older one tried. `None` when no snapshot is usable.
pub fn load_newest_snapshot(
    data_dir: &Path,
    config: EngineConfig,
) -> Result<Option<(Engine, u64)>> {
    Ok(load_newest_snapshot_info(data_dir, config)?.map(|(engine, info)| (engine, info.seq)))
}

pub(crate) fn load_newest_snapshot_info(
    data_dir: &Path,
    config: EngineConfig,
) -> Result<Option<(Engine, SnapshotInfo)>> {
    let dir = snapshot_dir(data_dir);
    let snapshots = list_snapshots(data_dir).map_err(|e| JournalError::io(dir, e))?;
    for (name_seq, path) in snapshots.into_iter().rev() {
        match load_snapshot(&path, config) {
            Ok((_, info)) if info.seq != name_seq => tracing::warn!(
                path = %path.display(),
                "skipping snapshot: header seq {} differs from the file name", info.seq
            ),
            Ok(found) => return Ok(Some(found)),
            Err(e) => tracing::warn!("skipping snapshot: {e}"),
        }
    }
    Ok(None)
}

/// Deletes all but the `keep` newest snapshot files (by seq). Returns the deleted paths.
pub fn prune_snapshots(data_dir: &Path, keep: usize) -> io::Result<Vec<PathBuf>> {
    let snapshots = list_snapshots(data_dir)?;
    let excess = snapshots.len().saturating_sub(keep);
    let mut deleted = Vec::with_capacity(excess);
    for (_, path) in snapshots.into_iter().take(excess) {
        fs::remove_file(&path)?;
        deleted.push(path);
    }
    if !deleted.is_empty() {
        fsync_dir(&snapshot_dir(data_dir))?;
    }
    Ok(deleted)
}

/// Moves every segment of `<data>/journal` whose records all have seq <= `seq` into
/// `<data>/journal/archive/`. The newest segment is never moved, whatever it holds: it is the
/// one the writer appends to. A segment's records end where the next segment begins, so only
/// the file names are needed. Returns the moved segments' new paths.
pub fn archive_segments_before(data_dir: &Path, seq: u64) -> io::Result<Vec<PathBuf>> {
    let segments = list_segments(&journal_dir(data_dir))?;
    let closed = segments.len().saturating_sub(1);
    let movable: Vec<&PathBuf> = segments[..closed]
        .iter()
        .zip(&segments[1..])
        .take_while(|(_, (next_first, _))| next_first.saturating_sub(1) <= seq)
        .map(|((_, path), _)| path)
        .collect();
    archive(data_dir, &movable)
}

fn archive(data_dir: &Path, paths: &[&PathBuf]) -> io::Result<Vec<PathBuf>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let to_dir = archive_dir(data_dir);
    create_dir_durable(&to_dir)?;
    let mut moved = Vec::with_capacity(paths.len());
    for path in paths {
        let Some(name) = path.file_name() else {
            continue;
        };
        let to = to_dir.join(name);
        fs::rename(path, &to)?;
        moved.push(to);
    }
    fsync_dir(&to_dir)?;
    fsync_dir(&journal_dir(data_dir))?;
    Ok(moved)
}

/// What [`retain`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    pub deleted_snapshots: Vec<PathBuf>,
    pub archived_segments: Vec<PathBuf>,
}

/// After writing a snapshot: keep the `keep` newest snapshots, then archive the segments the
/// OLDEST kept snapshot covers. Archiving only up to the oldest keeps every kept snapshot
/// usable: if the newest turns out corrupt, recovery falls back to an older one and still finds
/// the journal it needs in `<data>/journal`.
pub fn retain(data_dir: &Path, keep: usize) -> io::Result<Retention> {
    let deleted_snapshots = prune_snapshots(data_dir, keep.max(1))?;
    let archived_segments = match list_snapshots(data_dir)?.first() {
        Some((oldest, _)) => archive_segments_before(data_dir, *oldest)?,
        None => Vec::new(),
    };
    Ok(Retention {
        deleted_snapshots,
        archived_segments,
    })
}
