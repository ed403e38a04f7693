//! Checkpoints and seals (docs/journal-format.md, "Checkpoints and seals"): a journal cut at
//! any record boundary below what was on disk is a loss that recovery reports, never a
//! shorter history that passes as whole.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use rialto_core::{Command, EngineConfig};
use rialto_journal::format::{
    CHECKPOINT_LEN, CHECKPOINT_SLOTS, SEGMENT_HEADER_LEN, SEGMENT_HEADER_LEN_V1, encode_record,
    journal_dir, segment_name,
};
use rialto_journal::{
    JournalError, JournalReader, JournalWriter, RecoverOptions, recover, recover_with,
};
use tempfile::TempDir;

fn engine_config() -> EngineConfig {
    EngineConfig::default()
}

/// Every file of the journal directory and its bytes.
fn snapshot_of_files(data: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = fs::read_dir(journal_dir(data))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// A copy of `from` (a journal directory's parent) in a fresh temporary directory.
fn copy_data(from: &Path) -> TempDir {
    let to = TempDir::new().unwrap();
    fs::create_dir_all(journal_dir(to.path())).unwrap();
    for (path, bytes) in snapshot_of_files(from) {
        fs::write(
            journal_dir(to.path()).join(path.file_name().unwrap()),
            bytes,
        )
        .unwrap();
    }
    to
}

/// `(segment index, offset, seq)` of every record boundary: the end of each record.
fn boundaries(data: &Path) -> Vec<(usize, usize, u64)> {
    let mut out = Vec::new();
    for (i, seg) in segments(data).iter().enumerate() {
        for (offset, size, seq) in records(seg) {
            out.push((i, offset + size, seq));
        }
    }
    out
}

/// Cuts segment `index` at `offset` and removes every segment after it.
fn cut(data: &Path, index: usize, offset: usize) {
    let segs = segments(data);
    let bytes = fs::read(&segs[index]).unwrap();
    fs::write(&segs[index], &bytes[..offset]).unwrap();
    for later in &segs[index + 1..] {
        fs::remove_file(later).unwrap();
    }
}

fn verify_only() -> RecoverOptions {
    RecoverOptions {
        repair: false,
        ..RecoverOptions::default()
    }
}

/// After a clean stop every record is claimed by a checkpoint or a seal: cutting the journal
/// at any record boundary (the segments after the cut removed, or kept) is a loss, reported
/// with the seqs that are missing, and nothing is changed.
#[test]
fn a_cut_at_every_record_boundary_is_reported_after_a_clean_stop() {
    let original = TempDir::new().unwrap();
    let cmds = workload(150);
    journal(original.path(), config(2048), &cmds, 0, 7);
    let segs = segments(original.path()).len();
    assert!(segs >= 4, "{segs} segments");
    let all = boundaries(original.path());
    for (at, &(index, offset, seq)) in all.iter().enumerate() {
        if seq == 150 {
            continue; // the end of the journal: nothing is cut off
        }
        let segment_end = all[at + 1].0 != index;
        // The later segments gone too: the loss shows against the cut segment's checkpoint,
        // or, cut at its very end, against its seal (its successor is missing).
        let dir = copy_data(original.path());
        cut(dir.path(), index, offset);
        let before = snapshot_of_files(dir.path());
        for options in [RecoverOptions::default(), verify_only()] {
            match recover_with(dir.path(), engine_config(), options) {
                Err(JournalError::LostSuffix {
                    journal_last,
                    lost_through,
                    evidence,
                }) if !segment_end => {
                    assert_eq!(journal_last, seq, "cut after seq {seq}");
                    assert!(lost_through > seq, "cut after seq {seq}: {lost_through}");
                    assert!(evidence.contains("checkpoint"), "{evidence}");
                }
                Err(JournalError::MissingSegment { sealed_at, .. }) if segment_end => {
                    assert_eq!(sealed_at, seq);
                }
                other => panic!("cut after seq {seq}: {:?}", other.map(|r| r.last_seq).err()),
            }
        }
        assert_eq!(snapshot_of_files(dir.path()), before, "cut after seq {seq}");
        // The later segments kept: the cut segment is not the last, and the reader refuses it.
        if !segment_end {
            let dir = copy_data(original.path());
            let seg = &segments(dir.path())[index];
            let bytes = fs::read(seg).unwrap();
            fs::write(seg, &bytes[..offset]).unwrap();
            let failure = JournalReader::open(dir.path(), false)
                .unwrap()
                .find_map(Result::err);
            let lost = matches!(failure, Some(JournalError::LostRecords { journal_last, .. }) if journal_last == seq);
            let last_segment = index + 1 == segs;
            assert!(lost || last_segment, "cut after seq {seq}: {failure:?}");
        }
    }
}

/// After a crash the checkpoint lags one commit: a cut inside the last batch cannot be told
/// from a power loss during its sync (nothing of it was acknowledged then) and is a torn tail;
/// a cut below it is a loss.
#[test]
fn after_a_crash_only_the_last_batch_may_be_cut_short() {
    let original = TempDir::new().unwrap();
    let cmds = workload(150);
    drop(journal_then_crash(
        original.path(),
        config(2048),
        &cmds,
        0,
        7,
    ));
    // Batches of 7: the last commit wrote seqs 148..=150, the one before ended at 147.
    let all = boundaries(original.path());
    for (at, &(index, offset, seq)) in all.iter().enumerate() {
        let segment_end = all.get(at + 1).is_some_and(|next| next.0 != index);
        let dir = copy_data(original.path());
        cut(dir.path(), index, offset);
        let recovered = recover(dir.path(), engine_config());
        if seq >= 147 {
            let recovered = recovered.unwrap_or_else(|e| panic!("cut after seq {seq}: {e}"));
            assert_eq!(recovered.last_seq, seq);
            assert_eq!(
                recovered.state_hash,
                fresh(&cmds[..seq as usize]).state_hash()
            );
        } else if segment_end {
            assert!(
                matches!(recovered, Err(JournalError::MissingSegment { sealed_at, .. }) if sealed_at == seq),
                "cut after seq {seq}: {:?}",
                recovered.map(|r| r.last_seq).err()
            );
        } else {
            assert!(
                matches!(recovered, Err(JournalError::LostSuffix { journal_last, .. }) if journal_last == seq),
                "cut after seq {seq}: {:?}",
                recovered.map(|r| r.last_seq).err()
            );
        }
    }
}

/// Quiet for a while, the writer brings the checkpoint up to its last commit: then no cut
/// at all passes.
#[test]
fn an_idle_writer_catches_its_checkpoint_up() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(40);
    let mut w = journal_then_crash(dir.path(), config(1 << 20), &cmds, 0, 10);
    let now = std::time::Instant::now();
    assert!(!w.checkpoint_if_quiet(now).unwrap(), "not quiet yet");
    let quiet = now + rialto_journal::CHECKPOINT_WHEN_IDLE;
    assert!(w.checkpoint_if_quiet(quiet).unwrap(), "quiet: caught up");
    assert!(!w.checkpoint_if_quiet(quiet).unwrap(), "nothing left to do");
    drop(w);
    cut(dir.path(), 0, records(&segments(dir.path())[0])[38].0);
    assert!(matches!(
        recover(dir.path(), engine_config()),
        Err(JournalError::LostSuffix {
            journal_last: 38,
            lost_through: 40,
            ..
        })
    ));
}

/// Accepting the loss records it, and the journal goes on after the lost seqs, in a segment
/// of its own: seqs are never used twice.
#[test]
fn an_accepted_loss_below_the_checkpoint_goes_on_after_it() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(100);
    journal(dir.path(), config(1 << 20), &cmds[..60], 0, 10);
    cut(dir.path(), 0, records(&segments(dir.path())[0])[49].0);
    let options = RecoverOptions {
        accept_loss: true,
        ..RecoverOptions::default()
    };
    let recovered = recover_with(dir.path(), engine_config(), options).unwrap();
    let loss = recovered.accepted_loss.expect("recorded");
    assert_eq!((loss.from, loss.to, recovered.last_seq), (50, 60, 60));
    assert_eq!(
        recovered.engine.last_seq(),
        60,
        "the engine passes over the loss too"
    );
    // Stopped before anything more was journaled, it recovers past the loss again.
    drop(JournalWriter::open(dir.path(), config(1 << 20), 61).unwrap());
    let again = recover(dir.path(), engine_config()).unwrap();
    assert_eq!((again.last_seq, again.engine.last_seq()), (60, 60));
    let mut w = JournalWriter::open(dir.path(), config(1 << 20), 61).unwrap();
    for seq in 61..=70 {
        w.append(seq, ts(seq), &cmds[seq as usize - 1]);
    }
    w.commit().unwrap();
    w.sync().unwrap();
    drop(w);
    assert_eq!(
        segments(dir.path()).len(),
        2,
        "a new segment after the loss"
    );
    let again = recover(dir.path(), engine_config()).unwrap();
    assert_eq!((again.last_seq, again.replayed), (70, 59));
    assert!(again.accepted_loss.is_none(), "recorded once");
}

/// The newest segment deleted whole: the one before it is sealed, so its successor existed.
#[test]
fn a_missing_newest_segment_is_reported() {
    let dir = TempDir::new().unwrap();
    journal(dir.path(), config(2048), &workload(120), 0, 5);
    let segs = segments(dir.path());
    fs::remove_file(segs.last().unwrap()).unwrap();
    let err = recover(dir.path(), engine_config()).err().unwrap();
    assert!(matches!(err, JournalError::MissingSegment { .. }), "{err}");
    assert!(err.to_string().contains("is missing"), "{err}");
}

/// A checkpoint slot damaged (a write torn by a power loss) leaves the other one; both
/// damaged is not what a crash does, and is refused.
#[test]
fn one_damaged_checkpoint_slot_is_survived_two_are_refused() {
    let dir = TempDir::new().unwrap();
    journal(dir.path(), config(1 << 20), &workload(60), 0, 10);
    let seg = segments(dir.path()).pop().unwrap();
    flip_bit(&seg, CHECKPOINT_SLOTS[0] + 3);
    let recovered = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(recovered.last_seq, 60);
    flip_bit(&seg, CHECKPOINT_SLOTS[1] + 3);
    let err = recover(dir.path(), engine_config()).err().unwrap();
    assert!(
        matches!(err, JournalError::BadSegmentHeader { .. }),
        "{err}"
    );
}

/// A crash between creating a segment and sealing the one before it leaves that one unsealed
/// and the new one empty: recovered as it is, and the writer seals it. An unsealed segment
/// with records after it is refused.
#[test]
fn an_interrupted_roll_is_sealed_and_an_unsealed_segment_with_records_after_it_refused() {
    let dir = TempDir::new().unwrap();
    journal(dir.path(), config(2048), &workload(60), 0, 5);
    let segs = segments(dir.path());
    let previous = &segs[segs.len() - 2];
    let last_seq_before = records(previous).last().unwrap().2;
    // Undo the roll's seal and empty the new segment, as the crash would have left them.
    let unseal = |path: &Path| {
        let mut bytes = fs::read(path).unwrap();
        for at in CHECKPOINT_SLOTS {
            bytes[at..at + CHECKPOINT_LEN].fill(0);
        }
        fs::write(path, bytes).unwrap();
    };
    let with_records = copy_data(dir.path());
    unseal(&segments(with_records.path())[segs.len() - 2]);
    let err = recover(with_records.path(), engine_config()).err().unwrap();
    assert!(matches!(err, JournalError::NotSealed { .. }), "{err}");

    unseal(previous);
    let last = segs.last().unwrap();
    let header = fs::read(last).unwrap()[..SEGMENT_HEADER_LEN].to_vec();
    fs::write(last, header).unwrap();
    unseal(last);
    let recovered = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(recovered.last_seq, last_seq_before);
    drop(JournalWriter::open(dir.path(), config(2048), last_seq_before + 1).unwrap());
    // Sealed now: cutting it is a loss even though a segment follows.
    let bytes = fs::read(previous).unwrap();
    let (offset, _, _) = *records(previous).last().unwrap();
    fs::write(previous, &bytes[..offset]).unwrap();
    let failure = JournalReader::open(dir.path(), false)
        .unwrap()
        .find_map(Result::err);
    assert!(
        matches!(failure, Some(JournalError::LostRecords { .. })),
        "{failure:?}"
    );
}

/// A journal written before checkpoints (segment version 1) still recovers, and the writer
/// goes on in a version 2 segment beside it.
#[test]
fn a_version_1_journal_recovers_and_goes_on() {
    let dir = TempDir::new().unwrap();
    let cmds = workload(50);
    fs::create_dir_all(journal_dir(dir.path())).unwrap();
    let mut bytes = version_1_header(1);
    for (i, cmd) in cmds[..30].iter().enumerate() {
        let seq = i as u64 + 1;
        encode_record(&mut bytes, seq, ts(seq), cmd);
    }
    fs::write(journal_dir(dir.path()).join(segment_name(1)), &bytes).unwrap();
    let recovered = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(recovered.last_seq, 30);
    journal(dir.path(), config(1 << 20), &cmds, 30, 5);
    assert_eq!(segments(dir.path()).len(), 2);
    let recovered = recover(dir.path(), engine_config()).unwrap();
    assert_eq!(recovered.last_seq, 50);
    assert_eq!(recovered.state_hash, fresh(&cmds).state_hash());
    let read: Vec<Command> = JournalReader::open(dir.path(), false)
        .unwrap()
        .map(|r| r.unwrap().command)
        .collect();
    assert_eq!(read, cmds);
}

/// The 32-byte header of a version 1 segment (docs/journal-format.md).
fn version_1_header(first_seq: u64) -> Vec<u8> {
    let mut h = vec![0u8; SEGMENT_HEADER_LEN_V1];
    h[0..8].copy_from_slice(b"RIALTOJL");
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h[12..16].copy_from_slice(&(SEGMENT_HEADER_LEN_V1 as u32).to_le_bytes());
    h[16..24].copy_from_slice(&first_seq.to_le_bytes());
    let crc = crc32c::crc32c(&h[..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}
