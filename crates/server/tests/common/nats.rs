//! A three-node NATS JetStream cluster on free loopback ports, for tests of the replicated
//! log. Each node has its own store directory in a temporary directory; the processes are
//! killed (by their own PIDs) when the cluster is dropped.
//!
//! `nats-server` is found on PATH or in ~/go/bin. Without it a test fails (CI installs it:
//! `go install github.com/nats-io/nats-server/v2@v2.15.2`, as .ci/run does).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct NatsCluster {
    nodes: Vec<Child>,
    /// Each node's client URL, `nats://127.0.0.1:PORT`.
    pub urls: Vec<String>,
    /// Each node's command-line arguments, to start it again after [`NatsCluster::kill`].
    args: Vec<Vec<std::ffi::OsString>>,
    /// Each node's monitoring port (`/healthz`).
    monitors: Vec<u16>,
    dir: tempfile::TempDir,
}

/// The nats-server binary: on PATH, else in ~/go/bin; a clear failure otherwise.
pub fn nats_server_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("nats-server"))
        .find(|p| p.is_file());
    let in_go_bin = std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join("go/bin/nats-server"))
        .filter(|p| p.is_file());
    on_path.or(in_go_bin).unwrap_or_else(|| {
        panic!(
            "nats-server is neither on PATH nor in ~/go/bin: the replicated log's tests need \
             it. Install it with `go install github.com/nats-io/nats-server/v2@v2.15.2` \
             (.ci/run does)"
        )
    })
}

/// A free loopback port, never one handed out before in this process: tests run in parallel,
/// and two clusters must not be given the same port between its probe and a server's bind.
fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        if GIVEN.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            return port;
        }
    }
}

/// Start-ups tried before a test gives up: a port probed free can still be taken by another
/// process before nats-server binds it (the node then exits), and a new start picks others.
const START_ATTEMPTS: usize = 5;

impl NatsCluster {
    /// Starts three nodes and waits until each accepts connections.
    pub fn start() -> NatsCluster {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start() {
                Ok(cluster) => return cluster,
                Err(why) => failures.push(why),
            }
        }
        panic!(
            "nats-server did not start in {START_ATTEMPTS} attempts: {}",
            failures.join("\n\n")
        )
    }

    fn try_start() -> Result<NatsCluster, String> {
        static CLUSTERS: AtomicUsize = AtomicUsize::new(0);
        let binary = nats_server_binary();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let client_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let cluster_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let monitors: Vec<u16> = (0..3).map(|_| free_port()).collect();
        // A name of its own, so that a node of another test's cluster can never join this one.
        let name = format!(
            "rialto-test-{}-{}",
            std::process::id(),
            CLUSTERS.fetch_add(1, Ordering::Relaxed)
        );
        let mut nodes = Vec::new();
        let mut all_args = Vec::new();
        for i in 0..3 {
            let routes: Vec<String> = (0..3)
                .filter(|&j| j != i)
                .map(|j| format!("nats://127.0.0.1:{}", cluster_ports[j]))
                .collect();
            let store = dir.path().join(format!("n{i}"));
            let log = std::fs::File::create(dir.path().join(format!("n{i}.log")))
                .expect("a log file for nats-server");
            let mut args: Vec<std::ffi::OsString> = Vec::new();
            args.extend(["-a", "127.0.0.1", "-p"].map(Into::into));
            args.push(client_ports[i].to_string().into());
            args.extend(["-m".into(), monitors[i].to_string().into()]);
            args.extend([
                "-n".into(),
                format!("n{i}").into(),
                "-js".into(),
                "-sd".into(),
            ]);
            args.push(store.into());
            args.extend(["--cluster_name".into(), name.clone().into()]);
            args.push("--cluster".into());
            args.push(format!("nats://127.0.0.1:{}", cluster_ports[i]).into());
            args.extend(["--routes".into(), routes.join(",").into()]);
            let child = Command::new(&binary)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
            nodes.push(child);
            all_args.push(args);
        }
        let urls: Vec<String> = client_ports
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect();
        let mut cluster = NatsCluster {
            nodes,
            urls,
            args: all_args,
            monitors,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in &client_ports {
            while TcpStream::connect(("127.0.0.1", *port)).is_err() {
                if let Some(exited) = cluster.exited() {
                    return Err(format!("{exited} exited; the logs: {}", cluster.logs()));
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "nats-server did not listen on port {port} within 20 s; its log: {}",
                        cluster.logs()
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // A port taken by someone else between our probe and the server's bind: the server
        // exits, and the port answers for another process.
        if let Some(exited) = cluster.exited() {
            return Err(format!(
                "nats-server exited: {exited}; the logs: {}",
                cluster.logs()
            ));
        }
        Ok(cluster)
    }

    /// The nodes that have exited, if any (`n1 (exit status: 1)`).
    fn exited(&mut self) -> Option<String> {
        let exited: Vec<String> = (self.nodes.iter_mut().enumerate())
            .filter_map(|(i, node)| match node.try_wait() {
                Ok(Some(status)) => Some(format!("n{i} ({status})")),
                _ => None,
            })
            .collect();
        (!exited.is_empty()).then(|| exited.join(", "))
    }

    /// Kills node `i` (SIGKILL) and waits until it is gone; its store is kept.
    pub fn kill(&mut self, i: usize) {
        let _ = self.nodes[i].kill();
        let _ = self.nodes[i].wait();
    }

    /// Starts node `i` again (after [`Self::kill`]) on its ports and store, appending to its
    /// log, and waits until it accepts connections (up to 20 s) and its JetStream has caught
    /// up with the cluster (`/healthz` answers 200; up to 60 s), as a supervisor that restarts
    /// a node would before it counts the node back.
    pub fn restart(&mut self, i: usize) {
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join(format!("n{i}.log")))
            .expect("the nats-server log file");
        self.nodes[i] = Command::new(nats_server_binary())
            .args(&self.args[i])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start nats-server again");
        let port: u16 = (self.urls[i].rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .expect("a port in the URL");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = self.nodes[i].try_wait() {
                panic!(
                    "n{i} exited on restart ({status}); the logs: {}",
                    self.logs()
                );
            }
            assert!(
                Instant::now() < deadline,
                "n{i} did not listen again within 20 s; the logs: {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while !healthy(self.monitors[i]) {
            assert!(
                Instant::now() < deadline,
                "n{i}'s JetStream did not catch up within 60 s; the logs: {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The settings of a venue on this cluster whose tests want a short lease and frequent
    /// checkpoints.
    pub fn log_settings(&self, venue: &str) -> rialto_server::config::LogSettings {
        rialto_server::config::LogSettings {
            backend: rialto_server::config::LogBackend::Jetstream,
            nats: self.urls.clone(),
            venue: venue.into(),
            lease_ms: 1_000,
            checkpoint_every: 5,
            ..Default::default()
        }
    }

    /// The URLs as `--nats` takes them.
    pub fn urls_arg(&self) -> String {
        self.urls.join(",")
    }

    /// The nodes' logs, for a failure message.
    pub fn logs(&self) -> String {
        (0..self.nodes.len())
            .map(|i| {
                let path = self.dir.path().join(format!("n{i}.log"));
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                format!(
                    "--- n{i}:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Whether the nats-server monitored on `port` says it is healthy (`GET /healthz`: 200 once
/// its JetStream is current with the cluster's).
fn healthy(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200")
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
    }
}

/// One nats-server with JetStream on a free loopback port, with `extra` arguments (say,
/// `--user U --pass P`); killed (by its own PID) when dropped.
pub struct NatsNode {
    child: Child,
    /// `nats://127.0.0.1:PORT`.
    pub url: String,
    _dir: tempfile::TempDir,
}

impl NatsNode {
    pub fn start(extra: &[&str]) -> NatsNode {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let child = Command::new(nats_server_binary())
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(dir.path().join("store"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        let node = NatsNode {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server listens within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        node
    }
}

impl Drop for NatsNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
