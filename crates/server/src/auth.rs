//! Credentials. The venue keeps one secret key (data_dir/venue.key, created on first start);
//! every user's login secret is derived from it, so no password table needs journaling:
//! `secret(user) = hex(HMAC-SHA256(key, "rialto user secret" || user as i64 LE))[..32]`.
//! The admin secret is derived the same way unless the config sets one. An operator learns a
//! user's secret from the admin `add_user` reply or `rialto secret --user N`.

use std::fs;
use std::io::Write;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

const KEY_FILE: &str = "venue.key";
const SECRET_HEX_LEN: usize = 32;

#[derive(Clone)]
pub struct Credentials {
    key: [u8; 32],
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(..)")
    }
}

impl Credentials {
    pub fn from_key(key: [u8; 32]) -> Credentials {
        Credentials { key }
    }

    /// Loads data_dir/venue.key, creating it (owner-only permissions) with a random key if
    /// it does not exist yet.
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<Credentials> {
        if let Some(key) = read_key(data_dir)? {
            return Ok(Credentials { key });
        }
        let key = random_key()?;
        write_key(data_dir, &key)?;
        Ok(Credentials { key })
    }

    fn derive(&self, label: &[u8], user: i64) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(label);
        mac.update(&user.to_le_bytes());
        let digest = mac.finalize().into_bytes();
        hex(&digest)[..SECRET_HEX_LEN].to_string()
    }

    /// The login secret of `user`.
    pub fn user_secret(&self, user: i64) -> String {
        self.derive(b"rialto user secret", user)
    }

    /// The secret of an issued API key (docs/api.md, "API keys"):
    /// `hex(HMAC-SHA256(venue key, "api-key" || key id || salt))[..32]`. Only its SHA-256 is
    /// stored, so the key store alone cannot sign.
    pub fn api_key_secret(&self, key_id: &str, salt: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(b"api-key");
        mac.update(key_id.as_bytes());
        mac.update(salt);
        hex(&mac.finalize().into_bytes())[..SECRET_HEX_LEN].to_string()
    }

    /// The derived admin secret (used unless the config sets one).
    pub fn admin_secret(&self) -> String {
        self.derive(b"rialto admin secret", 0)
    }

    pub fn check_user(&self, user: i64, presented: &[u8]) -> bool {
        constant_time_eq(self.user_secret(user).as_bytes(), presented)
    }
}

/// The key in data_dir/venue.key, if there is one.
pub fn read_key(data_dir: &Path) -> anyhow::Result<Option<[u8; 32]>> {
    let path = data_dir.join(KEY_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let text = fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let key = parse_hex_key(text.trim())
        .ok_or_else(|| anyhow::anyhow!("{} must hold 64 hex digits", path.display()))?;
    Ok(Some(key))
}

/// A new venue key, from the operating system's random source.
pub fn random_key() -> anyhow::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    getrandom::getrandom(&mut key)
        .map_err(|e| anyhow::anyhow!("cannot draw a random venue key: {e}"))?;
    Ok(key)
}

/// Writes data_dir/venue.key (owner-only permissions); an existing file is an error, never
/// overwritten.
pub fn write_key(data_dir: &Path, key: &[u8; 32]) -> anyhow::Result<()> {
    let path = data_dir.join(KEY_FILE);
    fs::create_dir_all(data_dir)?;
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&path)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    writeln!(file, "{}", hex(key))?;
    file.sync_all()?;
    Ok(())
}

/// Compares without an early exit, so timing does not reveal how much of a guess was right.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Lowercase hex digits of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn parse_hex_key(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_differ_per_user_and_check_only_their_owner() {
        let creds = Credentials::from_key([7; 32]);
        let s1 = creds.user_secret(1);
        assert_eq!(s1.len(), 32);
        assert_ne!(s1, creds.user_secret(2));
        assert!(creds.check_user(1, s1.as_bytes()));
        assert!(!creds.check_user(2, s1.as_bytes()));
        assert!(!creds.check_user(1, &s1.as_bytes()[..31]));
    }

    #[test]
    fn the_key_file_is_created_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = Credentials::load_or_create(dir.path()).unwrap();
        let b = Credentials::load_or_create(dir.path()).unwrap();
        assert_eq!(a.user_secret(5), b.user_secret(5));
        fs::write(dir.path().join(KEY_FILE), "not hex").unwrap();
        assert!(Credentials::load_or_create(dir.path()).is_err());
    }
}
