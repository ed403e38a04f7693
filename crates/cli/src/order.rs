//! `rialto order`: signs and places one order over a running venue's REST API (docs/api.md),
//! and prints the answer: what became of the order, with its fills. The README's tour uses it,
//! so that the venue can be tried with the binary alone.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

#[derive(Args, Debug)]
pub struct OrderArgs {
    /// The venue's HTTP address ([web] listen)
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub web: String,
    /// The user who places the order, signing with the user id as the key
    #[arg(long, required_unless_present = "key", conflicts_with = "key")]
    pub user: Option<i64>,
    /// An issued API key (`rk…`, docs/api.md "API keys") to sign with, instead of --user; needs
    /// its --secret
    #[arg(long, requires = "secret")]
    pub key: Option<String>,
    /// The key's secret; without it, the user's is derived from --data's venue key (as
    /// `rialto secret`)
    #[arg(long)]
    pub secret: Option<String>,
    /// Data directory holding venue.key (only without --secret)
    #[arg(long, default_value = "data")]
    pub data: PathBuf,
    #[arg(long, default_value = "BTC-USD")]
    pub symbol: String,
    /// buy or sell
    #[arg(long)]
    pub side: String,
    /// The limit price as a decimal ("5000.00"); without it, a market order
    #[arg(long)]
    pub price: Option<String>,
    /// The quantity as a decimal ("0.003")
    #[arg(long)]
    pub qty: String,
    /// gtc, ioc, fok, day (the API's default without it)
    #[arg(long)]
    pub tif: Option<String>,
    /// The client's own id: a resend is refused and answered with the first order's status
    #[arg(long)]
    pub client_order_id: Option<String>,
}

/// The order's JSON body, prices and quantities as decimal strings.
pub fn body(args: &OrderArgs) -> Value {
    let mut body = json!({"symbol": args.symbol, "side": args.side, "qty": args.qty});
    match &args.price {
        Some(price) => body["price"] = json!(price),
        None => body["type"] = json!("market"),
    }
    if let Some(tif) = &args.tif {
        body["tif"] = json!(tif);
    }
    if let Some(id) = &args.client_order_id {
        body["client_order_id"] = json!(id);
    }
    body
}

/// Places the order; prints the answer, and fails on a refusal (its JSON error on stderr).
pub fn run(args: &OrderArgs) -> anyhow::Result<()> {
    let key = match (&args.key, args.user) {
        (Some(key), _) => key.clone(),
        (None, Some(user)) => user.to_string(),
        (None, None) => bail!("give --user or --key"),
    };
    let secret = match (&args.secret, args.user) {
        (Some(secret), _) => secret.clone(),
        (None, None) => bail!("--key needs its --secret"),
        (None, Some(user)) => {
            anyhow::ensure!(
                args.data.join("venue.key").exists(),
                "{} has no venue.key: give --secret, or --data of the running venue",
                args.data.display()
            );
            let credentials = rialto_server::auth::Credentials::load_or_create(&args.data)?;
            credentials.user_secret(user)
        }
    };
    let body = body(args).to_string();
    let (status, answer) =
        signed_request(&args.web, &key, &secret, "POST", "/api/v1/orders", &body)?;
    if status != 200 {
        bail!("HTTP {status}: {answer}");
    }
    println!("{answer}");
    Ok(())
}

/// A signed request (`method` and `target`, with `body`) over plain HTTP/1.1 (docs/api.md,
/// "Authentication"); the status and the body.
pub fn signed_request(
    web: &str,
    key: &str,
    secret: &str,
    method: &str,
    target: &str,
    body: &str,
) -> anyhow::Result<(u16, String)> {
    use rialto_server::web::auth::{now_ms, sign, signed_text};
    // No Rialto-Recv-Window: the server's default window (5 s) signs as an empty line.
    let ts = now_ms().to_string();
    let sig = sign(
        secret,
        &signed_text(key, &ts, "", method, target, body.as_bytes()),
    );
    let mut stream = TcpStream::connect(web).with_context(|| format!("cannot connect to {web}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(15)))?;
    let request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {web}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nRialto-Key: {key}\r\nRialto-Timestamp: {ts}\r\n\
         Rialto-Signature: {sig}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes())?;
    let mut out = Vec::new();
    stream.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .context("the answer has no header")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("the answer has no status")?;
    let body = match head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        true => dechunk(rest),
        false => rest.to_string(),
    };
    Ok((status, body))
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        text = rest[n..].trim_start_matches("\r\n");
    }
    out
}
