//! TLS server settings: certificate chains and keys from PEM, the SNI
//! resolver, protocol versions, ALPN and session resumption; reloading.
//!
//! The rustls `ServerConfig` is built once. Its certificate resolver holds
//! the loaded pairs behind a lock that a reload swaps, so a reload changes
//! what new handshakes see while connections already up keep their keys,
//! and session tickets issued before a reload still resume after it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::ServerSessionMemoryCache;
use rustls::server::{ClientHello, NoServerSessionStorage, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::error::Error;
use crate::limits;

/// ALPN protocol id of HTTP/1.1 (RFC 7301 §6).
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// ALPN protocol id of HTTP/2 over TLS (RFC 9113 §3.2).
pub const ALPN_H2: &[u8] = b"h2";

/// The ALPN protocols the engine can serve after a handshake.
const SERVED_ALPN: &[&[u8]] = &[ALPN_H2, ALPN_HTTP1];

/// Where one certificate chain and its private key come from.
#[derive(Clone)]
enum Source {
    /// Two PEM files, read again on every reload.
    Files { cert: PathBuf, key: PathBuf },
    /// PEM text held in memory (a generated development certificate).
    Pem {
        label: String,
        cert: Vec<u8>,
        key: Vec<u8>,
    },
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material.
        match self {
            Source::Files { cert, key } => f
                .debug_struct("Files")
                .field("cert", cert)
                .field("key", key)
                .finish(),
            Source::Pem { label, .. } => f.debug_struct("Pem").field("label", label).finish(),
        }
    }
}

/// Configures and builds a [`TlsConfig`]: `TlsConfig::builder()`.
#[derive(Debug, Clone)]
pub struct TlsBuilder {
    sources: Vec<Source>,
    alpn: Vec<Vec<u8>>,
    resumption: bool,
    session_cache: usize,
}

impl Default for TlsBuilder {
    fn default() -> Self {
        TlsBuilder {
            sources: Vec::new(),
            alpn: vec![ALPN_H2.to_vec(), ALPN_HTTP1.to_vec()],
            resumption: true,
            session_cache: limits::TLS_SESSION_CACHE,
        }
    }
}

impl TlsBuilder {
    /// Adds a certificate chain (leaf first) and its private key, both PEM
    /// files. Keys may be PKCS#8, PKCS#1 (RSA) or SEC1 (EC): RSA, ECDSA
    /// P-256/P-384 or Ed25519. The files are read by [`TlsBuilder::build`]
    /// and again by every [`TlsConfig::reload`].
    ///
    /// With several pairs, each handshake gets the pair whose certificate
    /// names (subject alternative DNS names, `*.` wildcards included) match
    /// the client's SNI; among pairs for the same name, the first whose key
    /// type the client accepts. Without SNI, or with an unknown name, the
    /// first pair is used. Default is none; building with none is an error.
    pub fn cert_files(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.sources.push(Source::Files {
            cert: cert.into(),
            key: key.into(),
        });
        self
    }

    /// Adds a certificate chain and key given as PEM text, named `label` in
    /// error messages. A reload keeps them as they are.
    pub fn cert_pem(
        mut self,
        label: impl Into<String>,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.sources.push(Source::Pem {
            label: label.into(),
            cert: cert.into(),
            key: key.into(),
        });
        self
    }

    /// Sets the ALPN protocol ids offered, most preferred first. A client
    /// that offers ALPN but none of these fails the handshake
    /// (RFC 7301 §3.2); a client that offers none gets HTTP/1.1. Only
    /// protocols the engine serves are admitted ([`TlsBuilder::build`]
    /// fails on others): `h2` and `http/1.1`. Default is `h2`, then
    /// `http/1.1`.
    pub fn alpn_protocols(mut self, protocols: Vec<Vec<u8>>) -> Self {
        self.alpn = protocols;
        self
    }

    /// Turns session resumption on or off. On, the server issues session
    /// tickets (TLS 1.3 and 1.2, encrypted with keys rotated every 6 hours)
    /// and keeps a session cache for TLS 1.2 session IDs. Default is on.
    pub fn resumption(mut self, on: bool) -> Self {
        self.resumption = on;
        self
    }

    /// Sets how many sessions the session cache holds (the oldest are
    /// evicted); 0 keeps no cache, tickets still resume. Default is
    /// [`limits::TLS_SESSION_CACHE`].
    pub fn session_cache_size(mut self, sessions: usize) -> Self {
        self.session_cache = sessions;
        self
    }

    /// Loads every certificate and key and builds the configuration.
    ///
    /// Fails with an error naming the file and the problem: unreadable
    /// file, no PEM certificate or key in it, a malformed certificate, an
    /// unsupported or encrypted key, or a key that does not match its
    /// certificate.
    pub fn build(self) -> Result<TlsConfig, Error> {
        if self.sources.is_empty() {
            return Err(Error::new_tls_config("no certificate given".to_owned()));
        }
        if let Some(unserved) = self
            .alpn
            .iter()
            .find(|p| !SERVED_ALPN.contains(&p.as_slice()))
        {
            return Err(Error::new_tls_config(format!(
                "ALPN protocol {:?} is not one the engine serves",
                String::from_utf8_lossy(unserved)
            )));
        }
        let provider = Arc::new(provider());
        let set = CertSet::load(&self.sources, &provider)?;
        let resolver = Arc::new(Resolver {
            current: RwLock::new(Arc::new(set)),
        });
        // TLS 1.3 first, then 1.2; rustls's cipher suites are AEAD-only
        // with forward secrecy (AES-GCM, ChaCha20-Poly1305; ECDHE with
        // X25519, P-256, P-384): no CBC, no RSA key exchange, no SSLv3..1.1.
        // The order among them is `provider`'s.
        let mut config = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|err| Error::new_tls_config(format!("protocol versions: {err}")))?
            .with_no_client_auth()
            .with_cert_resolver(resolver.clone());
        config.alpn_protocols = self.alpn;
        // After the handshake the record layer is ours (`record`): rustls
        // hands over the traffic keys, to nothing else.
        config.enable_secret_extraction = true;
        if self.resumption {
            config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()
                .map_err(|err| Error::new_tls_config(format!("session tickets: {err}")))?;
            if self.session_cache == 0 {
                config.session_storage = Arc::new(NoServerSessionStorage {});
            } else {
                config.session_storage = ServerSessionMemoryCache::new(self.session_cache);
            }
        } else {
            config.session_storage = Arc::new(NoServerSessionStorage {});
            config.send_tls13_tickets = 0;
        }
        // The server's suite order wins (most clients list AES-256 first),
        // except for clients that list ChaCha20 first: they likely lack AES
        // hardware, and get the twin configuration that follows their order.
        let mut server = config.clone();
        server.ignore_client_order = true;
        Ok(TlsConfig {
            inner: Arc::new(Inner {
                server: Arc::new(server),
                server_client_order: Arc::new(config),
                resolver,
                sources: self.sources,
                provider,
            }),
        })
    }
}

/// The crypto provider: aws-lc-rs (docs/decisions/030 records the
/// measurement against ring), with AES-128-GCM preferred over
/// AES-256-GCM and ChaCha20-Poly1305 in both TLS versions: its SHA-256 key
/// schedule makes a full handshake about 30% cheaper than AES-256-GCM's
/// SHA-384 one, and its records are cheaper too (`bench/tls-provider`).
fn provider() -> CryptoProvider {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    // A stable sort keeps the provider's order within a rank (TLS 1.3
    // before 1.2, ECDSA before RSA).
    provider
        .cipher_suites
        .sort_by_key(|suite| bulk_rank(suite.suite()));
    provider
}

/// The rank of ChaCha20-Poly1305, rustls's only AEAD besides AES-GCM.
const CHACHA_RANK: u8 = 2;

/// Server preference by bulk cipher: AES-128-GCM, AES-256-GCM, the rest.
fn bulk_rank(suite: rustls::CipherSuite) -> u8 {
    use rustls::CipherSuite as S;
    match suite {
        S::TLS13_AES_128_GCM_SHA256
        | S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 0,
        S::TLS13_AES_256_GCM_SHA384
        | S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 1,
        _ => CHACHA_RANK,
    }
}

/// A TLS server configuration: certificates, protocol versions, ALPN and
/// resumption. Cloning is cheap and clones share the certificates, so a
/// [`TlsConfig::reload`] on any clone reaches every listener.
#[derive(Clone)]
pub struct TlsConfig {
    inner: Arc<Inner>,
}

struct Inner {
    /// Built once; its resolver is `resolver`. The server's suite order.
    server: Arc<ServerConfig>,
    /// The same, following the client's suite order.
    server_client_order: Arc<ServerConfig>,
    /// The certificates in use, swapped by a reload.
    resolver: Arc<Resolver>,
    /// Where the certificates come from, read again by a reload.
    sources: Vec<Source>,
    provider: Arc<CryptoProvider>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("sources", &self.inner.sources)
            .field("alpn", &self.inner.server.alpn_protocols)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// A builder with the defaults documented on each setter.
    pub fn builder() -> TlsBuilder {
        TlsBuilder::default()
    }

    /// Reads every certificate and key file again and, when all load, makes
    /// new handshakes use them. Connections already established keep
    /// theirs. On error nothing changes and the error names the file and
    /// the problem.
    pub fn reload(&self) -> Result<(), Error> {
        let set = CertSet::load(&self.inner.sources, &self.inner.provider)?;
        *self
            .inner
            .resolver
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(set);
        Ok(())
    }

    /// The certificates in use, in the order they were added (the first is
    /// the default).
    pub fn certificates(&self) -> Vec<CertInfo> {
        self.inner
            .resolver
            .snapshot()
            .pairs
            .iter()
            .map(|pair| pair.info.clone())
            .collect()
    }

    /// The ALPN protocol ids offered, most preferred first.
    pub fn alpn_protocols(&self) -> &[Vec<u8>] {
        &self.inner.server.alpn_protocols
    }

    /// The rustls configuration for a handshake that starts with `hello`:
    /// the server's suite order, unless the first suite the client offers
    /// that the server has is ChaCha20-Poly1305 (a client without AES
    /// hardware says so this way); then the client's order.
    pub(crate) fn server_config_for(&self, hello: &ClientHello<'_>) -> Arc<ServerConfig> {
        let ours = &self.inner.provider.cipher_suites;
        let first_shared = hello
            .cipher_suites()
            .iter()
            .find(|offered| ours.iter().any(|suite| suite.suite() == **offered));
        match first_shared {
            Some(suite) if bulk_rank(*suite) == CHACHA_RANK => {
                self.inner.server_client_order.clone()
            }
            _ => self.inner.server.clone(),
        }
    }
}

/// What one loaded certificate is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// The certificate file, or the label given to [`TlsBuilder::cert_pem`].
    pub source: String,
    /// The leaf certificate's DNS names (subject alternative names).
    pub names: Vec<String>,
    /// SHA-256 of the leaf certificate (DER), as colon-separated hex pairs.
    pub sha256: String,
}

// ===== impl Resolver =====

/// Picks a certificate per handshake from the set in force.
#[derive(Debug)]
struct Resolver {
    current: RwLock<Arc<CertSet>>,
}

impl Resolver {
    fn snapshot(&self) -> Arc<CertSet> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let set = self.snapshot();
        let candidates = hello
            .server_name()
            .map(|name| set.lookup(name))
            .filter(|found| !found.is_empty())
            .unwrap_or(DEFAULT_PAIR);
        set.pick(candidates, hello.signature_schemes())
    }
}

/// The pair for handshakes without SNI or with an unknown name: the first.
const DEFAULT_PAIR: &[usize] = &[0];

/// The loaded pairs and the name index over them.
#[derive(Debug)]
struct CertSet {
    pairs: Vec<Pair>,
    /// Exact DNS name → pairs, in the order they were added.
    exact: HashMap<String, Vec<usize>>,
    /// `*.example.com` stored as `example.com` → pairs.
    wildcard: HashMap<String, Vec<usize>>,
}

#[derive(Debug)]
struct Pair {
    key: Arc<CertifiedKey>,
    info: CertInfo,
}

impl CertSet {
    fn load(sources: &[Source], provider: &CryptoProvider) -> Result<CertSet, Error> {
        let mut set = CertSet {
            pairs: Vec::with_capacity(sources.len()),
            exact: HashMap::new(),
            wildcard: HashMap::new(),
        };
        for (idx, source) in sources.iter().enumerate() {
            let pair = load_pair(source, provider)?;
            for name in &pair.info.names {
                let index = match name.strip_prefix("*.") {
                    Some(parent) => set.wildcard.entry(parent.to_owned()).or_default(),
                    None => set.exact.entry(name.clone()).or_default(),
                };
                index.push(idx);
            }
            set.pairs.push(pair);
        }
        Ok(set)
    }

    /// The pairs for an SNI name: exact names first, then a wildcard one
    /// label up (RFC 6125 §6.4.3: `*` covers exactly one label).
    fn lookup(&self, name: &str) -> &[usize] {
        let lower: Cow<'_, str> = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(name.to_ascii_lowercase())
        } else {
            Cow::Borrowed(name)
        };
        if let Some(found) = self.exact.get(lower.as_ref()) {
            return found;
        }
        lower
            .split_once('.')
            .and_then(|(_, parent)| self.wildcard.get(parent))
            .map_or(&[], Vec::as_slice)
    }

    /// The first candidate whose key can sign with a scheme the client
    /// offered (an ECDSA and an RSA certificate may serve the same name),
    /// else the first.
    fn pick(
        &self,
        candidates: &[usize],
        offered: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        let fits = |idx: &&usize| {
            candidates.len() == 1 || self.pairs[**idx].key.key.choose_scheme(offered).is_some()
        };
        let idx = candidates
            .iter()
            .find(fits)
            .or(candidates.first())
            .copied()?;
        Some(self.pairs.get(idx)?.key.clone())
    }
}

/// Loads and checks one certificate chain and key.
fn load_pair(source: &Source, provider: &CryptoProvider) -> Result<Pair, Error> {
    let err = |msg: String| Error::new_tls_config(msg);
    let (cert_pem, key_pem, cert_name, key_name, label) = match source {
        Source::Files { cert, key } => {
            let cert_name = format!("certificate file {}", cert.display());
            let key_name = format!("key file {}", key.display());
            let cert_pem = std::fs::read(cert).map_err(|e| err(format!("{cert_name}: {e}")))?;
            let key_pem = std::fs::read(key).map_err(|e| err(format!("{key_name}: {e}")))?;
            let label = cert.display().to_string();
            (
                Cow::Owned(cert_pem),
                Cow::Owned(key_pem),
                cert_name,
                key_name,
                label,
            )
        }
        Source::Pem { label, cert, key } => (
            Cow::Borrowed(cert.as_slice()),
            Cow::Borrowed(key.as_slice()),
            format!("certificate {label}"),
            format!("key {label}"),
            label.clone(),
        ),
    };

    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(format!("{cert_name}: invalid PEM ({e})")))?;
    let Some(leaf) = chain.first() else {
        return Err(err(format!(
            "{cert_name}: no certificate found (expected a PEM \"BEGIN CERTIFICATE\" block)"
        )));
    };
    let parsed = webpki::EndEntityCert::try_from(leaf)
        .map_err(|e| err(format!("{cert_name}: not a valid X.509 certificate ({e})")))?;
    let names: Vec<String> = parsed
        .valid_dns_names()
        .map(str::to_ascii_lowercase)
        .collect();

    let key = match PrivateKeyDer::from_pem_slice(&key_pem) {
        Ok(key) => key,
        Err(pem::Error::NoItemsFound) if contains(&key_pem, b"ENCRYPTED PRIVATE KEY") => {
            return Err(err(format!(
                "{key_name}: the private key is encrypted; give an unencrypted key"
            )));
        }
        Err(pem::Error::NoItemsFound) => {
            return Err(err(format!(
                "{key_name}: no private key found (expected a PEM \"BEGIN PRIVATE KEY\", \
                 \"BEGIN RSA PRIVATE KEY\" or \"BEGIN EC PRIVATE KEY\" block)"
            )));
        }
        Err(e) => return Err(err(format!("{key_name}: invalid PEM ({e})"))),
    };
    let signing = provider.key_provider.load_private_key(key).map_err(|e| {
        err(format!(
            "{key_name}: unsupported or malformed private key ({e})"
        ))
    })?;
    let certified = CertifiedKey::new(chain, signing);
    if let Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) =
        certified.keys_match()
    {
        return Err(err(format!(
            "{key_name}: the key does not match the certificate in {}",
            cert_name
                .strip_prefix("certificate file ")
                .unwrap_or(&cert_name)
        )));
    }
    let sha256 = fingerprint(certified.cert[0].as_ref());
    Ok(Pair {
        key: Arc::new(certified),
        info: CertInfo {
            source: label,
            names,
            sha256,
        },
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// SHA-256 of `der` as `AB:CD:…`.
fn fingerprint(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let mut out = String::with_capacity(digest.as_ref().len() * 3);
    for (i, byte) in digest.as_ref().iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        out.push_str(&format!("{byte:02X}"));
    }
    out
}
