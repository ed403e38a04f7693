//! `rialto fix log`: one session's message log, filtered by ClOrdID and time, as text and as
//! JSON Lines; an unknown session names the ones there are.

use std::path::Path;
use std::process::{Command, Output};

use rialto_fix::session::{Direction, MessageLog};
use rialto_fix::{MessageWriter, tags};

const SESSION: &str = "FIX.4.4-RIALTO-TRADER1";
/// 2026-11-22 04:44:29.123 UTC.
const T0: i64 = 1_795_322_669_123_000_000;
const SECOND: i64 = 1_000_000_000;

fn message(msg_type: &str, seq: u64, fields: &[(u32, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = MessageWriter::begin(&mut out, b"FIX.4.4", msg_type.as_bytes());
    w.str(tags::SENDER_COMP_ID, b"TRADER1")
        .str(tags::TARGET_COMP_ID, b"RIALTO")
        .uint(tags::MSG_SEQ_NUM, seq);
    for (tag, value) in fields {
        w.str(*tag, value.as_bytes());
    }
    w.finish();
    out
}

/// A session's day: logon, an order A and its report, an order B, a cancel of A, garbage.
fn write_log(data: &Path) {
    let dir = data.join("fix");
    let mut log = MessageLog::open(&dir, SESSION).unwrap();
    let records: [(Direction, Vec<u8>); 7] = [
        (Direction::In, message("A", 1, &[(98, "0"), (108, "30")])),
        (Direction::Out, message("A", 1, &[(98, "0"), (108, "30")])),
        (
            Direction::In,
            message("D", 2, &[(11, "A"), (55, "BTC-USD")]),
        ),
        (Direction::Out, message("8", 2, &[(11, "A"), (150, "0")])),
        (
            Direction::In,
            message("D", 3, &[(11, "B"), (55, "BTC-USD")]),
        ),
        (Direction::In, message("F", 4, &[(11, "C"), (41, "A")])),
        (Direction::InGarbled, b"8=FIX.4.4\x01junk".to_vec()),
    ];
    for (i, (direction, bytes)) in records.iter().enumerate() {
        log.append(*direction, T0 + i as i64 * SECOND, bytes);
    }
    log.flush().unwrap();
    // Another session, for the error that lists them.
    MessageLog::open(&dir, "FIX.4.2-RIALTO-TRADER2").unwrap();
}

fn rialto_fix_log(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rialto"))
        .args(["fix", "log", "--data"])
        .arg(data)
        .args(args)
        .output()
        .unwrap()
}

fn lines(output: &Output) -> Vec<String> {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The MsgSeqNum and direction of each line, e.g. "in 2".
fn summary(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let mut words = l.split(' ');
            let _time = words.next();
            let direction = words.next().unwrap();
            let seq = l
                .split('|')
                .find_map(|f| f.strip_prefix("34="))
                .unwrap_or("-");
            format!("{direction} {seq}")
        })
        .collect()
}

#[test]
fn every_message_in_order_with_time_and_direction() {
    let data = tempfile::tempdir().unwrap();
    write_log(data.path());
    let out = lines(&rialto_fix_log(data.path(), &["--session", SESSION]));
    assert_eq!(
        summary(&out),
        [
            "in 1",
            "out 1",
            "in 2",
            "out 2",
            "in 3",
            "in 4",
            "garbled -"
        ]
    );
    assert!(
        out[2].starts_with("20261122-04:44:31.123 in 8=FIX.4.4|9="),
        "{}",
        out[2]
    );
    assert!(
        out[2].contains("|35=D|") && out[2].ends_with('|'),
        "{}",
        out[2]
    );
    assert_eq!(out[6], "20261122-04:44:35.123 garbled 8=FIX.4.4|junk");
}

#[test]
fn filtered_by_clordid_and_by_time() {
    let data = tempfile::tempdir().unwrap();
    write_log(data.path());
    // A's order, its report, and the cancel that names it in OrigClOrdID.
    let out = lines(&rialto_fix_log(
        data.path(),
        &["--session", SESSION, "--clordid", "A"],
    ));
    assert_eq!(summary(&out), ["in 2", "out 2", "in 4"]);

    // From a UTCTimestamp to Unix nanoseconds, both ends included.
    let to = (T0 + 4 * SECOND).to_string();
    let out = lines(&rialto_fix_log(
        data.path(),
        &[
            "--session",
            SESSION,
            "--from",
            "20261122-04:44:31.123",
            "--to",
            &to,
        ],
    ));
    assert_eq!(summary(&out), ["in 2", "out 2", "in 3"]);

    // Both filters at once; a time in whole seconds.
    let out = lines(&rialto_fix_log(
        data.path(),
        &[
            "--session",
            SESSION,
            "--clordid",
            "A",
            "--from",
            "20261122-04:44:33",
        ],
    ));
    assert_eq!(summary(&out), ["in 4"]);
}

#[test]
fn json_lines() {
    let data = tempfile::tempdir().unwrap();
    write_log(data.path());
    let out = lines(&rialto_fix_log(
        data.path(),
        &["--session", SESSION, "--clordid", "B", "--json"],
    ));
    assert_eq!(out.len(), 1);
    assert!(out[0].starts_with("{\"time_ns\":"), "{}", out[0]);
    let value: serde_json::Value = serde_json::from_str(&out[0]).unwrap();
    assert_eq!(value["time_ns"], T0 + 4 * SECOND);
    assert_eq!(value["direction"], "in");
    let text = value["message"].as_str().unwrap();
    assert!(text.starts_with("8=FIX.4.4|9="), "{text}");
    assert!(text.contains("|11=B|"), "{text}");
}

#[test]
fn an_unknown_session_lists_the_known_ones() {
    let data = tempfile::tempdir().unwrap();
    write_log(data.path());
    let out = rialto_fix_log(data.path(), &["--session", "FIX.4.4-RIALTO-NOBODY"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("FIX.4.2-RIALTO-TRADER2, FIX.4.4-RIALTO-TRADER1"),
        "{err}"
    );

    let out = rialto_fix_log(data.path(), &["--session", SESSION, "--from", "yesterday"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("YYYYMMDD-HH:MM:SS"));
}
