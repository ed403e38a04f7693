//! Signed requests: API keys, HMAC-SHA256 signatures, increasing nonces, a time window and a
//! rate per key (docs/api.md, "Authentication").

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{ApiError, AppState, Principal};
use crate::config::WebSettings;
use crate::sockets::TokenBucket;

/// How far a request's timestamp may be from the server's clock.
pub const MAX_SKEW_MS: i64 = 30_000;

/// Nonces and rates per key. Keys are few (one per user), so plain maps under a lock.
pub struct Guard {
    /// When this run of the server began: a request signed earlier is refused, so that the
    /// nonces it forgot in the restart cannot be used to replay what was captured before it.
    started_ms: i64,
    nonces: Mutex<HashMap<String, u64>>,
    buckets: Mutex<HashMap<String, TokenBucket>>,
    rate: u64,
    burst: u64,
}

/// The four parts of a signed request's credentials.
pub struct Signed<'a> {
    pub key: &'a str,
    pub timestamp_ms: &'a str,
    pub nonce: &'a str,
    pub signature: &'a str,
}

impl<'a> Signed<'a> {
    pub fn from_headers(headers: &'a HeaderMap) -> Result<Signed<'a>, ApiError> {
        let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        match (
            get("rialto-key"),
            get("rialto-timestamp"),
            get("rialto-nonce"),
            get("rialto-signature"),
        ) {
            (Some(key), Some(timestamp_ms), Some(nonce), Some(signature)) => Ok(Signed {
                key,
                timestamp_ms,
                nonce,
                signature,
            }),
            _ => Err(unauthorized(
                "missing_credentials",
                "a private endpoint needs the Rialto-Key, Rialto-Timestamp, Rialto-Nonce and \
                 Rialto-Signature headers",
            )),
        }
    }
}

fn unauthorized(code: &'static str, message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, code, message)
}

/// The text a signature covers.
pub fn signed_text(
    timestamp_ms: &str,
    nonce: &str,
    method: &str,
    target: &str,
    body: &[u8],
) -> Vec<u8> {
    let mut text = Vec::with_capacity(64 + target.len() + body.len());
    for part in [timestamp_ms, nonce, method, target] {
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

impl Guard {
    /// A guard for a server run that began at `started_ms` (ms since the Unix epoch).
    pub fn new(settings: &WebSettings, started_ms: i64) -> Guard {
        Guard {
            started_ms,
            nonces: Mutex::new(HashMap::new()),
            buckets: Mutex::new(HashMap::new()),
            rate: settings.max_requests_per_sec,
            burst: settings.burst,
        }
    }

    /// Checks a signed request; on success the key's nonce is spent.
    pub fn verify(
        &self,
        state: &AppState,
        signed: &Signed<'_>,
        method: &str,
        target: &str,
        body: &[u8],
    ) -> Result<Principal, ApiError> {
        let (principal, secret) = if signed.key == "admin" {
            (Principal::Admin, state.admin_secret.clone())
        } else {
            match signed.key.parse::<i64>() {
                Ok(user) if user > 0 => {
                    (Principal::User(user), state.credentials.user_secret(user))
                }
                _ => return Err(unauthorized("unknown_key", "the key names no user")),
            }
        };
        let timestamp: i64 = signed
            .timestamp_ms
            .parse()
            .map_err(|_| unauthorized("stale_request", "Rialto-Timestamp is not a number of ms"))?;
        // abs_diff: a timestamp at either end of i64 must not overflow the subtraction.
        if now_ms().abs_diff(timestamp) > MAX_SKEW_MS.unsigned_abs() {
            return Err(unauthorized(
                "stale_request",
                "Rialto-Timestamp is more than 30 s from the server's clock",
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
            signed.timestamp_ms,
            signed.nonce,
            method,
            target,
            body,
        ));
        mac.verify_slice(&presented)
            .map_err(|_| unauthorized("bad_signature", "the signature does not match"))?;
        {
            let mut nonces = self.nonces.lock().unwrap_or_else(|e| e.into_inner());
            let last = nonces.entry(signed.key.to_string()).or_insert(0);
            if nonce <= *last {
                return Err(unauthorized(
                    "replayed_nonce",
                    "Rialto-Nonce must be greater than this key's previous nonce",
                ));
            }
            *last = nonce;
        }
        self.allow(signed.key)?;
        Ok(principal)
    }

    /// Takes one request from the key's rate.
    pub fn allow(&self, key: &str) -> Result<(), ApiError> {
        if self.rate == 0 {
            return Ok(());
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets
            .entry(key.to_string())
            .or_insert_with(|| TokenBucket::new(self.burst));
        if bucket.take(self.rate, self.burst) {
            Ok(())
        } else {
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many requests for this key: slow down",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_cover_every_part() {
        let text = signed_text("1", "2", "POST", "/api/v1/orders", b"{}");
        assert_eq!(text, b"1\n2\nPOST\n/api/v1/orders\n{}");
        let sig = sign("secret", &text);
        assert_eq!(sig.len(), 64);
        assert_ne!(
            sig,
            sign(
                "secret",
                &signed_text("1", "3", "POST", "/api/v1/orders", b"{}")
            )
        );
        assert_eq!(unhex(&sig).unwrap().len(), 32);
        assert!(unhex("zz").is_none());
    }
}
