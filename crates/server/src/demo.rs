//! The demo venue that `rialto serve --demo` creates on an empty data directory: two spot
//! symbols, a future whose mark follows its book, an insurance fund and a few funded users,
//! journaled like any admin command (docs/operations.md).

use rialto_core::{Command, Name, SymbolKind, SymbolSpec};

use crate::auth::Credentials;

/// Demo users are 1..=DEMO_USERS.
pub const DEMO_USERS: i64 = 8;
/// The demo venue's order-id window: a day (issue 30's "a new user sees it at work").
pub const DEMO_ORDER_ID_WINDOW_NS: i64 = 86_400 * 1_000_000_000;
/// The demo symbols' price band: 10% either side of the reference price (the last trade, or an
/// operator's `set_ref_price`), so a fat-fingered price is refused `price_out_of_band`.
pub const DEMO_BAND_BPS: i64 = 1_000;
/// What each demo user is given of each currency, in minor units.
pub const DEMO_FUNDS: i64 = 1_000_000_000_000;
/// One more demo user with little money: only 10 USD (1,000,000 minor units: USD has 5
/// decimals on the demo venue) and nothing else, so that a position of a few lots of the
/// future can be liquidated by a mark move of a few per cent (docs/operations.md, "The demo
/// venue").
pub const DEMO_MARGIN_USER: i64 = DEMO_USERS + 1;
pub const DEMO_MARGIN_FUNDS: i64 = 1_000_000;
/// The demo's future (a perpetual on BTC quoted in USD, with the spot symbols' ticks and lots):
/// the gateway sets its mark to its last trade price (`gateway::MARK_INTERVAL`).
pub const DEMO_FUTURE: &str = "BTC-PERP";
/// Its mark before the first trade, and its margins per lot: 10% initial, 5% maintenance of
/// that mark.
pub const DEMO_FUTURE_MARK: i64 = 500_000;
pub const DEMO_FUTURE_INITIAL_MARGIN: i64 = 50_000;
pub const DEMO_FUTURE_MAINTENANCE_MARGIN: i64 = 25_000;
/// The USD insurance fund the demo starts with, in minor units (10,000 USD).
pub const DEMO_INSURANCE: i64 = 1_000_000_000;

fn name(text: &str) -> Name {
    Name::new(text).expect("demo names are short")
}

/// Symbol specs of the demo venue: a lot is 1,000 base minor units (0.001 BTC or ETH), a price
/// tick is 0.01 USD per coin, so one tick on one lot is one minor unit of USD (0.00001 USD:
/// USD has 5 decimals here); a taker pays one minor unit per lot and a maker nothing.
pub fn demo_symbols() -> Vec<SymbolSpec> {
    let future = SymbolKind::Future {
        initial_margin: DEMO_FUTURE_INITIAL_MARGIN,
        maintenance_margin: DEMO_FUTURE_MAINTENANCE_MARGIN,
        mark_price: DEMO_FUTURE_MARK,
    };
    [
        ("BTC-USD", SymbolKind::Spot),
        ("ETH-USD", SymbolKind::Spot),
        (DEMO_FUTURE, future),
    ]
    .iter()
    .map(|&(symbol, kind)| SymbolSpec {
        symbol: name(symbol),
        base: name(&symbol[..3]),
        quote: name("USD"),
        base_scale: 1_000,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 1,
        band_bps: DEMO_BAND_BPS,
        day_end: 0,
        kind: Some(kind),
    })
    .collect()
}

/// A new user given [`DEMO_FUNDS`] of each demo currency, as the demo's users are (transfer
/// ids `user × 10 + i`). The simulator funds its FIX and web traders' users with it too.
pub fn funded_user(user: i64) -> Vec<Command> {
    let mut commands = vec![Command::AddUser { user }];
    for (i, currency) in ["USD", "BTC", "ETH"].iter().enumerate() {
        commands.push(Command::AdjustBalance {
            user,
            currency: name(currency),
            amount: DEMO_FUNDS,
            tx: user * 10 + i as i64,
        });
    }
    commands
}

pub fn demo_commands() -> Vec<Command> {
    let mut commands: Vec<Command> = demo_symbols()
        .into_iter()
        .map(|spec| Command::AddSymbol(Box::new(spec)))
        .collect();
    for user in 1..=DEMO_USERS {
        commands.extend(funded_user(user));
    }
    commands.push(Command::AddUser {
        user: DEMO_MARGIN_USER,
    });
    commands.push(Command::AdjustBalance {
        user: DEMO_MARGIN_USER,
        currency: name("USD"),
        amount: DEMO_MARGIN_FUNDS,
        tx: DEMO_MARGIN_USER * 10,
    });
    commands.push(Command::FundInsurance {
        currency: name("USD"),
        amount: DEMO_INSURANCE,
        tx: 1_000,
    });
    commands.push(Command::SetOrderIdWindow {
        window: DEMO_ORDER_ID_WINDOW_NS,
    });
    commands
}

/// Where the demo users' secrets are written (owner-only), since secrets never go to a log.
pub const SECRETS_FILE: &str = "demo-secrets.txt";

/// Writes the demo users' secrets to `data_dir/demo-secrets.txt` (mode 0600) and returns a
/// line for the log that says where they are, without them.
pub fn write_secrets(
    credentials: &Credentials,
    data_dir: &std::path::Path,
) -> anyhow::Result<String> {
    use std::io::Write;
    let path = data_dir.join(SECRETS_FILE);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    for user in 1..=DEMO_MARGIN_USER {
        writeln!(file, "user {user} secret {}", credentials.user_secret(user))?;
    }
    Ok(format!(
        "symbols BTC-USD (id 0), ETH-USD (id 1), the future {DEMO_FUTURE} (id 2); users \
         1-{DEMO_USERS}, and {DEMO_MARGIN_USER} with $10,000 only, their secrets in {} \
         (or `rialto secret --user N`)",
        path.display()
    ))
}
