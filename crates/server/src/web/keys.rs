//! Issued API keys (docs/api.md, "API keys"): several per user, each with permissions, an
//! optional IP allow-list and a label, kept in `<data_dir>/api-keys.json`.
//!
//! A key's secret is derived from the venue key, the key id and a random salt of its own
//! ([`Credentials::api_key_secret`]); the store keeps the salt and the secret's SHA-256, never
//! the secret, so whoever reads the file cannot sign. Revoking a key removes its entry (its
//! salt goes with it): that key alone stops working. The file is replaced atomically (a
//! temporary file, fsync, rename, fsync of the directory) with owner-only permissions.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use rialto_core::UserId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::auth::{Credentials, constant_time_eq, hex};

/// The store's file in the data directory.
pub const FILE_NAME: &str = "api-keys.json";
/// Characters of a key id: `rk` and 18 letters or digits.
pub const KEY_ID_LEN: usize = 20;
/// The most allow-list entries a key may carry.
pub const MAX_ALLOW_IPS: usize = 16;
/// The longest label, in characters.
pub const MAX_LABEL_CHARS: usize = 64;
/// The most keys the store holds in all (besides the per-user limit).
pub const MAX_KEYS: usize = 65_536;

const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// What a key may do. Every key may read (balances, orders, fills, its user's stream).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Perms {
    /// Place, cancel, amend, move, reduce, mass-cancel.
    pub trade: bool,
    /// Move funds out. No user endpoint does that today (withdrawals are the admin's), so
    /// this is recorded and listed but grants nothing yet.
    pub withdraw: bool,
}

impl Perms {
    pub const ALL: Perms = Perms {
        trade: true,
        withdraw: true,
    };

    /// From names: `read` (implied, may be given), `trade`, `withdraw`.
    pub fn parse(names: &[String]) -> Result<Perms, String> {
        let mut perms = Perms::default();
        for name in names {
            match name.as_str() {
                "read" => {}
                "trade" => perms.trade = true,
                "withdraw" => perms.withdraw = true,
                other => {
                    return Err(format!(
                        "unknown permission {other:?} (read, trade or withdraw)"
                    ));
                }
            }
        }
        Ok(perms)
    }

    pub fn names(self) -> Vec<&'static str> {
        let mut names = vec!["read"];
        if self.trade {
            names.push("trade");
        }
        if self.withdraw {
            names.push("withdraw");
        }
        names
    }
}

/// An allow-list entry: an address, or a network in CIDR notation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let bad = || format!("{text:?} is not an IP address or CIDR network (10.0.0.0/8)");
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let net: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.len() <= 3 => {
                p.parse::<u8>().map_err(|_| bad())?
            }
            Some(_) => return Err(bad()),
        };
        if prefix > max {
            return Err(bad());
        }
        Ok(Cidr { net, prefix })
    }

    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = addr.to_canonical();
        match (self.net, addr) {
            (IpAddr::V4(net), IpAddr::V4(addr)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(addr) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(addr)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(addr) & mask
            }
            _ => false,
        }
    }
}

/// A key as the file holds it: no secret, only its SHA-256.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredKey {
    key: String,
    user: UserId,
    /// 16 random bytes, hex.
    salt: String,
    permissions: Vec<String>,
    allow_ips: Vec<String>,
    label: String,
    created_ms: i64,
    /// hex(SHA-256(secret)): a secret recomputed from the venue key must match it.
    secret_sha256: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFile {
    version: u32,
    keys: Vec<StoredKey>,
}

/// A key found for a request: whose, what it may do, from where, and its secret.
pub struct Resolved {
    pub user: UserId,
    pub perms: Perms,
    pub allow: Vec<Cidr>,
    pub secret: String,
}

/// What a new key is to be.
pub struct NewKey {
    pub user: UserId,
    pub perms: Perms,
    pub allow_ips: Vec<String>,
    pub label: String,
}

/// Why a key was not created or revoked.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Invalid(String),
    #[error("user {user} already has {max} keys (web.max_api_keys_per_user): revoke one first")]
    TooMany { user: UserId, max: usize },
    #[error("the key store is full ({MAX_KEYS} keys)")]
    StoreFull,
    #[error("no such key")]
    NotFound,
    #[error("cannot write the key store: {0}")]
    Io(String),
}

/// Stores the whole key file elsewhere too (a replicated venue's bucket), before the file is
/// written; an error leaves the keys as they were.
pub type Mirror = Box<dyn Fn(&[u8]) -> anyhow::Result<()> + Send + Sync>;

pub struct KeyStore {
    /// The file, or none (tests of the web side without a data directory).
    path: Option<PathBuf>,
    mirror: Option<Mirror>,
    credentials: Arc<Credentials>,
    max_per_user: usize,
    keys: RwLock<BTreeMap<String, StoredKey>>,
    /// One writer of the file at a time (held across the write and the swap in memory).
    writing: Mutex<()>,
}

impl KeyStore {
    /// Loads `<data_dir>/api-keys.json` (an absent file is an empty store).
    pub fn open(
        data_dir: &Path,
        credentials: Arc<Credentials>,
        max_per_user: usize,
    ) -> anyhow::Result<KeyStore> {
        let path = data_dir.join(FILE_NAME);
        let mut keys = BTreeMap::new();
        match fs::read(&path) {
            Ok(bytes) => {
                let file: StoreFile = serde_json::from_slice(&bytes)
                    .map_err(|e| anyhow::anyhow!("{} is not a key store: {e}", path.display()))?;
                anyhow::ensure!(
                    file.version == 1,
                    "{}: unknown version {}",
                    path.display(),
                    file.version
                );
                for key in file.keys {
                    keys.insert(key.key.clone(), key);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        }
        Ok(KeyStore {
            path: Some(path),
            mirror: None,
            credentials,
            max_per_user,
            keys: RwLock::new(keys),
            writing: Mutex::new(()),
        })
    }

    /// A store with no keys and no file (a read replica's).
    pub fn empty(credentials: Arc<Credentials>, max_per_user: usize) -> KeyStore {
        KeyStore {
            path: None,
            mirror: None,
            credentials,
            max_per_user,
            keys: RwLock::new(BTreeMap::new()),
            writing: Mutex::new(()),
        }
    }

    /// Every change is stored by `mirror` before the file is written.
    pub fn with_mirror(self, mirror: Mirror) -> KeyStore {
        KeyStore {
            mirror: Some(mirror),
            ..self
        }
    }

    /// Whether `text` has the shape of an issued key id (so it cannot be a user id or admin).
    pub fn is_key_id(text: &str) -> bool {
        text.len() == KEY_ID_LEN
            && text.starts_with("rk")
            && text.bytes().all(|b| b.is_ascii_alphanumeric())
    }

    /// The key named `key_id`, if it exists and its secret still derives from the venue key.
    pub fn resolve(&self, key_id: &str) -> Option<Resolved> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let stored = keys.get(key_id)?;
        let salt = super::auth::unhex(&stored.salt)?;
        let secret = self.credentials.api_key_secret(key_id, &salt);
        let digest = hex(&Sha256::digest(secret.as_bytes()));
        if !constant_time_eq(digest.as_bytes(), stored.secret_sha256.as_bytes()) {
            tracing::warn!(
                key = key_id,
                "an API key's stored hash does not match the venue key: the key is refused"
            );
            return None;
        }
        Some(Resolved {
            user: stored.user,
            perms: Perms::parse(&stored.permissions).unwrap_or_default(),
            allow: stored
                .allow_ips
                .iter()
                .filter_map(|c| Cidr::parse(c).ok())
                .collect(),
            secret,
        })
    }

    /// Whether `key_id` is still in the store (not revoked).
    pub fn exists(&self, key_id: &str) -> bool {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        keys.contains_key(key_id)
    }

    /// Creates a key; answers its description with the secret (shown this once).
    pub fn create(&self, new: NewKey, now_ms: i64) -> Result<serde_json::Value, KeyError> {
        for ip in &new.allow_ips {
            Cidr::parse(ip).map_err(KeyError::Invalid)?;
        }
        if new.allow_ips.len() > MAX_ALLOW_IPS {
            return Err(KeyError::Invalid(format!(
                "at most {MAX_ALLOW_IPS} allow_ips entries"
            )));
        }
        if new.label.chars().count() > MAX_LABEL_CHARS || new.label.chars().any(char::is_control) {
            return Err(KeyError::Invalid(format!(
                "a label is at most {MAX_LABEL_CHARS} characters, none of them control characters"
            )));
        }
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.keys.read().unwrap_or_else(|e| e.into_inner()).clone();
        if next.values().filter(|k| k.user == new.user).count() >= self.max_per_user {
            return Err(KeyError::TooMany {
                user: new.user,
                max: self.max_per_user,
            });
        }
        if next.len() >= MAX_KEYS {
            return Err(KeyError::StoreFull);
        }
        let (key_id, salt) = loop {
            let mut random = [0u8; KEY_ID_LEN - 2 + 16];
            getrandom::getrandom(&mut random)
                .map_err(|e| KeyError::Io(format!("no randomness: {e}")))?;
            let (id, salt) = random.split_at(KEY_ID_LEN - 2);
            let id: String = "rk"
                .chars()
                .chain(
                    id.iter()
                        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])),
                )
                .collect();
            if !next.contains_key(&id) {
                break (id, salt.to_vec());
            }
        };
        let secret = self.credentials.api_key_secret(&key_id, &salt);
        let stored = StoredKey {
            key: key_id.clone(),
            user: new.user,
            salt: hex(&salt),
            permissions: new.perms.names().iter().map(|s| s.to_string()).collect(),
            allow_ips: new.allow_ips,
            label: new.label,
            created_ms: now_ms,
            secret_sha256: hex(&Sha256::digest(secret.as_bytes())),
        };
        let mut answer = describe(&stored);
        next.insert(key_id, stored);
        self.persist(&next)?;
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = next;
        answer["secret"] = serde_json::Value::String(secret);
        Ok(answer)
    }

    /// Removes a key (of `user` only, when given); answers what it was.
    pub fn revoke(
        &self,
        key_id: &str,
        user: Option<UserId>,
    ) -> Result<serde_json::Value, KeyError> {
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.keys.read().unwrap_or_else(|e| e.into_inner()).clone();
        let removed = match next.get(key_id) {
            Some(k) if user.is_none_or(|u| u == k.user) => next.remove(key_id).expect("present"),
            _ => return Err(KeyError::NotFound),
        };
        self.persist(&next)?;
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(describe(&removed))
    }

    /// Every key (of `user`, when given), without secrets, oldest first.
    pub fn list(&self, user: Option<UserId>) -> Vec<serde_json::Value> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let mut list: Vec<&StoredKey> = keys
            .values()
            .filter(|k| user.is_none_or(|u| u == k.user))
            .collect();
        list.sort_by(|a, b| (a.created_ms, &a.key).cmp(&(b.created_ms, &b.key)));
        list.into_iter().map(describe).collect()
    }

    fn persist(&self, keys: &BTreeMap<String, StoredKey>) -> Result<(), KeyError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let file = StoreFile {
            version: 1,
            keys: keys.values().cloned().collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| KeyError::Io(e.to_string()))?;
        if let Some(mirror) = &self.mirror {
            mirror(&bytes).map_err(|e| {
                tracing::error!("cannot store the API keys in the cluster: {e:#}");
                KeyError::Io(format!("cannot store the keys in the cluster: {e}"))
            })?;
        }
        write_atomically(path, &bytes).map_err(|e| {
            tracing::error!("cannot write {}: {e}", path.display());
            KeyError::Io(e.to_string())
        })
    }
}

/// A key's public description (never its secret, salt or hash).
fn describe(key: &StoredKey) -> serde_json::Value {
    serde_json::json!({
        "key": key.key,
        "user": key.user,
        "permissions": key.permissions,
        "allow_ips": key.allow_ips,
        "label": key.label,
        "created_ms": key.created_ms,
    })
}

/// Writes `path` whole or not at all: a temporary file beside it (mode 0600), fsync, rename,
/// fsync of the directory.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let tmp = path.with_extension("json.tmp");
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, path)?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> KeyStore {
        KeyStore::open(dir, Arc::new(Credentials::from_key([3; 32])), 2).unwrap()
    }

    fn new_key(user: UserId) -> NewKey {
        NewKey {
            user,
            perms: Perms {
                trade: true,
                withdraw: false,
            },
            allow_ips: vec!["10.0.0.0/8".into()],
            label: "bot".into(),
        }
    }

    #[test]
    fn keys_are_stored_without_their_secret_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let keys = store(dir.path());
        let made = keys.create(new_key(7), 1).unwrap();
        let (id, secret) = (
            made["key"].as_str().unwrap(),
            made["secret"].as_str().unwrap(),
        );
        assert!(KeyStore::is_key_id(id), "{id}");
        let text = fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(!text.contains(secret), "{text}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.path().join(FILE_NAME))
                .unwrap()
                .permissions();
            assert_eq!(mode.mode() & 0o777, 0o600);
        }
        let again = store(dir.path());
        let resolved = again.resolve(id).unwrap();
        assert_eq!(resolved.secret, secret);
        assert_eq!(resolved.user, 7);
        assert!(resolved.perms.trade && !resolved.perms.withdraw);
        assert!(again.list(Some(7))[0].get("secret").is_none());
        // Another venue key derives another secret: the stored hash refuses it.
        let other = KeyStore::open(dir.path(), Arc::new(Credentials::from_key([4; 32])), 2);
        assert!(other.unwrap().resolve(id).is_none());
    }

    #[test]
    fn a_user_has_a_bounded_number_of_keys_and_revokes_only_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let keys = store(dir.path());
        let a = keys.create(new_key(1), 1).unwrap()["key"]
            .as_str()
            .unwrap()
            .to_string();
        keys.create(new_key(1), 2).unwrap();
        assert!(matches!(
            keys.create(new_key(1), 3),
            Err(KeyError::TooMany { .. })
        ));
        assert!(keys.create(new_key(2), 3).is_ok());
        assert!(matches!(keys.revoke(&a, Some(2)), Err(KeyError::NotFound)));
        keys.revoke(&a, Some(1)).unwrap();
        assert!(keys.resolve(&a).is_none());
        assert_eq!(store(dir.path()).list(Some(1)).len(), 1);
    }

    #[test]
    fn bad_terms_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let keys = store(dir.path());
        for ip in ["10.0.0.0/33", "nope", "10.0.0.1/", "::1/129", "10.0.0.1/+8"] {
            let mut k = new_key(1);
            k.allow_ips = vec![ip.into()];
            assert!(
                matches!(keys.create(k, 1), Err(KeyError::Invalid(_))),
                "{ip}"
            );
        }
        let mut k = new_key(1);
        k.label = "x\n".into();
        assert!(keys.create(k, 1).is_err());
        assert!(Perms::parse(&["admin".into()]).is_err());
        assert_eq!(Perms::parse(&["read".into()]).unwrap(), Perms::default());
    }

    #[test]
    fn allow_lists_match_addresses_and_networks() {
        let net = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(net.contains("10.1.2.3".parse().unwrap()));
        assert!(net.contains("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!net.contains("10.2.0.1".parse().unwrap()));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains("1.2.3.4".parse().unwrap())
        );
        let one = Cidr::parse("127.0.0.1").unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        let v6 = Cidr::parse("2001:db8::/32").unwrap();
        assert!(v6.contains("2001:db8::1".parse().unwrap()));
        assert!(!v6.contains("2001:db9::1".parse().unwrap()));
    }
}
