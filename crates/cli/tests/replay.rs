//! `rialto replay`: malformed lines, --strict, word handling, determinism, limits.

mod common;

use common::{replay, rialto, split_hash};

const SETUP: &str = r#"{"cmd":"add_symbol","symbol":"BTC-USD","base":"BTC","quote":"USD","base_scale":100,"quote_scale":10,"maker_fee":2,"taker_fee":5}
{"cmd":"add_user","user":1}
{"cmd":"add_user","user":2}
{"cmd":"adjust_balance","user":2,"currency":"BTC","amount":1000,"tx":1}
"#;

/// Line 5 of every malformed-line case; line 6 is a good command that would come out
/// differently if line 5 had been applied.
const FOLLOW_UP: &str = r#"{"cmd":"adjust_balance","user":1,"currency":"USD","amount":5000,"tx":5}
{"cmd":"place","user":1,"order":7,"symbol":"BTC-USD","side":"buy","price":100,"qty":3}
{"cmd":"place","user":2,"order":8,"symbol":"BTC-USD","side":"sell","price":100,"qty":1}
"#;

fn scenario(line5: &str) -> String {
    format!("{SETUP}{line5}\n{FOLLOW_UP}")
}

/// Each bad line 5 with the text its report must contain. Several of them, if applied, would
/// make line 6 (tx 5, 5000 USD) a `duplicate_tx` or change user 1's balance or order 7.
const MALFORMED: &[(&str, &str)] = &[
    (
        r#"{"cmd":"adjust_balance","user":1,"currency":"USD","amount":5000,"tx":5"#,
        "not valid JSON",
    ),
    ("hello", "not valid JSON"),
    // A tick needs its time; a time of the wrong kind spoils any line (and moves no clock).
    (r#"{"cmd":"tick"}"#, "missing field \"ts\""),
    (
        r#"{"cmd":"adjust_balance","user":1,"currency":"USD","amount":5000,"tx":5,"ts":"9"}"#,
        "field \"ts\": expected an integer, found a string",
    ),
    (
        r#"{"cmd":"tick","ts":1.5}"#,
        "field \"ts\": expected an integer",
    ),
    (r#"[1,2,3]"#, "expected a JSON object"),
    (
        r#"{"cmd":"adjust_balance","user":1,"currency":"USD","tx":5}"#,
        "missing field \"amount\"",
    ),
    (
        r#"{"user":1,"currency":"USD","amount":5000,"tx":5}"#,
        "missing field \"cmd\"",
    ),
    (
        r#"{"cmd":"adjust_balance","user":1,"currency":"USD","amount":"5000","tx":5}"#,
        "field \"amount\": expected an integer, found a string",
    ),
    (
        r#"{"cmd":"adjust_balance","user":1,"currency":"USD","amount":5000.5,"tx":5}"#,
        "field \"amount\": expected an integer",
    ),
    (
        r#"{"cmd":"adjust_balance","user":1,"currency":"USD","amount":5000,"tx":18446744073709551616}"#,
        "field \"tx\": expected an integer, found a number outside the i64 range",
    ),
    (
        r#"{"cmd":"adjust_balance","user":1,"currency":"USD","amount":9223372036854775808,"tx":5}"#,
        "field \"amount\": expected an integer, found a number outside the i64 range",
    ),
    (
        r#"{"cmd":"adjust_balance","user":1,"currency":"USDUSDUSDUSDUSDUSDUSDUSD","amount":5000,"tx":5}"#,
        "field \"currency\": a name must be 1 to 23 bytes, found 24",
    ),
    (
        r#"{"cmd":"adjust_balance","user":1,"currency":"","amount":5000,"tx":5}"#,
        "field \"currency\": a name must be 1 to 23 bytes, found 0",
    ),
    (
        r#"{"cmd":"adjust_balance","user":null,"currency":"USD","amount":5000,"tx":5}"#,
        "field \"user\": expected an integer, found null",
    ),
    (
        r#"{"cmd":"deposit","user":1,"currency":"USD","amount":5000,"tx":5}"#,
        "unknown cmd \"deposit\"",
    ),
    (
        r#"{"cmd":"add_symbol","symbol":"F","base":"IDX","quote":"USD","base_scale":1,"quote_scale":1,"maker_fee":0,"taker_fee":0,"type":1}"#,
        "field \"type\": expected a string, found a number",
    ),
    (
        r#"{"cmd":"add_symbol","symbol":"F","base":"IDX","quote":"USD","base_scale":1,"quote_scale":1,"maker_fee":0,"taker_fee":0,"type":"future","initial_margin":"100","maintenance_margin":50,"mark_price":1000}"#,
        "field \"initial_margin\": expected an integer, found a string",
    ),
    (
        r#"{"cmd":"set_mark_price","symbol":"BTC-USD","price":1.5}"#,
        "field \"price\": expected an integer",
    ),
    (
        r#"{"cmd":"fund_insurance","currency":"USD","amount":5000}"#,
        "missing field \"tx\"",
    ),
    (
        r#"{"cmd":7}"#,
        "field \"cmd\": expected a string, found a number",
    ),
    (
        r#"{"cmd":"place","user":1,"order":7,"symbol":"BTC-USD","side":"buy","price":100,"qty":3,"post_only":"no"}"#,
        "field \"post_only\": expected a boolean, found a string",
    ),
    (
        r#"{"cmd":"place","user":1,"order":7,"symbol":"BTC-USD","side":1,"price":100,"qty":3}"#,
        "field \"side\": expected a string, found a number",
    ),
    (
        r#"{"cmd":"place","user":1,"order":7,"symbol":"BTC-USD","price":100,"qty":3}"#,
        "missing field \"side\"",
    ),
    (
        r#"{"cmd":"add_symbol","symbol":"ETH-USD","base":"ETH","quote":"USD","base_scale":1,"quote_scale":1,"maker_fee":0}"#,
        "missing field \"taker_fee\"",
    ),
    (
        r#"{"cmd":"book","symbol":"BTC-USD","depth":1e3}"#,
        "field \"depth\": expected an integer",
    ),
];

#[test]
fn malformed_lines_are_reported_and_change_nothing() {
    // A blank line is skipped silently but still counted, so the reference run keeps the seqs.
    let reference = replay(&scenario("   "), &[]);
    assert_eq!(reference.code, Some(0));
    assert_eq!(reference.stderr, "");
    assert!(
        reference
            .stdout
            .contains(r#"{"ev":"result","seq":6,"status":"ok"}"#),
        "{}",
        reference.stdout
    );
    assert!(
        reference.stdout.contains(
            r#""seq":8,"symbol":"BTC-USD","price":100,"qty":1,"maker_user":1,"maker_order":7"#
        ),
        "{}",
        reference.stdout
    );
    for (bad, what) in MALFORMED {
        let run = replay(&scenario(bad), &[]);
        assert_eq!(run.code, Some(0), "{bad}");
        assert!(
            run.stderr.starts_with("line 5: ") && run.stderr.contains(what),
            "bad line {bad}\nstderr: {}",
            run.stderr
        );
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        // Same events, same final balances and books, same state hash.
        assert_eq!(run.stdout, reference.stdout, "bad line {bad}");
    }
}

#[test]
fn every_malformed_line_is_reported_with_its_number() {
    let text = format!("{SETUP}\nnot json\n{{\"cmd\":\"nope\"}}\n{FOLLOW_UP}[]\n");
    let run = replay(&text, &[]);
    assert_eq!(run.code, Some(0));
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stderr);
    assert!(
        lines[0].starts_with("line 6: not valid JSON"),
        "{}",
        lines[0]
    );
    assert_eq!(lines[1], "line 7: unknown cmd \"nope\"");
    assert_eq!(lines[2], "line 11: expected a JSON object");
}

#[test]
fn strict_stops_at_the_first_malformed_line() {
    let text = scenario(r#"{"cmd":"add_user","user":"3"}"#);
    let run = replay(&text, &["--strict"]);
    assert_eq!(run.code, Some(1));
    assert!(
        run.stderr
            .starts_with("line 5: field \"user\": expected an integer, found a string\n"),
        "{}",
        run.stderr
    );
    // The events of lines 1-4 are flushed; nothing after, and no final line.
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", run.stdout);
    assert_eq!(lines[3], r#"{"ev":"result","seq":4,"status":"ok"}"#);

    // Without a malformed line, --strict changes nothing.
    let clean = scenario("");
    assert_eq!(
        replay(&clean, &["--strict"]).stdout,
        replay(&clean, &[]).stdout
    );
}

#[test]
fn unknown_words_are_invalid_orders_not_malformed_lines() {
    let place = |extra: &str| {
        format!(
            r#"{{"cmd":"place","user":2,"order":9,"symbol":"BTC-USD","side":"sell","price":100,"qty":1{extra}}}"#
        )
    };
    let lines = [
        place(r#","side":"up""#),
        place(r#","type":"trailing_stop""#),
        place(r#","tif":"gtx""#),
        place(r#","stp":"cancel_all""#),
        place(r#","type":"stop_loss","tif":"ioc""#),
        place(r#","type":"market","tif":"gtc""#),
    ];
    let text = format!("{SETUP}{}\n", lines.join("\n"));
    let run = replay(&text, &[]);
    assert_eq!(run.stderr, "");
    for seq in 5..=10 {
        let want = format!(
            r#"{{"ev":"result","seq":{seq},"status":"rejected","reason":"invalid_order"}}"#
        );
        assert!(run.stdout.contains(&want), "{want}\n{}", run.stdout);
    }
}

#[test]
fn a_symbol_too_long_to_exist_is_unknown_not_malformed() {
    let text = format!(
        "{SETUP}{}\n{}\n",
        r#"{"cmd":"place","user":2,"order":9,"symbol":"ABCDEFGHIJKLMNOPQRSTUVWXYZ","side":"sell","price":100,"qty":1}"#,
        r#"{"cmd":"book","symbol":""}"#
    );
    let run = replay(&text, &[]);
    assert_eq!(run.stderr, "");
    assert!(
        run.stdout
            .contains(r#"{"ev":"result","seq":5,"status":"rejected","reason":"unknown_symbol"}"#)
    );
    assert!(
        run.stdout
            .contains(r#"{"ev":"result","seq":6,"status":"rejected","reason":"unknown_symbol"}"#)
    );
}

#[test]
fn defaults_and_extra_fields() {
    // type defaults to limit and tif to gtc: the order rests. Unknown fields are ignored.
    let text = format!(
        "{SETUP}{}\n{}\n{}\n",
        r#"{"cmd":"place","user":2,"order":9,"symbol":"BTC-USD","side":"sell","price":100,"qty":1,"comment":"hi","client":{"x":[1]}}"#,
        r#"{"cmd":"book","symbol":"BTC-USD"}"#,
        // A market order without tif is IOC: with nothing to buy it is cancelled as `market`.
        r#"{"cmd":"place","user":2,"order":10,"symbol":"BTC-USD","side":"sell","type":"market","qty":1}"#,
    );
    let run = replay(&text, &[]);
    assert_eq!(run.stderr, "");
    assert!(
        run.stdout
            .contains(r#"{"ev":"book","seq":6,"symbol":"BTC-USD","bids":[],"asks":[[100,1]]}"#)
    );
    assert!(
        run.stdout.contains(
            r#"{"ev":"cancelled","seq":7,"user":2,"order":10,"qty":1,"reason":"market"}"#
        )
    );
    assert!(run.stdout.contains(r#""asks":[[2,9,100,1]]"#));
}

#[test]
fn two_replays_print_the_same_bytes() {
    let text = scenario("");
    let a = replay(&text, &[]);
    let b = replay(&text, &[]);
    assert_eq!(a.code, Some(0));
    assert_eq!(a.stdout, b.stdout);
    let last = a.stdout.lines().last().expect("final line");
    let (_, hash_a) = split_hash(last);
    // A different state has a different hash.
    let other = replay(&scenario(r#"{"cmd":"add_user","user":3}"#), &[]);
    let (_, hash_b) = split_hash(other.stdout.lines().last().expect("final line"));
    assert_ne!(hash_a, hash_b);
}

#[test]
fn replay_reads_a_file_and_reports_a_missing_one() {
    let path = std::env::temp_dir().join(format!("rialto-replay-{}.jsonl", std::process::id()));
    std::fs::write(&path, scenario("")).expect("write scenario");
    let from_file = rialto(
        &["replay", path.to_str().expect("UTF-8"), "--final-state"],
        "",
    );
    std::fs::remove_file(&path).ok();
    assert_eq!(from_file.code, Some(0));
    assert_eq!(from_file.stdout, replay(&scenario(""), &[]).stdout);

    let missing = rialto(&["replay", "/nonexistent/scenario.jsonl"], "");
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.contains("/nonexistent/scenario.jsonl"),
        "{}",
        missing.stderr
    );
}

#[test]
fn crlf_line_endings_and_names_that_need_escaping() {
    let text = concat!(
        r#"{"cmd":"add_symbol","symbol":"Q\"X\\Y","base":"Q\"X","quote":"\u00e9","base_scale":1,"quote_scale":1,"maker_fee":0,"taker_fee":0}"#,
        "\r\n",
        r#"{"cmd":"add_user","user":1}"#,
        "\r\n",
        r#"{"cmd":"book","symbol":"Q\"X\\Y"}"#,
        "\r\n"
    );
    let run = replay(text, &[]);
    assert_eq!(run.stderr, "");
    for line in run.stdout.lines() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
    assert!(
        run.stdout
            .contains(r#"{"ev":"book","seq":3,"symbol":"Q\"X\\Y","bids":[],"asks":[]}"#),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains(r#""fees":{"Q\"X":0,"é":0},"books":{"Q\"X\\Y":{"bids":[],"asks":[]}}"#),
        "{}",
        run.stdout
    );
}

#[test]
fn limit_exceeded_after_the_per_user_maximum() {
    // The default limit is 100,000 open orders per user; the next GTC order is refused. An IOC
    // order does not rest, so it is not limited.
    const MAX_OPEN: i64 = 100_000;
    let mut text = String::with_capacity(12 << 20);
    text.push_str(concat!(
        r#"{"cmd":"add_symbol","symbol":"X-Y","base":"X","quote":"Y","base_scale":1,"quote_scale":1,"maker_fee":0,"taker_fee":0}"#,
        "\n",
        r#"{"cmd":"add_user","user":1}"#,
        "\n",
        r#"{"cmd":"adjust_balance","user":1,"currency":"X","amount":1000000,"tx":1}"#,
        "\n"
    ));
    for order in 1..=MAX_OPEN + 1 {
        let price = 1000 + order % 100;
        text.push_str(&format!(
            r#"{{"cmd":"place","user":1,"order":{order},"symbol":"X-Y","side":"sell","price":{price},"qty":1}}"#
        ));
        text.push('\n');
    }
    text.push_str(
        r#"{"cmd":"place","user":1,"order":0,"symbol":"X-Y","side":"sell","tif":"ioc","price":5000,"qty":1}"#,
    );
    text.push('\n');
    let run = replay(&text, &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let last_ok = 3 + MAX_OPEN as usize;
    assert_eq!(
        lines[last_ok - 1],
        format!(r#"{{"ev":"result","seq":{last_ok},"status":"ok"}}"#)
    );
    assert_eq!(
        lines[last_ok],
        format!(
            r#"{{"ev":"result","seq":{},"status":"rejected","reason":"limit_exceeded"}}"#,
            last_ok + 1
        )
    );
    let ioc_seq = last_ok + 2;
    assert_eq!(
        lines[last_ok + 1],
        format!(
            r#"{{"ev":"cancelled","seq":{ioc_seq},"user":1,"order":0,"qty":1,"reason":"ioc"}}"#
        )
    );
    assert_eq!(
        lines[last_ok + 2],
        format!(r#"{{"ev":"result","seq":{ioc_seq},"status":"ok"}}"#)
    );
}

#[test]
fn help_names_the_commands() {
    let run = rialto(&["--help"], "");
    assert_eq!(run.code, Some(0));
    assert!(run.stdout.contains("replay"), "{}", run.stdout);
    assert!(run.stdout.contains("bench"), "{}", run.stdout);
}

#[test]
fn an_overlong_line_is_malformed_and_skipped() {
    let long = format!(
        r#"{{"cmd":"add_user","user":3,"pad":"{}"}}"#,
        "x".repeat(70_000)
    );
    let run = replay(&scenario(&long), &[]);
    assert_eq!(run.code, Some(0));
    assert_eq!(run.stderr, "line 5: line longer than 65536 bytes\n");
    assert_eq!(run.stdout, replay(&scenario(""), &[]).stdout);
}

/// Futures fields that are missing or unknown words are rejections, not malformed lines.
#[test]
fn a_future_without_margins_or_of_an_unknown_type_is_invalid_symbol() {
    let base = r#""symbol":"F","base":"IDX","quote":"USD","base_scale":1,"quote_scale":1,"maker_fee":0,"taker_fee":0"#;
    let lines = [
        format!(
            r#"{{"cmd":"add_symbol",{base},"type":"future","initial_margin":100,"maintenance_margin":50}}"#
        ),
        format!(r#"{{"cmd":"add_symbol",{base},"type":"option"}}"#),
        format!(
            r#"{{"cmd":"add_symbol",{base},"type":"future","initial_margin":100,"maintenance_margin":50,"mark_price":1000}}"#
        ),
        r#"{"cmd":"set_mark_price","symbol":"BTC-USD","price":5}"#.to_string(),
        r#"{"cmd":"set_mark_price","symbol":"NOPE","price":5}"#.to_string(),
        r#"{"cmd":"set_mark_price","symbol":"F","price":0}"#.to_string(),
        r#"{"cmd":"fund_insurance","currency":"USD","amount":-1,"tx":9}"#.to_string(),
    ];
    let run = replay(&format!("{SETUP}{}\n", lines.join("\n")), &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let results: Vec<&str> = run.stdout.lines().skip(4).take(7).collect();
    let reasons = [
        Some("invalid_symbol"),
        Some("invalid_symbol"),
        None,
        Some("invalid_symbol"),
        Some("unknown_symbol"),
        Some("invalid_price"),
        Some("insufficient_funds"),
    ];
    for (i, (line, reason)) in results.iter().zip(reasons).enumerate() {
        let expected = match reason {
            Some(r) => format!(
                r#"{{"ev":"result","seq":{},"status":"rejected","reason":"{r}"}}"#,
                i + 5
            ),
            None => format!(r#"{{"ev":"result","seq":{},"status":"ok"}}"#, i + 5),
        };
        assert_eq!(*line, expected);
    }
    assert!(run.stdout.contains(
        r#""F":{"type":"future","phase":"continuous","last":0,"ref":0,"band_bps":0,"mark":1000}"#
    ));
}
