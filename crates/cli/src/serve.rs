//! `rialto serve`: configuration from embedded defaults, a TOML file and flags; logging;
//! signals; then the server runs until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use clap::Args;
use rialto_server::config::{DurabilityMode, LogBackend, Role, ServerConfig, ThreadLayout};
use rialto_server::idle::WaitStrategy;

#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// TOML configuration file; anything it leaves out keeps its default
    /// (docs/operations.md lists every setting)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory: journal, snapshots, venue key [default: ./data]
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Binary order gateway address [default: 127.0.0.1:9100]
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Admin listener address [default: 127.0.0.1:9101]
    #[arg(long, value_name = "ADDR")]
    pub admin_listen: Option<SocketAddr>,
    /// FIX acceptor address [default: 127.0.0.1:9878] (`--set fix.enabled=false` turns it off)
    #[arg(long, value_name = "ADDR")]
    pub fix_listen: Option<SocketAddr>,
    /// HTTP address: REST, WebSocket, web console, /metrics [default: 127.0.0.1:8080]
    /// (`--set web.enabled=false` turns it off)
    #[arg(long, value_name = "ADDR")]
    pub web_listen: Option<SocketAddr>,
    /// Publish the binary market data feed over UDP multicast (groups and replay service
    /// as in `[market_data]`, docs/market-data.md)
    #[arg(long)]
    pub udp_feed: bool,
    /// On an empty data directory, create demo symbols and funded demo users
    #[arg(long)]
    pub demo: bool,
    /// Serve HTTPS and WSS on the web address (`[tls]`). With --demo and no tls.cert and
    /// tls.key set, a self-signed certificate for localhost and 127.0.0.1 is made in
    /// DATA/tls/ (kept for later runs)
    #[arg(long)]
    pub tls: bool,
    /// fsync: acknowledge after fsync (default); batch: after write, fsync every
    /// --batch-interval-us; none: unsafe, may lose acknowledged commands on a crash
    #[arg(long, value_name = "MODE")]
    pub durability: Option<DurabilityMode>,
    /// Longest time between fsyncs in batch mode [default: 1000]
    #[arg(long, value_name = "MICROS")]
    pub batch_interval_us: Option<u64>,
    /// Snapshot after this many journaled commands; 0 = only on the admin command
    /// [default: 1000000]
    #[arg(long, value_name = "N")]
    pub snapshot_every: Option<u64>,
    /// How pipeline threads wait: spin, spin-yield, park or backoff [default: backoff]
    #[arg(long, value_name = "STRATEGY")]
    pub wait: Option<WaitStrategy>,
    /// Whether the journal and engine stages get their own threads: auto (dedicated with 4+
    /// cores), dedicated or shared (they run on the gateway's thread) [default: auto]
    #[arg(long, value_name = "LAYOUT")]
    pub threads: Option<ThreadLayout>,
    /// How the gateway waits for sockets: spin (busy-poll), spin-yield, park or backoff
    /// [default: backoff]
    #[arg(long, value_name = "STRATEGY")]
    pub io: Option<WaitStrategy>,
    /// Frames per second a session may send before it is disconnected; 0 = no limit
    /// [default: 200000]
    #[arg(long, value_name = "N")]
    pub max_msgs_per_sec: Option<u64>,
    /// Order ids stay taken this long after their order ended (docs/rules.md), journaled at
    /// start as `set_order_id_window` when it differs from the venue's; --demo sets up 86400
    #[arg(long, value_name = "SECONDS")]
    pub order_id_window: Option<u64>,
    /// Any other setting, as in the TOML file: `--set gateway.burst=5000` (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Start even if the journal ends before the newest snapshot or before its last
    /// segment's checkpoint: acknowledged commands were lost (the log says which seqs). The
    /// venue goes on after the lost seqs and the loss is recorded in
    /// DATA/journal/accepted-losses; no journal file is moved or changed. Not needed with
    /// --durability none when only the snapshot shows the loss
    #[arg(long)]
    pub accept_journal_loss: bool,
    /// The command log: local (the journal in DATA, default) or jetstream (a replicated
    /// stream on NATS JetStream, shared by a leader and its standbys; docs/replication.md)
    #[arg(long, value_name = "BACKEND")]
    pub log: Option<LogBackend>,
    /// NATS servers for --log jetstream, comma-separated: nats://127.0.0.1:4222,...
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    pub nats: Vec<String>,
    /// With --log jetstream: auto (follow as a hot standby, lead when the lease is free),
    /// leader (lead now or refuse to start), standby (take over only from another leader) or
    /// replica (serve market data and public REST from the log; never lead, never write)
    /// [default: auto]
    #[arg(long, value_name = "ROLE")]
    pub role: Option<Role>,
    /// Durable history in DATA/history.sqlite (`[history]`, docs/api.md): on (default) or off
    #[arg(long, value_name = "on|off")]
    pub history: Option<Switch>,
    /// Print the settings these arguments give, as a TOML file, and exit without serving
    #[arg(long)]
    pub print_config: bool,
}

/// A setting turned on or off by a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// What `rialto serve --help` ends with: every setting and its default, as a TOML file.
pub fn settings_help() -> String {
    let mut text = String::from(
        "Every setting and its default, as a --config file gives them (set any with --set \
         KEY=VALUE, e.g. --set gateway.burst=5000 or --set web.enabled=false; \
         docs/operations.md describes each):\n\n",
    );
    for line in ServerConfig::default().to_toml().lines() {
        if !line.is_empty() {
            text.push_str("    ");
            text.push_str(line);
        }
        text.push('\n');
    }
    text
}

/// Builds the configuration: defaults, then the file, then `--set`, then the named flags.
pub fn config_from(args: &ServeArgs) -> anyhow::Result<ServerConfig> {
    let mut config = file_settings(args.config.as_deref(), &args.overrides)?;
    if let Some(dir) = &args.data {
        config.data_dir = dir.clone();
    }
    if let Some(addr) = args.listen {
        config.listen = addr;
    }
    if let Some(addr) = args.admin_listen {
        config.admin_listen = addr;
    }
    if let Some(addr) = args.fix_listen {
        config.fix.listen = addr;
    }
    if let Some(addr) = args.web_listen {
        config.web.listen = addr;
    }
    config.market_data.udp |= args.udp_feed;
    config.demo |= args.demo;
    if let Some(secs) = args.order_id_window {
        config.engine.order_id_window_s = Some(secs);
    }
    config.journal.accept_loss |= args.accept_journal_loss;
    if let Some(backend) = args.log {
        config.log.backend = backend;
    }
    if !args.nats.is_empty() {
        config.log.nats = args.nats.clone();
    }
    if let Some(role) = args.role {
        config.log.role = role;
    }
    config.tls.enabled |= args.tls;
    let unconfigured =
        config.tls.cert.as_os_str().is_empty() && config.tls.key.as_os_str().is_empty();
    if config.tls.enabled && unconfigured && config.demo {
        config.tls = rialto_server::tls::self_signed(&config.data_dir.join("tls"))?;
        // The certificate's path only (clients trust it); the key stays where it is.
        tracing::info!(cert = %config.tls.cert.display(), "TLS with a self-signed certificate");
    }
    if let Some(switch) = args.history {
        config.history.enabled = switch == Switch::On;
    }
    if let Some(mode) = args.durability {
        config.journal.durability = mode;
    }
    if let Some(us) = args.batch_interval_us {
        config.journal.batch_interval_us = us;
    }
    if let Some(n) = args.snapshot_every {
        config.journal.snapshot_every = n;
    }
    if let Some(wait) = args.wait {
        config.pipeline.wait = wait;
    }
    if let Some(threads) = args.threads {
        config.pipeline.threads = threads;
    }
    if let Some(io) = args.io {
        config.gateway.io = io;
    }
    if let Some(n) = args.max_msgs_per_sec {
        config.gateway.max_msgs_per_sec = n;
    }
    config.validate()?;
    Ok(config)
}

/// The settings a configuration file (`--config`) and `--set` items give over the defaults,
/// as `rialto serve` reads them before its named flags (not validated yet). The tools that
/// replay a venue's log take the venue's settings this way.
pub fn file_settings(
    config: Option<&std::path::Path>,
    overrides: &[String],
) -> anyhow::Result<ServerConfig> {
    let mut table = match config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config {}", path.display()))?;
            text.parse::<toml::Table>()
                .with_context(|| format!("config {}", path.display()))?
        }
        None => toml::Table::new(),
    };
    for item in overrides {
        apply_override(&mut table, item).with_context(|| format!("--set {item}"))?;
    }
    let mut config: ServerConfig = toml::Value::Table(table)
        .try_into()
        .context("invalid configuration")?;
    // An `[instruments]` table adds to the demo symbols' entries rather than dropping them.
    for (symbol, decimals) in ServerConfig::default().instruments {
        config.instruments.entry(symbol).or_insert(decimals);
    }
    Ok(config)
}

/// `a.b.c=value`: value is read as TOML (a number, bool, quoted string...), or as a bare
/// string when it is not valid TOML.
fn apply_override(table: &mut toml::Table, item: &str) -> anyhow::Result<()> {
    let (key, value) = item
        .split_once('=')
        .context("expected KEY=VALUE, e.g. gateway.burst=5000")?;
    let value: toml::Value = match format!("v = {value}").parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").context("a value")?,
        Err(_) => toml::Value::String(value.to_string()),
    };
    let mut parts: Vec<&str> = key.trim().split('.').collect();
    let last = parts
        .pop()
        .filter(|k| !k.is_empty())
        .context("an empty key")?;
    let mut at = table;
    for part in parts {
        at = at
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .with_context(|| format!("`{part}` is not a section"))?;
    }
    at.insert(last.to_string(), value);
    Ok(())
}

/// Runs until SIGINT or SIGTERM, then shuts down cleanly.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let config = config_from(args)?;
    if args.print_config {
        print!("{}", config.to_toml());
        return Ok(());
    }
    let tls_cert = config
        .tls
        .enabled
        .then(|| config.tls.cert.display().to_string());
    let groups = (
        config.market_data.udp_incremental,
        config.market_data.udp_snapshot,
    );
    // Handlers first: a signal during recovery stops the server as soon as it is up.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())
            .context("cannot install a signal handler")?;
    }
    let server = match rialto_server::start_with_stop(config, stop) {
        Ok(server) => server,
        Err(e) if e.is::<rialto_server::replication::StoppedAsStandby>() => {
            tracing::info!("{e}");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let fix = match server.fix_addr {
        Some(addr) => format!(", FIX on {addr}"),
        None => String::new(),
    };
    let web = match (server.web_addr, tls_cert) {
        (Some(addr), None) => format!(", web on http://{addr}/"),
        (Some(addr), Some(cert)) => format!(", web on https://{addr}/ (certificate {cert})"),
        (None, _) => String::new(),
    };
    let udp = match server.replay_addr {
        Some(replay) => format!(
            ", market data on udp://{} and udp://{} (replay on {replay})",
            groups.0, groups.1
        ),
        None => String::new(),
    };
    if server.read_only {
        println!(
            "rialto serving as a read replica (market data only; no order, admin or FIX \
             listener){web}{udp} (stop with Ctrl-C)"
        );
    } else {
        println!(
            "rialto serving: orders on {}, admin on {}{fix}{web}{udp} (stop with Ctrl-C)",
            server.order_addr, server.admin_addr
        );
    }
    server.wait()?;
    tracing::info!("stopped cleanly");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_and_set_overrides_anything() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rialto.toml");
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:7000\"\n[journal]\ndurability = \"none\"\n",
        )
        .unwrap();
        let args = ServeArgs {
            config: Some(file),
            durability: Some(DurabilityMode::Batch),
            overrides: vec!["gateway.burst=77".into(), "data_dir=/tmp/x".into()],
            ..ServeArgs::default()
        };
        let config = config_from(&args).unwrap();
        assert_eq!(config.listen.port(), 7000);
        assert_eq!(config.journal.durability, DurabilityMode::Batch);
        assert_eq!(config.gateway.burst, 77);
        assert_eq!(config.data_dir, PathBuf::from("/tmp/x"));
        let bad = ServeArgs {
            overrides: vec!["gateway.nonsense=1".into()],
            ..ServeArgs::default()
        };
        assert!(config_from(&bad).is_err());
    }

    /// The settings a config file gives, as `--print-config` writes them.
    fn printed(args: &ServeArgs) -> String {
        config_from(args).unwrap().to_toml()
    }

    #[test]
    fn printed_settings_read_back_as_the_same_settings() {
        let dir = tempfile::tempdir().unwrap();
        let args = ServeArgs {
            durability: Some(DurabilityMode::Batch),
            udp_feed: true,
            overrides: vec![
                "gateway.burst=77".into(),
                "fix.sessions=[{comp_id=\"DESK\", user=9, cancel_on_disconnect=true}]".into(),
                "instruments.X-Y={price_tick=\"0.5\", qty_lot=\"2\"}".into(),
            ],
            ..ServeArgs::default()
        };
        let text = printed(&args);
        assert!(text.contains("burst = 77"), "{text}");
        let config = config_from(&args).unwrap();
        let listed: Vec<&str> = config.instruments.keys().map(String::as_str).collect();
        assert_eq!(
            listed,
            ["BTC-PERP", "BTC-USD", "ETH-USD", "X-Y"],
            "added to the demo's"
        );
        let file = dir.path().join("printed.toml");
        std::fs::write(&file, &text).unwrap();
        let again = ServeArgs {
            config: Some(file),
            ..ServeArgs::default()
        };
        assert_eq!(printed(&again), text);
    }

    #[test]
    fn the_long_help_lists_every_setting_with_its_default() {
        let help = settings_help();
        let (_, listed) = help.split_once("\n\n").unwrap();
        let listed: String = listed
            .lines()
            .map(|l| l.strip_prefix("    ").unwrap_or(l).to_string() + "\n")
            .collect();
        let defaults = ServerConfig::default().to_toml();
        assert_eq!(listed, defaults);
        // Every field is there: the listing alone, read as a file, sets every one of them.
        let table: toml::Table = listed.parse().unwrap();
        let sections = [
            "journal",
            "log",
            "pipeline",
            "gateway",
            "engine",
            "fix",
            "web",
            "market_data",
        ];
        for section in sections {
            assert!(
                table[section].as_table().is_some_and(|t| t.len() >= 4),
                "{section}"
            );
        }
        let read: ServerConfig = toml::Value::Table(table).try_into().unwrap();
        assert_eq!(read.to_toml(), defaults);
    }
}
