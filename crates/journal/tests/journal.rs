//! Writer, reader and recovery: segments, torn tails, corruption, snapshots, archive.

mod common;

use std::fs;

use common::*;
use rialto_core::EngineConfig;
use rialto_journal::format::{SEGMENT_HEADER_LEN, archive_dir};
use rialto_journal::{
    Durability, JournalConfig, JournalError, JournalReader, JournalWriter, RecoverOptions,
    archive_segments_before, list_snapshots, recover, recover_with, retain, write_snapshot,
};
use tempfile::TempDir;

fn engine_config() -> EngineConfig {
    EngineConfig::default()
}

#[test]
fn the_workload_trades() {
    assert!(trades(&workload(400)) > 50, "{}", trades(&workload(400)));
}

#[test]
fn round_trip_across_segments() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(400);
    journal(dir.path(), config(1024), &cmds, 0, 7);
    let segs = segments(dir.path());
    assert!(segs.len() >= 10, "{} segments", segs.len());
    for seg in &segs {
        assert!(fs::metadata(seg).unwrap().len() <= (SEGMENT_HEADER_LEN + 1024) as u64);
    }
    let read: Vec<_> = JournalReader::open(dir.path(), false)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(read.len(), cmds.len());
    for (i, r) in read.iter().enumerate() {
        assert_eq!(
            (r.seq, r.ts_ns, &r.command),
            (i as u64 + 1, ts(i as u64 + 1), &cmds[i])
        );
    }
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(
        (rec.last_seq, rec.replayed, rec.snapshot_seq),
        (400, 400, None)
    );
    assert_eq!(rec.state_hash, fresh(&cmds).state_hash());
    assert!(rec.truncated_tail.is_none());
}

#[test]
fn batches_larger_than_the_buffer_and_across_segments_read_back_whole() {
    // A 100-byte buffer holds under two records: every batch of 64 grows it, and with 2 KiB
    // segments a batch spans several; the writer reuses the buffer without clearing it, so
    // old bytes lie under every new record.
    let dir = TempDir::new().unwrap();
    let cmds = workload(400);
    for durability in [Durability::Fsync, Durability::None] {
        let dir = dir.path().join(durability.to_string());
        let cfg = JournalConfig {
            buffer_bytes: 100,
            durability,
            ..config(2048)
        };
        journal(&dir, cfg, &cmds, 0, 64);
        assert!(
            segments(&dir).len() >= 10,
            "{} segments",
            segments(&dir).len()
        );
        let read: Vec<_> = JournalReader::open(&dir, false)
            .unwrap()
            .map(Result::unwrap)
            .map(|r| (r.seq, r.ts_ns, r.command))
            .collect();
        let want: Vec<_> = (1..=cmds.len() as u64)
            .map(|seq| (seq, ts(seq), cmds[seq as usize - 1].clone()))
            .collect();
        assert_eq!(read, want, "{durability}");
    }
}

#[test]
fn empty_data_dir_recovers_a_fresh_engine() {
    let dir = TempDir::new().unwrap();
    let rec = recover(&dir.path().join("missing"), engine_config()).unwrap();
    assert_eq!((rec.last_seq, rec.replayed, rec.snapshot_seq), (0, 0, None));
    let fresh = rialto_core::Engine::new(engine_config());
    assert_eq!(rec.state_hash, fresh.state_hash());
}

#[test]
fn writer_reopen_continues_the_last_segment() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(200);
    journal(dir.path(), config(1 << 20), &cmds[..100], 0, 10);
    assert_eq!(segments(dir.path()).len(), 1);
    let err = JournalWriter::open(dir.path(), config(1 << 20), 50)
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            JournalError::SeqMismatch {
                last: 100,
                next: 50,
                ..
            }
        ),
        "{err}"
    );
    journal(dir.path(), config(1 << 20), &cmds, 100, 10);
    assert_eq!(segments(dir.path()).len(), 1, "no new segment on reopen");
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(rec.last_seq, 200);
    assert_eq!(rec.state_hash, fresh(&cmds).state_hash());
}

#[test]
#[should_panic(expected = "out of sequence")]
fn append_asserts_seq_continuity() {
    let dir = TempDir::new().unwrap();
    let mut w = JournalWriter::open(dir.path(), config(1 << 20), 1).unwrap();
    let cmds = workload(3);
    w.append(1, 0, &cmds[0]);
    w.append(3, 0, &cmds[2]);
}

/// Cuts the last record at every byte offset inside it, as a crash during its write would:
/// recovery keeps everything before it, truncates the file there, and the writer continues
/// from the cut record's seq. (No checkpoint claims the last batch yet; cuts below the
/// checkpoint are losses: tests/checkpoint.rs.)
#[test]
fn torn_tail_at_every_offset_of_the_last_record() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(120);
    drop(journal_then_crash(dir.path(), config(2048), &cmds, 0, 5));
    let last = segments(dir.path()).pop().unwrap();
    let original = fs::read(&last).unwrap();
    let (start, size, seq) = *records(&last).last().unwrap();
    assert_eq!(seq, 120);
    let want = fresh(&cmds[..119]).state_hash();
    for cut in start + 1..start + size {
        fs::write(&last, &original[..cut]).unwrap();
        let rec = recover(dir.path(), engine_config()).unwrap();
        assert_eq!(rec.last_seq, 119, "cut at {cut}");
        assert_eq!(rec.state_hash, want, "cut at {cut}");
        let tail = rec.truncated_tail.expect("a torn tail");
        assert_eq!(
            (tail.offset, tail.discarded_bytes),
            (start as u64, (cut - start) as u64)
        );
        assert_eq!(fs::metadata(&last).unwrap().len(), start as u64);
    }
    // The journal takes the lost command again and recovers all of it.
    journal(dir.path(), config(2048), &cmds, 119, 5);
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(rec.last_seq, 120);
    assert_eq!(rec.state_hash, fresh(&cmds).state_hash());
}

#[test]
fn zero_filled_tail_is_torn() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(100);
    journal(dir.path(), config(1 << 20), &cmds, 0, 10);
    let seg = segments(dir.path()).pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();
    let mut bytes = fs::read(&seg).unwrap();
    bytes.extend_from_slice(&[0u8; 4096]);
    fs::write(&seg, bytes).unwrap();
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(rec.last_seq, 100);
    assert_eq!(rec.truncated_tail.unwrap().discarded_bytes, 4096);
    assert_eq!(fs::metadata(&seg).unwrap().len(), len);
    assert_eq!(rec.state_hash, fresh(&cmds).state_hash());
}

#[test]
fn a_bit_flip_in_the_last_record_is_a_torn_tail() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(100);
    drop(journal_then_crash(
        dir.path(),
        config(1 << 20),
        &cmds,
        0,
        10,
    ));
    let seg = segments(dir.path()).pop().unwrap();
    let (start, size, _) = *records(&seg).last().unwrap();
    flip_bit(&seg, start + size - 3);
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(rec.last_seq, 99);
    assert!(rec.truncated_tail.unwrap().problem.contains("CRC mismatch"));
    assert_eq!(rec.state_hash, fresh(&cmds[..99]).state_hash());
}

#[test]
fn verify_mode_reports_a_torn_tail_without_truncating() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(50);
    drop(journal_then_crash(
        dir.path(),
        config(1 << 20),
        &cmds,
        0,
        10,
    ));
    let seg = segments(dir.path()).pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();
    fs::write(&seg, &fs::read(&seg).unwrap()[..len as usize - 5]).unwrap();
    let rec = recover_with(
        dir.path(),
        engine_config(),
        RecoverOptions {
            repair: false,
            ..RecoverOptions::default()
        },
    )
    .unwrap();
    assert_eq!(rec.last_seq, 49);
    assert!(rec.truncated_tail.is_some());
    assert_eq!(
        fs::metadata(&seg).unwrap().len(),
        len - 5,
        "verify changes nothing"
    );
}

#[test]
fn a_bit_flip_in_a_middle_record_is_refused_with_its_offset() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(100);
    journal(dir.path(), config(1 << 20), &cmds, 0, 10);
    let seg = segments(dir.path()).pop().unwrap();
    let (start, _, seq) = records(&seg)[40];
    assert_eq!(seq, 41);
    flip_bit(&seg, start + 20);
    let len = fs::metadata(&seg).unwrap().len();
    let err = recover(dir.path(), engine_config())
        .err()
        .expect("corruption is refused");
    let msg = err.to_string();
    assert!(
        matches!(err, JournalError::Corrupt { offset, .. } if offset == start as u64),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("byte {start}")) && msg.contains("CRC mismatch"),
        "{msg}"
    );
    assert!(msg.contains("segment-00000000000000000001.log"), "{msg}");
    assert!(msg.contains("a valid record (seq 42) follows"), "{msg}");
    assert_eq!(fs::metadata(&seg).unwrap().len(), len, "nothing truncated");
    // The writer refuses it too.
    assert!(JournalWriter::open(dir.path(), config(1 << 20), 101).is_err());
}

#[test]
fn a_bad_record_at_the_end_of_a_closed_segment_is_corruption() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(200);
    journal(dir.path(), config(1024), &cmds, 0, 10);
    let first = segments(dir.path()).remove(0);
    let (start, size, _) = *records(&first).last().unwrap();
    flip_bit(&first, start + size - 1);
    let err = recover(dir.path(), engine_config()).err().unwrap();
    assert!(
        matches!(&err, JournalError::Corrupt { offset, problem, .. }
            if *offset == start as u64 && problem.contains("not the last")),
        "{err}"
    );
}

#[test]
fn a_bad_segment_header_is_refused() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(200);
    journal(dir.path(), config(1024), &cmds, 0, 10);
    let seg = segments(dir.path())[2].clone();
    flip_bit(&seg, 3);
    let err = recover(dir.path(), engine_config()).err().unwrap();
    assert!(
        matches!(err, JournalError::BadSegmentHeader { .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(seg.file_name().unwrap().to_str().unwrap()) && msg.contains("magic"),
        "{msg}"
    );
}

#[test]
fn a_missing_segment_is_a_seq_gap() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(200);
    journal(dir.path(), config(1024), &cmds, 0, 10);
    let segs = segments(dir.path());
    fs::remove_file(&segs[2]).unwrap();
    let err = recover(dir.path(), engine_config()).err().unwrap();
    assert!(
        matches!(err, JournalError::SeqGap { offset: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("sequence gap"), "{err}");
}

fn snapshot_at(dir: &std::path::Path, cmds: &[rialto_core::Command], seq: usize) {
    let engine = fresh(&cmds[..seq]);
    write_snapshot(
        dir,
        seq as u64,
        engine.state_hash(),
        &engine.encode_snapshot(),
    )
    .unwrap();
}

#[test]
fn snapshot_plus_tail_equals_full_replay() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(300);
    journal(dir.path(), config(1024), &cmds, 0, 10);
    snapshot_at(dir.path(), &cmds, 180);
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(
        (rec.snapshot_seq, rec.replayed, rec.last_seq),
        (Some(180), 120, 300)
    );
    assert_eq!(rec.state_hash, fresh(&cmds).state_hash());
    // Once the covered segments are archived, recovery does not need them...
    let archived = archive_segments_before(dir.path(), 180).unwrap();
    assert!(!archived.is_empty());
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(rec.state_hash, fresh(&cmds).state_hash());
    // ...and the full history still reads from seq 1 with the archive.
    let all: Vec<_> = JournalReader::open(dir.path(), true)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!((all.len(), all[0].seq), (300, 1));
    let live = JournalReader::open(dir.path(), false)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert!(live.seq > 1 && live.seq <= 181);
}

/// 300 commands journaled, with snapshots at 100 and 200; the state hash they end with.
fn two_snapshots(dir: &TempDir) -> (Vec<(u64, std::path::PathBuf)>, [u8; 32]) {
    let cmds = workload(300);
    journal(dir.path(), config(1024), &cmds, 0, 10);
    snapshot_at(dir.path(), &cmds, 100);
    snapshot_at(dir.path(), &cmds, 200);
    let snaps = list_snapshots(dir.path()).unwrap();
    assert_eq!(snaps.len(), 2);
    (snaps, fresh(&cmds).state_hash())
}

#[test]
fn a_corrupt_snapshot_falls_back_to_an_older_one_then_to_full_replay() {
    let dir = TempDir::new().unwrap();
    let (snaps, want) = two_snapshots(&dir);
    flip_bit(&snaps[1].1, 200);
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!((rec.snapshot_seq, rec.replayed), (Some(100), 200));
    assert_eq!(rec.state_hash, want);
    flip_bit(&snaps[0].1, 40); // inside the header's state hash
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!((rec.snapshot_seq, rec.replayed), (None, 300));
    assert_eq!(rec.state_hash, want);
}

#[test]
fn a_torn_snapshot_falls_back_to_the_one_before_at_every_cut() {
    let dir = TempDir::new().unwrap();
    let (snaps, want) = two_snapshots(&dir);
    let newest = &snaps[1].1;
    let whole = std::fs::read(newest).unwrap();
    // A crash while the newest snapshot was written leaves any prefix of it.
    let step = (whole.len() / 97).max(1);
    for cut in (0..whole.len()).step_by(step).chain([whole.len() - 1]) {
        std::fs::write(newest, &whole[..cut]).unwrap();
        let rec = recover(dir.path(), engine_config()).unwrap();
        assert_eq!(
            (rec.snapshot_seq, rec.replayed, rec.state_hash),
            (Some(100), 200, want),
            "the newest snapshot cut to {cut} of {} bytes",
            whole.len()
        );
    }
    std::fs::write(newest, &whole).unwrap();
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!((rec.snapshot_seq, rec.state_hash), (Some(200), want));
}

#[test]
fn a_snapshot_without_the_journal_after_it_is_a_missing_range() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(300);
    journal(dir.path(), config(1024), &cmds, 0, 10);
    snapshot_at(dir.path(), &cmds, 100);
    // Archive as if a snapshot at 250 had existed, then lose it: seq 101.. are gone.
    archive_segments_before(dir.path(), 250).unwrap();
    let err = recover(dir.path(), engine_config()).err().unwrap();
    assert!(matches!(err, JournalError::MissingRange { .. }), "{err}");
    assert!(err.to_string().contains("recovery needs seq 101"), "{err}");
}

#[test]
fn retention_keeps_the_newest_snapshots_and_archives_what_the_oldest_covers() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(400);
    journal(dir.path(), config(1024), &cmds, 0, 10);
    for seq in [50, 100, 150, 200, 250] {
        snapshot_at(dir.path(), &cmds, seq);
        retain(dir.path(), 3).unwrap();
    }
    let kept: Vec<u64> = list_snapshots(dir.path())
        .unwrap()
        .iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(kept, [150, 200, 250]);
    assert!(fs::read_dir(archive_dir(dir.path())).unwrap().count() > 0);
    let first_live = JournalReader::open(dir.path(), false)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert!(first_live.seq <= 151, "{}", first_live.seq);
    // Even the oldest kept snapshot still recovers from the live journal.
    for s in &list_snapshots(dir.path()).unwrap()[1..] {
        fs::remove_file(&s.1).unwrap();
    }
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(rec.snapshot_seq, Some(150));
    assert_eq!(rec.state_hash, fresh(&cmds).state_hash());
}

#[test]
fn the_segment_being_written_is_never_archived() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(100);
    journal(dir.path(), config(1 << 20), &cmds, 0, 10);
    assert!(
        archive_segments_before(dir.path(), u64::MAX)
            .unwrap()
            .is_empty()
    );
    assert_eq!(segments(dir.path()).len(), 1);
}

#[test]
fn a_journal_behind_its_snapshot_is_refused_unless_accepted_then_goes_on_beside_it() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(200);
    journal(dir.path(), config(1 << 20), &cmds[..120], 0, 10);
    snapshot_at(dir.path(), &cmds, 150); // as if seq 121..150 were lost
    let before = segments(dir.path());
    let refused = recover(dir.path(), engine_config())
        .err()
        .map(|e| e.to_string());
    assert!(
        refused
            .as_deref()
            .is_some_and(|e| e.contains("seqs 121..=150 are missing")),
        "{refused:?}"
    );
    // Durability none allows the loss: it is recorded, and nothing is moved.
    let options = RecoverOptions {
        durability: Durability::None,
        ..RecoverOptions::default()
    };
    let rec = recover_with(dir.path(), engine_config(), options).unwrap();
    assert_eq!((rec.last_seq, rec.replayed), (150, 0));
    let loss = rec.accepted_loss.expect("recorded");
    assert_eq!((loss.from, loss.to), (121, 150));
    assert_eq!(segments(dir.path()), before);
    journal(dir.path(), config(1 << 20), &cmds, 150, 10);
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(rec.last_seq, 200);
    assert_eq!(rec.state_hash, fresh(&cmds).state_hash());
}

#[test]
fn durability_modes_say_what_may_be_acknowledged() {
    let cmds = workload(20);
    let run = |durability: Durability| {
        let dir = TempDir::new().unwrap();
        let cfg = JournalConfig {
            durability,
            ..JournalConfig::default()
        };
        let mut w = JournalWriter::open(dir.path(), cfg, 1).unwrap();
        for (i, cmd) in cmds.iter().enumerate().take(10) {
            w.append(i as u64 + 1, ts(i as u64 + 1), cmd);
        }
        let d = w.commit().unwrap();
        let len = fs::metadata(w.current_segment()).unwrap().len();
        let synced = w.sync().unwrap();
        (d, len, synced, dir)
    };
    let (d, len, s, _dir) = run(Durability::Fsync);
    assert_eq!(
        (d.ack_through, d.written_through, d.synced_through),
        (10, 10, 10)
    );
    assert!(len > SEGMENT_HEADER_LEN as u64);
    assert_eq!(s.synced_through, 10);
    let (d, len, s, _dir) = run(Durability::Batch {
        interval_us: 3_600_000_000,
    });
    assert_eq!((d.ack_through, d.written_through), (10, 10));
    assert!(d.synced_through == 0 || d.synced_through == 10);
    assert!(len > SEGMENT_HEADER_LEN as u64);
    assert_eq!(s.synced_through, 10);
    let (d, len, s, _dir) = run(Durability::None);
    assert_eq!(
        (d.ack_through, d.written_through, d.synced_through),
        (10, 0, 0)
    );
    assert_eq!(
        len, SEGMENT_HEADER_LEN as u64,
        "none mode has not written yet"
    );
    assert_eq!((s.written_through, s.synced_through), (10, 10));
}

#[test]
fn batch_mode_syncs_when_due() {
    let dir = TempDir::new().unwrap();
    let cfg = JournalConfig {
        durability: Durability::Batch {
            interval_us: 50_000,
        },
        ..JournalConfig::default()
    };
    let cmds = workload(10);
    let mut w = JournalWriter::open(dir.path(), cfg, 1).unwrap();
    w.append(1, 0, &cmds[0]);
    w.commit().unwrap(); // the first commit after open is within the interval: not synced
    w.append(2, 0, &cmds[1]);
    let d = w.commit().unwrap();
    assert_eq!(d.ack_through, 2);
    if d.synced_through < 2 {
        let due = w.sync_due_at().expect("a sync is due later");
        // The background thread may have synced meanwhile; never less than before.
        assert!(
            w.sync_if_due(due - std::time::Duration::from_millis(1))
                .unwrap()
                .synced_through
                >= d.synced_through
        );
        assert_eq!(w.sync_if_due(due).unwrap().synced_through, 2);
    }
    assert_eq!(w.sync_due_at(), None);
}

#[test]
fn every_fsync_is_reported_to_the_observer_in_every_mode_that_syncs() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, mpsc};
    let cmds = workload(10);
    let count = |durability| {
        let dir = TempDir::new().unwrap();
        let cfg = JournalConfig {
            durability,
            ..JournalConfig::default()
        };
        let seen = Arc::new(AtomicU64::new(0));
        let (synced, first_sync) = mpsc::channel();
        let synced = Mutex::new(synced);
        let mut w = JournalWriter::open(dir.path(), cfg, 1).unwrap();
        let counter = seen.clone();
        w.observe_syncs(Arc::new(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
            let _ = synced.lock().unwrap().send(());
        }));
        for (i, cmd) in cmds.iter().enumerate() {
            w.append(i as u64 + 1, ts(i as u64 + 1), cmd);
            w.commit().unwrap();
        }
        // Batch mode syncs on its own thread, every 1 ms here: wait for its first report.
        if matches!(durability, Durability::Batch { .. }) {
            let _ = first_sync.recv_timeout(std::time::Duration::from_secs(10));
        }
        seen.load(Ordering::Relaxed)
    };
    assert_eq!(count(Durability::Fsync), 10, "one fsync per commit");
    assert!(count(Durability::Batch { interval_us: 1_000 }) >= 1);
    assert_eq!(count(Durability::None), 0);
}

#[test]
fn durability_parses_and_displays() {
    use std::str::FromStr;
    assert_eq!(Durability::from_str("fsync"), Ok(Durability::Fsync));
    assert_eq!(
        Durability::from_str("batch"),
        Ok(Durability::Batch { interval_us: 1000 })
    );
    assert_eq!(
        Durability::from_str("batch:250"),
        Ok(Durability::Batch { interval_us: 250 })
    );
    assert_eq!(Durability::from_str("none"), Ok(Durability::None));
    assert!(Durability::from_str("sometimes").is_err());
    for d in [
        Durability::Fsync,
        Durability::Batch { interval_us: 7 },
        Durability::None,
    ] {
        assert_eq!(Durability::from_str(&d.to_string()), Ok(d));
    }
}

#[test]
fn a_last_record_with_a_valid_crc_but_an_unknown_command_is_never_truncated() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(50);
    journal(dir.path(), config(1 << 20), &cmds, 0, 10);
    let seg = segments(dir.path()).pop().unwrap();
    let (start, size, _) = *records(&seg).last().unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    bytes[start + 24] = 200; // the command tag, as a newer build might write it
    let crc = crc32c::crc32c(&bytes[start + 8..start + size]);
    bytes[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    fs::write(&seg, &bytes).unwrap();
    let err = recover(dir.path(), engine_config()).err().unwrap();
    assert!(err.to_string().contains("valid CRC but"), "{err}");
    assert!(err.to_string().contains("unknown command tag 200"), "{err}");
    assert_eq!(fs::metadata(&seg).unwrap().len(), bytes.len() as u64);
}

#[test]
fn segments_are_preallocated_and_end_clean_when_closed() {
    let cmds = workload(300);
    let cfg = JournalConfig {
        durability: Durability::Batch { interval_us: 1_000 },
        segment_bytes: 8 << 10,
        ..JournalConfig::default()
    };

    // A writer that is never dropped, as after SIGKILL: what it committed is in the page
    // cache, followed by the preallocated zeros, which recovery cuts off.
    let dir = TempDir::new().unwrap();
    let mut w = JournalWriter::open(dir.path(), cfg, 1).unwrap();
    for (i, cmd) in cmds.iter().enumerate() {
        w.append(i as u64 + 1, ts(i as u64 + 1), cmd);
        if i % 7 == 0 {
            w.commit().unwrap();
        }
    }
    w.commit().unwrap();
    let last = w.current_segment().to_path_buf();
    assert!(
        fs::metadata(&last).unwrap().len() >= 8 << 10,
        "preallocated"
    );
    std::mem::forget(w);
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(rec.last_seq, 300);
    assert!(rec.truncated_tail.unwrap().problem.contains("zero bytes"));
    assert_eq!(rec.state_hash, fresh(&cmds).state_hash());
    // The writer carries on after the recovered end.
    let mut w = JournalWriter::open(dir.path(), cfg, 301).unwrap();
    w.append(301, 0, &cmds[0]);
    w.commit().unwrap();
    drop(w);
    assert_eq!(recover(dir.path(), engine_config()).unwrap().last_seq, 301);

    // Closed cleanly, every segment ends with its last record.
    let dir = TempDir::new().unwrap();
    let mut w = JournalWriter::open(dir.path(), cfg, 1).unwrap();
    for (i, cmd) in cmds.iter().enumerate() {
        w.append(i as u64 + 1, ts(i as u64 + 1), cmd);
        w.commit().unwrap();
    }
    drop(w);
    let segs = segments(dir.path());
    assert!(segs.len() > 2, "rolled over");
    for seg in &segs {
        let (start, size, _) = *records(seg).last().unwrap();
        assert_eq!(fs::metadata(seg).unwrap().len(), (start + size) as u64);
    }
    let rec = recover(dir.path(), engine_config()).unwrap();
    assert!(rec.truncated_tail.is_none());
    assert_eq!(rec.state_hash, fresh(&cmds).state_hash());
}

#[test]
fn uncommitted_holds_exactly_the_batch_being_committed_in_every_mode() {
    let cmds = workload(30);
    for durability in [
        Durability::Fsync,
        Durability::Batch { interval_us: 1_000 },
        Durability::None,
    ] {
        let dir = TempDir::new().unwrap();
        let cfg = JournalConfig {
            durability,
            ..JournalConfig::default()
        };
        let mut w = JournalWriter::open(dir.path(), cfg, 1).unwrap();
        let mut replayed = Vec::new();
        for (b, batch) in cmds.chunks(7).enumerate() {
            for (i, cmd) in batch.iter().enumerate() {
                let seq = (b * 7 + i) as u64 + 1;
                w.append(seq, ts(seq), cmd);
            }
            // What a replica reads: the batch's records, none before them.
            let bytes = w.uncommitted().to_vec();
            let mut pos = 0;
            while pos < bytes.len() {
                let record = rialto_journal::format::parse_record(&bytes, pos).unwrap();
                pos += record.size;
                replayed.push((record.seq, record.ts_ns, record.command));
            }
            w.commit().unwrap();
            assert!(w.uncommitted().is_empty(), "{durability:?}");
        }
        let expected: Vec<_> = cmds
            .iter()
            .enumerate()
            .map(|(i, c)| (i as u64 + 1, ts(i as u64 + 1), c.clone()))
            .collect();
        assert_eq!(replayed, expected, "{durability:?}");
    }
}
