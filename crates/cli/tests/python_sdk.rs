//! The Python SDK (sdk/python) against the `rialto` binary cargo built: runs its pytest suite,
//! which starts its own `rialto serve --demo` servers (plain and `--tls`) on free ports and
//! checks place/query/cancel, a fill between two users, balances as Decimals, a WebSocket book
//! rebuilt from a snapshot after a forced reconnect, refusals raised with the API's codes and a
//! TLS round trip, and runs its examples.
//!
//! Needs Python 3.10 or later with the SDK's dependencies (`python3 -m pip install
//! ./sdk/python[test]`; `.ci/run` installs them). It fails, rather than skips, when they are
//! missing. The SDK is imported from the source tree (sdk/python/src), so the suite always tests
//! the code beside it, not an older installed copy.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

/// The tests in sdk/python/tests: all must run and pass (none skipped).
const TESTS: usize = 17;
/// The whole pytest run; each of its waits has its own deadline of at most 60 s.
const SUITE_DEADLINE: Duration = Duration::from_secs(300);

fn sdk_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/python")
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned())
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
fn the_python_sdk_suite_passes_against_rialto_serve() {
    let python = python();
    let check = Command::new(&python)
        .args([
            "-c",
            "import sys; assert sys.version_info >= (3, 10), sys.version; \
             import httpx, websockets, pytest",
        ])
        .output();
    match check {
        Err(e) => panic!(
            "`{python}` is needed for the Python SDK test ({e}): install Python 3.10 or later, \
             or set PYTHON"
        ),
        Ok(out) if !out.status.success() => panic!(
            "the Python SDK's dependencies are missing: run `{python} -m pip install \
             ./sdk/python[test]` (.ci/run does)\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Ok(_) => {}
    }

    let mut suite = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .env("RIALTO_BIN", env!("CARGO_BIN_EXE_rialto"))
        .env("PYTHONPATH", sdk_dir().join("src"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(sdk_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pytest");
    let stdout = collect(suite.stdout.take().unwrap());
    let stderr = collect(suite.stderr.take().unwrap());
    let status = common::exit_within(&mut suite, SUITE_DEADLINE);
    if status.is_none() {
        // The servers pytest started get SIGTERM when it dies (tests/conftest.py).
        let _ = suite.kill();
        let _ = suite.wait();
    }
    let stdout = stdout.join().unwrap();
    let stderr = stderr.join().unwrap();
    let status = status.unwrap_or_else(|| {
        panic!("the Python SDK suite ran over {SUITE_DEADLINE:?}:\n{stdout}\n{stderr}")
    });
    assert!(
        status.success(),
        "the Python SDK suite failed ({status}):\n{stdout}\n{stderr}"
    );
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        summary.starts_with(&format!("{TESTS} passed")) && !summary.contains("skipped"),
        "expected {TESTS} Python tests to pass, none skipped: {summary:?}\n{stdout}"
    );
    print!("{stdout}");
}
