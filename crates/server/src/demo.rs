//! The demo venue that `rialto serve --demo` creates on an empty data directory: two symbols
//! and a few funded users, journaled like any admin command (docs/operations.md).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rialto_core::{Command, Name, SymbolSpec};

use crate::auth::Credentials;
use crate::pipeline::{Op, Pipeline, Reply, Request, SYSTEM_SESSION};

/// Demo users are 1..=DEMO_USERS.
pub const DEMO_USERS: i64 = 8;
/// What each demo user is given of each currency, in minor units.
pub const DEMO_FUNDS: i64 = 1_000_000_000_000;

fn name(text: &str) -> Name {
    Name::new(text).expect("demo names are short")
}

/// Symbol specs of the demo venue: prices are in cents per lot, one lot is 1,000 base minor
/// units, a taker pays 1 cent per lot and a maker nothing.
pub fn demo_symbols() -> Vec<SymbolSpec> {
    ["BTC-USD", "ETH-USD"]
        .iter()
        .map(|symbol| SymbolSpec {
            symbol: name(symbol),
            base: name(&symbol[..3]),
            quote: name("USD"),
            base_scale: 1_000,
            quote_scale: 1,
            maker_fee: 0,
            taker_fee: 1,
        })
        .collect()
}

pub fn demo_commands() -> Vec<Command> {
    let mut commands: Vec<Command> = demo_symbols().into_iter().map(Command::AddSymbol).collect();
    for user in 1..=DEMO_USERS {
        commands.push(Command::AddUser { user });
        for (i, currency) in ["USD", "BTC", "ETH"].iter().enumerate() {
            commands.push(Command::AdjustBalance {
                user,
                currency: name(currency),
                amount: DEMO_FUNDS,
                tx: user * 10 + i as i64,
            });
        }
    }
    commands
}

/// Sends the demo commands through the pipeline and waits until they are applied.
pub fn set_up(pipeline: &mut Pipeline, timeout: Duration) -> anyhow::Result<()> {
    let commands = demo_commands();
    let target = pipeline.shared.applied_seq.load(Ordering::SeqCst) + commands.len() as u64;
    for cmd in commands {
        let mut request = Request {
            session: SYSTEM_SESSION,
            reply: Reply::Admin { request: 0 },
            op: Op::Command(cmd),
        };
        while let Err(back) = pipeline.inbound.try_push(request) {
            request = back;
            pipeline.inbound.ring_always();
            if pipeline.do_inline_work() == 0 {
                std::thread::yield_now();
            }
        }
    }
    pipeline.inbound.ring_always();
    let started = Instant::now();
    while pipeline.shared.applied_seq.load(Ordering::SeqCst) < target {
        anyhow::ensure!(
            !pipeline.shared.has_failed(),
            "the pipeline failed during the demo set-up"
        );
        anyhow::ensure!(started.elapsed() < timeout, "the demo set-up timed out");
        // Stages that share the caller's thread run here; replies to the system are dropped.
        if pipeline.do_inline_work() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    Ok(())
}

/// A line for the log: the demo users and their secrets.
pub fn describe(credentials: &Credentials) -> String {
    let users: Vec<String> = (1..=DEMO_USERS)
        .map(|u| format!("user {u} secret {}", credentials.user_secret(u)))
        .collect();
    format!(
        "symbols BTC-USD (id 0), ETH-USD (id 1); {}",
        users.join(", ")
    )
}
