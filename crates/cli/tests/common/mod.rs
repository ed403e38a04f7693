//! Running the built `rialto` binary. Each test file uses a different subset of these helpers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `rialto` with `args`, feeding `stdin` to it.
pub fn rialto(args: &[&str], stdin: &str) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rialto"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rialto");
    let mut input = child.stdin.take().expect("stdin");
    let stdin = stdin.to_owned();
    // Write from another thread: a large scenario would otherwise fill both pipes and deadlock.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    let output = child.wait_with_output().expect("run rialto");
    writer.join().expect("stdin writer");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Replays `scenario` from stdin with `--final-state` (and any `extra` flags).
pub fn replay(scenario: &str, extra: &[&str]) -> Run {
    let mut args = vec!["replay", "-", "--final-state"];
    args.extend_from_slice(extra);
    rialto(&args, scenario)
}

/// Splits the final line's `"state_hash":"<hex>"}` off, checking the hash's shape. Returns the
/// line with the hash replaced by `*`, and the hash.
pub fn split_hash(final_line: &str) -> (String, String) {
    let marker = "\"state_hash\":\"";
    let at = final_line
        .rfind(marker)
        .unwrap_or_else(|| panic!("no state_hash in {final_line}"));
    let rest = &final_line[at + marker.len()..];
    let hash = rest
        .strip_suffix("\"}")
        .unwrap_or_else(|| panic!("state_hash is not the last field: {final_line}"));
    assert!(
        hash.len() == 64
            && hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "state_hash is not 64 lowercase hex digits: {hash:?}"
    );
    (
        format!("{}{marker}*\"}}", &final_line[..at]),
        hash.to_owned(),
    )
}

/// `rialto serve --demo` on free ports (FIX and web included) over `data`; killed when dropped.
pub struct Served {
    child: Child,
    /// "rialto serving: orders on A, admin on B, FIX on C, web on http://D/ (stop with Ctrl-C)"
    pub first_line: String,
    /// Keeps reading the rest of stdout, so that the server never writes into a closed pipe.
    _drain: JoinHandle<()>,
}

pub fn serve_demo(data: &Path) -> Served {
    serve_demo_with(data, "batch")
}

/// [`serve_demo`] with the journal's durability mode.
pub fn serve_demo_with(data: &Path, durability: &str) -> Served {
    serve_with(data, durability, &[])
}

/// `rialto serve` arguments that put every listener on a free loopback port.
pub const ON_FREE_PORTS: [&str; 8] = [
    "--listen",
    "127.0.0.1:0",
    "--admin-listen",
    "127.0.0.1:0",
    "--fix-listen",
    "127.0.0.1:0",
    "--web-listen",
    "127.0.0.1:0",
];

/// [`serve_demo_with`] and `extra` arguments; returns once the server serves (its first line).
pub fn serve_with(data: &Path, durability: &str, extra: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rialto"))
        .args(["serve", "--demo", "--durability", durability])
        .args(extra)
        .args(ON_FREE_PORTS)
        .arg("--data")
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start rialto serve");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first_line = String::new();
    stdout.read_line(&mut first_line).unwrap();
    let drain = std::thread::spawn(move || {
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    });
    Served {
        child,
        first_line,
        _drain: drain,
    }
}

impl Served {
    /// The address the first line gives after `label` ("FIX on ", "web on ").
    pub fn address_after(&self, label: &str) -> &str {
        let line = &self.first_line;
        line.split(label)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(|word| word.trim_end_matches(','))
            .unwrap_or_else(|| panic!("no {label:?} in the first line: {line:?}"))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SplitMix64: test choices (a fault schedule, orders) that follow from a seed alone, with no
/// dependency.
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn in_range(&mut self, range: std::ops::RangeInclusive<u64>) -> u64 {
        range.start() + self.below(range.end() - range.start() + 1)
    }
}

/// Waits up to `timeout` for `child` to exit, woken by its exit (SIGCHLD), not by polling.
/// None if it still runs then.
pub fn exit_within(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    use wait_timeout::ChildExt;
    child
        .wait_timeout(timeout)
        .expect("wait for a child process")
}
