//! Signed requests: API keys, HMAC-SHA256 signatures, increasing nonces, a time window, a
//! rate per user or client address, and a throttle on failed logins (docs/api.md,
//! "Authentication").
//!
//! Everything kept here is keyed by a verified principal (a user id, or the admin) or by a
//! client address ([`PeerKey`]), never by text a client chose, and is forgotten once it no
//! longer matters, so the tables hold only recently active users and addresses.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{ApiError, AppState, Principal};
use crate::admission::{LoginThrottle, PeerKey, ThrottleSettings, Throttled};
use crate::config::WebSettings;
use crate::sockets::TokenBucket;

/// How often the tables are swept for entries that no longer matter.
const PRUNE_EVERY: Duration = Duration::from_secs(1);
/// Most rate buckets kept (a full table forgets entries as [`crate::admission`] does).
const MAX_BUCKETS: usize = 65_536;

/// Who a request is charged to: its verified signer, or else the address it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Payer {
    Principal(Principal),
    Address(PeerKey),
}

/// Nonces, rates and failed logins.
pub struct Guard {
    /// When this run of the server began: a request signed earlier is refused, so that the
    /// nonces it forgot in the restart cannot be used to replay what was captured before it.
    started_ms: i64,
    /// How far a request's timestamp may be from the server's clock (`web.max_clock_skew_ms`).
    max_skew_ms: i64,
    /// How long a principal's last nonce is kept after its last accepted request: twice the
    /// skew. Every request accepted at wall time `a` had a timestamp within the skew of `a`,
    /// and a replay at time `r` needs that same timestamp within the skew of `r`: so no
    /// accepted request can be replayed later than `a + 2 * skew`, and past that its nonce
    /// proves nothing. (So a nonce of u64::MAX locks its key for a minute, not until restart.)
    nonce_memory_ms: i64,
    nonces: Mutex<Nonces>,
    buckets: Mutex<Buckets>,
    throttle: Mutex<(LoginThrottle<Principal>, Instant)>,
    rate: u64,
    burst: u64,
}

/// The last nonce of each principal, with the wall time (ms) it was accepted.
struct Nonces {
    last: HashMap<Principal, (u64, i64)>,
    pruned_ms: i64,
}

struct Buckets {
    by_payer: HashMap<Payer, (TokenBucket, Instant)>,
    pruned: Instant,
}

/// The four parts of a signed request's credentials.
pub struct Signed<'a> {
    pub key: &'a str,
    pub timestamp_ms: &'a str,
    pub nonce: &'a str,
    pub signature: &'a str,
}

/// The names of the credential headers.
pub const HEADERS: [&str; 4] = [
    "rialto-key",
    "rialto-timestamp",
    "rialto-nonce",
    "rialto-signature",
];

impl<'a> Signed<'a> {
    pub fn from_headers(headers: &'a HeaderMap) -> Result<Signed<'a>, ApiError> {
        let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        match HEADERS.map(get) {
            [Some(key), Some(timestamp_ms), Some(nonce), Some(signature)] => Ok(Signed {
                key,
                timestamp_ms,
                nonce,
                signature,
            }),
            _ => Err(missing_credentials()),
        }
    }
}

pub fn missing_credentials() -> ApiError {
    unauthorized(
        "missing_credentials",
        "a private endpoint needs the Rialto-Key, Rialto-Timestamp, Rialto-Nonce and \
         Rialto-Signature headers",
    )
}

fn unauthorized(code: &'static str, message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, code, message)
}

/// The principal a key names. A key has one spelling only: `admin`, or a user id in
/// decimal without sign or leading zeros (`1`, not `01` or `+1`), so that no captured
/// request can be replayed under another spelling of the same key.
pub fn parse_key(key: &str) -> Option<Principal> {
    if key == "admin" {
        return Some(Principal::Admin);
    }
    let canonical = (1..=19).contains(&key.len())
        && key.bytes().all(|b| b.is_ascii_digit())
        && !key.starts_with('0');
    if !canonical {
        return None;
    }
    key.parse::<i64>().ok().map(Principal::User)
}

/// The text a signature covers: key, timestamp, nonce, method, path and query, body.
pub fn signed_text(
    key: &str,
    timestamp_ms: &str,
    nonce: &str,
    method: &str,
    target: &str,
    body: &[u8],
) -> Vec<u8> {
    let mut text = Vec::with_capacity(80 + key.len() + target.len() + body.len());
    for part in [key, timestamp_ms, nonce, method, target] {
        text.extend_from_slice(part.as_bytes());
        text.push(b'\n');
    }
    text.extend_from_slice(body);
    text
}

/// hex(HMAC-SHA256(secret, text)): what a client sends (used by tests and tools).
pub fn sign(secret: &str, text: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(text);
    crate::auth::hex(&mac.finalize().into_bytes())
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

pub fn now_ms() -> i64 {
    crate::pipeline::now_ns() / 1_000_000
}

fn throttled(why: Throttled) -> ApiError {
    let message = match why {
        Throttled::Address => "too many failed logins from this address: wait and try again",
        Throttled::User => "too many failed logins for this key: wait and try again",
    };
    ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_failures", message)
}

impl Guard {
    /// A guard for a server run that began at `started_ms` (ms since the Unix epoch).
    pub fn new(settings: &WebSettings, started_ms: i64) -> Guard {
        let throttle = ThrottleSettings {
            burst: settings.login_failures_burst,
            per_sec: settings.login_failures_per_sec,
        };
        let max_skew_ms = i64::try_from(settings.max_clock_skew_ms).unwrap_or(i64::MAX / 2);
        Guard {
            started_ms,
            max_skew_ms,
            nonce_memory_ms: 2 * max_skew_ms,
            nonces: Mutex::new(Nonces {
                last: HashMap::new(),
                pruned_ms: started_ms,
            }),
            buckets: Mutex::new(Buckets {
                by_payer: HashMap::new(),
                pruned: Instant::now(),
            }),
            throttle: Mutex::new((LoginThrottle::new(throttle), Instant::now())),
            rate: settings.max_requests_per_sec,
            burst: settings.burst,
        }
    }

    /// Checks a signed request from `peer`; on success the principal's nonce is spent. A
    /// refusal counts as a failed login of `peer` (and of the key's principal, when it names
    /// one); too many of them and further attempts are refused unexamined.
    pub fn verify(
        &self,
        state: &AppState,
        signed: &Signed<'_>,
        peer: PeerKey,
        method: &str,
        target: &str,
        body: &[u8],
    ) -> Result<Principal, ApiError> {
        let principal = parse_key(signed.key);
        let now = Instant::now();
        {
            let mut throttle = self.throttle.lock().unwrap_or_else(|e| e.into_inner());
            let (throttle, pruned) = &mut *throttle;
            if now.duration_since(*pruned) >= crate::admission::PRUNE_EVERY {
                throttle.prune(now);
                *pruned = now;
            }
            throttle.check(peer, principal, now).map_err(throttled)?;
        }
        let checked = match principal {
            None => Err(unauthorized(
                "unknown_key",
                "the key names no user: a user id in decimal (no sign or leading zeros), or admin",
            )),
            Some(principal) => self.check(state, signed, principal, method, target, body),
        };
        if checked.is_err() {
            let mut throttle = self.throttle.lock().unwrap_or_else(|e| e.into_inner());
            throttle.0.failed(peer, principal, now);
        }
        checked.map(|()| principal.expect("checked"))
    }

    fn check(
        &self,
        state: &AppState,
        signed: &Signed<'_>,
        principal: Principal,
        method: &str,
        target: &str,
        body: &[u8],
    ) -> Result<(), ApiError> {
        let secret = match principal {
            Principal::Admin => state.admin_secret.clone(),
            Principal::User(user) => state.credentials.user_secret(user),
        };
        let timestamp: i64 = signed
            .timestamp_ms
            .parse()
            .map_err(|_| unauthorized("stale_request", "Rialto-Timestamp is not a number of ms"))?;
        let now = now_ms();
        // abs_diff: a timestamp at either end of i64 must not overflow the subtraction.
        if now.abs_diff(timestamp) > self.max_skew_ms.unsigned_abs() {
            return Err(unauthorized(
                "stale_request",
                "Rialto-Timestamp is too far from the server's clock (web.max_clock_skew_ms)",
            ));
        }
        if timestamp < self.started_ms {
            return Err(unauthorized(
                "stale_request",
                "Rialto-Timestamp is before the server started: sign the request again",
            ));
        }
        let nonce: u64 = signed
            .nonce
            .parse()
            .map_err(|_| unauthorized("replayed_nonce", "Rialto-Nonce is not a u64"))?;
        let presented = unhex(signed.signature)
            .ok_or_else(|| unauthorized("bad_signature", "the signature is not hex"))?;
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
        mac.update(&signed_text(
            signed.key,
            signed.timestamp_ms,
            signed.nonce,
            method,
            target,
            body,
        ));
        // Constant time: verify_slice compares without an early exit.
        mac.verify_slice(&presented)
            .map_err(|_| unauthorized("bad_signature", "the signature does not match"))?;
        let mut nonces = self.nonces.lock().unwrap_or_else(|e| e.into_inner());
        if now - nonces.pruned_ms >= PRUNE_EVERY.as_millis() as i64 {
            nonces
                .last
                .retain(|_, &mut (_, accepted_ms)| now - accepted_ms <= self.nonce_memory_ms);
            nonces.pruned_ms = now;
        }
        let last = match nonces.last.get(&principal) {
            Some(&(nonce, accepted_ms)) if now - accepted_ms <= self.nonce_memory_ms => nonce,
            _ => 0,
        };
        if nonce <= last {
            return Err(unauthorized(
                "replayed_nonce",
                "Rialto-Nonce must be greater than this key's previous nonce",
            ));
        }
        nonces.last.insert(principal, (nonce, now));
        Ok(())
    }

    /// Takes one request from the payer's rate.
    /// Charges one request to `payer`'s rate; answers the whole requests left in its burst
    /// (`u64::MAX` without a rate), or `rate_limited` with the seconds until the next.
    pub fn allow(&self, payer: Payer) -> Result<u64, ApiError> {
        if self.rate == 0 {
            return Ok(u64::MAX);
        }
        let now = Instant::now();
        // A bucket unused this long is full again: forgetting it changes nothing.
        let refilled = Duration::from_secs_f64(self.burst as f64 / self.rate as f64);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let full = buckets.by_payer.len() >= MAX_BUCKETS && !buckets.by_payer.contains_key(&payer);
        if full || now.duration_since(buckets.pruned) >= PRUNE_EVERY {
            buckets
                .by_payer
                .retain(|_, (_, used)| now.duration_since(*used) < refilled);
            buckets.pruned = now;
            if buckets.by_payer.len() >= MAX_BUCKETS
                && let Some(&any) = buckets.by_payer.keys().next()
            {
                buckets.by_payer.remove(&any);
            }
        }
        let (bucket, used) = buckets
            .by_payer
            .entry(payer)
            .or_insert_with(|| (TokenBucket::new(self.burst), now));
        *used = now;
        if bucket.take(self.rate, self.burst) {
            return Ok(bucket.left());
        }
        let retry_after_s = bucket.seconds_to_next(self.rate);
        let message = match payer {
            Payer::Principal(_) => "too many requests for this key: slow down",
            Payer::Address(_) => "too many requests from this address: slow down",
        };
        Err(
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
                .retry_after(retry_after_s),
        )
    }

    /// Requests a second a rate allows (0: no limit).
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Entries held: principals' nonces and rate buckets (for tests and metrics).
    pub fn entries(&self) -> (usize, usize) {
        let nonces = self
            .nonces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last
            .len();
        let buckets = self
            .buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_payer
            .len();
        (nonces, buckets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_cover_every_part() {
        let text = signed_text("7", "1", "2", "POST", "/api/v1/orders", b"{}");
        assert_eq!(text, b"7\n1\n2\nPOST\n/api/v1/orders\n{}");
        let sig = sign("secret", &text);
        assert_eq!(sig.len(), 64);
        assert_ne!(
            sig,
            sign(
                "secret",
                &signed_text("7", "1", "3", "POST", "/api/v1/orders", b"{}")
            )
        );
        assert_ne!(
            sig,
            sign(
                "secret",
                &signed_text("07", "1", "2", "POST", "/api/v1/orders", b"{}")
            )
        );
        assert_eq!(unhex(&sig).unwrap().len(), 32);
        assert!(unhex("zz").is_none());
    }

    #[test]
    fn a_key_has_one_spelling() {
        assert_eq!(parse_key("1"), Some(Principal::User(1)));
        assert_eq!(parse_key("42"), Some(Principal::User(42)));
        assert_eq!(parse_key("admin"), Some(Principal::Admin));
        assert_eq!(
            parse_key("9223372036854775807"),
            Some(Principal::User(i64::MAX))
        );
        for other in [
            "",
            "0",
            "01",
            "001",
            "+1",
            "-1",
            " 1",
            "1 ",
            "1.0",
            "Admin",
            "ADMIN",
            "0x1",
            "9223372036854775808",
            "99999999999999999999",
            "١",
        ] {
            assert_eq!(parse_key(other), None, "{other:?}");
        }
    }
}
