//! How a node connects to NATS: the servers' addresses and the node's credentials and TLS from
//! `[log]` (docs/replication.md, "Securing NATS").
//!
//! Secrets come from files only. A URL with a user or password in it is refused: URLs are
//! printed in errors and logs, and command lines are visible to every local user.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use async_nats::{ConnectOptions, ServerAddr};

use crate::config::LogSettings;

/// The servers of `settings.nats`, parsed; an address with credentials in it is refused.
pub fn server_addrs(settings: &LogSettings) -> anyhow::Result<Vec<ServerAddr>> {
    settings
        .nats
        .iter()
        .map(|url| {
            let addr: ServerAddr = url
                .parse()
                .map_err(|_| anyhow::anyhow!("log.nats: `{}` is not a NATS URL", redacted(url)))?;
            anyhow::ensure!(
                !addr.has_user_pass(),
                "log.nats: `{}` has credentials in it: give them in log.nats_user and \
                 log.nats_password_file (or log.nats_credentials, log.nats_token_file) instead, \
                 so that they reach no log",
                redacted(url)
            );
            Ok(addr)
        })
        .collect()
}

/// The connect options `settings` asks for: credentials read from their files, TLS when a CA
/// is given, and `timeout` for connecting and for every request.
pub async fn connect_options(
    settings: &LogSettings,
    timeout: Duration,
) -> anyhow::Result<ConnectOptions> {
    let mut options = match &settings.nats_credentials {
        Some(path) => ConnectOptions::new()
            .credentials_file(path)
            .await
            .with_context(|| format!("log.nats_credentials: cannot use {}", path.display()))?,
        None => ConnectOptions::new(),
    };
    let methods = [
        settings.nats_credentials.is_some(),
        settings.nats_user.is_some() || settings.nats_password_file.is_some(),
        settings.nats_token_file.is_some(),
    ];
    anyhow::ensure!(
        methods.iter().filter(|&&m| m).count() <= 1,
        "log: give one of nats_credentials, nats_user with nats_password_file, or \
         nats_token_file"
    );
    match (&settings.nats_user, &settings.nats_password_file) {
        (Some(user), Some(file)) => {
            let password = read_secret(file, "log.nats_password_file")?;
            options = options.user_and_password(user.clone(), password);
        }
        (None, None) => {}
        _ => anyhow::bail!("log.nats_user and log.nats_password_file go together"),
    }
    if let Some(file) = &settings.nats_token_file {
        options = options.token(read_secret(file, "log.nats_token_file")?);
    }
    if let Some(ca) = &settings.nats_tls_ca {
        readable(ca, "log.nats_tls_ca")?;
        options = options.add_root_certificates(ca.clone()).require_tls(true);
    }
    match (&settings.nats_tls_cert, &settings.nats_tls_key) {
        (Some(cert), Some(key)) => {
            readable(cert, "log.nats_tls_cert")?;
            readable(key, "log.nats_tls_key")?;
            options = options
                .add_client_certificate(cert.clone(), key.clone())
                .require_tls(true);
        }
        (None, None) => {}
        _ => anyhow::bail!("log.nats_tls_cert and log.nats_tls_key go together"),
    }
    Ok(options
        .connection_timeout(timeout)
        .request_timeout(Some(timeout)))
}

/// Whether NATS refused the client's credentials or TLS (as opposed to being unreachable).
pub fn is_refusal(error: &async_nats::ConnectError) -> bool {
    use async_nats::ConnectErrorKind::{Authentication, AuthorizationViolation, Tls};
    matches!(error.kind(), AuthorizationViolation | Authentication | Tls)
}

/// `url` with any user and password in it replaced by `***`, fit to print.
pub fn redacted(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return match url.rfind('@') {
            Some(at) => format!("***{}", &url[at..]),
            None => url.to_string(),
        };
    };
    match url[scheme_end..].rfind('@') {
        Some(at) => format!("{}***{}", &url[..scheme_end], &url[scheme_end + at..]),
        None => url.to_string(),
    }
}

/// Every URL of `settings.nats`, redacted and joined, fit to print.
pub fn printable_servers(settings: &LogSettings) -> String {
    let urls: Vec<String> = settings.nats.iter().map(|u| redacted(u)).collect();
    urls.join(",")
}

/// The first line of a secret's file, which must not be empty.
fn read_secret(path: &Path, setting: &str) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{setting}: cannot read {}", path.display()))?;
    let secret = text.lines().next().unwrap_or("").trim().to_string();
    anyhow::ensure!(!secret.is_empty(), "{setting}: {} is empty", path.display());
    Ok(secret)
}

/// Fails clearly now rather than at the first connection attempt.
fn readable(path: &Path, setting: &str) -> anyhow::Result<()> {
    std::fs::metadata(path)
        .with_context(|| format!("{setting}: cannot read {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_hides_credentials_and_nothing_else() {
        assert_eq!(redacted("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        assert_eq!(redacted("nats://u:p@host:4222"), "nats://***@host:4222");
        assert_eq!(redacted("tls://tok@host"), "tls://***@host");
        assert_eq!(redacted("u:p@host:4222"), "***@host:4222");
    }

    #[test]
    fn a_url_with_credentials_is_refused_without_echoing_them() {
        let settings = LogSettings {
            nats: vec!["nats://alice:hunter2@127.0.0.1:4222".into()],
            ..Default::default()
        };
        let error = format!("{:#}", server_addrs(&settings).unwrap_err());
        assert!(error.contains("log.nats_password_file"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn credentials_go_together_and_one_method_at_a_time() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let password = dir.path().join("password");
        std::fs::write(&password, "s3cret\n").unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let check = |settings: LogSettings| {
            runtime
                .block_on(connect_options(&settings, Duration::from_secs(1)))
                .map(|_| ())
                .map_err(|e| format!("{e:#}"))
        };
        let user_only = LogSettings {
            nats_user: Some("rialto".into()),
            ..Default::default()
        };
        assert!(check(user_only).unwrap_err().contains("go together"));
        let both = LogSettings {
            nats_user: Some("rialto".into()),
            nats_password_file: Some(password.clone()),
            nats_token_file: Some(password.clone()),
            ..Default::default()
        };
        assert!(check(both).unwrap_err().contains("give one of"));
        let empty_password = LogSettings {
            nats_user: Some("rialto".into()),
            nats_password_file: Some(empty),
            ..Default::default()
        };
        assert!(check(empty_password).unwrap_err().contains("is empty"));
        let missing_ca = LogSettings {
            nats_tls_ca: Some(dir.path().join("nowhere.pem")),
            ..Default::default()
        };
        assert!(check(missing_ca).unwrap_err().contains("log.nats_tls_ca"));
        let garbage = dir.path().join("garbage.creds");
        std::fs::write(&garbage, "not a credentials file\n").unwrap();
        let bad_creds = LogSettings {
            nats_credentials: Some(garbage),
            ..Default::default()
        };
        assert!(
            check(bad_creds)
                .unwrap_err()
                .contains("log.nats_credentials")
        );
        let good = LogSettings {
            nats_user: Some("rialto".into()),
            nats_password_file: Some(password),
            ..Default::default()
        };
        check(good).unwrap();
    }
}
