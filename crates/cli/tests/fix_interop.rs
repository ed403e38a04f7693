//! QuickFIX/J against `rialto serve`: the Java initiator in interop/quickfixj logs on over
//! FIX 4.4 and FIXT.1.1/5.0SP2, trades between two sessions, amends, cancels, checks every
//! ExecutionReport, forces a sequence gap each way, and exits 0 only if every step passed.
//! Needs a JDK 17 and Maven (`.ci/run` installs them); the first build downloads QuickFIX/J.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/quickfixj")
}

fn build_java() {
    let status = Command::new("mvn")
        .args(["-q", "-B", "-Dstyle.color=never", "package"])
        .current_dir(interop_dir())
        .status()
        .expect("Maven is needed for the QuickFIX/J interop test (.ci/run installs it)");
    assert!(status.success(), "mvn package failed in interop/quickfixj");
}

#[test]
fn quickfixj_trades_amends_cancels_and_resends_against_rialto() {
    build_java();
    let data = tempfile::tempdir().unwrap();
    let server = common::serve_demo(data.path());
    let fix: SocketAddr = server.address_after("FIX on ").parse().unwrap();
    let credentials = rialto_server::auth::Credentials::load_or_create(data.path()).unwrap();
    for begin in ["FIX.4.4", "FIXT.1.1"] {
        let store = tempfile::tempdir().unwrap();
        let output = Command::new("java")
            .args([
                "-cp",
                "target/classes:target/dependency/*",
                "rialto.interop.Interop",
            ])
            .args(["--port", &fix.port().to_string(), "--begin", begin])
            .args(["--secret1", &credentials.user_secret(1)])
            .args(["--secret2", &credentials.user_secret(2)])
            .arg("--store")
            .arg(store.path())
            .current_dir(interop_dir())
            .output()
            .expect("a JDK is needed for the QuickFIX/J interop test (.ci/run installs it)");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "QuickFIX/J interop over {begin} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Every step reported, the forced gaps among them.
        for step in 0..=11 {
            assert!(stdout.contains(&format!("ok step {step}:")), "{stdout}");
        }
    }
}
