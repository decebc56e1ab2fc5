//! `celer serve --config FILE`: the TOML configuration file.
//!
//! Every flag of `celer serve` has a key (examples/celer.toml lists them
//! all). The rules:
//!
//! - a flag given on the command line wins over the file's key; a flag
//!   that repeats (`--listen`, `--index`, `--tls-cert`) replaces the
//!   file's whole list; feeds and task commands are merged by name, the
//!   command line's winning; `--feed-interval SECS` and `--feed-max-bytes`
//!   win over every feed's value in the file, `--feed-interval NAME=SECS`
//!   and `--feed-schema NAME=FILE` over that feed's;
//! - an unknown key, a wrong type or a value out of range is an error
//!   naming the file, the line and the key (`celer.toml:7: limits.max_body:
//!   ...`), exit status 2;
//! - sizes and durations take the flags' units (`"16MiB"`, `"500ms"`), or a
//!   bare TOML number (bytes, seconds);
//! - relative paths (the root, the data directory, certificates, keys,
//!   CA and schema files, `file:` feed sources, `unix:` listeners, a task
//!   command's program when it has a `/`) are relative to the file's
//!   directory, not to the working directory.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};

use clap::ArgMatches;
use clap::parser::ValueSource;
use http::HeaderValue;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use crate::Usage;
use crate::serve::{HiddenArg, ServeArgs, SymlinksArg, ThreadingArg};
use crate::units::{Secs, Size};

/// Largest configuration file read, in bytes.
pub(crate) const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A configuration file, as read.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    log_level: Option<String>,
    #[serde(default, deserialize_with = "listens")]
    listen: Option<Vec<String>>,
    #[serde(default, deserialize_with = "ranged::<_, u16, 1, 65535>")]
    workers: Option<u16>,
    threading: Option<ThreadingArg>,
    server_header: Option<ServerHeader>,
    #[serde(default, deserialize_with = "ranged::<_, i32, 1, 2147483647>")]
    backlog: Option<i32>,
    #[serde(default, deserialize_with = "octal")]
    unix_mode: Option<u32>,
    #[serde(default)]
    files: Files,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    tls: Tls,
    #[serde(default)]
    http2: Http2,
    #[serde(default)]
    tasks: Tasks,
    #[serde(default)]
    feeds: FeedDefaults,
    #[serde(default)]
    feed: Vec<FeedEntry>,
}

/// `[files]`: the directory served and how.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Files {
    root: Option<PathBuf>,
    index: Option<Vec<String>>,
    listing: Option<bool>,
    hidden: Option<HiddenArg>,
    symlinks: Option<SymlinksArg>,
    cache_max_age: Option<Secs>,
    cache_public: Option<bool>,
    cache_immutable: Option<bool>,
    precompressed: Option<bool>,
    open_file_cache: Option<Secs>,
}

/// `[limits]`: what a client may hold, and for how long.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Limits {
    #[serde(default, deserialize_with = "ranged::<_, u32, 1, 4294967295>")]
    max_connections: Option<u32>,
    max_body: Option<Size>,
    max_head: Option<Size>,
    max_uri: Option<Size>,
    #[serde(default, deserialize_with = "ranged::<_, u32, 1, 256>")]
    max_headers: Option<u32>,
    max_drain: Option<Size>,
    max_requests_per_connection: Option<u64>,
    head_timeout: Option<Secs>,
    body_timeout: Option<Secs>,
    keep_alive_timeout: Option<Secs>,
    write_timeout: Option<Secs>,
    shutdown_timeout: Option<Secs>,
}

/// `[tls]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tls {
    certificates: Option<Vec<CertPair>>,
    self_signed: Option<bool>,
    #[serde(default, deserialize_with = "listens")]
    redirect_http: Option<Vec<String>>,
    hsts: Option<Secs>,
    handshake_timeout: Option<Secs>,
    #[serde(default, deserialize_with = "ranged::<_, u32, 1, 4294967295>")]
    max_handshakes: Option<u32>,
    resumption: Option<bool>,
}

/// One `[[tls.certificates]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CertPair {
    cert: PathBuf,
    key: PathBuf,
}

/// `[http2]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Http2 {
    enabled: Option<bool>,
    #[serde(default, deserialize_with = "ranged::<_, u32, 1, 4294967295>")]
    max_streams: Option<u32>,
    #[serde(default, deserialize_with = "window")]
    stream_window: Option<Size>,
    #[serde(default, deserialize_with = "window")]
    connection_window: Option<Size>,
    max_cancelled: Option<u64>,
}

/// `[tasks]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tasks {
    enabled: Option<bool>,
    data_dir: Option<PathBuf>,
    #[serde(default, deserialize_with = "positive_secs")]
    lease: Option<Secs>,
    require_key: Option<bool>,
    commands: Option<BTreeMap<String, Vec<String>>>,
}

/// `[feeds]`: what every feed gets unless its `[[feed]]` says otherwise.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedDefaults {
    #[serde(default, deserialize_with = "positive_secs")]
    interval: Option<Secs>,
    max_bytes: Option<Size>,
    ca: Option<PathBuf>,
}

/// One `[[feed]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedEntry {
    #[serde(deserialize_with = "feed_name")]
    name: String,
    #[serde(deserialize_with = "feed_source")]
    source: String,
    #[serde(default, deserialize_with = "positive_secs")]
    interval: Option<Secs>,
    max_bytes: Option<Size>,
    schema: Option<PathBuf>,
}

/// `server_header`: a value, or `false` for none.
#[derive(Debug)]
enum ServerHeader {
    Value(HeaderValue),
    Off,
}

impl<'de> Deserialize<'de> for ServerHeader {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<ServerHeader, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ServerHeader;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a header value (a string), or false for no Server header")
            }
            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<ServerHeader, E> {
                match on {
                    false => Ok(ServerHeader::Off),
                    true => Err(E::custom(
                        "true is not a header value: give a string, or false for none",
                    )),
                }
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ServerHeader, E> {
                HeaderValue::from_str(s)
                    .map(ServerHeader::Value)
                    .map_err(|_| E::custom(format!("{s:?} is not a valid header value")))
            }
        }
        de.deserialize_any(Visitor)
    }
}

/// An integer from `MIN` to `MAX`, as `T`.
fn ranged<'de, D, T, const MIN: i64, const MAX: i64>(de: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i64>,
{
    struct Visitor<const MIN: i64, const MAX: i64>;
    impl<const MIN: i64, const MAX: i64> serde::de::Visitor<'_> for Visitor<MIN, MAX> {
        type Value = i64;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "an integer from {MIN} to {MAX}")
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<i64, E> {
            Ok(n)
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<i64, E> {
            i64::try_from(n).map_err(|_| E::custom(format!("{n} is out of range")))
        }
    }
    let n = de.deserialize_i64(Visitor::<MIN, MAX>)?;
    if !(MIN..=MAX).contains(&n) {
        return Err(D::Error::custom(format!(
            "{n} is out of range: expected an integer from {MIN} to {MAX}"
        )));
    }
    T::try_from(n)
        .map(Some)
        .map_err(|_| D::Error::custom(format!("{n} is out of range")))
}

/// A duration of more than zero.
fn positive_secs<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Secs>, D::Error> {
    let secs = Secs::deserialize(de)?;
    if secs.0.is_zero() {
        return Err(D::Error::custom("must be more than 0"));
    }
    Ok(Some(secs))
}

/// An HTTP/2 flow-control window.
fn window<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Size>, D::Error> {
    crate::http2::check_window(Size::deserialize(de)?)
        .map(Some)
        .map_err(D::Error::custom)
}

/// A file mode in octal, as a string: `"660"`, `"0o600"`. (A TOML integer
/// is refused: `660` would be read as decimal.)
fn octal<'de, D: Deserializer<'de>>(de: D) -> Result<Option<u32>, D::Error> {
    struct Visitor;
    impl serde::de::Visitor<'_> for Visitor {
        type Value = u32;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an octal file mode as a string, such as \"660\"")
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<u32, E> {
            crate::serve::octal_mode(s).map_err(E::custom)
        }
    }
    de.deserialize_any(Visitor).map(Some)
}

/// Listener specs, checked (a relative `unix:` path is resolved later).
fn listens<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Vec<String>>, D::Error> {
    let specs = Vec::<String>::deserialize(de)?;
    for spec in &specs {
        celer_server::Listen::parse(spec).map_err(D::Error::custom)?;
    }
    Ok(Some(specs))
}

/// A feed name.
fn feed_name<'de, D: Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    let name = String::deserialize(de)?;
    if !celer::feed::is_valid_name(&name) {
        return Err(D::Error::custom(format!(
            "{name:?} is not a feed name (1 to {} ASCII letters, digits, '-' or '_')",
            celer::feed::MAX_FEED_NAME_BYTES
        )));
    }
    Ok(name)
}

/// A feed source: `file:PATH`, `redis://HOST/KEY`, `http(s)://URL`.
fn feed_source<'de, D: Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    let source = String::deserialize(de)?;
    celer_apps::feed::FeedSpec::parse(&format!("f={source}")).map_err(D::Error::custom)?;
    Ok(source)
}

impl Config {
    /// Reads and checks `path`.
    ///
    /// # Errors
    ///
    /// A usage error naming the file, and for a bad key its line and name.
    pub(crate) fn load(path: &Path) -> Result<Loaded, Usage> {
        let shown = path.display();
        let len = std::fs::metadata(path)
            .map_err(|err| Usage(format!("--config {shown}: {err}")))?
            .len();
        if len > MAX_CONFIG_BYTES {
            return Err(Usage(format!(
                "--config {shown}: {len} bytes, more than the {MAX_CONFIG_BYTES} a configuration file may have"
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|err| Usage(format!("--config {shown}: {err}")))?;
        let de = toml::Deserializer::parse(&text)
            .map_err(|err| Usage(located(path, &text, err.span(), None, err.message())))?;
        let config: Config = serde_path_to_error::deserialize(de).map_err(|err| {
            let key = err.path().to_string();
            let inner = err.into_inner();
            Usage(located(
                path,
                &text,
                inner.span(),
                Some(&key),
                inner.message(),
            ))
        })?;
        let base = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        };
        Ok(Loaded {
            config,
            path: path.to_owned(),
            base,
            text,
        })
    }
}

/// `FILE:LINE: KEY: MESSAGE`.
fn located(
    path: &Path,
    text: &str,
    span: Option<std::ops::Range<usize>>,
    key: Option<&str>,
    message: &str,
) -> String {
    let mut out = path.display().to_string();
    if let Some(span) = span {
        let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
        out.push_str(&format!(":{line}"));
    }
    // serde_path_to_error says "." for the top level.
    if let Some(key) = key.filter(|k| !k.is_empty() && *k != ".") {
        out.push_str(&format!(": {key}"));
    }
    out.push_str(&format!(": {message}"));
    out
}

/// A configuration file read, with where it came from.
#[derive(Debug)]
pub(crate) struct Loaded {
    config: Config,
    path: PathBuf,
    base: PathBuf,
    text: String,
}

impl Loaded {
    /// `FILE:LINE: KEY: MESSAGE` for a key of `section` (`""` for the top
    /// level); the line is that of the first `KEY =` in the section.
    fn error(&self, section: &str, key: &str, message: impl Display) -> Usage {
        let full = if section.is_empty() {
            key.to_owned()
        } else {
            format!("{section}.{key}")
        };
        let span = line_offset(&self.text, section, key).map(|at| at..at);
        Usage(located(
            &self.path,
            &self.text,
            span,
            Some(&full),
            &message.to_string(),
        ))
    }

    /// `path` relative to the file's directory, unless absolute.
    fn resolve(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.base.join(path)
        }
    }

    /// The listener specs of `section.key`, each resolved.
    fn resolve_listens(
        &self,
        specs: &[String],
        section: &str,
        key: &str,
    ) -> Result<Vec<celer_server::Listen>, Usage> {
        specs
            .iter()
            .map(|spec| self.resolve_listen(spec))
            .collect::<Result<_, _>>()
            .map_err(|err| self.error(section, key, err))
    }

    /// A listener spec with a relative `unix:` path resolved.
    fn resolve_listen(&self, spec: &str) -> Result<celer_server::Listen, String> {
        let (gateway, rest) = match spec.split_once('+') {
            Some((g @ ("fastcgi" | "scgi"), rest)) => (format!("{g}+"), rest),
            _ => (String::new(), spec),
        };
        let spec = match rest.strip_prefix("unix:") {
            Some(path) if !path.starts_with('/') && !path.starts_with('@') => {
                format!("{gateway}unix:{}", self.resolve(Path::new(path)).display())
            }
            _ => spec.to_owned(),
        };
        celer_server::Listen::parse(&spec).map_err(|err| err.to_string())
    }

    /// The log level the file sets, if any.
    pub(crate) fn log_level(&self) -> Option<&str> {
        self.config.log_level.as_deref()
    }

    /// Sets every field of `args` that the file gives and the command line
    /// (`matches`) does not.
    ///
    /// # Errors
    ///
    /// A usage error naming the key, for what only shows once the file and
    /// the flags are put together.
    pub(crate) fn apply(&self, args: &mut ServeArgs, matches: &ArgMatches) -> Result<(), Usage> {
        let cli = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        macro_rules! set {
            ($id:literal, $target:expr, $value:expr) => {
                if let Some(value) = $value {
                    if !cli($id) {
                        $target = value;
                    }
                }
            };
        }
        let c = &self.config;

        // Top level.
        if let Some(specs) = &c.listen {
            if !cli("listen") {
                args.listen = self.resolve_listens(specs, "", "listen")?;
            }
        }
        set!("workers", args.workers, c.workers.map(Some));
        set!("threading", args.threading, c.threading);
        set!("backlog", args.backlog, c.backlog);
        set!("unix_mode", args.unix_mode, c.unix_mode.map(Some));
        if !cli("server_header") && !cli("no_server_header") {
            match &c.server_header {
                Some(ServerHeader::Value(value)) => args.server_header = value.clone(),
                Some(ServerHeader::Off) => args.no_server_header = true,
                None => {}
            }
        }

        // [files]
        let f = &c.files;
        set!(
            "root",
            args.root,
            f.root.as_deref().map(|p| Some(self.resolve(p)))
        );
        set!("index", args.index, f.index.clone());
        set!("listing", args.listing, f.listing);
        set!("hidden", args.hidden, f.hidden);
        set!("symlinks", args.symlinks, f.symlinks);
        set!(
            "cache_max_age",
            args.cache_max_age,
            f.cache_max_age.map(Some)
        );
        set!("cache_public", args.cache_public, f.cache_public);
        set!("cache_immutable", args.cache_immutable, f.cache_immutable);
        set!(
            "no_precompressed",
            args.no_precompressed,
            f.precompressed.map(|on| !on)
        );
        set!("open_file_cache", args.open_file_cache, f.open_file_cache);
        if args.root.is_none() {
            let given = [
                ("index", f.index.is_some()),
                ("listing", f.listing.is_some()),
                ("hidden", f.hidden.is_some()),
                ("symlinks", f.symlinks.is_some()),
                ("cache_max_age", f.cache_max_age.is_some()),
                ("cache_public", f.cache_public.is_some()),
                ("cache_immutable", f.cache_immutable.is_some()),
                ("precompressed", f.precompressed.is_some()),
                ("open_file_cache", f.open_file_cache.is_some()),
            ];
            if let Some((key, _)) = given.iter().find(|(_, given)| *given) {
                return Err(self.error(
                    "files",
                    key,
                    "needs a root to serve (files.root or --root)",
                ));
            }
        }

        // [limits]
        let l = &c.limits;
        set!("max_connections", args.max_connections, l.max_connections);
        set!("max_body", args.max_body, l.max_body);
        set!("max_head", args.max_head, l.max_head);
        set!("max_uri", args.max_uri, l.max_uri);
        set!("max_headers", args.max_headers, l.max_headers);
        set!("max_drain", args.max_drain, l.max_drain);
        set!(
            "max_requests_per_connection",
            args.max_requests_per_connection,
            l.max_requests_per_connection
        );
        set!("head_timeout", args.head_timeout, l.head_timeout);
        set!("body_timeout", args.body_timeout, l.body_timeout);
        set!(
            "keep_alive_timeout",
            args.keep_alive_timeout,
            l.keep_alive_timeout
        );
        set!("write_timeout", args.write_timeout, l.write_timeout);
        set!(
            "shutdown_timeout",
            args.shutdown_timeout,
            l.shutdown_timeout
        );

        // [tls]: the certificates given on the command line (or
        // --self-signed) replace the file's, whichever way they are given.
        let t = &c.tls;
        let tls = &mut args.tls;
        if !(cli("tls_cert") || cli("tls_key") || cli("self_signed")) {
            if t.self_signed == Some(true) && t.certificates.as_ref().is_some_and(|c| !c.is_empty())
            {
                return Err(self.error(
                    "tls",
                    "self_signed",
                    "cannot be used with tls.certificates: choose one",
                ));
            }
            if let Some(pairs) = &t.certificates {
                tls.tls_cert = pairs.iter().map(|p| self.resolve(&p.cert)).collect();
                tls.tls_key = pairs.iter().map(|p| self.resolve(&p.key)).collect();
            }
            if let Some(on) = t.self_signed {
                tls.self_signed = on;
            }
        }
        if let Some(specs) = &t.redirect_http {
            if !cli("redirect_http") {
                tls.redirect_http = self.resolve_listens(specs, "tls", "redirect_http")?;
            }
        }
        set!("hsts", tls.hsts, t.hsts.map(Some));
        set!(
            "tls_handshake_timeout",
            tls.tls_handshake_timeout,
            t.handshake_timeout
        );
        set!(
            "max_tls_handshakes",
            tls.max_tls_handshakes,
            t.max_handshakes
        );
        set!(
            "no_tls_resumption",
            tls.no_tls_resumption,
            t.resumption.map(|on| !on)
        );

        // [http2]
        let h = &c.http2;
        let h2 = &mut args.http2;
        set!("no_http2", h2.no_http2, h.enabled.map(|on| !on));
        set!("h2_max_streams", h2.h2_max_streams, h.max_streams);
        set!("h2_stream_window", h2.h2_stream_window, h.stream_window);
        set!(
            "h2_connection_window",
            h2.h2_connection_window,
            h.connection_window
        );
        set!("h2_max_cancelled", h2.h2_max_cancelled, h.max_cancelled);

        // [tasks]
        let k = &c.tasks;
        set!("tasks", args.tasks, k.enabled);
        set!(
            "data_dir",
            args.data_dir,
            k.data_dir.as_deref().map(|p| self.resolve(p))
        );
        set!("task_lease", args.task_lease, k.lease);
        set!("tasks_require_key", args.tasks_require_key, k.require_key);
        if let Some(commands) = &k.commands {
            // Merged by name; the command line's win.
            let on_cli: Vec<&str> = args
                .task_command
                .iter()
                .filter_map(|spec| spec.split_once('=').map(|(name, _)| name))
                .collect();
            let mut from_file = Vec::new();
            for (name, argv) in commands {
                if on_cli.contains(&name.as_str()) {
                    continue;
                }
                let mut argv = argv.clone();
                if let Some(program) = argv.first_mut() {
                    if program.contains('/') {
                        *program = self.resolve(Path::new(program)).display().to_string();
                    }
                }
                let json = serde_json::to_string(&argv).unwrap_or_default();
                from_file.push(format!("{name}={json}"));
            }
            from_file.append(&mut args.task_command);
            args.task_command = from_file;
        }
        if !args.tasks {
            let given = [
                ("data_dir", k.data_dir.is_some()),
                ("lease", k.lease.is_some()),
                ("require_key", k.require_key.is_some()),
                ("commands", k.commands.is_some()),
            ];
            if let Some((key, _)) = given.iter().find(|(_, given)| *given) {
                return Err(self.error(
                    "tasks",
                    key,
                    "needs the task API on (tasks.enabled = true or --tasks)",
                ));
            }
        }

        // [feeds] and [[feed]]
        self.apply_feeds(args, &cli)
    }

    fn apply_feeds(&self, args: &mut ServeArgs, cli: &dyn Fn(&str) -> bool) -> Result<(), Usage> {
        let d = &self.config.feeds;
        if let Some(ca) = &d.ca {
            if !cli("feed_ca") {
                args.feed_ca = Some(self.resolve(ca));
            }
        }
        let global_interval =
            cli("feed_interval") && args.feed_interval.iter().any(|s| !s.contains('='));
        let global_max = cli("feed_max_bytes");
        if let Some(max) = d.max_bytes {
            if !global_max {
                args.feed_max_bytes = max;
            }
        }
        let mut specs = Vec::new();
        let mut intervals = Vec::new();
        if let Some(every) = d.interval {
            if !global_interval {
                intervals.push(every.to_string());
            }
        }
        for (i, entry) in self.config.feed.iter().enumerate() {
            let name = &entry.name;
            if self.config.feed[..i].iter().any(|e| e.name == *name) {
                return Err(Usage(format!(
                    "{}: feed {name:?} is defined twice",
                    self.path.display()
                )));
            }
            let per_name = |flag: &[String]| {
                flag.iter()
                    .any(|spec| spec.split_once('=').is_some_and(|(n, _)| n == name))
            };
            let mut spec = celer_apps::feed::FeedSpec::parse(&format!("{name}={}", entry.source))
                .map_err(|err| {
                Usage(format!("{}: feed {name:?}: {err}", self.path.display()))
            })?;
            if let celer_apps::feed::SourceSpec::File(path) = &spec.source {
                spec.source = celer_apps::feed::SourceSpec::File(self.resolve(path));
            }
            // A --feed of the same name replaces the file's source.
            if !args.feeds.iter().any(|cli_spec| cli_spec.name == *name) {
                specs.push(spec);
            }
            if let Some(every) = entry.interval {
                if !global_interval && !per_name(&args.feed_interval) {
                    intervals.push(format!("{name}={every}"));
                }
            }
            if let Some(max) = entry.max_bytes {
                if !global_max {
                    args.feed_max_bytes_each.push((name.clone(), max));
                }
            }
            if let Some(schema) = &entry.schema {
                if !per_name(&args.feed_schema) {
                    args.feed_schema
                        .insert(0, format!("{name}={}", self.resolve(schema).display()));
                }
            }
        }
        specs.append(&mut args.feeds);
        args.feeds = specs;
        // The file's first: a later NAME=SECS wins over an earlier SECS.
        intervals.append(&mut args.feed_interval);
        args.feed_interval = intervals;
        Ok(())
    }
}

/// The byte offset of the first `KEY =` line in `section` (`""`: before
/// any table header; `tasks` also matches `[tasks.commands]`).
fn line_offset(text: &str, section: &str, key: &str) -> Option<usize> {
    let mut current = String::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if let Some(header) = trimmed.strip_prefix('[') {
            current = header
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .to_owned();
        } else if (current == section || current.starts_with(&format!("{section}.")))
            && trimmed
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(['=', '.']))
        {
            return Some(offset + line.len() - line.trim_start().len());
        }
        if section.is_empty() && !current.is_empty() {
            // Top-level keys come before the first table.
            return None;
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::line_offset;

    #[test]
    fn keys_are_found_in_their_section() {
        let text = "listen = []\n[files]\nroot = \"x\"\n[tasks.commands]\nthumb = []\n";
        let line = |section, key| {
            line_offset(text, section, key).map(|at| text[..at].matches('\n').count() + 1)
        };
        assert_eq!(line("", "listen"), Some(1));
        assert_eq!(line("files", "root"), Some(3));
        assert_eq!(line("tasks", "thumb"), Some(5));
        assert_eq!(line("", "root"), None);
        assert_eq!(line("limits", "root"), None);
    }
}
