//! Rialto's runtime: recovery, the pipeline threads, the binary gateway, configuration.
//!
//! [`start`] recovers the venue from its data directory and starts serving; the returned
//! [`RunningServer`] stops cleanly on request (SIGINT/SIGTERM in `rialto serve`).

pub mod admission;
pub mod affinity;
pub mod auth;
pub mod config;
pub mod demo;
pub mod event;
pub mod feed;
pub mod fix;
pub mod fixstore;
pub mod gateway;
pub mod history;
pub mod idle;
pub mod metrics;
pub mod nats_access;
pub mod pipeline;
pub mod process;
pub mod replication;
pub mod ring;
pub mod route;
pub mod session;
pub mod simlog;
pub mod snapstore;
pub mod sockets;
pub mod tls;
pub mod web;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use rialto_journal::{Durability, JournalConfig, JournalWriter};

use crate::auth::Credentials;
use crate::config::{DurabilityMode, LogBackend, Role, ServerConfig};
use crate::gateway::{Gateway, GatewayConfig};
use crate::pipeline::{Pipeline, PipelineConfig};
use crate::replication::CommandLog;

/// A server that is accepting connections.
pub struct RunningServer {
    /// The binary order listener (`0.0.0.0:0` on a read replica, which opens none).
    pub order_addr: SocketAddr,
    /// The admin listener (`0.0.0.0:0` on a read replica, which opens none).
    pub admin_addr: SocketAddr,
    /// Whether this node is a read replica (`log.role = "replica"`, docs/replication.md).
    pub read_only: bool,
    /// The FIX acceptor, when enabled.
    pub fix_addr: Option<SocketAddr>,
    /// The HTTP server (REST, WebSocket, console, metrics), when enabled.
    pub web_addr: Option<SocketAddr>,
    /// The UDP feed's replay service, when the feed is on.
    pub replay_addr: Option<SocketAddr>,
    pub market_data: Arc<feed::MarketData>,
    pub credentials: Arc<Credentials>,
    pub admin_secret: String,
    stop: Arc<AtomicBool>,
    gateway: JoinHandle<Result<(), String>>,
    web: Option<web::WebServer>,
    udp: Option<feed::udp::UdpFeed>,
    md_thread: JoinHandle<()>,
    /// The history database (`[history]`), when on.
    pub history: Option<Arc<history::Store>>,
    history_writer: Option<JoinHandle<()>>,
    pipeline_shared: Arc<pipeline::Shared>,
    web_bridge: Arc<web::bridge::WebBridge>,
    /// A replicated leader's FIX stores in the cluster.
    fix_mirror: Option<fixstore::FixMirror>,
    /// Held until the server is dropped (after it stopped).
    _data_dir_lock: rialto_journal::DataDirLock,
}

impl RunningServer {
    /// The flag that stops the server (a signal handler sets it).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stalls the web side's reading of the gateway's user messages while the guard lives
    /// (for tests of a web side that falls behind).
    #[doc(hidden)]
    pub fn stall_web_user_messages(&self) -> impl Drop + '_ {
        self.web_bridge.stall_user_messages()
    }

    /// Holds the cluster reads and writes of one FIX session's store (e.g.
    /// `FIX.4.4-RIALTO-TRADER1`) back until [`Self::release_fix_store`] (for tests of a slow
    /// cluster).
    #[doc(hidden)]
    pub fn stall_fix_store(&self, session: &str) {
        if let Some(mirror) = &self.fix_mirror {
            mirror.stall(session);
        }
    }

    #[doc(hidden)]
    pub fn release_fix_store(&self) {
        if let Some(mirror) = &self.fix_mirror {
            mirror.release();
        }
    }

    /// Waits (up to `timeout`) until market data has replayed everything the engine applied.
    pub fn settle_market_data(&self, timeout: Duration) {
        self.market_data.settle(&self.pipeline_shared, timeout);
    }

    /// Asks for a clean shutdown and waits for it.
    pub fn shutdown(self) -> anyhow::Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        self.wait()
    }

    /// Waits until the server stops (after the stop flag is set, or a fatal error).
    pub fn wait(self) -> anyhow::Result<()> {
        let gateway = self.gateway.join();
        // However the gateway ended, the rest stops with it.
        self.stop.store(true, Ordering::SeqCst);
        if let Some(web) = self.web {
            web.join();
        }
        if let Some(udp) = self.udp {
            udp.join();
        }
        let _ = self.md_thread.join();
        // The market data thread handed the writer its last rows when it ended.
        if let Some(writer) = self.history_writer {
            let _ = writer.join();
        }
        match gateway {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(anyhow::anyhow!(e)),
            Err(_) => Err(anyhow::anyhow!("the gateway thread panicked")),
        }
    }
}

fn journal_config(config: &ServerConfig) -> JournalConfig {
    let j = &config.journal;
    JournalConfig {
        segment_bytes: j.segment_bytes,
        durability: match j.durability {
            DurabilityMode::Fsync => Durability::Fsync,
            DurabilityMode::Batch => Durability::Batch {
                interval_us: j.batch_interval_us,
            },
            DurabilityMode::None => Durability::None,
        },
        ..JournalConfig::default()
    }
}

/// Recovery from the local journal (snapshot + journal tail) and the journal opened after it.
fn recover_local(
    config: &ServerConfig,
    metrics: &Arc<metrics::Metrics>,
) -> anyhow::Result<(rialto_core::Engine, i64, CommandLog)> {
    let data_dir = &config.data_dir;
    let started = Instant::now();
    let options = rialto_journal::RecoverOptions {
        repair: true,
        durability: journal_config(config).durability,
        accept_loss: config.journal.accept_loss,
    };
    let recovered = match rialto_journal::recover_with(data_dir, config.engine_config(), options) {
        Ok(recovered) => recovered,
        Err(e @ rialto_journal::JournalError::LostSuffix { .. }) => anyhow::bail!(
            "cannot recover the venue from {}: {e}. To start anyway, after the lost seqs, and \
             record the loss in {}/journal/accepted-losses, start once with \
             `rialto serve --accept-journal-loss` (`rialto journal verify` shows what is there)",
            data_dir.display(),
            data_dir.display()
        ),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "cannot recover the venue from {}",
                data_dir.display()
            )));
        }
    };
    tracing::info!(
        snapshot_seq = ?recovered.snapshot_seq,
        replayed = recovered.replayed,
        last_seq = recovered.last_seq,
        state_hash = %auth::hex(&recovered.state_hash),
        ms = started.elapsed().as_millis() as u64,
        "recovered"
    );
    let mut journal = JournalWriter::open(
        data_dir,
        journal_config(config),
        recovered.engine.last_seq() + 1,
    )
    .with_context(|| format!("cannot open the journal in {}", data_dir.display()))?;
    let fsync_metrics = metrics.clone();
    journal.observe_syncs(Arc::new(move |took| {
        fsync_metrics.journal_fsync.record(took.as_nanos() as u64)
    }));
    Ok((
        recovered.engine,
        recovered.last_ts_ns,
        CommandLog::Local(journal),
    ))
}

/// Recovers the venue from `config.data_dir`, starts the pipeline and the gateway, and
/// returns once both listeners accept connections.
pub fn start(config: ServerConfig) -> anyhow::Result<RunningServer> {
    start_with_stop(config, Arc::new(AtomicBool::new(false)))
}

/// [`start`], stopping once `stop` turns true, even if it turned true before the server was
/// up (a signal handler installed first: Ctrl-C during recovery stops the server cleanly as
/// soon as it has started).
pub fn start_with_stop(
    config: ServerConfig,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<RunningServer> {
    let started_ms = web::auth::now_ms();
    config.validate()?;
    if let Some(cpu) = config.pipeline.gateway_cpu {
        // Before any thread starts: they all inherit it (and so does the caller's thread).
        affinity::keep_off(cpu)?;
    }
    let data_dir = &config.data_dir;
    process::owner_only_files();
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
    // One server per data directory; `rialto journal verify` sees that one is running.
    let data_dir_lock = rialto_journal::DataDirLock::acquire(data_dir)
        .with_context(|| format!("cannot lock the data directory {}", data_dir.display()))?;
    let tightened = process::tighten_permissions(data_dir)
        .with_context(|| format!("cannot restrict permissions in {}", data_dir.display()))?;
    if tightened > 0 {
        tracing::info!(
            entries = tightened,
            "took group and other permissions away in the data directory"
        );
    }
    let open_files = process::raise_open_file_limit();
    let needed = config.descriptors_needed();
    if open_files < needed {
        tracing::warn!(
            open_files,
            needed,
            "the open file limit is below what the connection limits add up to: a flood on one \
             listener could starve the others; raise the hard limit (ulimit -Hn) or lower the \
             connection limits"
        );
    } else {
        tracing::info!(open_files, needed, "open file limit");
    }
    // A node of a replicated venue takes the venue's key and checks its settings before it
    // reads its own key (docs/replication.md).
    let connection = match config.log.backend {
        LogBackend::Local => None,
        LogBackend::Jetstream => {
            let connection = replication::Connection::open_until_stopped(
                &config.log,
                Duration::from_secs(30),
                stop.clone(),
            )?;
            replication::join_venue(&connection, data_dir, &config.shared_settings())?;
            Some(Arc::new(connection))
        }
    };
    let credentials = Arc::new(Credentials::load_or_create(data_dir)?);
    let admin_secret = config
        .admin_secret
        .clone()
        .unwrap_or_else(|| credentials.admin_secret());
    if config.log.role == Role::Replica {
        let connection = connection.context("a replica has a connection")?;
        let parts = ReplicaParts {
            config,
            connection,
            credentials,
            admin_secret,
            stop,
            started_ms,
            data_dir_lock,
        };
        return start_replica(parts);
    }

    // One TLS configuration for every listener that speaks it (HTTP, order, admin, FIX).
    let tls_config = match config.tls.enabled {
        true => Some(tls::server_config(&config.tls)?),
        false => None,
    };
    let bind_web = || -> anyhow::Result<_> {
        match config.web.enabled {
            true => Ok(Some(web::bind(config.web.listen).with_context(|| {
                format!("cannot listen for HTTP on {}", config.web.listen)
            })?)),
            false => Ok(None),
        }
    };
    let metrics = Arc::new(metrics::Metrics::default());
    // A replicated venue's key store writes through to the cluster.
    let mut key_mirror = None;
    let mut fix_mirror = None;
    let (web_listener, mut engine, mut last_ts_ns, mut journal) = match config.log.backend {
        LogBackend::Local => {
            // Bound before recovery, which may take a while: a taken port fails at once.
            let web_listener = bind_web()?;
            let (engine, last_ts_ns, journal) = recover_local(&config, &metrics)?;
            (web_listener, engine, last_ts_ns, journal)
        }
        LogBackend::Jetstream => {
            // A standby opens no listener until it leads.
            let connection = connection.context("a jetstream node has a connection")?;
            let leading = replication::start_node(
                connection.clone(),
                &config.log,
                data_dir,
                config.engine_config(),
                &stop,
            )?;
            // The keys as the last leader left them, before the web side loads them.
            replication::retrying("taking the venue's API keys", || {
                replication::adopt_api_keys(&connection, data_dir)
            })?;
            key_mirror = Some(replication::api_key_mirror(&connection));
            // FIX sessions are kept in the cluster, written only while this node leads.
            let lease = leading.log.lease_guard();
            fix_mirror = Some(replication::retrying("opening the FIX bucket", || {
                fixstore::FixMirror::open(&connection, lease.clone())
            })?);
            let log = CommandLog::JetStream(leading.log);
            (bind_web()?, leading.engine, leading.last_ts_ns, log)
        }
    };
    let fresh = engine.last_seq() == 0;
    if config.demo && fresh {
        // Journaled and synced before anything else runs, whatever the durability mode: a
        // demo venue is never set up twice over a data directory (a kill before a `none`
        // journal's first flush would otherwise leave an empty journal to set up again).
        for cmd in demo::demo_commands() {
            let seq = engine.last_seq() + 1;
            last_ts_ns = pipeline::now_ns().max(last_ts_ns);
            journal.append(seq, last_ts_ns, &cmd);
            let result = engine.apply(seq, last_ts_ns, &cmd, &mut ());
            metrics.command(&cmd, result);
            if let Err(reason) = result {
                anyhow::bail!("demo set-up: {cmd:?} rejected: {reason:?}");
            }
        }
        journal
            .sync()
            .with_context(|| format!("cannot write the journal in {}", data_dir.display()))?;
        let described = demo::write_secrets(&credentials, data_dir)?;
        tracing::info!("demo venue created: {described}");
    }
    if let Some(window) = config.engine.order_id_window_ns()?
        && window != engine.order_id_window()
    {
        // Journaled like any operator command, so a replay reaches the same venue.
        let cmd = rialto_core::Command::SetOrderIdWindow { window };
        let seq = engine.last_seq() + 1;
        last_ts_ns = pipeline::now_ns().max(last_ts_ns);
        journal.append(seq, last_ts_ns, &cmd);
        if let Err(reason) = engine.apply(seq, last_ts_ns, &cmd, &mut ()) {
            anyhow::bail!("engine.order_id_window_s: rejected: {reason:?}");
        }
        metrics.command(&cmd, Ok(()));
        journal
            .sync()
            .with_context(|| format!("cannot write the journal in {}", data_dir.display()))?;
        tracing::info!(window_ns = window, "order-id window set");
    }
    // The demo's future follows its own book (docs/operations.md, "The demo venue").
    let mark_follower = config
        .demo
        .then(|| engine.symbol_id(demo::DEMO_FUTURE))
        .filter(|&id| {
            engine.symbol(id).is_some_and(|spec| {
                matches!(spec.kind, Some(rialto_core::SymbolKind::Future { .. }))
            })
        });
    let mut instruments = fix::instruments::Instruments::new(&config.instruments);
    instruments.refresh(&engine.symbols_by_name());
    let market_data = feed::MarketData::new(&engine);
    if let CommandLog::JetStream(log) = &mut journal {
        // Read replicas start their feeds here too, so their sequence numbers are this
        // node's (docs/replication.md).
        log.publish_feed_epoch(engine.last_seq(), market_data.epoch_ns())
            .context("cannot announce the market data feed's epoch in the log")?;
    }
    // Market data replays the journal on its own copy of the engine (twice the engine's
    // memory; see docs/market-data.md).
    let replica =
        rialto_core::Engine::decode_snapshot(&engine.encode_snapshot(), config.engine_config())
            .context("cannot copy the engine for the market data replica")?;
    let md_channel = pipeline::MdChannel::new(
        config.market_data.ring_capacity,
        config.market_data.max_spill_mib << 20,
    );
    // The history database fills its gaps from the local journal, which a node of the
    // replicated log does not write: history is off there for now (docs/replication.md).
    let history_on = config.history.enabled && config.log.backend == LogBackend::Local;
    if config.history.enabled && !history_on {
        tracing::warn!("[history] is not offered with --log jetstream yet: history is off");
    }
    let history = match history_on {
        true => Some(history::start(
            &config.history,
            data_dir,
            config.engine_config(),
            engine.last_seq(),
        )?),
        false => None,
    };
    let (history_store, history_tap, history_writer) = match history {
        Some(h) => (Some(h.store), Some(h.tap), Some(h.writer)),
        None => (None, None, None),
    };

    // The web's requests reach the journal stage through the bridge's own intake ring.
    let (bridge, user_messages) = web::bridge::WebBridge::new(config.web.user_message_batches);
    // The FIX gateway's own intake ring: a binary flood in the inbound ring cannot starve it.
    let fix_intake = config
        .fix
        .enabled
        .then(|| ring::Ring::new(config.pipeline.ring_capacity));
    let pipeline = Pipeline::start(
        PipelineConfig {
            ring_capacity: config.pipeline.ring_capacity,
            batch_max: config.batch_max(),
            wait: config.pipeline.wait,
            snapshot_every: config.journal.snapshot_every,
            data_dir: data_dir.clone(),
            archive: config.journal.archive,
            last_ts_ns,
            dedicated_threads: config.pipeline.threads.dedicated(),
            market_data: Some(md_channel.clone()),
            metrics: metrics.clone(),
            prefetch: config.pipeline.prefetch,
            checkpoint_every: match config.log.backend {
                LogBackend::Local => 0,
                LogBackend::Jetstream => config.log.checkpoint_every,
            },
            intakes: config
                .web
                .enabled
                .then(|| bridge.intake())
                .into_iter()
                .chain(fix_intake.clone())
                .collect(),
            web_outbound: config.web.enabled.then(|| bridge.outlet()),
        },
        engine,
        journal,
        credentials.clone(),
    )?;
    let md_thread = market_data.spawn(
        md_channel.clone(),
        pipeline.shared.clone(),
        replica,
        config.pipeline.prefetch,
        history_tap,
    )?;
    for (name, ring) in [
        ("inbound", pipeline.inbound.len_probe()),
        ("web_inbound", bridge.intake().len_probe()),
        ("web_outbound", bridge.outlet().len_probe()),
        ("outbound", pipeline.outbound.len_probe()),
        ("market_data", md_channel.chunks.len_probe()),
    ] {
        metrics.add_gauge("rialto_ring_occupancy", &format!("ring=\"{name}\""), ring);
    }
    if let Some(intake) = &fix_intake {
        let probe = intake.len_probe();
        metrics.add_gauge("rialto_ring_occupancy", "ring=\"fix_inbound\"", probe);
    }
    if let Some(store) = &history_store {
        store.follow(pipeline.shared.clone());
        let (written, shared) = (store.clone(), pipeline.shared.clone());
        let lag = move || {
            let applied = shared.applied_seq.load(Ordering::Acquire);
            applied.saturating_sub(written.written_seq.load(Ordering::Acquire))
        };
        metrics.add_gauge("rialto_history_lag_seqs", "", Box::new(lag));
        let store_too = store.clone();
        let dropped = move || store_too.dropped_batches.load(Ordering::Relaxed);
        metrics.add_gauge("rialto_history_dropped_batches", "", Box::new(dropped));
    }
    market_data.settle(&pipeline.shared, Duration::from_secs(5));
    let pipeline_shared = pipeline.shared.clone();

    let fix = if config.fix.enabled {
        let f = &config.fix;
        let sessions = f
            .sessions
            .iter()
            .enumerate()
            .map(|(number, s)| {
                let binding = fix::SessionBinding {
                    user: s.user,
                    cancel_on_disconnect: s.cancel_on_disconnect.unwrap_or(f.cancel_on_disconnect),
                    number: number as u64,
                };
                (s.comp_id.clone(), binding)
            })
            .collect();
        let fix_config = fix::FixConfig {
            listen: f.listen,
            comp_id: f.comp_id.clone(),
            sessions,
            max_connections: f.max_connections,
            max_pending_logons: f.max_pending_logons,
            max_pending_logons_per_address: f.max_pending_logons_per_address,
            logon_timeout: Duration::from_millis(f.logon_timeout_ms),
            message_log_max_bytes: f.message_log_max_bytes,
            message_log_files: f.message_log_files,
            tls: tls_config.clone(),
            max_message_bytes: f.max_message_bytes,
            max_clock_skew_ns: (f.max_clock_skew_ms as i64).saturating_mul(1_000_000),
            allow_user_defined_tags: f.allow_user_defined_tags,
            max_msgs_per_sec: f.max_msgs_per_sec,
            burst: f.burst,
            message_log: f.message_log,
            data_dir: data_dir.clone(),
            mirror: fix_mirror.clone(),
        };
        let intake = fix_intake.clone().expect("FIX is enabled");
        let gateway = fix::FixGateway::bind(
            fix_config,
            credentials.clone(),
            instruments,
            market_data.clone(),
            intake,
        )
        .with_context(|| format!("cannot listen for FIX on {}", f.listen))?;
        Some(gateway)
    } else {
        None
    };
    let web_bridge = config.web.enabled.then(|| bridge.clone());
    let bridge_handle = bridge.clone();
    if config.web.enabled {
        let bridge = bridge.clone();
        let probe = Box::new(move || bridge.dropped_messages());
        metrics.add_gauge("rialto_web_user_messages_dropped", "", probe);
    }
    let gateway = Gateway::bind(
        config.listen,
        config.admin_listen,
        GatewayConfig {
            io: config.gateway.io,
            max_sessions: config.gateway.max_sessions,
            max_admin_sessions: config.gateway.max_admin_sessions,
            max_pending_logins: config.gateway.max_pending_logins,
            max_pending_admin_logins: config.gateway.max_pending_admin_logins,
            max_pending_logins_per_address: config.gateway.max_pending_logins_per_address,
            login_timeout: Duration::from_millis(config.gateway.login_timeout_ms),
            max_msgs_per_sec: config.gateway.max_msgs_per_sec,
            burst: config.gateway.burst,
            max_output_bytes: config.gateway.max_output_bytes,
            admin_secret: admin_secret.clone(),
            tls: tls_config.clone(),
            metrics: metrics.clone(),
            mark_follower,
        },
        credentials.clone(),
        pipeline,
        fix,
        web_bridge,
    )
    .with_context(|| {
        format!(
            "cannot listen on {} and {}",
            config.listen, config.admin_listen
        )
    })?;
    let order_addr = gateway.order_addr()?;
    let admin_addr = gateway.admin_addr()?;
    let fix_addr = gateway.fix_addr().transpose()?;
    let gateway_stop = stop.clone();
    let web = if let Some(listener) = web_listener {
        let parts = web::WebParts {
            settings: config.web.clone(),
            instruments: config.instruments.clone(),
            credentials: credentials.clone(),
            admin_secret: admin_secret.clone(),
            keys: Arc::new({
                let store = web::keys::KeyStore::open(
                    data_dir,
                    credentials.clone(),
                    config.web.max_api_keys_per_user,
                )
                .context("cannot load the API key store")?;
                match key_mirror.take() {
                    Some(mirror) => store.with_mirror(mirror),
                    None => store,
                }
            }),
            bridge,
            user_messages,
            md: market_data.clone(),
            metrics: metrics.clone(),
            history: history_store.clone(),
            started_ms,
            tls: tls_config.clone(),
            max_open_orders_per_user: config.engine.max_open_orders_per_user,
        };
        Some(web::start(parts, listener, stop.clone())?)
    } else {
        None
    };
    let web_addr = web.as_ref().map(|w| w.addr);
    let udp = start_udp_feed(&config, &market_data, &stop)?;
    let replay_addr = udp.as_ref().map(|u| u.replay_addr);
    if let Some(udp) = &udp {
        let skipped = udp.skipped_batches.clone();
        let probe = Box::new(move || skipped.load(std::sync::atomic::Ordering::Relaxed));
        metrics.add_gauge("rialto_udp_feed_skipped_batches", "", probe);
    }
    let gateway_cpu = config.pipeline.gateway_cpu;
    let gateway = std::thread::Builder::new()
        .name("rialto-gateway".into())
        .spawn(move || {
            if let Some(cpu) = gateway_cpu
                && let Err(e) = affinity::pin(cpu)
            {
                tracing::warn!("the gateway thread runs unpinned: {e:#}");
            }
            gateway.run(gateway_stop)
        })?;
    tracing::info!(
        %order_addr,
        %admin_addr,
        fix_addr = ?fix_addr,
        web_addr = ?web_addr,
        tls = config.tls.enabled,
        durability = ?config.journal.durability,
        dedicated_threads = config.pipeline.threads.dedicated(),
        "serving"
    );
    Ok(RunningServer {
        order_addr,
        admin_addr,
        read_only: false,
        fix_addr,
        web_addr,
        replay_addr,
        market_data,
        credentials,
        admin_secret,
        stop,
        gateway,
        web,
        udp,
        md_thread,
        history: history_store,
        history_writer,
        pipeline_shared,
        web_bridge: bridge_handle,
        fix_mirror,
        _data_dir_lock: data_dir_lock,
    })
}

/// How a read replica answers the queries its engine can answer without a sequencer: the
/// venue's settings (`/status`, `/exchange-info`), a user's report (balances, open orders) and
/// the user list, as of the last command it applied. Everything else is refused.
fn read_only_answer(
    follower: Arc<std::sync::Mutex<replication::Follower>>,
) -> Box<web::bridge::ReadOnlyAnswer> {
    use crate::event::Event;
    use pipeline::{Op, Reply};
    Box::new(move |reply: &Reply, op: &Op| {
        let follower = follower.lock().unwrap_or_else(|e| e.into_inner());
        let engine = &follower.engine;
        let seq = engine.last_seq();
        match (reply, op) {
            (&Reply::Settings { request }, Op::VenueSettings) => {
                let mut symbols: Vec<_> = engine
                    .symbols_by_name()
                    .into_iter()
                    .filter_map(|(id, _)| Some((id, engine.symbol_status(id)?)))
                    .collect();
                symbols.sort_by_key(|(id, _)| *id);
                symbols.truncate(rialto_wire::MAX_SYMBOL_LIST_ITEMS);
                Some(Event::VenueSettings {
                    request,
                    seq,
                    order_id_window_ns: engine.order_id_window(),
                    symbols,
                })
            }
            (&Reply::Users { request }, Op::ListUsers) => {
                let mut users = engine.users();
                users.truncate(rialto_wire::MAX_USER_LIST_ITEMS);
                Some(Event::UserList { request, users })
            }
            (
                &Reply::Report { request },
                Op::Command(rialto_core::Command::UserReport { user }),
            ) => Some(match engine.user_report(*user) {
                Some(mut report) => {
                    let margins = crate::pipeline::report_margins(engine, &report);
                    report.balances.truncate(rialto_wire::MAX_REPORT_BALANCES);
                    report.orders.truncate(rialto_wire::MAX_REPORT_ORDERS);
                    report.positions.truncate(rialto_wire::MAX_REPORT_POSITIONS);
                    Event::Report {
                        request,
                        seq,
                        report,
                        margins,
                    }
                }
                None => Event::AdminResult {
                    request,
                    seq,
                    result: Err(rialto_core::Reason::UnknownUser),
                },
            }),
            _ => None,
        }
    })
}

/// The UDP feed and its replay service, when `[market_data] udp` is on.
fn start_udp_feed(
    config: &ServerConfig,
    market_data: &Arc<feed::MarketData>,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<Option<feed::udp::UdpFeed>> {
    if !config.market_data.udp {
        return Ok(None);
    }
    let md = &config.market_data;
    let feed = feed::udp::start(market_data.clone(), md, stop.clone()).with_context(|| {
        format!(
            "cannot start the UDP feed ({} / {}, replay on {})",
            md.udp_incremental, md.udp_snapshot, md.replay_listen
        )
    })?;
    Ok(Some(feed))
}

/// What [`start_replica`] starts from.
struct ReplicaParts {
    config: ServerConfig,
    connection: Arc<replication::Connection>,
    credentials: Arc<Credentials>,
    admin_secret: String,
    stop: Arc<AtomicBool>,
    started_ms: i64,
    data_dir_lock: rialto_journal::DataDirLock,
}

/// A read replica's side of the log: each batch goes to the market data thread as the journal
/// stage would hand it over, each feed epoch restarts the feed where the leader's began.
struct ReplicaFeed {
    tap: pipeline::JournalTap,
    shared: Arc<pipeline::Shared>,
    market_data: Arc<feed::MarketData>,
}

impl replication::ReplicaSink for ReplicaFeed {
    fn batch(&mut self, records: &[u8], seq: u64) {
        self.tap.send(records);
        self.tap.hand_off();
        self.shared.applied_seq.store(seq, Ordering::Release);
    }

    fn feed_epoch(&mut self, seq: u64, epoch_ns: i64) {
        self.market_data.restart_at(seq, epoch_ns);
    }
}

/// A read replica (`log.role = "replica"`): follows the log from its first message, replays
/// it into market data, and serves the WebSocket public channels, public REST and the UDP
/// feed. It opens no order, admin or FIX listener, never takes the lease and never appends;
/// the web side refuses whatever needs the sequencer (`read_only_replica`).
fn start_replica(parts: ReplicaParts) -> anyhow::Result<RunningServer> {
    let ReplicaParts {
        config,
        connection,
        credentials,
        admin_secret,
        stop,
        started_ms,
        data_dir_lock,
    } = parts;
    let web_listener = match config.web.enabled {
        true => Some(
            web::bind(config.web.listen)
                .with_context(|| format!("cannot listen for HTTP on {}", config.web.listen))?,
        ),
        false => None,
    };
    if config.history.enabled {
        tracing::warn!("[history] is not offered on a read replica: history is off");
    }
    let metrics = Arc::new(metrics::Metrics::default());
    let engine_config = config.engine_config();
    let mut replica = replication::Replica::open(connection, &config.log, engine_config)?;
    // The engine it starts from: empty, or a snapshot's (a trimmed stream). Market data
    // replays the log on its own copy, as on the leader.
    let (market_data, md_engine) = {
        let follower = replica.follower();
        let follower = follower.lock().unwrap_or_else(|e| e.into_inner());
        let engine = &follower.engine;
        let copy = rialto_core::Engine::decode_snapshot(&engine.encode_snapshot(), engine_config)
            .context("cannot copy the engine for market data")?;
        (feed::MarketData::new(engine), copy)
    };
    let md_channel = pipeline::MdChannel::new(
        config.market_data.ring_capacity,
        config.market_data.max_spill_mib << 20,
    );
    let shared = Arc::new(pipeline::Shared::default());
    shared
        .applied_seq
        .store(md_engine.last_seq(), Ordering::Release);
    let md_thread = market_data.spawn(
        md_channel.clone(),
        shared.clone(),
        md_engine,
        config.pipeline.prefetch,
        None,
    )?;
    metrics.add_gauge(
        "rialto_ring_occupancy",
        "ring=\"market_data\"",
        md_channel.chunks.len_probe(),
    );
    let mut sink = ReplicaFeed {
        tap: pipeline::JournalTap::new(md_channel.clone()),
        shared: shared.clone(),
        market_data: market_data.clone(),
    };
    // Serve the venue as it stands: the log up to its end now, and market data after it.
    let started = Instant::now();
    let last = replication::retrying("reading the log's end", || replica.last_stream_seq())?;
    while replica.stream_seq() < last {
        if stop.load(Ordering::SeqCst) {
            shared.engine_done.store(true, Ordering::SeqCst);
            let _ = md_thread.join();
            return Err(replication::StoppedAsStandby.into());
        }
        // Market data's spill at its bound: let its thread catch up before reading on.
        if sink.tap.is_full() {
            sink.tap.hand_off();
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        if !replica.step(Duration::from_millis(200), &mut sink)? {
            sink.tap.hand_off();
        }
    }
    while sink.tap.spilled() > 0 {
        sink.tap.hand_off();
        std::thread::yield_now();
    }
    market_data.settle(&shared, Duration::from_secs(30));
    tracing::info!(
        stream_seq = replica.stream_seq(),
        seq = replica.seq(),
        ms = started.elapsed().as_millis() as u64,
        "read replica: applied the log to its end"
    );
    let tls_config = match config.tls.enabled {
        true => Some(tls::server_config(&config.tls)?),
        false => None,
    };
    let (bridge, user_messages) = web::bridge::WebBridge::new(config.web.user_message_batches);
    bridge.set_read_only(read_only_answer(replica.follower()));
    let bridge_handle = bridge.clone();
    let web = if let Some(listener) = web_listener {
        let parts = web::WebParts {
            settings: config.web.clone(),
            instruments: config.instruments.clone(),
            credentials: credentials.clone(),
            admin_secret: admin_secret.clone(),
            // No issued keys: a replica would not see one revoked (docs/replication.md).
            keys: Arc::new(web::keys::KeyStore::empty(
                credentials.clone(),
                config.web.max_api_keys_per_user,
            )),
            bridge,
            user_messages,
            md: market_data.clone(),
            metrics: metrics.clone(),
            history: None,
            started_ms,
            tls: tls_config,
            max_open_orders_per_user: config.engine.max_open_orders_per_user,
        };
        Some(web::start(parts, listener, stop.clone())?)
    } else {
        None
    };
    let web_addr = web.as_ref().map(|w| w.addr);
    let udp = start_udp_feed(&config, &market_data, &stop)?;
    let replay_addr = udp.as_ref().map(|u| u.replay_addr);
    let follow_stop = stop.clone();
    let follow_shared = shared.clone();
    let follower = std::thread::Builder::new()
        .name("rialto-replica".into())
        .spawn(move || {
            let mut result = Ok(());
            while !follow_stop.load(Ordering::SeqCst) && !follow_shared.has_failed() {
                // Records waiting for room in the market data ring are handed over soon; with
                // the spill at its bound, nothing more is read until they are.
                let wait = match sink.tap.spilled() {
                    0 => Duration::from_millis(100),
                    _ => Duration::from_millis(1),
                };
                if sink.tap.is_full() {
                    sink.tap.hand_off();
                    std::thread::sleep(wait);
                    continue;
                }
                match replica.step(wait, &mut sink) {
                    Ok(_) => {
                        sink.tap.hand_off();
                    }
                    Err(e) => {
                        let message = format!("read replica: {e:#}");
                        follow_shared.fail(message.clone());
                        result = Err(message);
                        break;
                    }
                }
            }
            follow_shared.engine_done.store(true, Ordering::SeqCst);
            if result.is_ok()
                && let Some(failure) = follow_shared
                    .failure
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
            {
                result = Err(failure);
            }
            result
        })?;
    let unbound = SocketAddr::from(([0, 0, 0, 0], 0));
    tracing::info!(web_addr = ?web_addr, replay_addr = ?replay_addr, "serving as a read replica");
    Ok(RunningServer {
        order_addr: unbound,
        admin_addr: unbound,
        read_only: true,
        fix_addr: None,
        web_addr,
        replay_addr,
        market_data,
        credentials,
        admin_secret,
        stop,
        gateway: follower,
        web,
        udp,
        md_thread,
        history: None,
        history_writer: None,
        pipeline_shared: shared,
        web_bridge: bridge_handle,
        fix_mirror: None,
        _data_dir_lock: data_dir_lock,
    })
}
