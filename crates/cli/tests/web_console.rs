//! The web console in a real browser: `web/tests/console.mjs` drives Debian's Chromium
//! (headless, through playwright-core) against `rialto serve --demo`: user 1 rests a sell and
//! sees it on the ladder, user 2 crosses it from a second browser context, both tapes show the
//! trade, balances move by exactly the fill and its fees, user 1 amends and cancels the rest and
//! sees a stop-limit order pending and an iceberg's slice in its open orders, and the admin view
//! takes a snapshot, books a deposit, draws the latency histograms, sets a band, a reference
//! price and the order-id window, suspends and resumes a user, and runs an opening auction that
//! both traders' pages follow (phase, band, the uncross trade). On the way it checks the market
//! list (last price, 24 h change, a click selects), the order form's % of balance and total,
//! the order history and fills, the candle interval selector and zoom, and the layout at 360,
//! 768 and 1440 px (it fails when the page or a panel overflows the viewport). The script prints
//! each step and exits 0 only if every step passed.
//!
//! Needs Node.js with npm and Chromium (`apt-get install nodejs npm chromium`; `.ci/run`
//! installs them). It fails, rather than skips, when they are missing. The screenshots are left
//! in the target directory's tmp (`web_console.png`, `web_console-admin.png`, and
//! `web_console-trade-360.png` … `web_console-admin-1440.png` for the layout widths).

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

/// Every step the script reports when given the admin secret.
const STEPS: usize = 28;
/// The widths the script checks the layout at and photographs (LAYOUT_WIDTHS in console.mjs).
const LAYOUT_WIDTHS: [u32; 3] = [360, 768, 1440];
/// The whole browser run, launch to screenshot; each of its waits has its own 15 s limit.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(300);

fn web_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web")
}

fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

/// Runs `program --version`, failing the test with `hint` when it cannot.
fn require(program: &str, hint: &str) {
    let ok = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "`{program}` is needed for the web console test: {hint}");
}

/// Installs playwright-core from web/package-lock.json unless it is there already.
fn npm_ci() {
    if web_dir()
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(web_dir())
        .status()
        .expect("npm is needed for the web console test (.ci/run installs it)");
    assert!(status.success(), "npm ci failed in web/");
}

/// Reads a child's pipe to the end on another thread.
fn collect(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

#[test]
fn the_console_trades_in_headless_chromium() {
    require("node", "apt-get install nodejs npm (.ci/run installs it)");
    let chromium = chromium();
    assert!(
        chromium.exists(),
        "Chromium is needed for the web console test and is not at {}: apt-get install chromium \
         (.ci/run installs it), or set CHROMIUM",
        chromium.display()
    );
    npm_ci();

    let data = tempfile::tempdir().unwrap();
    let server = common::serve_demo(data.path());
    let url = server.address_after("web on ").to_string();
    assert!(url.starts_with("http://"), "{url}");
    let credentials = rialto_server::auth::Credentials::load_or_create(data.path()).unwrap();
    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web_console.png");
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut screenshots = vec![
        screenshot.clone(),
        tmp.join("web_console-admin.png"),
        tmp.join("web_console-futures.png"),
    ];
    for view in ["trade", "admin"] {
        for width in LAYOUT_WIDTHS {
            screenshots.push(tmp.join(format!("web_console-{view}-{width}.png")));
        }
    }
    for old in &screenshots {
        let _ = std::fs::remove_file(old);
    }

    let mut script = Command::new("node")
        .arg("tests/console.mjs")
        .args(["--url", &url])
        .args(["--secret1", &credentials.user_secret(1)])
        .args(["--secret2", &credentials.user_secret(2)])
        .args(["--admin-secret", &credentials.admin_secret()])
        .arg("--chromium")
        .arg(&chromium)
        .arg("--screenshot")
        .arg(&screenshot)
        .current_dir(web_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start node web/tests/console.mjs");
    let stdout = collect(script.stdout.take().unwrap());
    let stderr = collect(script.stderr.take().unwrap());
    let status = common::exit_within(&mut script, SCRIPT_DEADLINE);
    if status.is_none() {
        let _ = script.kill();
        let _ = script.wait();
    }
    drop(server);
    let stdout = stdout.join().unwrap();
    let stderr = stderr.join().unwrap();
    let status = status.unwrap_or_else(|| {
        panic!("the browser test ran over {SCRIPT_DEADLINE:?}:\n{stdout}\n{stderr}")
    });
    assert!(
        status.success(),
        "the browser test failed ({status}):\n{stdout}\n{stderr}"
    );
    for step in 1..=STEPS {
        assert!(
            stdout.contains(&format!("ok step {step}:")),
            "step {step} not reported:\n{stdout}"
        );
    }
    print!("{stdout}");
    for shot in &screenshots {
        let bytes = std::fs::read(shot)
            .unwrap_or_else(|e| panic!("no screenshot at {}: {e}", shot.display()));
        assert!(
            bytes.len() > 10_000 && bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{} is not a PNG of a rendered page ({} bytes)",
            shot.display(),
            bytes.len()
        );
    }
}
