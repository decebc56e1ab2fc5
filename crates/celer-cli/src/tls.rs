//! The TLS flags of `celer serve`: certificate files or a generated
//! development certificate, the HTTP-to-HTTPS redirect listener, HSTS, and
//! reloading certificates on SIGHUP.

use std::path::PathBuf;
use std::time::Duration;

use celer_server::limits;
use celer_server::tls::ALPN_HTTP1;
use celer_server::{Listen, TlsConfig};

use crate::Usage;
use crate::units::Secs;

/// TLS arguments of `celer serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct TlsArgs {
    /// PEM certificate chain (leaf first) to serve over TLS; pairs with the
    /// --tls-key at the same position. Repeat for several certificates: each
    /// handshake gets the one whose names match the client's SNI, and the
    /// first when none does. With TLS, every --listen address serves HTTPS.
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub(crate) tls_cert: Vec<PathBuf>,

    /// PEM private key (PKCS#8, RSA or EC; RSA, ECDSA or Ed25519) of the
    /// --tls-cert at the same position.
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub(crate) tls_key: Vec<PathBuf>,

    /// Serve HTTPS with a certificate generated in memory for localhost,
    /// 127.0.0.1 and ::1, and print its SHA-256 fingerprint. For
    /// development only: clients do not trust it.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"], help_heading = "TLS")]
    pub(crate) self_signed: bool,

    /// Also listen here in plain HTTP and answer every request with a 308
    /// redirect to https on the same host and path. Repeatable.
    #[arg(long, value_name = "URL", help_heading = "TLS")]
    pub(crate) redirect_http: Vec<Listen>,

    /// Send Strict-Transport-Security: max-age=SECS on every HTTPS response.
    #[arg(long, value_name = "SECS", help_heading = "TLS")]
    pub(crate) hsts: Option<Secs>,

    /// Time allowed for a TLS handshake from accepting the connection; a
    /// client that does not finish in time is disconnected.
    #[arg(long, value_name = "SECS", default_value_t = Secs(limits::TLS_HANDSHAKE_TIMEOUT),
          help_heading = "TLS")]
    pub(crate) tls_handshake_timeout: Secs,

    /// Most TLS handshakes in progress at once. Accepting never pauses: at
    /// the cap a new connection takes the place of the least advanced
    /// pending handshake (the oldest still waiting for its ClientHello),
    /// which is closed. Every connection must send its whole ClientHello
    /// within 3 s.
    #[arg(long, value_name = "N", default_value_t = limits::MAX_TLS_HANDSHAKES as u32,
          value_parser = clap::value_parser!(u32).range(1..), help_heading = "TLS")]
    pub(crate) max_tls_handshakes: u32,

    /// Turn TLS session resumption (tickets and the session cache) off, so
    /// every connection makes a full handshake.
    #[arg(long, help_heading = "TLS")]
    pub(crate) no_tls_resumption: bool,
}

impl TlsArgs {
    /// True when the server serves HTTPS.
    pub(crate) fn enabled(&self) -> bool {
        self.self_signed || !self.tls_cert.is_empty() || !self.tls_key.is_empty()
    }

    /// The redirect listeners.
    pub(crate) fn redirect_http(&self) -> &[Listen] {
        &self.redirect_http
    }

    /// The HSTS max-age, if set.
    pub(crate) fn hsts(&self) -> Option<Duration> {
        self.hsts.map(|secs| secs.0)
    }

    /// Copies the TLS limits into `limits`.
    pub(crate) fn apply_limits(&self, limits: &mut celer_server::Limits) {
        limits.tls_handshake_timeout = self.tls_handshake_timeout.0;
        limits.max_tls_handshakes = self.max_tls_handshakes as usize;
    }

    /// Loads the certificates, or generates one; `None` without TLS flags.
    /// ALPN offers `h2` when `http2`, else only `http/1.1`. Problems with
    /// the flags or the files are usage errors (exit 2).
    pub(crate) fn config(&self, http2: bool) -> Result<Option<TlsConfig>, Usage> {
        if !self.enabled() {
            if !self.redirect_http.is_empty() {
                return Err(Usage(
                    "--redirect-http needs HTTPS: give --tls-cert and --tls-key, or --self-signed"
                        .to_owned(),
                ));
            }
            if self.hsts.is_some() {
                return Err(Usage(
                    "--hsts needs HTTPS: give --tls-cert and --tls-key, or --self-signed"
                        .to_owned(),
                ));
            }
            return Ok(None);
        }
        if self.tls_cert.len() != self.tls_key.len() {
            return Err(Usage(format!(
                "--tls-cert and --tls-key come in pairs: got {} certificate(s) and {} key(s)",
                self.tls_cert.len(),
                self.tls_key.len()
            )));
        }
        let mut builder = TlsConfig::builder().resumption(!self.no_tls_resumption);
        if !http2 {
            builder = builder.alpn_protocols(vec![ALPN_HTTP1.to_vec()]);
        }
        if self.self_signed {
            let (cert, key) = self_signed()?;
            builder = builder.cert_pem("self-signed", cert, key);
        }
        for (cert, key) in self.tls_cert.iter().zip(&self.tls_key) {
            builder = builder.cert_files(cert, key);
        }
        let config = builder.build().map_err(|err| Usage(err.to_string()))?;
        if self.self_signed {
            let info = &config.certificates()[0];
            eprintln!(
                "celer: self-signed certificate for {} (development only), SHA-256 fingerprint {}",
                SELF_SIGNED_NAMES.join(", "),
                info.sha256
            );
        }
        Ok(Some(config))
    }
}

/// The names a generated development certificate covers.
const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A fresh ECDSA P-256 certificate and key, as PEM.
fn self_signed() -> Result<(String, String), Usage> {
    let names = SELF_SIGNED_NAMES.map(str::to_owned).to_vec();
    let generated = rcgen::generate_simple_self_signed(names).map_err(|err| {
        Usage(format!(
            "--self-signed: cannot generate a certificate: {err}"
        ))
    })?;
    Ok((generated.cert.pem(), generated.signing_key.serialize_pem()))
}

/// Reloads the certificate files (SIGHUP); a failure keeps the certificates
/// in use and says why.
pub(crate) fn reload(config: &TlsConfig) {
    match config.reload() {
        Ok(()) => {
            for info in config.certificates() {
                tracing::info!(
                    target: "celer::tls",
                    source = %info.source,
                    sha256 = %info.sha256,
                    "reloaded TLS certificate"
                );
            }
        }
        Err(err) => tracing::error!(
            target: "celer::tls",
            error = %err,
            "TLS reload failed; keeping the certificates in use"
        ),
    }
}
