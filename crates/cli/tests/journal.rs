//! `rialto journal dump | rialto replay --final-state` reaches the state `recover` reaches;
//! `rialto journal verify` reports and exits 1 on corruption.

mod common;

use std::fs;
use std::path::Path;

use common::{replay, rialto, split_hash};
use rialto_core::{Command, EngineConfig, Name, PlaceOrder, Side, SymbolId, SymbolSpec};
use rialto_journal::format::{
    CHECKPOINT_LEN, CHECKPOINT_SLOTS, SEGMENT_HEADER_LEN, journal_dir, list_segments, parse_record,
};
use rialto_journal::{
    Durability, JournalConfig, JournalError, JournalWriter, RecoverOptions,
    archive_segments_before, recover, recover_with, write_snapshot,
};
use tempfile::TempDir;

/// Two symbols (so that names must resolve to the right ids), funded users, crossing orders.
fn commands() -> Vec<Command> {
    let name = |s| Name::new(s).unwrap();
    let mut cmds = Vec::new();
    for (symbol, base) in [("ETH-USD", "ETH"), ("BTC-USD", "BTC")] {
        cmds.push(Command::AddSymbol(Box::new(SymbolSpec {
            symbol: name(symbol),
            base: name(base),
            quote: name("USD"),
            base_scale: 100,
            quote_scale: 10,
            maker_fee: 2,
            taker_fee: 5,
            band_bps: 0,
            day_end: 0,
            kind: SymbolSpec::SPOT,
        })));
    }
    let mut tx = 0;
    for user in 1..=4 {
        cmds.push(Command::AddUser { user });
        for cur in ["USD", "BTC", "ETH"] {
            tx += 1;
            cmds.push(Command::AdjustBalance {
                user,
                currency: name(cur),
                amount: 100_000_000,
                tx,
            });
        }
    }
    for i in 0..300i64 {
        let user = 1 + i % 4;
        let side = if i % 3 == 0 { Side::Sell } else { Side::Buy };
        let symbol = SymbolId((i % 2) as u32);
        cmds.push(Command::Place(PlaceOrder::limit(
            user,
            1000 + i,
            symbol,
            side,
            95 + (i * 7) % 11,
            1 + i % 5,
        )));
        if i % 10 == 9 {
            cmds.push(Command::Cancel {
                user,
                order: 1000 + i - 4,
            });
        }
        if i % 50 == 0 {
            cmds.push(Command::Book { symbol, depth: 5 });
        }
    }
    cmds
}

fn write_journal(data: &Path, cmds: &[Command]) {
    write_journal_until(data, cmds).sync().unwrap();
}

/// Journals `cmds` in batches of 16 and returns the writer without its clean stop's sync.
fn write_journal_until(data: &Path, cmds: &[Command]) -> JournalWriter {
    let cfg = JournalConfig {
        segment_bytes: 4096,
        durability: Durability::Fsync,
        ..JournalConfig::default()
    };
    let mut w = JournalWriter::open(data, cfg, 1).unwrap();
    for (i, batch) in cmds.chunks(16).enumerate() {
        for (j, cmd) in batch.iter().enumerate() {
            let seq = (i * 16 + j) as u64 + 1;
            w.append(seq, seq as i64 * 1000, cmd);
        }
        w.commit().unwrap();
    }
    w
}

fn hex(hash: [u8; 32]) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn dump_replays_to_the_recovered_state() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().to_str().unwrap();
    let cmds = commands();
    write_journal(dir.path(), &cmds);
    let recovered = recover(dir.path(), EngineConfig::default()).unwrap();
    assert_eq!(recovered.last_seq, cmds.len() as u64);

    let dump = rialto(&["journal", "dump", "--data", data], "");
    assert_eq!(dump.code, Some(0), "{}", dump.stderr);
    assert_eq!(dump.stdout.lines().count(), cmds.len());
    let replayed = replay(&dump.stdout, &["--strict"]);
    assert_eq!(replayed.code, Some(0), "{}", replayed.stderr);
    assert!(
        replayed.stdout.contains("\"ev\":\"trade\""),
        "the journal trades"
    );
    let (_, hash) = split_hash(replayed.stdout.lines().last().unwrap());
    assert_eq!(hash, hex(recovered.state_hash));
}

#[test]
fn dump_needs_the_archive_once_segments_are_archived() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().to_str().unwrap();
    let cmds = commands();
    write_journal(dir.path(), &cmds);
    let engine = recover(dir.path(), EngineConfig::default()).unwrap().engine;
    let seq = engine.last_seq();
    write_snapshot(
        dir.path(),
        seq,
        engine.state_hash(),
        &engine.encode_snapshot(),
    )
    .unwrap();
    assert!(!archive_segments_before(dir.path(), seq).unwrap().is_empty());

    let dump = rialto(&["journal", "dump", "--data", data], "");
    assert_eq!(dump.code, Some(1));
    assert!(dump.stderr.contains("--include-archive"), "{}", dump.stderr);
    let dump = rialto(
        &["journal", "dump", "--data", data, "--include-archive"],
        "",
    );
    assert_eq!(dump.code, Some(0), "{}", dump.stderr);
    let replayed = replay(&dump.stdout, &["--strict"]);
    let (_, hash) = split_hash(replayed.stdout.lines().last().unwrap());
    assert_eq!(hash, engine.state_hash_hex());
}

#[test]
fn verify_summarises_and_fails_on_corruption() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().to_str().unwrap();
    let cmds = commands();
    // Killed, not stopped: the last batch is on disk but no checkpoint claims it yet, so a
    // cut into it is a torn tail (below the checkpoint it would be a loss).
    drop(write_journal_until(dir.path(), &cmds));
    let hash = hex(recover(dir.path(), EngineConfig::default())
        .unwrap()
        .state_hash);

    let ok = rialto(&["journal", "verify", "--data", data], "");
    assert_eq!(ok.code, Some(0), "{}{}", ok.stdout, ok.stderr);
    assert!(
        ok.stdout.contains(&format!("seq: 1..={}", cmds.len())),
        "{}",
        ok.stdout
    );
    assert!(
        ok.stdout.contains(&format!("state_hash: {hash}")),
        "{}",
        ok.stdout
    );
    assert!(ok.stdout.contains("result: ok"), "{}", ok.stdout);

    // A torn tail is reported, not fatal, and verify leaves it in place.
    let segs = list_segments(&journal_dir(dir.path())).unwrap();
    let last = &segs.last().unwrap().1;
    let bytes = fs::read(last).unwrap();
    fs::write(last, &bytes[..bytes.len() - 3]).unwrap();
    let torn = rialto(&["journal", "verify", "--data", data], "");
    assert_eq!(torn.code, Some(0), "{}", torn.stdout);
    assert!(torn.stdout.contains("torn tail: "), "{}", torn.stdout);
    assert_eq!(fs::metadata(last).unwrap().len(), bytes.len() as u64 - 3);

    // A flipped byte in the first segment is corruption.
    let first = &segs[0].1;
    let mut bytes = fs::read(first).unwrap();
    bytes[SEGMENT_HEADER_LEN + 100] ^= 0x40;
    fs::write(first, bytes).unwrap();
    let bad = rialto(&["journal", "verify", "--data", data], "");
    assert_eq!(bad.code, Some(1), "{}", bad.stdout);
    assert!(bad.stdout.contains("CORRUPT journal"), "{}", bad.stdout);
    assert!(
        bad.stdout.contains("segment-00000000000000000001.log"),
        "{}",
        bad.stdout
    );
}

#[test]
fn verify_on_a_running_server_says_its_tail_is_live_and_a_second_server_is_refused() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().to_str().unwrap();
    let served = common::serve_demo(dir.path());
    let live = rialto(&["journal", "verify", "--data", data], "");
    assert_eq!(live.code, Some(0), "{}{}", live.stdout, live.stderr);
    assert!(live.stdout.contains("server: running"), "{}", live.stdout);
    assert!(live.stdout.contains("result: ok"), "{}", live.stdout);
    assert!(!live.stderr.contains("WARN"), "{}", live.stderr);

    let args = serve_args(data, "batch", &[]);
    let second = rialto(&args.iter().map(String::as_str).collect::<Vec<_>>(), "");
    assert_ne!(second.code, Some(0));
    assert!(
        second.stderr.contains("another server is running"),
        "{}",
        second.stderr
    );
    drop(served);
    let after = rialto(&["journal", "verify", "--data", data], "");
    assert!(
        !after.stdout.contains("server: running"),
        "{}",
        after.stdout
    );
}

#[test]
fn a_demo_venue_killed_at_once_is_not_set_up_again_even_without_durability() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().to_str().unwrap();
    let add_symbols = |dump: &str| {
        dump.lines()
            .filter(|l| l.contains("\"add_symbol\""))
            .count()
    };
    let demo_symbols = rialto_server::demo::demo_symbols().len();
    // Killed (SIGKILL) as soon as it serves: in `none` mode nothing has been flushed by the
    // journal stage yet, but the set-up was synced before anything ran.
    drop(common::serve_demo_with(dir.path(), "none"));
    let dump = rialto(&["journal", "dump", "--data", data], "");
    assert_eq!(dump.code, Some(0), "{}", dump.stderr);
    assert_eq!(add_symbols(&dump.stdout), demo_symbols, "{}", dump.stdout);
    // Started again, the venue is the one set up before, not a second one.
    drop(common::serve_demo_with(dir.path(), "none"));
    let dump = rialto(&["journal", "dump", "--data", data], "");
    assert_eq!(add_symbols(&dump.stdout), demo_symbols, "{}", dump.stdout);
}

/// Every file under `journal/` (archive included) and its bytes.
fn journal_files(data: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut dirs = vec![journal_dir(data)];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push((path.clone(), fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// The whole journal of `commands()` and a snapshot after its last seq, then the last segment
/// cut: after `keep` whole records, and `torn` bytes into the next one. Returns the last seq
/// the journal still holds and the snapshot's seq.
fn journal_cut_below_the_snapshot(data: &Path, keep: usize, torn: usize) -> (u64, u64) {
    write_journal(data, &commands());
    let engine = recover(data, EngineConfig::default()).unwrap().engine;
    let snapshot_seq = engine.last_seq();
    write_snapshot(
        data,
        snapshot_seq,
        engine.state_hash(),
        &engine.encode_snapshot(),
    )
    .unwrap();
    let (first_seq, last) = list_segments(&journal_dir(data)).unwrap().pop().unwrap();
    let bytes = fs::read(&last).unwrap();
    let mut end = SEGMENT_HEADER_LEN;
    for _ in 0..keep {
        end += parse_record(&bytes, end).unwrap().size;
    }
    assert!(end + torn < bytes.len(), "the cut leaves out records");
    fs::write(&last, &bytes[..end + torn]).unwrap();
    (first_seq + keep as u64 - 1, snapshot_seq)
}

fn serve_args(data: &str, durability: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["serve", "--data", data, "--durability", durability];
    args.extend_from_slice(&common::ON_FREE_PORTS);
    args.extend_from_slice(extra);
    args.into_iter().map(str::to_owned).collect()
}

#[test]
fn a_journal_cut_below_the_snapshot_is_refused_until_the_loss_is_accepted() {
    // Cut at a record boundary, and in the middle of a record (a torn tail).
    for torn in [0, 7] {
        let dir = TempDir::new().unwrap();
        let data = dir.path().to_str().unwrap();
        let (journal_last, snapshot_seq) = journal_cut_below_the_snapshot(dir.path(), 3, torn);
        let missing = format!("seqs {}..={snapshot_seq} are missing", journal_last + 1);
        let before = journal_files(dir.path());

        let verify = rialto(&["journal", "verify", "--data", data], "");
        assert_eq!(verify.code, Some(1), "{}", verify.stdout);
        assert!(verify.stdout.contains(&missing), "{}", verify.stdout);
        assert!(
            verify.stdout.contains(&format!(
                "the journal ends at seq {journal_last}, but the newest snapshot is at seq \
                 {snapshot_seq}"
            )),
            "{}",
            verify.stdout
        );
        assert!(
            verify.stdout.contains("result: CORRUPT"),
            "{}",
            verify.stdout
        );

        // Dump writes what the journal holds, says what is missing, and fails.
        let dump = rialto(&["journal", "dump", "--data", data], "");
        assert_eq!(dump.code, Some(1), "{}", dump.stderr);
        assert_eq!(dump.stdout.lines().count() as u64, journal_last);
        assert!(dump.stderr.contains(&missing), "{}", dump.stderr);
        assert!(dump.stderr.contains("--allow-gaps"), "{}", dump.stderr);
        let dump = rialto(&["journal", "dump", "--data", data, "--allow-gaps"], "");
        assert_eq!(dump.code, Some(0), "{}", dump.stderr);
        assert!(dump.stderr.contains(&missing), "{}", dump.stderr);

        // Recovery as the server does it, in fsync and batch mode: refused, nothing changed.
        for mode in ["fsync", "batch"] {
            let options = RecoverOptions {
                durability: mode.parse().unwrap(),
                ..RecoverOptions::default()
            };
            let refused = recover_with(dir.path(), EngineConfig::default(), options);
            assert!(
                matches!(refused, Err(JournalError::LostSuffix { .. })),
                "{mode}"
            );
            let serve = rialto(
                &serve_args(data, mode, &[])
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
                "",
            );
            assert_ne!(serve.code, Some(0), "{mode}");
            assert!(serve.stderr.contains(&missing), "{}", serve.stderr);
            assert!(
                serve.stderr.contains("--accept-journal-loss"),
                "{}",
                serve.stderr
            );
            assert_eq!(
                journal_files(dir.path()),
                before,
                "{mode} changed the journal"
            );
        }

        // Accepted: the server serves, the old files are as they were, the loss is recorded.
        drop(common::serve_with(
            dir.path(),
            "batch",
            &["--accept-journal-loss"],
        ));
        let after = journal_files(dir.path());
        for (path, bytes) in &before {
            let kept = after.iter().find(|(p, _)| p == path);
            assert_eq!(kept.map(|(_, b)| b), Some(bytes), "{}", path.display());
        }
        let losses = rialto_journal::read_accepted_losses(dir.path()).unwrap();
        assert_eq!(losses.len(), 1);
        assert_eq!(
            (losses[0].from, losses[0].to),
            (journal_last + 1, snapshot_seq)
        );
        assert!(
            losses[0].note.contains("durability batch"),
            "{:?}",
            losses[0]
        );

        // Started again without the flag, the accepted loss is no obstacle.
        drop(common::serve_with(dir.path(), "fsync", &[]));
        let verify = rialto(&["journal", "verify", "--data", data], "");
        assert_eq!(verify.code, Some(0), "{}", verify.stdout);
        assert!(
            verify.stdout.contains(&format!(
                "accepted loss: seqs {}..={snapshot_seq}",
                journal_last + 1
            )),
            "{}",
            verify.stdout
        );
        assert!(verify.stdout.contains("result: ok"), "{}", verify.stdout);
        let dump = rialto(&["journal", "dump", "--data", data], "");
        assert_eq!(dump.code, Some(1));
        assert!(dump.stdout.is_empty(), "{}", dump.stdout);
        assert!(dump.stderr.contains("hole"), "{}", dump.stderr);
        let dump = rialto(&["journal", "dump", "--data", data, "--allow-gaps"], "");
        assert_eq!(dump.code, Some(0), "{}", dump.stderr);
        assert_eq!(dump.stdout.lines().count() as u64, journal_last);
        assert!(dump.stderr.contains("hole"), "{}", dump.stderr);
    }
}

#[test]
fn after_an_accepted_loss_the_journal_goes_on_beside_the_old_segment() {
    let dir = TempDir::new().unwrap();
    let (journal_last, snapshot_seq) = journal_cut_below_the_snapshot(dir.path(), 2, 5);
    let options = RecoverOptions {
        accept_loss: true,
        ..RecoverOptions::default()
    };
    let recovered = recover_with(dir.path(), EngineConfig::default(), options).unwrap();
    assert_eq!(recovered.last_seq, snapshot_seq);
    let loss = recovered.accepted_loss.expect("the loss is recorded");
    assert_eq!((loss.from, loss.to), (journal_last + 1, snapshot_seq));
    let mut w =
        JournalWriter::open(dir.path(), JournalConfig::default(), snapshot_seq + 1).unwrap();
    let more = Command::AddUser { user: 99 };
    for seq in snapshot_seq + 1..=snapshot_seq + 3 {
        w.append(seq, seq as i64 * 1000, &more);
    }
    w.commit().unwrap();
    drop(w);
    let again = recover(dir.path(), EngineConfig::default()).unwrap();
    assert_eq!((again.replayed, again.last_seq), (3, snapshot_seq + 3));
    assert!(again.accepted_loss.is_none(), "recorded once");
    assert_eq!(
        rialto_journal::read_accepted_losses(dir.path())
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn durability_none_accepts_a_lost_suffix_itself_and_records_it() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().to_str().unwrap();
    let (journal_last, snapshot_seq) = journal_cut_below_the_snapshot(dir.path(), 4, 0);
    // A `none` writer checkpoints only at a roll and a clean stop: killed, its last segment
    // has no checkpoint, so only the snapshot shows the loss.
    let (_, last) = list_segments(&journal_dir(dir.path()))
        .unwrap()
        .pop()
        .unwrap();
    let mut bytes = fs::read(&last).unwrap();
    for at in CHECKPOINT_SLOTS {
        bytes[at..at + CHECKPOINT_LEN].fill(0);
    }
    fs::write(&last, bytes).unwrap();
    let before = journal_files(dir.path());
    drop(common::serve_with(dir.path(), "none", &[]));
    let after = journal_files(dir.path());
    for (path, bytes) in &before {
        let kept = after.iter().find(|(p, _)| p == path);
        assert_eq!(kept.map(|(_, b)| b), Some(bytes), "{}", path.display());
    }
    let losses = rialto_journal::read_accepted_losses(dir.path()).unwrap();
    assert_eq!(
        (losses[0].from, losses[0].to),
        (journal_last + 1, snapshot_seq)
    );
    assert!(
        losses[0].note.contains("durability none"),
        "{:?}",
        losses[0]
    );
    let verify = rialto(&["journal", "verify", "--data", data], "");
    assert_eq!(verify.code, Some(0), "{}", verify.stdout);
    assert!(verify.stdout.contains("accepted loss"), "{}", verify.stdout);
}

/// A journal cut exactly at a record boundary, with no snapshot to show it: the segment's
/// checkpoint does. `verify` reports the lost seqs, the server refuses to start until the loss
/// is accepted, and then goes on after the lost seqs.
#[test]
fn a_journal_cut_at_a_record_boundary_is_reported_by_its_checkpoint() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().to_str().unwrap();
    let cmds = commands();
    write_journal(dir.path(), &cmds);
    let (_, last) = list_segments(&journal_dir(dir.path()))
        .unwrap()
        .pop()
        .unwrap();
    let bytes = fs::read(&last).unwrap();
    let mut end = SEGMENT_HEADER_LEN;
    let mut seq = 0;
    for _ in 0..3 {
        let r = parse_record(&bytes, end).unwrap();
        end += r.size;
        seq = r.seq;
    }
    assert!(end < bytes.len(), "records are cut off");
    fs::write(&last, &bytes[..end]).unwrap();
    let missing = format!("seqs {}..={} are missing", seq + 1, cmds.len());

    let verify = rialto(&["journal", "verify", "--data", data], "");
    assert_eq!(verify.code, Some(1), "{}", verify.stdout);
    assert!(verify.stdout.contains(&missing), "{}", verify.stdout);
    assert!(verify.stdout.contains("checkpoint"), "{}", verify.stdout);
    let dump = rialto(&["journal", "dump", "--data", data], "");
    assert_eq!(dump.code, Some(1), "{}", dump.stderr);
    assert_eq!(dump.stdout.lines().count() as u64, seq);
    let args = serve_args(data, "fsync", &[]);
    let serve = rialto(&args.iter().map(String::as_str).collect::<Vec<_>>(), "");
    assert_ne!(serve.code, Some(0));
    assert!(serve.stderr.contains(&missing), "{}", serve.stderr);
    assert!(
        serve.stderr.contains("--accept-journal-loss"),
        "{}",
        serve.stderr
    );

    drop(common::serve_with(
        dir.path(),
        "fsync",
        &["--accept-journal-loss"],
    ));
    let losses = rialto_journal::read_accepted_losses(dir.path()).unwrap();
    assert_eq!(
        losses.iter().map(|l| (l.from, l.to)).collect::<Vec<_>>(),
        [(seq + 1, cmds.len() as u64)]
    );
    let verify = rialto(&["journal", "verify", "--data", data], "");
    assert_eq!(verify.code, Some(0), "{}", verify.stdout);
    assert!(verify.stdout.contains("accepted loss"), "{}", verify.stdout);
    // The venue went on after the lost seqs: none is used twice.
    let recovered = recover(dir.path(), EngineConfig::default()).unwrap();
    assert!(recovered.last_seq >= cmds.len() as u64);
}

#[test]
fn nats_only_flags_without_a_log_on_nats_are_refused() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().to_str().unwrap();
    for cmd in ["dump", "verify"] {
        for flag in [["--venue", "main"], ["--checkpoint-every", "10"]] {
            let run = rialto(&["journal", cmd, "--data", data, flag[0], flag[1]], "");
            assert_ne!(run.code, Some(0), "journal {cmd} {flag:?}: {run:?}");
            assert!(
                run.stderr.contains("give --nats or --config"),
                "journal {cmd} {flag:?}: {}",
                run.stderr
            );
        }
    }
}

/// A venue configured with more symbols than the default `engine.max_symbols` (256): its
/// journal tools are told the venue's settings as `rialto serve` is (`--config`, `--set`), and
/// without them say what to pass.
#[test]
fn the_tools_replay_with_the_venues_engine_limits() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().to_str().unwrap();
    let name = |s: &str| Name::new(s).unwrap();
    let mut cmds: Vec<Command> = (0..300)
        .map(|i| {
            Command::AddSymbol(Box::new(SymbolSpec {
                symbol: name(&format!("S{i}-USD")),
                base: name("BTC"),
                quote: name("USD"),
                base_scale: 100,
                quote_scale: 10,
                maker_fee: 0,
                taker_fee: 0,
                band_bps: 0,
                day_end: 0,
                kind: SymbolSpec::SPOT,
            }))
        })
        .collect();
    cmds.push(Command::AddUser { user: 1 });
    cmds.push(Command::AdjustBalance {
        user: 1,
        currency: name("USD"),
        amount: 100_000_000,
        tx: 1,
    });
    // An order on a symbol past the default limit.
    cmds.push(Command::Place(PlaceOrder::limit(
        1,
        7,
        SymbolId(290),
        Side::Buy,
        100,
        1,
    )));
    write_journal(dir.path(), &cmds);
    let config = EngineConfig {
        max_symbols: 512,
        ..EngineConfig::default()
    };
    let engine = recover(dir.path(), config).unwrap().engine;
    write_snapshot(
        dir.path(),
        engine.last_seq(),
        engine.state_hash(),
        &engine.encode_snapshot(),
    )
    .unwrap();
    let hash = engine.state_hash_hex();

    // With the default limits: refused, saying what to pass.
    let verify = rialto(&["journal", "verify", "--data", data], "");
    assert_eq!(verify.code, Some(1), "{}", verify.stdout);
    assert!(
        verify.stdout.contains("raise engine.max_symbols")
            && verify.stdout.contains("--config FILE")
            && verify.stdout.contains("--set engine.NAME=VALUE"),
        "{}",
        verify.stdout
    );
    let dump = rialto(&["journal", "dump", "--data", data], "");
    assert_eq!(dump.code, Some(1));
    assert!(
        dump.stderr.contains("--set engine.NAME=VALUE"),
        "{}",
        dump.stderr
    );

    // With the venue's settings, by --set or by its configuration file: the venue's state.
    let set = ["--set", "engine.max_symbols=512"];
    let verify = rialto(
        &[&["journal", "verify", "--data", data][..], &set].concat(),
        "",
    );
    assert_eq!(verify.code, Some(0), "{}", verify.stdout);
    assert!(
        verify.stdout.contains(&format!("state_hash: {hash}")),
        "{}",
        verify.stdout
    );
    let file = dir.path().join("venue.toml");
    fs::write(&file, "[engine]\nmax_symbols = 512\n").unwrap();
    let file = file.to_str().unwrap();
    let verify = rialto(&["journal", "verify", "--data", data, "--config", file], "");
    assert_eq!(verify.code, Some(0), "{}", verify.stdout);
    assert!(
        verify.stdout.contains(&format!("state_hash: {hash}")),
        "{}",
        verify.stdout
    );
    let dump = rialto(
        &[&["journal", "dump", "--data", data][..], &set].concat(),
        "",
    );
    assert_eq!(dump.code, Some(0), "{}", dump.stderr);
    let replayed = replay(&dump.stdout, &["--strict", "--config", file]);
    let (_, replayed_hash) = split_hash(replayed.stdout.lines().last().unwrap());
    assert_eq!(replayed_hash, hash);
    // `rialto replay` with the default limits refuses the symbols past 256: another state.
    let default_limits = replay(&dump.stdout, &[]);
    let (_, other) = split_hash(default_limits.stdout.lines().last().unwrap());
    assert_ne!(other, hash);
}
