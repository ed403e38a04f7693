//! Signed requests: API keys, HMAC-SHA256 signatures, a timestamp with a receive window,
//! replays refused within it, a rate per key or client address, and a throttle on failed
//! logins (docs/api.md, "Authentication").
//!
//! Everything kept here is keyed by a verified key ([`KeyRef`]) or by a client address
//! ([`PeerKey`]), never by text a client chose, and is forgotten once it no longer matters,
//! so the tables hold only recently active keys and addresses.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use rialto_core::UserId;
use sha2::Sha256;

use super::keys::{KEY_ID_LEN, KeyStore, Perms};
use super::{ApiError, AppState, Principal};
use crate::admission::{LoginThrottle, PeerKey, ThrottleSettings, Throttled};
use crate::config::WebSettings;
use crate::sockets::TokenBucket;

/// How often the tables are swept for entries that no longer matter.
const PRUNE_EVERY: Duration = Duration::from_secs(1);
/// Most rate buckets kept (a full table forgets entries as [`crate::admission`] does).
const MAX_BUCKETS: usize = 65_536;
/// The receive window of a request that names none, and the largest one may name (ms).
pub const DEFAULT_RECV_WINDOW_MS: i64 = 5_000;
pub const MAX_RECV_WINDOW_MS: i64 = 60_000;
/// Bytes of a signature remembered to refuse its replay (a collision of 128 bits is not
/// going to happen by chance, and a forger would need the secret anyway).
const REMEMBERED_BYTES: usize = 16;

/// A verified key: the admin's, a user's default key (the user id), or an issued key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyRef {
    Admin,
    User(UserId),
    Issued([u8; KEY_ID_LEN]),
}

impl KeyRef {
    /// The issued key's id, for an issued key.
    pub fn issued_id(&self) -> Option<&str> {
        match self {
            KeyRef::Issued(id) => std::str::from_utf8(id).ok(),
            _ => None,
        }
    }
}

/// Who signed a request, with which key, allowed to do what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub principal: Principal,
    pub key: KeyRef,
    pub perms: Perms,
}

impl Access {
    /// Refuses `permission_denied` unless the key may trade.
    pub fn need_trade(&self) -> Result<(), ApiError> {
        if self.perms.trade {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_denied",
            "this API key may not trade (it lacks the trade permission)",
        ))
    }
}

/// Who a request is charged to: the key it was correctly signed with, or else the address
/// it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Payer {
    Key(KeyRef),
    Address(PeerKey),
}

/// Accepted signatures, rates and failed logins.
pub struct Guard {
    /// When this run of the server began: a request signed earlier is refused, so that the
    /// signatures it forgot in the restart cannot be replayed after it.
    started_ms: i64,
    /// How far ahead of the server's clock a timestamp may be (`web.max_clock_skew_ms`).
    max_ahead_ms: i64,
    /// Signatures remembered per key (`web.max_signatures_per_key`): a key that sends more
    /// distinct requests within their windows is refused 429 until the oldest expire.
    max_remembered: usize,
    seen: Mutex<Seen>,
    buckets: Mutex<Buckets>,
    throttle: Mutex<(LoginThrottle<Principal>, Instant)>,
    rate: u64,
    burst: u64,
}

/// Each key's accepted signatures, each until the end of its receive window (wall ms).
struct Seen {
    by_key: HashMap<KeyRef, KeySeen>,
    pruned_ms: i64,
}

#[derive(Default)]
struct KeySeen {
    until_ms: HashMap<[u8; REMEMBERED_BYTES], i64>,
    /// The soonest and latest of the entries' ends.
    soonest_ms: i64,
    latest_ms: i64,
}

struct Buckets {
    by_payer: HashMap<Payer, (TokenBucket, Instant)>,
    pruned: Instant,
}

/// The parts of a signed request's credentials.
pub struct Signed<'a> {
    pub key: &'a str,
    pub timestamp_ms: &'a str,
    /// As sent, when sent.
    pub recv_window_ms: Option<&'a str>,
    pub signature: &'a str,
}

/// The names of the credential headers (any of them makes a request a signed one).
pub const HEADERS: [&str; 5] = [
    "rialto-key",
    "rialto-timestamp",
    "rialto-recv-window",
    "rialto-signature",
    "rialto-nonce",
];

impl<'a> Signed<'a> {
    pub fn from_headers(headers: &'a HeaderMap) -> Result<Signed<'a>, ApiError> {
        let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if headers.contains_key("rialto-nonce") {
            return Err(unauthorized(
                "bad_signature",
                "Rialto-Nonce is no longer used: sign key, timestamp, receive window, method, \
                 target and body (docs/api.md, Authentication)",
            ));
        }
        match (
            get("rialto-key"),
            get("rialto-timestamp"),
            get("rialto-signature"),
        ) {
            (Some(key), Some(timestamp_ms), Some(signature)) => Ok(Signed {
                key,
                timestamp_ms,
                recv_window_ms: headers
                    .get("rialto-recv-window")
                    .map(|v| v.to_str().unwrap_or("")),
                signature,
            }),
            _ => Err(missing_credentials()),
        }
    }
}

pub fn missing_credentials() -> ApiError {
    unauthorized(
        "missing_credentials",
        "a private endpoint needs the Rialto-Key, Rialto-Timestamp and Rialto-Signature headers",
    )
}

fn unauthorized(code: &'static str, message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, code, message)
}

/// The principal a default key names. Such a key has one spelling only: `admin`, or a user
/// id in decimal without sign or leading zeros (`1`, not `01` or `+1`).
pub fn parse_key(key: &str) -> Option<Principal> {
    if key == "admin" {
        return Some(Principal::Admin);
    }
    canonical_number(key, 19)
        .and_then(|_| key.parse::<i64>().ok())
        .map(Principal::User)
}

/// `text` when it is a decimal number of at most `max_digits` without sign or leading zeros.
fn canonical_number(text: &str, max_digits: usize) -> Option<&str> {
    let canonical = (1..=max_digits).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_digit())
        && !text.starts_with('0');
    canonical.then_some(text)
}

/// The text a signature covers: key, timestamp, receive window (as sent, or empty when the
/// header is absent), method, path and query, body; each but the body followed by `\n`.
pub fn signed_text(
    key: &str,
    timestamp_ms: &str,
    recv_window_ms: &str,
    method: &str,
    target: &str,
    body: &[u8],
) -> Vec<u8> {
    let mut text = Vec::with_capacity(80 + key.len() + target.len() + body.len());
    for part in [key, timestamp_ms, recv_window_ms, method, target] {
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

/// The bytes of a hex text (either case); `None` for anything else.
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
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

/// A refused request: why, and the key it was correctly signed with (then it is charged to
/// that key's rate and is not a failed login: its signer knows the secret).
pub struct Refusal {
    pub error: Box<ApiError>,
    pub signed_by: Option<KeyRef>,
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Refusal {
        Refusal {
            error: Box::new(error),
            signed_by: None,
        }
    }
}

/// A key found by its text: who, which, allowed what, from where, and its secret.
struct Found {
    access: Access,
    allow: Vec<super::keys::Cidr>,
    secret: String,
}

fn find(state: &AppState, key: &str) -> Option<Found> {
    let (principal, key_ref, perms, allow, secret) = match parse_key(key) {
        Some(Principal::Admin) => (
            Principal::Admin,
            KeyRef::Admin,
            Perms::ALL,
            Vec::new(),
            state.admin_secret.clone(),
        ),
        Some(Principal::User(user)) => (
            Principal::User(user),
            KeyRef::User(user),
            Perms::ALL,
            Vec::new(),
            state.credentials.user_secret(user),
        ),
        None if KeyStore::is_key_id(key) => {
            let resolved = state.keys.resolve(key)?;
            let id: [u8; KEY_ID_LEN] = key.as_bytes().try_into().ok()?;
            (
                Principal::User(resolved.user),
                KeyRef::Issued(id),
                resolved.perms,
                resolved.allow,
                resolved.secret,
            )
        }
        None => return None,
    };
    let access = Access {
        principal,
        key: key_ref,
        perms,
    };
    Some(Found {
        access,
        allow,
        secret,
    })
}

impl Guard {
    /// A guard for a server run that began at `started_ms` (ms since the Unix epoch).
    pub fn new(settings: &WebSettings, started_ms: i64) -> Guard {
        let throttle = ThrottleSettings {
            burst: settings.login_failures_burst,
            per_sec: settings.login_failures_per_sec,
        };
        Guard {
            started_ms,
            max_ahead_ms: i64::try_from(settings.max_clock_skew_ms).unwrap_or(i64::MAX / 2),
            max_remembered: settings.max_signatures_per_key,
            seen: Mutex::new(Seen {
                by_key: HashMap::new(),
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

    /// Checks a signed request from `peer`; on success its signature is remembered until its
    /// window ends. A request refused for its key or signature counts as a failed login of
    /// `peer` (and of the key's principal, when it names one); too many of them and further
    /// attempts are refused unexamined. A correctly signed request refused for its time,
    /// address or as a replay is not a failed login.
    pub fn verify(
        &self,
        state: &AppState,
        signed: &Signed<'_>,
        peer: IpAddr,
        method: &str,
        target: &str,
        body: &[u8],
    ) -> Result<Access, Refusal> {
        let peer_key = PeerKey::of(peer);
        let found = find(state, signed.key);
        let principal = found.as_ref().map(|f| f.access.principal);
        let now = Instant::now();
        {
            let mut throttle = self.throttle.lock().unwrap_or_else(|e| e.into_inner());
            let (throttle, pruned) = &mut *throttle;
            if now.duration_since(*pruned) >= crate::admission::PRUNE_EVERY {
                throttle.prune(now);
                *pruned = now;
            }
            throttle
                .check(peer_key, principal, now)
                .map_err(throttled)?;
        }
        let authentic = match &found {
            None => Err(unauthorized(
                "unknown_key",
                "no such key: a user id in decimal (no sign or leading zeros), admin, or an \
                 issued key that exists (not revoked)",
            )),
            Some(found) => check_signature(&found.secret, signed, method, target, body),
        };
        if let Err(error) = authentic {
            let mut throttle = self.throttle.lock().unwrap_or_else(|e| e.into_inner());
            throttle.0.failed(peer_key, principal, now);
            return Err(error.into());
        }
        let found = found.expect("authentic");
        let refused = |error| Refusal {
            error: Box::new(error),
            signed_by: Some(found.access.key),
        };
        if !found.allow.is_empty() && !found.allow.iter().any(|net| net.contains(peer)) {
            return Err(refused(ApiError::new(
                StatusCode::FORBIDDEN,
                "ip_not_allowed",
                "this API key may not be used from this address (its allow_ips)",
            )));
        }
        self.check_time_and_replay(signed, found.access.key)
            .map_err(refused)?;
        Ok(found.access)
    }

    fn check_time_and_replay(&self, signed: &Signed<'_>, key: KeyRef) -> Result<(), ApiError> {
        let stale = |message: &str| unauthorized("stale_request", message);
        let timestamp: i64 = canonical_number(signed.timestamp_ms, 18)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| stale("Rialto-Timestamp is not a number of ms"))?;
        let window = match signed.recv_window_ms {
            None => DEFAULT_RECV_WINDOW_MS,
            Some(text) => canonical_number(text, 5)
                .and_then(|w| w.parse().ok())
                .filter(|w| (1..=MAX_RECV_WINDOW_MS).contains(w))
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "bad_recv_window",
                        "Rialto-Recv-Window is a number of ms from 1 to 60000",
                    )
                })?,
        };
        let now = now_ms();
        if timestamp > now + self.max_ahead_ms {
            return Err(stale(
                "Rialto-Timestamp is ahead of the server's clock (by more than \
                 web.max_clock_skew_ms)",
            ));
        }
        let until_ms = timestamp + window;
        if until_ms < now {
            return Err(stale(
                "Rialto-Timestamp is older than the request's receive window",
            ));
        }
        if timestamp < self.started_ms {
            return Err(stale(
                "Rialto-Timestamp is before the server started: sign the request again",
            ));
        }
        let presented = unhex(signed.signature).expect("checked");
        let remembered: [u8; REMEMBERED_BYTES] =
            presented[..REMEMBERED_BYTES].try_into().expect("32 bytes");
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if now - seen.pruned_ms >= PRUNE_EVERY.as_millis() as i64 {
            seen.by_key.retain(|_, k| k.latest_ms >= now);
            seen.pruned_ms = now;
        }
        let mine = seen.by_key.entry(key).or_default();
        if mine.until_ms.len() >= self.max_remembered && mine.soonest_ms < now {
            mine.until_ms.retain(|_, until| *until >= now);
            mine.soonest_ms = mine.until_ms.values().copied().min().unwrap_or(i64::MAX);
        }
        if mine.until_ms.contains_key(&remembered) {
            return Err(unauthorized(
                "replayed_request",
                "this signed request was already accepted (sign each request afresh: a \
                 new timestamp)",
            ));
        }
        if mine.until_ms.len() >= self.max_remembered {
            let wait_ms = (mine.soonest_ms - now).max(1);
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many distinct requests for this key within their receive windows \
                 (web.max_signatures_per_key): slow down or use shorter windows",
            )
            .retry_after((wait_ms as u64).div_ceil(1000)));
        }
        if mine.until_ms.is_empty() {
            mine.soonest_ms = until_ms;
            mine.latest_ms = until_ms;
        }
        mine.soonest_ms = mine.soonest_ms.min(until_ms);
        mine.latest_ms = mine.latest_ms.max(until_ms);
        mine.until_ms.insert(remembered, until_ms);
        Ok(())
    }

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
            Payer::Key(_) => "too many requests for this key: slow down",
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

    /// Entries held: remembered signatures (of every key) and rate buckets (for tests and
    /// metrics).
    pub fn entries(&self) -> (usize, usize) {
        let signatures = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_key
            .values()
            .map(|k| k.until_ms.len())
            .sum();
        let buckets = self
            .buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_payer
            .len();
        (signatures, buckets)
    }
}

/// Checks the signature (in constant time) against the key's secret.
fn check_signature(
    secret: &str,
    signed: &Signed<'_>,
    method: &str,
    target: &str,
    body: &[u8],
) -> Result<(), ApiError> {
    let presented = unhex(signed.signature)
        .filter(|bytes| bytes.len() == 32)
        .ok_or_else(|| unauthorized("bad_signature", "the signature is not 64 hex digits"))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(&signed_text(
        signed.key,
        signed.timestamp_ms,
        signed.recv_window_ms.unwrap_or(""),
        method,
        target,
        body,
    ));
    mac.verify_slice(&presented)
        .map_err(|_| unauthorized("bad_signature", "the signature does not match"))
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
