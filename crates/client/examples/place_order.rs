//! Logs in, places one limit order and prints every frame received for two seconds.
//!
//! ```text
//! cargo run -p rialto-client --example place_order -- \
//!     --addr 127.0.0.1:9100 --user 1 --secret secret --symbol-id 0 --side buy \
//!     --price 100 --qty 10 --order 1
//! ```

use std::error::Error;
use std::str::FromStr;
use std::time::{Duration, Instant};

use rialto_client::Client;
use rialto_core::{Side, SymbolId};
use rialto_wire::NewOrder;

const LISTEN_FOR: Duration = Duration::from_secs(2);

struct Args {
    addr: String,
    user: i64,
    secret: String,
    symbol: u32,
    side: Side,
    price: i64,
    qty: i64,
    order: i64,
}

fn parse_args() -> Result<Args, Box<dyn Error>> {
    let mut args = Args {
        addr: "127.0.0.1:9100".into(),
        user: 1,
        secret: "secret".into(),
        symbol: 0,
        side: Side::Buy,
        price: 100,
        qty: 1,
        order: 1,
    };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let value = words
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--addr" => args.addr = value,
            "--user" => args.user = number(&flag, &value)?,
            "--secret" => args.secret = value,
            "--symbol-id" => args.symbol = number(&flag, &value)?,
            "--side" => {
                args.side = Side::parse(&value).ok_or("--side is buy or sell")?;
            }
            "--price" => args.price = number(&flag, &value)?,
            "--qty" => args.qty = number(&flag, &value)?,
            "--order" => args.order = number(&flag, &value)?,
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    Ok(args)
}

fn number<T: FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{flag}: not a number: {value}"))
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    let mut client = Client::connect(&args.addr)?;
    client.set_read_timeout(Some(LISTEN_FOR))?;
    let last_seq = client.login(args.user, args.secret.as_bytes())?;
    println!(
        "logged in to {} as user {} (last_seq={last_seq})",
        args.addr, args.user
    );

    let order = NewOrder::limit(
        args.order,
        SymbolId(args.symbol),
        args.side,
        args.price,
        args.qty,
    );
    client.place(order)?;
    println!(
        "sent order={} symbol_id={} side={} price={} qty={}",
        args.order, args.symbol, args.side, args.price, args.qty
    );

    let deadline = Instant::now() + LISTEN_FOR;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        client.set_read_timeout(Some(left))?;
        match client.recv() {
            Ok(msg) => println!("{msg}"),
            Err(e) if e.is_timeout() => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
