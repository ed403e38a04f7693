//! TLS (rustls, with the ring provider) for the HTTP, order, admin and FIX listeners, from a
//! PEM certificate chain and private key; and a self-signed certificate for
//! `rialto serve --demo --tls`. [`server_config`] sets no ALPN, so one configuration serves
//! every listener.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

/// `[tls]`: off by default.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSettings {
    /// Speak TLS on every listener but the UDP feed's replay service: HTTPS and WSS on
    /// `web.listen`, and TLS on the order, admin and FIX ports.
    pub enabled: bool,
    /// The certificate chain, PEM, the server's own certificate first.
    pub cert: PathBuf,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Loads the certificate chain and key of `settings` into a server configuration.
pub fn server_config(settings: &TlsSettings) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    anyhow::ensure!(
        !settings.cert.as_os_str().is_empty() && !settings.key.as_os_str().is_empty(),
        "tls.cert and tls.key must name PEM files when tls.enabled is true"
    );
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&settings.cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .with_context(|| format!("cannot read certificates from {}", settings.cert.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "no certificate in {}",
        settings.cert.display()
    );
    // The key's path only: its contents never go into a message.
    let key = PrivateKeyDer::from_pem_file(&settings.key)
        .with_context(|| format!("cannot read a private key from {}", settings.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key do not make a valid pair")?;
    Ok(Arc::new(config))
}

/// The certificate and key files `rialto serve --demo --tls` uses under `dir`, made (a
/// self-signed certificate for localhost and 127.0.0.1, files readable by their owner only)
/// unless both are there already.
pub fn self_signed(dir: &Path) -> anyhow::Result<TlsSettings> {
    let settings = TlsSettings {
        enabled: true,
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    if settings.cert.exists() && settings.key.exists() {
        return Ok(settings);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let certified = rcgen::generate_simple_self_signed(names)?;
    write_private(&settings.key, certified.key_pair.serialize_pem().as_bytes())?;
    write_private(&settings.cert, certified.cert.pem().as_bytes())?;
    Ok(settings)
}

/// Writes a new file with mode 0600 (replacing one there).
fn write_private(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(contents)?;
    file.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_self_signed_certificate_loads_and_its_files_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let settings = self_signed(&dir.path().join("tls")).unwrap();
        for file in [&settings.cert, &settings.key] {
            let mode = std::fs::metadata(file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{}", file.display());
        }
        server_config(&settings).unwrap();
        // A second call keeps the files.
        let cert = std::fs::read(&settings.cert).unwrap();
        self_signed(&dir.path().join("tls")).unwrap();
        assert_eq!(std::fs::read(&settings.cert).unwrap(), cert);
        let missing = TlsSettings {
            enabled: true,
            ..TlsSettings::default()
        };
        assert!(server_config(&missing).is_err());
    }
}
