//! Server configuration: embedded defaults, overridden by a TOML file and then by flags.
//!
//! Every field has a default, so `rialto serve` needs no file. Every queue, buffer and rate has
//! a limit here (STYLE.md: "put a limit on everything").

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::idle::WaitStrategy;
use crate::pipeline::Prefetch;

/// How durable a command is before its sender is acknowledged (docs/journal-format.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityMode {
    /// Acknowledged only after the journal is fsynced (group commit).
    Fsync,
    /// Written to the OS before the acknowledgement, fsynced every `batch_interval_us`.
    Batch,
    /// Unsafe: buffered in the process; a crash can lose acknowledged commands.
    None,
}

impl std::str::FromStr for DurabilityMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fsync" => Ok(DurabilityMode::Fsync),
            "batch" => Ok(DurabilityMode::Batch),
            "none" => Ok(DurabilityMode::None),
            _ => Err(format!(
                "unknown durability `{s}` (expected fsync, batch or none)"
            )),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Journal, snapshots and the venue's secret key live here.
    pub data_dir: PathBuf,
    /// The binary order gateway.
    pub listen: SocketAddr,
    /// The admin listener (admin frames, admin secret).
    pub admin_listen: SocketAddr,
    /// Create the demo symbols and funded demo users on an empty venue.
    pub demo: bool,
    /// The admin listener's secret; derived from the venue key when not set
    /// (`rialto secret --admin` prints it).
    pub admin_secret: Option<String>,
    pub journal: JournalSettings,
    /// Where the command log lives: the local journal (default) or a NATS JetStream stream
    /// shared by a leader and its standbys (docs/replication.md).
    pub log: LogSettings,
    pub pipeline: PipelineSettings,
    pub gateway: GatewaySettings,
    pub engine: EngineSettings,
    pub fix: FixSettings,
    pub web: WebSettings,
    /// TLS for the HTTP listener (off by default).
    pub tls: crate::tls::TlsSettings,
    pub market_data: MarketDataSettings,
    /// Durable history in `<data>/history.sqlite` (docs/api.md, "Durable history").
    pub history: crate::history::HistorySettings,
    /// How FIX, REST and the console write prices and quantities of each symbol as decimals. A
    /// symbol not listed here uses 1 and 1: prices in ticks, quantities in lots.
    pub instruments: BTreeMap<String, InstrumentSettings>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct JournalSettings {
    pub durability: DurabilityMode,
    /// In `batch` mode, the longest time between two fsyncs.
    pub batch_interval_us: u64,
    pub segment_bytes: u64,
    /// Take a snapshot after this many journaled commands (0: only on the admin command).
    pub snapshot_every: u64,
    /// Move journal segments that the newest snapshot covers into journal/archive.
    pub archive: bool,
    /// Start even if the journal ends before the newest snapshot (acknowledged commands were
    /// lost), recording the loss in journal/accepted-losses (`--accept-journal-loss`). A
    /// decision for one start, so it is not read from or written to the TOML file.
    #[serde(skip)]
    pub accept_loss: bool,
}

/// Which command log the sequencer appends to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogBackend {
    /// The journal in the data directory (`[journal]`).
    Local,
    /// A replicated stream on NATS JetStream (`log.nats`), one per venue.
    Jetstream,
}

impl std::str::FromStr for LogBackend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "local" => Ok(LogBackend::Local),
            "jetstream" => Ok(LogBackend::Jetstream),
            _ => Err(format!("unknown log `{s}` (expected local or jetstream)")),
        }
    }
}

/// What a node does with a JetStream log (docs/replication.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Follow the log as a hot standby while another node holds the lease; take the lease
    /// when it is free and lead.
    Auto,
    /// Take the lease at start and lead; refuse to start while another node holds it.
    Leader,
    /// Like `auto`, but never lead a venue whose lease nobody held since this node started:
    /// it takes over only after it has seen another node lead and lose the lease.
    Standby,
    /// A read replica: follow the log and serve market data and public REST from it; never
    /// take the lease, never append, refuse whatever would write.
    Replica,
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Role::Auto),
            "leader" => Ok(Role::Leader),
            "standby" => Ok(Role::Standby),
            "replica" => Ok(Role::Replica),
            _ => Err(format!(
                "unknown role `{s}` (expected auto, leader, standby or replica)"
            )),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    /// `local` or `jetstream`.
    pub backend: LogBackend,
    /// NATS server URLs (`jetstream`): any of the cluster's nodes.
    pub nats: Vec<String>,
    /// The venue's name in NATS: stream `RIALTO_<venue>` on subject `rialto.<venue>.log`,
    /// lease in the key-value bucket `rialto_<venue>_lease`. Letters, digits, `-` and `_`.
    pub venue: String,
    /// Copies JetStream keeps of the stream and the lease (3 on a three-node cluster).
    pub replicas: usize,
    /// What this node does: `auto`, `leader`, `standby` or `replica`.
    pub role: Role,
    /// The leader's lease: it renews it every quarter of this, stops acknowledging once it
    /// could not renew it for 80% of it, and a standby takes over when it lapses.
    pub lease_ms: u64,
    /// The leader writes a checkpoint (seq and state hash) into the log after every this many
    /// commands; every node compares it with its own (0: none).
    pub checkpoint_every: u64,
    /// The longest wait for JetStream to acknowledge an append, or to answer any request.
    pub ack_timeout_ms: u64,
    /// Snapshots the leader keeps in the venue's snapshot bucket; the stream is trimmed below
    /// the oldest (0: snapshots stay local and the stream keeps everything).
    pub snapshots_kept: usize,
    /// The most batches the leader has sent to JetStream and not seen acknowledged at once
    /// (1: one append at a time). Each is fenced by the stream sequence the one before it is
    /// to get; a batch is acknowledged to clients only once it and every earlier one are.
    pub appends_in_flight: usize,
    // How this node proves itself to NATS (docs/replication.md, "Securing NATS"), each secret
    // read from a file (never from the command line or a URL, so that it reaches no log and no
    // process list); crate::nats_access uses them. All optional: a NATS server without
    // authentication takes a client that gives none, but a venue's NATS should accept no one
    // else, since the venue's log and key live there.
    /// A NATS credentials file (a user JWT and its NKey seed, as `nsc` writes it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_credentials: Option<PathBuf>,
    /// A NATS user name, with `nats_password_file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_user: Option<String>,
    /// A file holding the password of `nats_user` (one line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_password_file: Option<PathBuf>,
    /// A file holding a NATS authentication token (one line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_token_file: Option<PathBuf>,
    /// A PEM file of the CA certificates to trust: the connection then requires TLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_tls_ca: Option<PathBuf>,
    /// A client certificate (PEM) to show, with `nats_tls_key`, to servers that verify
    /// clients (`verify: true` in nats-server's tls block).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_tls_key: Option<PathBuf>,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            backend: LogBackend::Local,
            nats: Vec::new(),
            venue: "main".into(),
            replicas: 3,
            role: Role::Auto,
            lease_ms: 1_500,
            checkpoint_every: 100_000,
            ack_timeout_ms: 5_000,
            snapshots_kept: 3,
            appends_in_flight: 8,
            nats_credentials: None,
            nats_user: None,
            nats_password_file: None,
            nats_token_file: None,
            nats_tls_ca: None,
            nats_tls_cert: None,
            nats_tls_key: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineSettings {
    /// Slots in each ring between the threads (gateway → journal → engine → gateway).
    pub ring_capacity: usize,
    /// Most commands taken from a ring at once (the journal's group-commit batch). Unset: by
    /// the log's backend ([`ServerConfig::batch_max`]), 1,024 for the local journal and 4,096
    /// for JetStream.
    pub batch_max: Option<usize>,
    /// How the pipeline threads wait for work.
    pub wait: WaitStrategy,
    /// Whether the journal and engine stages get threads of their own.
    pub threads: ThreadLayout,
    /// A CPU for the gateway's thread alone (with the journal and engine stages when they
    /// share it): it is pinned there and every other thread of the server is kept off it.
    pub gateway_cpu: Option<usize>,
    /// Whether the engine stage prefetches what its next commands touch: `auto` (when the
    /// venue's state outgrows the CPU caches), `on` or `off`.
    pub prefetch: Prefetch,
}

/// Where the journal and engine stages run. They are the same agents either way, connected by
/// the same rings; only who drives them differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadLayout {
    /// `dedicated` with 4 or more cores, else `shared`.
    Auto,
    /// One thread per stage: the most throughput when there are cores to spare.
    Dedicated,
    /// Both stages run on the gateway's thread, in turn: no hand-off between threads, which
    /// is what a 2-core machine can afford (docs/operations.md).
    Shared,
}

impl ThreadLayout {
    pub fn dedicated(self) -> bool {
        match self {
            ThreadLayout::Dedicated => true,
            ThreadLayout::Shared => false,
            ThreadLayout::Auto => std::thread::available_parallelism().map_or(1, |n| n.get()) >= 4,
        }
    }
}

impl std::str::FromStr for ThreadLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ThreadLayout::Auto),
            "dedicated" => Ok(ThreadLayout::Dedicated),
            "shared" => Ok(ThreadLayout::Shared),
            _ => Err(format!(
                "unknown thread layout `{s}` (expected auto, dedicated or shared)"
            )),
        }
    }
}

/// File descriptors kept for files (journal segments, snapshots, FIX stores and logs) besides
/// connections.
pub const FILE_DESCRIPTORS_FOR_FILES: u64 = 256;

impl ServerConfig {
    /// The file descriptors the connection limits of every listener add up to, plus
    /// [`FILE_DESCRIPTORS_FOR_FILES`]: with at least this many, no listener can take another's.
    pub fn descriptors_needed(&self) -> u64 {
        let g = &self.gateway;
        let mut needed = g.max_sessions
            + g.max_pending_logins
            + g.max_admin_sessions
            + g.max_pending_admin_logins;
        if self.fix.enabled {
            needed += self.fix.max_connections + self.fix.max_pending_logons;
        }
        if self.web.enabled {
            needed += self.web.max_connections + self.web.max_pending_connections;
        }
        if self.market_data.udp {
            needed += crate::feed::udp::MAX_REPLAY_WAITING + crate::feed::udp::MAX_REPLAYS_WRITING;
        }
        needed as u64 + FILE_DESCRIPTORS_FOR_FILES
    }
}

/// The shortest admin secret a config may set.
pub const MIN_ADMIN_SECRET_LEN: usize = 32;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewaySettings {
    /// How the gateway thread waits for socket events: `park` blocks in epoll, `spin` busy-polls
    /// (lowest latency; takes a core), `backoff` spins briefly then blocks.
    pub io: WaitStrategy,
    /// Logged-in sessions on the order port.
    pub max_sessions: usize,
    /// Logged-in sessions on the admin listener, counted apart from the order port's.
    pub max_admin_sessions: usize,
    /// Connections that have not logged in yet on the order port; over it the oldest of them
    /// is closed.
    pub max_pending_logins: usize,
    /// The same on the admin port.
    pub max_pending_admin_logins: usize,
    /// Connections from one address (IPv6: one /64) that have not logged in yet, per port.
    pub max_pending_logins_per_address: usize,
    /// A connection that has not logged in after this long is closed.
    pub login_timeout_ms: u64,
    /// Frames a session may send per second before it is disconnected (0: no limit).
    pub max_msgs_per_sec: u64,
    /// Burst allowance above the rate.
    pub burst: u64,
    /// A session whose unsent output exceeds this many bytes is too slow and is disconnected.
    pub max_output_bytes: usize,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineSettings {
    pub max_open_orders_per_user: u32,
    /// The engine's capacities, reserved at start (docs/operations.md, "Capacities").
    pub max_resting_orders: u32,
    pub max_users: u32,
    pub max_tx_ids: u32,
    pub max_window_ids: u32,
    pub max_symbols: u32,
    /// The venue's order-id window in seconds (docs/rules.md, "Order ids are not reused
    /// within a window"). When set and different from the venue's, it is journaled at start
    /// as the operator command `set_order_id_window`; unset, the venue keeps what it has.
    pub order_id_window_s: Option<u64>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct FixSettings {
    pub enabled: bool,
    /// The FIX acceptor (FIX 4.2, 4.4 and FIXT.1.1 with 5.0SP2 on one port).
    pub listen: SocketAddr,
    /// Our CompID: the TargetCompID that initiators send.
    pub comp_id: String,
    /// Which SenderCompIDs may log on, and as which user.
    pub sessions: Vec<FixSessionSettings>,
    /// Cancel a session's live orders when it disconnects (sessions may override it).
    pub cancel_on_disconnect: bool,
    /// Logged-on connections.
    pub max_connections: usize,
    /// Connections that have not logged on yet; over it the oldest of them is closed.
    pub max_pending_logons: usize,
    /// Connections from one address (IPv6: one /64) that have not logged on yet.
    pub max_pending_logons_per_address: usize,
    /// A connection that has sent no valid Logon after this long is closed.
    pub logon_timeout_ms: u64,
    /// The largest FIX message accepted, in bytes.
    pub max_message_bytes: usize,
    /// SendingTime may differ from our clock by this much before a message is refused.
    pub max_clock_skew_ms: u64,
    /// Accept user-defined tags (5000 and above) that the data dictionary does not define;
    /// off, they are rejected as invalid tag numbers (SessionRejectReason 0).
    pub allow_user_defined_tags: bool,
    /// Messages a connection may send per second before it is logged out (0: no limit).
    pub max_msgs_per_sec: u64,
    pub burst: u64,
    /// Keep every message in and out in the per-session message log (`rialto fix log`).
    pub message_log: bool,
    /// A session's message log starts a new file past this size...
    pub message_log_max_bytes: u64,
    /// ...and keeps this many full files beside the current one (older ones are deleted).
    pub message_log_files: u32,
}

/// HTTP: the REST API, the WebSocket API, /metrics and the web console (docs/api.md).
/// docs/operations.md lists every setting with its default; docs/security.md says why.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebSettings {
    pub enabled: bool,
    pub listen: SocketAddr,
    /// Requests a user (signed requests) or a client address (everything else) may make per
    /// second, REST and WebSocket requests alike (0: no limit).
    pub max_requests_per_sec: u64,
    pub burst: u64,
    /// Messages waiting to be written to one WebSocket whose socket buffer is full, before
    /// it is cut off as a slow consumer.
    pub max_ws_queue: usize,
    /// The same in bytes, for a logged-in WebSocket.
    pub max_ws_queue_bytes: usize,
    /// Batches of users' fills, cancellations and phase changes (up to 1,024 messages each,
    /// one a millisecond while busy) that wait for the web side; past it the gateway drops
    /// them and the users concerned get a `gap` (docs/api.md, "Gaps").
    pub user_message_batches: usize,
    /// The same in bytes, for a WebSocket that has not logged in.
    pub max_ws_queue_bytes_public: usize,
    pub max_ws_connections: usize,
    /// Open connections past their first request (a WebSocket: past its login or first
    /// subscription), in all and from one address (an IPv4 address or an IPv6 /64). A
    /// connection over either is answered 503 `busy` and closed.
    pub max_connections: usize,
    pub max_connections_per_address: usize,
    /// Connections that have not got that far yet. Over this (or over
    /// `max_connections_per_address` from one address) the oldest such connection is closed
    /// to make room for the new one.
    pub max_pending_connections: usize,
    /// The whole header of a request must arrive within this of the connection opening or of
    /// the previous answer (so it is the keep-alive idle timeout too).
    pub header_read_timeout_ms: u64,
    /// The largest request header (request line and headers, bytes) and the most header
    /// fields; over either the answer is 431.
    pub max_header_bytes: usize,
    pub max_headers: usize,
    /// A WebSocket must log in or subscribe within this of its upgrade.
    pub ws_login_timeout_ms: u64,
    /// A WebSocket from which nothing arrives (no request, no pong) for this long is closed;
    /// the server pings it after half of it.
    pub ws_idle_timeout_ms: u64,
    /// How far ahead of the server's clock a signed request's timestamp may be (how far
    /// behind is the request's own receive window).
    pub max_clock_skew_ms: u64,
    /// Distinct signed requests remembered per key within their receive windows (to refuse
    /// replays); a key over it is refused 429 until the oldest windows end.
    pub max_signatures_per_key: usize,
    /// Issued API keys a user may hold at once (besides the default key, the user id).
    pub max_api_keys_per_user: usize,
    /// Failed logins (a signed request or WebSocket login refused) allowed in a burst per
    /// address and per user, and forgiven per second after it.
    pub login_failures_burst: u32,
    pub login_failures_per_sec: f64,
}

/// The market data feed (docs/market-data.md).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MarketDataSettings {
    /// Slots in the ring between the journal stage and the market data thread (each holds
    /// the records of one journaled batch, up to `pipeline.batch_max` commands).
    pub ring_capacity: usize,
    /// MiB of journaled records that may wait beyond a full ring for the market data thread;
    /// past it the journal stage takes no new commands until the thread catches up.
    pub max_spill_mib: usize,
    /// Publish the binary feed over UDP multicast, with its TCP replay service.
    pub udp: bool,
    /// Multicast group and port of the incremental channel.
    pub udp_incremental: SocketAddrV4,
    /// Multicast group and port of the snapshot channel.
    pub udp_snapshot: SocketAddrV4,
    /// The interface multicast leaves by (loopback keeps the feed on this host).
    pub udp_interface: Ipv4Addr,
    /// Multicast TTL: 0 stays on this host, 1 on the local network.
    pub udp_ttl: u32,
    /// How often every book goes out on the snapshot channel.
    pub snapshot_interval_ms: u64,
    /// The TCP replay service for missed incremental packets.
    pub replay_listen: SocketAddr,
    /// Incremental packets kept for replay.
    pub replay_packets: usize,
}

impl Default for MarketDataSettings {
    fn default() -> Self {
        MarketDataSettings {
            ring_capacity: 4_096,
            max_spill_mib: 64,
            udp: false,
            udp_incremental: "239.255.42.1:30001".parse().expect("valid address"),
            udp_snapshot: "239.255.42.1:30002".parse().expect("valid address"),
            udp_interface: Ipv4Addr::LOCALHOST,
            udp_ttl: 0,
            snapshot_interval_ms: 1_000,
            replay_listen: "127.0.0.1:9102".parse().expect("valid address"),
            replay_packets: 100_000,
        }
    }
}

impl Default for WebSettings {
    fn default() -> Self {
        WebSettings {
            enabled: true,
            listen: "127.0.0.1:8080".parse().expect("valid address"),
            max_requests_per_sec: 1_000,
            burst: 1_000,
            max_ws_queue: 4_096,
            max_ws_queue_bytes: 4 << 20,
            user_message_batches: 1_024,
            max_ws_queue_bytes_public: 256 << 10,
            max_ws_connections: 4_096,
            max_connections: 1_024,
            max_connections_per_address: 64,
            max_pending_connections: 256,
            header_read_timeout_ms: 5_000,
            max_header_bytes: 16 << 10,
            max_headers: 64,
            ws_login_timeout_ms: 10_000,
            ws_idle_timeout_ms: 60_000,
            max_clock_skew_ms: 1_000,
            max_signatures_per_key: 10_000,
            max_api_keys_per_user: 20,
            login_failures_burst: 10,
            login_failures_per_sec: 1.0,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FixSessionSettings {
    /// The initiator's SenderCompID.
    pub comp_id: String,
    pub user: i64,
    #[serde(default)]
    pub cancel_on_disconnect: Option<bool>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InstrumentSettings {
    /// The price of one tick, as a decimal ("0.01").
    pub price_tick: String,
    /// The quantity of one lot, as a decimal ("0.001").
    pub qty_lot: String,
}

impl Default for FixSettings {
    fn default() -> Self {
        FixSettings {
            enabled: true,
            listen: "127.0.0.1:9878".parse().expect("valid address"),
            comp_id: "RIALTO".into(),
            // The demo users: TRADER1 logs on as user 1, and so on.
            sessions: (1..=crate::demo::DEMO_USERS)
                .map(|user| FixSessionSettings {
                    comp_id: format!("TRADER{user}"),
                    user,
                    cancel_on_disconnect: None,
                })
                .collect(),
            cancel_on_disconnect: false,
            max_connections: 256,
            max_pending_logons: 64,
            max_pending_logons_per_address: 8,
            logon_timeout_ms: 5_000,
            max_message_bytes: 64 << 10,
            max_clock_skew_ms: 120_000,
            allow_user_defined_tags: false,
            max_msgs_per_sec: 200_000,
            burst: 20_000,
            message_log: true,
            message_log_max_bytes: 64 << 20,
            message_log_files: 4,
        }
    }
}

fn demo_instruments() -> BTreeMap<String, InstrumentSettings> {
    crate::demo::demo_symbols()
        .iter()
        .map(|spec| {
            let settings = InstrumentSettings {
                price_tick: "0.01".into(),
                qty_lot: "0.001".into(),
            };
            (spec.symbol.as_str().to_string(), settings)
        })
        .collect()
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            data_dir: PathBuf::from("data"),
            listen: "127.0.0.1:9100".parse().expect("valid address"),
            admin_listen: "127.0.0.1:9101".parse().expect("valid address"),
            demo: false,
            admin_secret: None,
            journal: JournalSettings::default(),
            log: LogSettings::default(),
            pipeline: PipelineSettings::default(),
            gateway: GatewaySettings::default(),
            engine: EngineSettings::default(),
            fix: FixSettings::default(),
            web: WebSettings::default(),
            tls: crate::tls::TlsSettings::default(),
            market_data: MarketDataSettings::default(),
            history: crate::history::HistorySettings::default(),
            instruments: demo_instruments(),
        }
    }
}

impl Default for JournalSettings {
    fn default() -> Self {
        JournalSettings {
            durability: DurabilityMode::Fsync,
            batch_interval_us: 1_000,
            segment_bytes: 64 << 20,
            snapshot_every: 1_000_000,
            archive: true,
            accept_loss: false,
        }
    }
}

impl Default for PipelineSettings {
    fn default() -> Self {
        PipelineSettings {
            ring_capacity: 16_384,
            batch_max: None,
            wait: WaitStrategy::Backoff,
            threads: ThreadLayout::Auto,
            gateway_cpu: None,
            prefetch: Prefetch::Auto,
        }
    }
}

impl Default for GatewaySettings {
    fn default() -> Self {
        GatewaySettings {
            io: WaitStrategy::Backoff,
            max_sessions: 1_024,
            max_admin_sessions: 16,
            max_pending_logins: 64,
            max_pending_admin_logins: 16,
            max_pending_logins_per_address: 8,
            login_timeout_ms: 5_000,
            max_msgs_per_sec: 200_000,
            burst: 20_000,
            max_output_bytes: 16 << 20,
        }
    }
}

impl EngineSettings {
    /// `order_id_window_s` in nanoseconds; an error when that does not fit an `i64`.
    pub fn order_id_window_ns(&self) -> anyhow::Result<Option<i64>> {
        self.order_id_window_s
            .map(|s| {
                i64::try_from(s)
                    .ok()
                    .and_then(|s| s.checked_mul(1_000_000_000))
                    .ok_or_else(|| anyhow::anyhow!("engine.order_id_window_s {s} is too large"))
            })
            .transpose()
    }
}

/// The engine configuration of a venue run with the default settings. The tools that replay a
/// venue's journal or log (`rialto journal verify|dump`, `rialto replay`) apply it, so that
/// their limits (`limit_exceeded`) are the venue's.
pub fn default_engine_config() -> rialto_core::EngineConfig {
    ServerConfig::default().engine_config()
}

/// `pipeline.batch_max` when the operator does not set it, with the local journal.
pub const DEFAULT_BATCH_MAX_LOCAL: usize = 1_024;
/// `pipeline.batch_max` when the operator does not set it, with JetStream (within
/// [`crate::replication::MAX_BATCH_COMMANDS`]).
pub const DEFAULT_BATCH_MAX_JETSTREAM: usize = 4_096;
const _: () = assert!(DEFAULT_BATCH_MAX_JETSTREAM <= crate::replication::MAX_BATCH_COMMANDS);

/// The most any of the engine's capacities may be: 2^28 entries (an id index of 2^29 slots,
/// 4 GiB, reserved at start).
const MAX_CAPACITY: u32 = 1 << 28;
/// Each symbol's books and tables are allocated when it is added; a venue lists its symbols.
const MAX_SYMBOLS: u32 = 1 << 16;

impl Default for EngineSettings {
    fn default() -> Self {
        let core = rialto_core::EngineConfig::default();
        EngineSettings {
            max_open_orders_per_user: core.max_open_orders_per_user,
            max_resting_orders: 1 << 21,
            max_users: 1 << 18,
            max_tx_ids: 1 << 22,
            max_window_ids: 1 << 22,
            max_symbols: core.max_symbols,
            order_id_window_s: None,
        }
    }
}

impl ServerConfig {
    /// Parses a TOML configuration; fields it leaves out keep their defaults.
    pub fn from_toml_str(text: &str) -> anyhow::Result<ServerConfig> {
        let config: ServerConfig = toml::from_str(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Every setting as a TOML file would give it (`rialto serve --print-config`; with the
    /// defaults, the list in `rialto serve --help`).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot write the settings: {e}\n"))
    }

    /// Most commands in one batch (`pipeline.batch_max`): the operator's value, or by the
    /// backend. JetStream spends a fixed cost on every message besides its bytes, so bigger
    /// batches commit more commands per second there (docs/operations.md).
    pub fn batch_max(&self) -> usize {
        // The default never exceeds the ring: a small ring makes small batches.
        self.pipeline.batch_max.unwrap_or(
            match self.log.backend {
                LogBackend::Local => DEFAULT_BATCH_MAX_LOCAL,
                LogBackend::Jetstream => DEFAULT_BATCH_MAX_JETSTREAM,
            }
            .min(self.pipeline.ring_capacity),
        )
    }

    /// Refuses settings that cannot work, with a message naming the setting.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.validate_log()?;
        self.history.validate()?;
        let p = &self.pipeline;
        anyhow::ensure!(
            p.ring_capacity >= 2 && p.ring_capacity <= 1 << 24,
            "pipeline.ring_capacity must be 2..=16777216"
        );
        anyhow::ensure!(
            self.batch_max() >= 1 && self.batch_max() <= p.ring_capacity,
            "pipeline.batch_max must be 1..=ring_capacity (it is {} here)",
            self.batch_max()
        );
        anyhow::ensure!(
            self.gateway.max_sessions >= 1 && self.gateway.max_admin_sessions >= 1,
            "gateway.max_sessions and gateway.max_admin_sessions must be at least 1"
        );
        anyhow::ensure!(
            self.gateway.max_pending_logins >= 1
                && self.gateway.max_pending_admin_logins >= 1
                && self.gateway.max_pending_logins_per_address >= 1,
            "gateway.max_pending_logins, max_pending_admin_logins and \
             max_pending_logins_per_address must be at least 1"
        );
        let w = &self.web;
        anyhow::ensure!(
            w.max_ws_queue >= 1 && w.max_ws_connections >= 1 && w.user_message_batches >= 1,
            "web.max_ws_queue, web.max_ws_connections and web.user_message_batches must be at \
             least 1"
        );
        anyhow::ensure!(
            w.max_ws_queue_bytes >= 1 << 10 && w.max_ws_queue_bytes_public >= 1 << 10,
            "web.max_ws_queue_bytes and web.max_ws_queue_bytes_public must be at least 1024"
        );
        anyhow::ensure!(
            w.max_connections >= 1
                && w.max_connections_per_address >= 1
                && w.max_pending_connections >= 1,
            "web.max_connections, max_connections_per_address and max_pending_connections \
             must be at least 1"
        );
        anyhow::ensure!(
            w.header_read_timeout_ms >= 1
                && w.ws_login_timeout_ms >= 1
                && w.ws_idle_timeout_ms >= 2,
            "web.header_read_timeout_ms, ws_login_timeout_ms and ws_idle_timeout_ms must be positive"
        );
        anyhow::ensure!(
            (8 << 10..=1 << 20).contains(&w.max_header_bytes) && w.max_headers >= 8,
            "web.max_header_bytes must be 8192..=1048576 and web.max_headers at least 8"
        );
        anyhow::ensure!(
            (100..=60_000).contains(&w.max_clock_skew_ms),
            "web.max_clock_skew_ms must be 100..=60000"
        );
        anyhow::ensure!(
            (1..=1_000_000).contains(&w.max_signatures_per_key),
            "web.max_signatures_per_key must be 1..=1000000"
        );
        anyhow::ensure!(
            (1..=1_000).contains(&w.max_api_keys_per_user),
            "web.max_api_keys_per_user must be 1..=1000"
        );
        anyhow::ensure!(
            w.login_failures_burst >= 1
                && w.login_failures_per_sec.is_finite()
                && w.login_failures_per_sec > 0.0,
            "web.login_failures_burst must be at least 1 and login_failures_per_sec positive"
        );
        anyhow::ensure!(
            (2..=1 << 24).contains(&self.market_data.ring_capacity),
            "market_data.ring_capacity must be 2..=16777216"
        );
        anyhow::ensure!(
            (1..=65_536).contains(&self.market_data.max_spill_mib),
            "market_data.max_spill_mib must be 1..=65536"
        );
        anyhow::ensure!(
            w.max_requests_per_sec == 0 || w.burst >= 1,
            "web.burst must be at least 1 when web.max_requests_per_sec limits"
        );
        let md = &self.market_data;
        anyhow::ensure!(
            md.udp_incremental.ip().is_multicast() && md.udp_snapshot.ip().is_multicast(),
            "market_data.udp_incremental and udp_snapshot must be multicast groups (224.0.0.0/4)"
        );
        anyhow::ensure!(
            md.udp_incremental != md.udp_snapshot,
            "market_data.udp_incremental and udp_snapshot must differ"
        );
        anyhow::ensure!(
            md.snapshot_interval_ms >= 10 && md.replay_packets >= 1,
            "market_data.snapshot_interval_ms must be at least 10 and replay_packets at least 1"
        );
        anyhow::ensure!(
            self.gateway.login_timeout_ms >= 1,
            "gateway.login_timeout_ms must be at least 1"
        );
        anyhow::ensure!(
            self.gateway.max_output_bytes >= 2 * rialto_wire::MAX_SERVER_FRAME,
            "gateway.max_output_bytes must be at least {} (two of the largest replies)",
            2 * rialto_wire::MAX_SERVER_FRAME
        );
        anyhow::ensure!(
            self.gateway.burst >= 1,
            "gateway.burst must be at least 1 (a session's first frame is its login)"
        );
        anyhow::ensure!(
            (4096..=1 << 40).contains(&self.journal.segment_bytes),
            "journal.segment_bytes must be 4096..=1099511627776"
        );
        if let Some(secret) = &self.admin_secret {
            // 32 characters: 128 bits as hex, like the derived secret; a shorter one can be
            // guessed by anyone who reaches the admin port.
            anyhow::ensure!(
                (MIN_ADMIN_SECRET_LEN..=rialto_wire::Secret::MAX_LEN).contains(&secret.len()),
                "admin_secret must be {MIN_ADMIN_SECRET_LEN}..={} bytes (at least 128 bits as hex)",
                rialto_wire::Secret::MAX_LEN
            );
        }
        self.validate_fix()?;
        let e = &self.engine;
        for (name, value) in [
            ("max_resting_orders", e.max_resting_orders),
            ("max_users", e.max_users),
            ("max_tx_ids", e.max_tx_ids),
            ("max_window_ids", e.max_window_ids),
        ] {
            anyhow::ensure!(
                (1..=MAX_CAPACITY).contains(&value),
                "engine.{name} must be 1..={MAX_CAPACITY}"
            );
        }
        anyhow::ensure!(
            (1..=MAX_SYMBOLS).contains(&e.max_symbols),
            "engine.max_symbols must be 1..={MAX_SYMBOLS}"
        );
        Ok(())
    }

    fn validate_log(&self) -> anyhow::Result<()> {
        let l = &self.log;
        if l.backend == LogBackend::Local {
            anyhow::ensure!(
                l.role != Role::Replica,
                "log.role = \"replica\" follows a replicated log: it needs log.backend = \
                 \"jetstream\" (--log jetstream --nats URLS)"
            );
            return Ok(());
        }
        anyhow::ensure!(
            !l.nats.is_empty(),
            "log.backend = \"jetstream\" needs log.nats, the NATS servers (--nats URL,URL,...)"
        );
        anyhow::ensure!(
            !l.venue.is_empty()
                && l.venue.len() <= 64
                && l.venue
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "log.venue must be 1 to 64 letters, digits, `-` or `_`"
        );
        anyhow::ensure!((1..=5).contains(&l.replicas), "log.replicas must be 1..=5");
        anyhow::ensure!(
            (100..=60_000).contains(&l.lease_ms),
            "log.lease_ms must be 100..=60000"
        );
        anyhow::ensure!(
            l.snapshots_kept <= 100,
            "log.snapshots_kept must be 0..=100"
        );
        anyhow::ensure!(
            (1..=crate::replication::MAX_APPENDS_IN_FLIGHT).contains(&l.appends_in_flight),
            "log.appends_in_flight must be 1..={}",
            crate::replication::MAX_APPENDS_IN_FLIGHT
        );
        anyhow::ensure!(
            (100..=60_000).contains(&l.ack_timeout_ms),
            "log.ack_timeout_ms must be 100..=60000"
        );
        // One batch is one message: its records must fit NATS's default 1 MiB payload.
        let batch_bytes = self.batch_max() * rialto_journal::format::RECORD_MAX_BYTES;
        anyhow::ensure!(
            batch_bytes <= crate::replication::MAX_BATCH_BYTES,
            "pipeline.batch_max must be at most {} with log.backend = \"jetstream\" (a batch \
             is one NATS message)",
            crate::replication::MAX_BATCH_BYTES / rialto_journal::format::RECORD_MAX_BYTES
        );
        Ok(())
    }

    fn validate_fix(&self) -> anyhow::Result<()> {
        let f = &self.fix;
        let comp_id_ok = |id: &str| {
            !id.is_empty()
                && id.len() <= 64
                && id.bytes().all(|b| b.is_ascii_graphic() && b != b'=')
        };
        anyhow::ensure!(
            comp_id_ok(&f.comp_id),
            "fix.comp_id must be 1..=64 printable characters"
        );
        let mut seen = std::collections::HashSet::new();
        for s in &f.sessions {
            anyhow::ensure!(
                comp_id_ok(&s.comp_id),
                "fix.sessions: comp_id `{}` must be 1..=64 printable characters",
                s.comp_id
            );
            anyhow::ensure!(
                seen.insert(&s.comp_id),
                "fix.sessions: `{}` is listed twice",
                s.comp_id
            );
            anyhow::ensure!(
                s.user > 0,
                "fix.sessions: `{}` needs a user id above 0",
                s.comp_id
            );
        }
        anyhow::ensure!(
            f.max_connections >= 1,
            "fix.max_connections must be at least 1"
        );
        anyhow::ensure!(
            (1024..=16 << 20).contains(&f.max_message_bytes),
            "fix.max_message_bytes must be 1024..=16777216"
        );
        anyhow::ensure!(f.burst >= 1, "fix.burst must be at least 1");
        anyhow::ensure!(
            f.max_pending_logons >= 1 && f.max_pending_logons_per_address >= 1,
            "fix.max_pending_logons and fix.max_pending_logons_per_address must be at least 1"
        );
        anyhow::ensure!(
            f.logon_timeout_ms >= 1,
            "fix.logon_timeout_ms must be at least 1"
        );
        anyhow::ensure!(
            f.message_log_max_bytes >= 1 << 20,
            "fix.message_log_max_bytes must be at least 1048576"
        );
        for (symbol, i) in &self.instruments {
            for (what, text) in [("price_tick", &i.price_tick), ("qty_lot", &i.qty_lot)] {
                let ok = rialto_fix::Decimal::parse(text.as_bytes()).is_ok_and(|d| d.mantissa > 0);
                anyhow::ensure!(
                    ok,
                    "instruments.{symbol}.{what} must be a positive decimal, not `{text}`"
                );
            }
        }
        Ok(())
    }

    /// The settings that decide what a venue does, which every node of a replicated venue must
    /// share (docs/replication.md), one `name = value` line each in a fixed order: the first
    /// node of a venue stores them in the cluster and every other node compares its own.
    pub fn shared_settings(&self) -> String {
        let e = &self.engine;
        let window = match e.order_id_window_s {
            Some(s) => s.to_string(),
            None => "none".into(),
        };
        let mut text = format!(
            "engine.max_open_orders_per_user = {}\nengine.max_resting_orders = {}\n\
             engine.max_users = {}\nengine.max_tx_ids = {}\nengine.max_window_ids = {}\n\
             engine.max_symbols = {}\n\
             engine.order_id_window_s = {window}\nlog.checkpoint_every = {}\nlog.lease_ms = {}\n",
            e.max_open_orders_per_user,
            e.max_resting_orders,
            e.max_users,
            e.max_tx_ids,
            e.max_window_ids,
            e.max_symbols,
            self.log.checkpoint_every,
            self.log.lease_ms,
        );
        // A BTreeMap: the same order on every node.
        for (symbol, i) in &self.instruments {
            text.push_str(&format!(
                "instruments.{symbol} = {} {}\n",
                i.price_tick, i.qty_lot
            ));
        }
        text
    }

    /// The engine's configuration; the hash seed is drawn at random on every start (nothing
    /// the engine reports depends on it, and users must not be able to guess it).
    pub fn engine_config(&self) -> rialto_core::EngineConfig {
        let mut seed = [0u8; 8];
        // A failed draw leaves the default seed: still correct, only less collision-proof.
        let _ = getrandom::getrandom(&mut seed);
        let e = &self.engine;
        rialto_core::EngineConfig {
            max_open_orders_per_user: e.max_open_orders_per_user,
            max_resting_orders: e.max_resting_orders,
            max_users: e.max_users,
            max_tx_ids: e.max_tx_ids,
            max_window_ids: e.max_window_ids,
            max_symbols: e.max_symbols,
            hash_seed: u64::from_le_bytes(seed) | 1,
            ..rialto_core::EngineConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_overrides_only_what_it_names() {
        let config = ServerConfig::from_toml_str(
            "listen = \"127.0.0.1:7000\"\n[journal]\ndurability = \"batch\"\n",
        )
        .unwrap();
        assert_eq!(config.listen.port(), 7000);
        assert_eq!(config.admin_listen.port(), 9101);
        assert_eq!(config.journal.durability, DurabilityMode::Batch);
        assert_eq!(config.journal.batch_interval_us, 1_000);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        assert!(ServerConfig::from_toml_str("lisen = \"x\"").is_err());
        assert!(ServerConfig::from_toml_str("[journal]\ndurability = \"maybe\"").is_err());
        assert!(ServerConfig::from_toml_str("[pipeline]\nring_capacity = 1").is_err());
    }

    #[test]
    fn a_jetstream_log_needs_servers_a_plain_venue_name_and_batches_that_fit_a_message() {
        let ok = "[log]\nbackend = \"jetstream\"\nnats = [\"nats://127.0.0.1:4222\"]\n";
        let config = ServerConfig::from_toml_str(ok).unwrap();
        assert_eq!(config.log.backend, LogBackend::Jetstream);
        assert_eq!(config.log.role, Role::Auto);
        let refused = |extra: &str| {
            let text = format!("{ok}{extra}");
            ServerConfig::from_toml_str(&text)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let no_servers = ServerConfig::from_toml_str("[log]\nbackend = \"jetstream\"\n");
        assert!(no_servers.unwrap_err().to_string().contains("log.nats"));
        assert!(refused("venue = \"a.b\"\n").contains("log.venue"));
        assert!(refused("role = \"boss\"\n").contains("boss"));
        let replica = ServerConfig::from_toml_str(&format!("{ok}role = \"replica\"\n")).unwrap();
        assert_eq!(replica.log.role, Role::Replica);
        let local_replica = ServerConfig::from_toml_str("[log]\nrole = \"replica\"\n");
        assert!(local_replica.unwrap_err().to_string().contains("jetstream"));
        assert!(refused("lease_ms = 10\n").contains("log.lease_ms"));
        for appends in [0, 65] {
            let text = format!("appends_in_flight = {appends}\n");
            assert!(refused(&text).contains("log.appends_in_flight must be 1..=64"));
        }
        let one = ServerConfig::from_toml_str(&format!("{ok}appends_in_flight = 1\n")).unwrap();
        assert_eq!(one.log.appends_in_flight, 1);
        let big = "[pipeline]\nbatch_max = 8192\n";
        assert!(refused(big).contains("pipeline.batch_max"));
        // The local journal takes any batch that fits the ring.
        assert!(ServerConfig::from_toml_str(big).is_ok());
        // docs/operations.md, docs/replication.md and `rialto bench log --help` give the most.
        assert_eq!(crate::replication::MAX_BATCH_COMMANDS, 5434);
        let batch = |n: usize| format!("[pipeline]\nring_capacity = 8192\nbatch_max = {n}\n");
        assert!(ServerConfig::from_toml_str(&format!("{ok}{}", batch(5434))).is_ok());
        assert!(refused(&batch(5435)).contains("at most 5434"));
    }

    #[test]
    fn batch_max_defaults_by_backend_unless_set() {
        let jetstream = "[log]\nbackend = \"jetstream\"\nnats = [\"nats://127.0.0.1:4222\"]\n";
        assert_eq!(ServerConfig::default().batch_max(), 1_024);
        assert_eq!(ServerConfig::from_toml_str("").unwrap().batch_max(), 1_024);
        assert_eq!(
            ServerConfig::from_toml_str(jetstream).unwrap().batch_max(),
            4_096
        );
        // The operator's value wins with either backend.
        let set = "[pipeline]\nbatch_max = 256\n";
        assert_eq!(ServerConfig::from_toml_str(set).unwrap().batch_max(), 256);
        let both = format!("{jetstream}{set}");
        assert_eq!(ServerConfig::from_toml_str(&both).unwrap().batch_max(), 256);
        // A ring smaller than the backend's default bounds the default; a batch_max set above
        // the ring is refused, naming it.
        let small_ring = format!("{jetstream}[pipeline]\nring_capacity = 2048\n");
        let small = ServerConfig::from_toml_str(&small_ring).unwrap();
        assert_eq!(small.batch_max(), 2_048);
        let too_big = format!("{small_ring}batch_max = 4096\n");
        let refused = ServerConfig::from_toml_str(&too_big)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("it is 4096 here"), "{refused}");
        // Printed settings keep it unset, so the backend still decides when they are read back.
        let printed = ServerConfig::default().to_toml();
        assert!(!printed.contains("batch_max"), "{printed}");
    }
}
