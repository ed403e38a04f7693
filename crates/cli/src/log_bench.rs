//! `rialto bench log --backend jetstream --nats URLS`: what the replicated command log costs
//! (docs/replication.md, docs/benchmarks.md). It commits batches of stamped orders through the
//! leader's own appender (one message per batch, fenced by `Nats-Expected-Last-Sequence`, as
//! the sequencer does), first with one append in flight, then with `--in-flight` of them (as
//! `log.appends_in_flight`), and beside it, in the same run, measures the
//! floor: a bare async-nats client publishing the same bytes to a stream of the same kind and
//! waiting for each acknowledgement, one at a time and pipelined. With `--floor-rate`, also the
//! floor of the order-to-ack target: that bare client publishing messages of the leader's mean
//! batch size (`--floor-bytes`) at the leader's append rate, timing each publish-ack (the
//! leader's rate and mean size are on its /metrics: `rialto_log_appends_total`,
//! `rialto_log_appended_bytes_total`). Its streams and buckets are its own (venue
//! `bench_<pid>`), deleted at the end.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use rialto_core::{Command, PlaceOrder, Side, SymbolId};
use rialto_server::config::{LogBackend, LogSettings};
use rialto_server::replication::{
    CommandLog, Connection, JetStreamLog, MAX_APPENDS_IN_FLIGHT, MAX_BATCH_COMMANDS,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// A NATS JetStream stream, as `rialto serve --log jetstream`
    Jetstream,
}

#[derive(Args, Debug)]
pub struct LogBenchArgs {
    /// The log to measure
    #[arg(long, value_enum, default_value = "jetstream")]
    pub backend: Backend,
    /// NATS server URLs, comma-separated (any nodes of the cluster)
    #[arg(long, value_delimiter = ',', required = true)]
    pub nats: Vec<String>,
    /// Commands to commit through the log
    #[arg(long, default_value_t = 1_000_000)]
    pub commands: u64,
    /// Commands per batch (one message), at most 5434 (a message stays under 1 MB)
    #[arg(long, default_value_t = 4096)]
    pub batch: usize,
    /// Messages each floor run publishes
    #[arg(long, default_value_t = 1_000)]
    pub messages: u64,
    /// The pipelined floor's acknowledgements awaited at most at once
    #[arg(long, default_value_t = 64)]
    pub window: usize,
    /// Appends the pipelined run of Rialto's appender keeps in flight (`log.appends_in_flight`)
    #[arg(long, default_value_t = 8)]
    pub in_flight: usize,
    /// Copies JetStream keeps of each stream (3 on a three-node cluster)
    #[arg(long, default_value_t = 3)]
    pub replicas: usize,
    /// Also run the floor at this many messages per second (open loop: each message is sent
    /// when its time comes, paced per millisecond, whatever the acknowledgements do; --messages
    /// of them), timing each publish-ack from its send: the floor of the order-to-ack target at
    /// the leader's append rate (the growth of `rialto_log_appends_total` on its /metrics)
    #[arg(long, value_name = "MSGS_PER_S")]
    pub floor_rate: Option<u64>,
    /// The paced floor's message size in bytes [default: the first batch's]: the leader's mean
    /// batch (`rialto_log_appended_bytes_total` / `rialto_log_appends_total` on its /metrics)
    #[arg(long, value_name = "N", requires = "floor_rate")]
    pub floor_bytes: Option<usize>,
    /// Run the paced floor only (not Rialto's appender nor the other floors)
    #[arg(long, requires_all = ["floor_rate", "floor_bytes"])]
    pub floor_only: bool,
}

/// The paced floor gives up when this many acknowledgements are outstanding (it fell behind).
const FLOOR_MAX_OUTSTANDING: u64 = 100_000;

/// Latencies in µs, from 1 µs to 100 s.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("valid bounds")
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}

fn line(h: &Histogram<u64>) -> String {
    format!(
        "p50 {} µs, p99 {} µs, max {} µs",
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.max()
    )
}

pub fn run(args: &LogBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=MAX_BATCH_COMMANDS).contains(&args.batch),
        "--batch must be 1 to {MAX_BATCH_COMMANDS}"
    );
    anyhow::ensure!(args.commands >= 1, "--commands must be at least 1");
    anyhow::ensure!(args.messages >= 1, "--messages must be at least 1");
    anyhow::ensure!(
        (1..=65_536).contains(&args.window),
        "--window must be 1 to 65536"
    );
    anyhow::ensure!(
        (1..=MAX_APPENDS_IN_FLIGHT).contains(&args.in_flight),
        "--in-flight must be 1 to {MAX_APPENDS_IN_FLIGHT}"
    );
    anyhow::ensure!(
        args.floor_rate.is_none_or(|r| (1..=1_000_000).contains(&r)),
        "--floor-rate must be 1 to 1000000 messages/s"
    );
    anyhow::ensure!(
        args.floor_bytes
            .is_none_or(|b| (1..=rialto_server::replication::MAX_BATCH_BYTES).contains(&b)),
        "--floor-bytes must be 1 to {}",
        rialto_server::replication::MAX_BATCH_BYTES
    );
    let settings = LogSettings {
        backend: LogBackend::Jetstream,
        nats: args.nats.clone(),
        venue: format!("bench_{}", std::process::id()),
        replicas: args.replicas,
        ..LogSettings::default()
    };
    let connection = Arc::new(Connection::open(&settings, Duration::from_secs(30))?);
    let floor_stream = format!("{}_floor", connection.names.stream);
    let floor_subject = format!("rialto.{}.floor", settings.venue);
    let outcome = measure(args, &connection, &floor_stream, &floor_subject);
    // Whatever happened, the bench's streams go.
    connection.runtime.block_on(async {
        let names = &connection.names;
        for stream in [&names.stream, &floor_stream] {
            let _ = connection.js.delete_stream(stream).await;
        }
        for bucket in [&names.bucket, &names.venue_bucket] {
            let _ = connection.js.delete_key_value(bucket).await;
        }
        let _ = connection
            .js
            .delete_object_store(&names.snapshot_bucket)
            .await;
    });
    outcome
}

fn measure(
    args: &LogBenchArgs,
    connection: &Arc<Connection>,
    floor_stream: &str,
    floor_subject: &str,
) -> anyhow::Result<()> {
    println!(
        "log bench: venue {}, jetstream at {}, {} replicas; {} commands in batches of {}",
        connection.names.venue,
        args.nats.join(","),
        args.replicas,
        args.commands,
        args.batch
    );
    // Rialto's appender: stamped orders, one batch per message; first one append in flight
    // (as `log.appends_in_flight = 1`), then `--in-flight` of them.
    let mut payload = Vec::new();
    let mut end = 0;
    let runs: &[usize] = match args.floor_only {
        true => &[],
        false => &[1, args.in_flight],
    };
    for &in_flight in runs {
        let mut writer = JetStreamLog::new(connection.clone(), end);
        writer.set_max_in_flight(in_flight);
        let mut log = CommandLog::JetStream(writer);
        let started = Instant::now();
        let batch_us = append_all(args, &mut log, &mut payload)?;
        let elapsed = started.elapsed();
        let label = match in_flight {
            1 => "rialto log:".to_owned(),
            n => format!("rialto log, {n} in flight:"),
        };
        println!(
            "{label:<26}{:>12.0} commands/s committed ({} batches of up to {} commands, the \
             first {} bytes, {in_flight} append(s) in flight); one batch, sent to committed: {}",
            args.commands as f64 / elapsed.as_secs_f64(),
            batch_us.len(),
            args.batch,
            payload.len(),
            line(&batch_us)
        );
        if let CommandLog::JetStream(writer) = &log {
            end = writer.last_stream_seq();
        }
    }
    floor(args, connection, floor_stream, floor_subject, &payload)
}

/// Commits `args.commands` stamped orders in batches of `args.batch` through `log`, keeping
/// as many appends in flight as it allows; each batch's time from sent to committed.
fn append_all(
    args: &LogBenchArgs,
    log: &mut CommandLog,
    payload: &mut Vec<u8>,
) -> anyhow::Result<Histogram<u64>> {
    let mut batch_us = histogram();
    let mut sent_at = VecDeque::with_capacity(MAX_APPENDS_IN_FLIGHT);
    let mut committed = |log: &CommandLog, sent_at: &mut VecDeque<Instant>| -> anyhow::Result<()> {
        while sent_at.len() > log.batches_in_flight() {
            let Some(sent) = sent_at.pop_front() else {
                break;
            };
            batch_us.record(micros(sent.elapsed()))?;
        }
        Ok(())
    };
    let mut seq = 0u64;
    while seq < args.commands {
        let count = (args.commands - seq).min(args.batch as u64);
        for _ in 0..count {
            seq += 1;
            let side = if seq.is_multiple_of(2) {
                Side::Buy
            } else {
                Side::Sell
            };
            let place = PlaceOrder::limit(
                (seq % 1_000) as i64 + 1,
                seq as i64,
                SymbolId(0),
                side,
                5_000 + (seq % 50) as i64,
                1 + (seq % 7) as i64,
            );
            log.append(seq, seq as i64, &Command::Place(place));
        }
        if payload.is_empty() {
            *payload = log.uncommitted().to_vec();
        }
        // As the journal stage: at the bound, wait for the oldest append's answer first.
        while log.in_flight() >= log.max_in_flight() {
            log.poll(true).context("appending a batch")?;
            committed(log, &mut sent_at)?;
        }
        sent_at.push_back(Instant::now());
        log.submit().context("appending a batch")?;
        log.poll(false).context("appending a batch")?;
        committed(log, &mut sent_at)?;
    }
    log.sync().context("appending a batch")?;
    committed(log, &mut sent_at)?;
    Ok(batch_us)
}

/// A bare client publishing the first batch's bytes to a stream of the same kind (the paced
/// floor: `--floor-bytes` if given).
fn floor(
    args: &LogBenchArgs,
    connection: &Connection,
    stream: &str,
    subject: &str,
    payload: &[u8],
) -> anyhow::Result<()> {
    use async_nats::jetstream::stream;
    let commands_per_message = args.batch.min(args.commands as usize) as f64;
    let payload = Bytes::copy_from_slice(payload);
    // The paced floor's messages: the leader's mean batch size when given.
    let paced_payload = match args.floor_bytes {
        Some(n) => Bytes::from(vec![0x5a; n]),
        None => payload.clone(),
    };
    let js = &connection.js;
    connection.runtime.block_on(async {
        js.get_or_create_stream(stream::Config {
            name: stream.to_owned(),
            subjects: vec![subject.to_owned()],
            num_replicas: args.replicas,
            storage: stream::StorageType::File,
            max_message_size: rialto_server::replication::MAX_BATCH_BYTES as i32 + 4096,
            ..Default::default()
        })
        .await
        .context("creating the floor's stream")?;
        if let Some(rate) = args.floor_rate {
            paced(js, subject, &paced_payload, rate, args.messages).await?;
        }
        if args.floor_only {
            return anyhow::Ok(());
        }

        // One at a time.
        let mut one_us = histogram();
        let started = Instant::now();
        for _ in 0..args.messages {
            let sent = Instant::now();
            js.publish(subject.to_owned(), payload.clone())
                .await?
                .await?;
            one_us.record(micros(sent.elapsed()))?;
        }
        let one_rate = args.messages as f64 / started.elapsed().as_secs_f64();
        println!(
            "floor, one by one: {:>12.0} commands/s ({one_rate:.0} messages/s of {} bytes); \
             publish to ack: {}",
            one_rate * commands_per_message,
            payload.len(),
            line(&one_us)
        );

        // Pipelined: up to `window` acknowledgements awaited at once.
        let mut pending = VecDeque::with_capacity(args.window);
        let started = Instant::now();
        for _ in 0..args.messages {
            if pending.len() == args.window
                && let Some(ack) = pending.pop_front()
            {
                let ack: async_nats::jetstream::context::PublishAckFuture = ack;
                ack.await?;
            }
            pending.push_back(js.publish(subject.to_owned(), payload.clone()).await?);
        }
        for ack in pending {
            ack.await?;
        }
        let piped_rate = args.messages as f64 / started.elapsed().as_secs_f64();
        println!(
            "floor, pipelined:  {:>12.0} commands/s ({piped_rate:.0} messages/s, {} in flight)",
            piped_rate * commands_per_message,
            args.window
        );
        anyhow::Ok(())
    })
}

/// The floor at `rate` messages/s: `messages` publishes of `payload`, each sent when its time
/// comes (not waiting for the acknowledgements before it), each timed from its send to its
/// acknowledgement.
async fn paced(
    js: &async_nats::jetstream::Context,
    subject: &str,
    payload: &Bytes,
    rate: u64,
    messages: u64,
) -> anyhow::Result<()> {
    let (acked, mut acks) = tokio::sync::mpsc::unbounded_channel::<anyhow::Result<u64>>();
    let mut ack_us = histogram();
    let record = |h: &mut Histogram<u64>, ack: anyhow::Result<u64>| -> anyhow::Result<()> {
        h.record(ack?)?;
        Ok(())
    };
    let started = tokio::time::Instant::now();
    let mut received = 0u64;
    for i in 0..messages {
        // Due at i / rate s: the timer wakes per millisecond, so messages due meanwhile go
        // together.
        let due = started + Duration::from_nanos(i.saturating_mul(1_000_000_000) / rate);
        tokio::time::sleep_until(due).await;
        let sent = Instant::now();
        let ack = js
            .publish(subject.to_owned(), payload.clone())
            .await
            .context("publishing")?;
        let acked = acked.clone();
        tokio::spawn(async move {
            let outcome = match ack.await {
                Ok(_) => Ok(micros(sent.elapsed())),
                Err(e) => Err(anyhow::anyhow!("publish-ack: {e}")),
            };
            let _ = acked.send(outcome);
        });
        while let Ok(ack) = acks.try_recv() {
            received += 1;
            record(&mut ack_us, ack)?;
        }
        anyhow::ensure!(
            i + 1 - received < FLOOR_MAX_OUTSTANDING,
            "the paced floor fell behind: {} acknowledgements outstanding",
            i + 1 - received
        );
    }
    let sending = started.elapsed();
    drop(acked);
    while let Some(ack) = acks.recv().await {
        record(&mut ack_us, ack)?;
    }
    // The rate the sends kept: `messages` sends over the time from the first to the last.
    let achieved = match messages {
        1 => rate as f64,
        n => (n - 1) as f64 / sending.as_secs_f64().max(1e-9),
    };
    println!(
        "floor, paced:      {rate} messages/s offered, {achieved:.0} achieved, {} bytes each, \
         {messages} messages; publish to ack: {}",
        payload.len(),
        line(&ack_us)
    );
    Ok(())
}
