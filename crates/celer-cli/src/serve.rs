//! `celer serve`: a directory or the embedded welcome site, on the engine.
//!
//! The command line maps one to one onto `celer_server::Builder`, `Limits`
//! and `BindOptions`; defaults shown by `--help` are the engine's own
//! constants. Binding happens before serving, so a bad address fails at
//! once with exit status 2. The start-up line (`celer: listening on
//! tcp://127.0.0.1:8080 (...)`) is printed once the signal handlers are in
//! place, with the real ports, and scripts may parse it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use celer::files::{CacheControl, Files, Hidden, Symlinks};
use celer_apps::{StaticSite, Welcome};
use celer_server::limits::{self, Limits};
use celer_server::listen::{BACKLOG, BindOptions};
use celer_server::{Listen, Server, Threading, TlsConfig};
use http::HeaderValue;

use crate::Usage;
use crate::http2::Http2Args;
use crate::tls::{self, TlsArgs};
use crate::units::{Secs, Size};

/// Listen address used when no `--listen` is given.
const DEFAULT_LISTEN: &str = "tcp://127.0.0.1:8080";

/// Listen address used when no `--listen` is given and TLS is on.
const DEFAULT_LISTEN_TLS: &str = "tcp://127.0.0.1:8443";

/// Arguments of `celer serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Sizes take a binary unit: 4096, 64k, 16MiB. Durations are seconds or take a \
unit: 30, 0.5, 500ms, 2m.

--config FILE reads the same settings from a TOML file, in sections ([files], \
[limits], [tls], [http2], [tasks], [feeds], [[feed]]; examples/celer.toml \
documents every key). A flag given on the command line wins over the file \
(a repeated flag such as --listen replaces the file's list; feeds and task \
commands merge by name). Unknown keys and wrong values are errors naming the \
file, line and key; `celer serve --config FILE --check` checks without serving.

SIGTERM or SIGINT stops accepting, lets requests in flight finish (up to \
--shutdown-timeout), closes idle connections and exits 0. SIGHUP reloads the \
--tls-cert and --tls-key files: new handshakes use the new certificates, \
established connections keep theirs, and a file that fails to load keeps the \
certificates in use (the error is logged).

TLS: TLS 1.3 and 1.2 only, AEAD cipher suites with forward secrecy \
(AES-128-GCM preferred, then AES-256-GCM, then ChaCha20-Poly1305; clients \
listing ChaCha20-Poly1305 first get it), ALPN \
http/1.1, session resumption (tickets and a session cache) on by default.

Examples:
  celer serve
  celer serve --root ./public --listen tcp://0.0.0.0:8080 --listen tcp://[::]:8080
  celer serve --root ./dist --cache-max-age 10m --cache-immutable --listing
  celer serve --root /srv/www --listen unix:/run/celer.sock --unix-mode 660
  celer serve --self-signed
  celer serve --feed scores=file:/srv/scores.json --feed-interval 500ms
  celer serve --feed scores=file:/srv/scores.json --feed-schema scores=scores.schema.json
  celer serve --config /etc/celer/celer.toml --check
  celer serve --root /srv/www --listen tcp://0.0.0.0:443 --tls-cert site.crt --tls-key site.key \
    --redirect-http tcp://0.0.0.0:80 --hsts 31536000")]
pub(crate) struct ServeArgs {
    /// Read settings from this TOML file (every flag has a key; see
    /// examples/celer.toml). Flags given here win over the file's keys;
    /// relative paths in the file are relative to its directory.
    #[arg(long, value_name = "FILE", help_heading = "Configuration")]
    pub(crate) config: Option<PathBuf>,

    /// Check the configuration (the flags and the --config file: keys,
    /// values, certificates, schemas, the root) and exit without serving:
    /// 0 when it is valid, 2 with the first problem otherwise.
    #[arg(long, help_heading = "Configuration")]
    pub(crate) check: bool,

    /// Directory to serve. Without it, the embedded welcome site is served.
    #[arg(long, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,

    /// File tried for a directory; repeat to try several in order.
    #[arg(long = "index", value_name = "NAME", default_value = celer::files::INDEX, help_heading = "Files")]
    pub(crate) index: Vec<String>,

    /// List directories that have no index file (an HTML page, names sorted
    /// and escaped); without it they get 404.
    #[arg(long, help_heading = "Files")]
    pub(crate) listing: bool,

    /// What names starting with a dot get (.well-known is always served):
    /// deny (403), ignore (404, not listed) or allow.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = HiddenArg::Deny, help_heading = "Files")]
    pub(crate) hidden: HiddenArg,

    /// What symbolic links get: follow (anywhere), within-root (followed
    /// while the target stays under the root, 403 otherwise) or deny (403).
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = SymlinksArg::WithinRoot, help_heading = "Files")]
    pub(crate) symlinks: SymlinksArg,

    /// Send Cache-Control max-age with files [default: no Cache-Control].
    #[arg(long, value_name = "SECS", help_heading = "Files")]
    pub(crate) cache_max_age: Option<Secs>,

    /// Add `public` to Cache-Control.
    #[arg(long, help_heading = "Files")]
    pub(crate) cache_public: bool,

    /// Send `max-age=31536000, immutable` for fingerprinted names
    /// (app.3f2a9c1b.js: a part of 8-64 lowercase hex digits).
    #[arg(long, help_heading = "Files")]
    pub(crate) cache_immutable: bool,

    /// Do not serve precompressed siblings (NAME.br, NAME.zst, NAME.gz)
    /// chosen by Accept-Encoding.
    #[arg(long, help_heading = "Files")]
    pub(crate) no_precompressed: bool,

    /// Keep files open for reuse this long: a file served again costs an
    /// fstat instead of open, fstat and close (and no read up to 8 KiB); a
    /// file replaced, deleted or created is seen at most this late (a file
    /// changed in place at once).
    /// 0 turns it off.
    #[arg(
        long,
        value_name = "SECS",
        default_value = "1s",
        help_heading = "Files"
    )]
    pub(crate) open_file_cache: Secs,

    /// Where to listen: tcp://HOST:PORT (IPv6 in brackets), unix:PATH, fd:N,
    /// systemd or systemd:NAME; after fastcgi+ or scgi+ (fastcgi+unix:PATH,
    /// scgi+tcp://HOST:PORT) to serve a front-end web server. Repeat to
    /// listen on several [default: tcp://127.0.0.1:8080, or
    /// tcp://127.0.0.1:8443 with TLS].
    #[arg(long = "listen", value_name = "URL")]
    pub(crate) listen: Vec<Listen>,

    /// Worker threads [default: the number of CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) workers: Option<u16>,

    /// Threading model: one runtime and SO_REUSEPORT listener per worker, or
    /// one work-stealing runtime.
    #[arg(long, value_enum, value_name = "MODEL", default_value_t = ThreadingArg::PerCore)]
    pub(crate) threading: ThreadingArg,

    /// Value of the Server response header.
    #[arg(long, value_name = "STR", default_value = "celer", value_parser = header_value)]
    pub(crate) server_header: HeaderValue,

    /// Send no Server header.
    #[arg(long, conflicts_with = "server_header")]
    pub(crate) no_server_header: bool,

    /// Most connections open at once, exactly, with any number of workers; at
    /// the limit new clients wait (accepted, or in the backlog) until one
    /// leaves, and are not refused.
    #[arg(long, value_name = "N", default_value_t = limits::MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections: u32,

    /// Largest request body; larger ones get 413. 0 turns the limit off.
    #[arg(long, value_name = "BYTES", default_value_t = Size(limits::MAX_BODY_BYTES))]
    pub(crate) max_body: Size,

    /// Largest request head (request line and headers); larger ones get 431.
    #[arg(long, value_name = "BYTES", default_value_t = Size(limits::MAX_HEAD_BYTES as u64))]
    pub(crate) max_head: Size,

    /// Longest request target (path and query); longer ones get 414.
    #[arg(long, value_name = "BYTES", default_value_t = Size(limits::MAX_URI_BYTES as u64))]
    pub(crate) max_uri: Size,

    /// Most header fields in a request (at most 256); more get 431.
    #[arg(long, value_name = "N", default_value_t = limits::MAX_HEADERS as u32,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) max_headers: u32,

    /// Most unread request-body bytes discarded to keep a connection alive
    /// after a handler answered without reading them; past it the connection
    /// closes.
    #[arg(long, value_name = "BYTES", default_value_t = Size(limits::MAX_DRAIN_BYTES))]
    pub(crate) max_drain: Size,

    /// Time allowed for a request head to arrive once it has begun (slowloris
    /// guard); a late head gets 408.
    #[arg(long, value_name = "SECS", default_value_t = Secs(limits::HEAD_TIMEOUT))]
    pub(crate) head_timeout: Secs,

    /// Time allowed without progress while a request body is read.
    #[arg(long, value_name = "SECS", default_value_t = Secs(limits::BODY_TIMEOUT))]
    pub(crate) body_timeout: Secs,

    /// Time an idle keep-alive connection stays open.
    #[arg(long, value_name = "SECS", default_value_t = Secs(limits::KEEP_ALIVE_TIMEOUT))]
    pub(crate) keep_alive_timeout: Secs,

    /// Time allowed without progress while writing to a client that does not
    /// read.
    #[arg(long, value_name = "SECS", default_value_t = Secs(limits::WRITE_TIMEOUT))]
    pub(crate) write_timeout: Secs,

    /// Time requests in flight get to finish after SIGTERM or SIGINT.
    #[arg(long, value_name = "SECS", default_value_t = Secs(limits::SHUTDOWN_TIMEOUT))]
    pub(crate) shutdown_timeout: Secs,

    /// Close a connection after this many requests; 0 for no limit.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) max_requests_per_connection: u64,

    /// Listen backlog: connections the kernel queues before they are
    /// accepted.
    #[arg(long, value_name = "N", default_value_t = BACKLOG,
          value_parser = clap::value_parser!(i32).range(1..))]
    pub(crate) backlog: i32,

    /// File mode of UNIX sockets the server creates, in octal (e.g. 660)
    /// [default: from the umask].
    #[arg(long, value_name = "OCTAL", value_parser = octal_mode)]
    pub(crate) unix_mode: Option<u32>,

    /// Mount the task API at /tasks (submit, watch, cancel, fetch results
    /// of long-running tasks; the built-in `echo` kind), beside the site.
    #[arg(long, help_heading = "Tasks")]
    pub(crate) tasks: bool,

    /// Directory of the task store (SQLite), created when missing.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "celer-data",
        help_heading = "Tasks"
    )]
    pub(crate) data_dir: PathBuf,

    /// How long a running task's lease lasts: after a crash, its tasks run
    /// again once their leases have run out.
    #[arg(long, value_name = "SECS", default_value_t = Secs(celer_tasks::limits::DEFAULT_LEASE), help_heading = "Tasks")]
    pub(crate) task_lease: Secs,

    /// A task kind that runs a program: NAME=ARGV, ARGV a JSON array of
    /// strings (e.g. 'thumb=["/usr/local/bin/thumb","--size","128"]'). The
    /// task's input goes to its stdin as JSON, its stdout is the result;
    /// no shell, the environment cleared. Repeatable.
    #[arg(long, value_name = "NAME=ARGV", help_heading = "Tasks")]
    pub(crate) task_command: Vec<String>,

    /// Require an API key on every task API request (`Authorization:
    /// Bearer <token>`; 401 without one, 403 for a revoked one), with the
    /// key's quotas. Keys: `celer tasks keys create --data-dir DIR`. The
    /// dashboard's page (/tasks/ui) asks for one.
    #[arg(long, help_heading = "Tasks")]
    pub(crate) tasks_require_key: bool,

    /// A live JSON feed at /feeds/NAME (its SSE stream at
    /// /feeds/NAME/events, WebSocket at /feeds/NAME/ws, status at
    /// /feeds/NAME/status; a page at /feeds/): NAME=file:PATH,
    /// NAME=redis://HOST[:PORT]/KEY or NAME=https://URL. Repeatable.
    #[arg(long = "feed", value_name = "NAME=SOURCE", value_parser = celer_apps::feed::FeedSpec::parse,
          help_heading = "Feeds")]
    pub(crate) feeds: Vec<celer_apps::feed::FeedSpec>,

    /// How often feeds are read (and their Cache-Control max-age): a
    /// duration for every feed, or NAME=DURATION for one. Repeatable.
    #[arg(long, value_name = "[NAME=]SECS", help_heading = "Feeds")]
    pub(crate) feed_interval: Vec<String>,

    /// Largest feed document; larger updates are refused and the last
    /// good version stays.
    #[arg(long, value_name = "BYTES", help_heading = "Feeds",
          default_value_t = Size(celer::feed::limits::DEFAULT_MAX_DOCUMENT_BYTES as u64))]
    pub(crate) feed_max_bytes: Size,

    /// Also trust the CA certificates in this PEM file for https feed
    /// sources (beside the Mozilla roots).
    #[arg(long, value_name = "FILE", help_heading = "Feeds")]
    pub(crate) feed_ca: Option<PathBuf>,

    /// Check each new version of feed NAME against the JSON Schema in FILE
    /// (drafts 4 to 2020-12, chosen by its $schema); a version that fails
    /// is refused (the last good one stays), logged with the first failing
    /// location and counted in /feeds/NAME/status (rejected_validator). An
    /// invalid schema stops the start. Repeatable.
    #[arg(long, value_name = "NAME=FILE", help_heading = "Feeds")]
    pub(crate) feed_schema: Vec<String>,

    /// Per-feed document limits from the --config file's `[[feed]]`
    /// `max_bytes`.
    #[arg(skip)]
    pub(crate) feed_max_bytes_each: Vec<(String, Size)>,

    #[command(flatten)]
    pub(crate) tls: TlsArgs,

    #[command(flatten)]
    pub(crate) http2: Http2Args,
}

/// `--threading` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ThreadingArg {
    /// One current-thread runtime and SO_REUSEPORT listener per worker.
    PerCore,
    /// One multi-thread runtime whose workers steal tasks.
    WorkStealing,
}

/// `--hidden` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum HiddenArg {
    /// 403 Forbidden.
    Deny,
    /// 404 Not Found, and left out of listings.
    Ignore,
    /// Served and listed like other names.
    Allow,
}

/// `--symlinks` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SymlinksArg {
    /// Followed wherever they lead.
    Follow,
    /// Followed while the target stays under the root.
    WithinRoot,
    /// Never followed (403).
    Deny,
}

/// The file service for `--root`, configured from the flags.
fn files(root: &std::path::Path, args: &ServeArgs) -> anyhow::Result<Files> {
    let files = Files::new(root).map_err(|err| Usage(format!("--root {err}")))?;
    let mut cache = CacheControl::new()
        .public(args.cache_public)
        .immutable_fingerprinted(args.cache_immutable);
    if let Some(age) = args.cache_max_age {
        cache = cache.max_age(age.0);
    }
    Ok(files
        .index(args.index.iter().cloned())
        .listing(args.listing)
        .hidden(match args.hidden {
            HiddenArg::Deny => Hidden::Deny,
            HiddenArg::Ignore => Hidden::Ignore,
            HiddenArg::Allow => Hidden::Allow,
        })
        .symlinks(match args.symlinks {
            SymlinksArg::Follow => Symlinks::Follow,
            SymlinksArg::WithinRoot => Symlinks::WithinRoot,
            SymlinksArg::Deny => Symlinks::Deny,
        })
        .cache_control(cache)
        .precompressed(!args.no_precompressed)
        .open_file_cache(Some(args.open_file_cache.0)))
}

/// The arguments of `celer serve` with its `--config` file applied (flags
/// on the command line win), and the log level the file sets.
///
/// # Errors
///
/// A usage error for a bad file, or for a flag that needs another that
/// neither the command line nor the file gives.
pub(crate) fn configure(
    mut args: ServeArgs,
    matches: &clap::ArgMatches,
) -> anyhow::Result<(ServeArgs, Option<String>)> {
    let mut log_level = None;
    if let Some(path) = args.config.clone() {
        let loaded = crate::config::Config::load(&path)?;
        loaded.apply(&mut args, matches)?;
        log_level = loaded.log_level().map(str::to_owned);
    }
    needs(&args, matches)?;
    Ok((args, log_level))
}

/// Flags that mean nothing without another setting: `--listing` without
/// `--root` and the like (checked after the file is applied, which may
/// give the other).
fn needs(args: &ServeArgs, matches: &clap::ArgMatches) -> Result<(), Usage> {
    use clap::parser::ValueSource;
    let root = args.root.is_some();
    let tasks = args.tasks;
    let feeds = !args.feeds.is_empty();
    let table: [(&str, &str, bool, &str); 17] = [
        ("index", "--index", root, "--root"),
        ("listing", "--listing", root, "--root"),
        ("hidden", "--hidden", root, "--root"),
        ("symlinks", "--symlinks", root, "--root"),
        ("cache_max_age", "--cache-max-age", root, "--root"),
        ("cache_public", "--cache-public", root, "--root"),
        ("cache_immutable", "--cache-immutable", root, "--root"),
        ("no_precompressed", "--no-precompressed", root, "--root"),
        ("open_file_cache", "--open-file-cache", root, "--root"),
        ("data_dir", "--data-dir", tasks, "--tasks"),
        ("task_lease", "--task-lease", tasks, "--tasks"),
        ("task_command", "--task-command", tasks, "--tasks"),
        ("tasks_require_key", "--tasks-require-key", tasks, "--tasks"),
        ("feed_interval", "--feed-interval", feeds, "--feed"),
        ("feed_max_bytes", "--feed-max-bytes", feeds, "--feed"),
        ("feed_ca", "--feed-ca", feeds, "--feed"),
        ("feed_schema", "--feed-schema", feeds, "--feed"),
    ];
    for (id, flag, present, needed) in table {
        if !present && matches.value_source(id) == Some(ValueSource::CommandLine) {
            return Err(Usage(format!(
                "{flag} needs {needed} (on the command line or in the --config file)"
            )));
        }
    }
    Ok(())
}

/// Runs `celer serve` until SIGTERM or SIGINT; with `--check`, checks the
/// configuration and returns.
pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let site = match &args.root {
        Some(root) => Some(StaticSite::with_files(files(root, args)?)),
        None => None,
    };
    if args.check {
        return check(args);
    }
    match celer_server::raise_fd_limit() {
        Ok(n) => tracing::debug!(target: "celer::serve", limit = n, "open file limit"),
        Err(err) => {
            tracing::warn!(target: "celer::serve", error = %err, "cannot raise the open file limit")
        }
    }
    let tls = args.tls.config(args.http2.enabled())?;
    let bound = builder(args, tls.clone())
        .bind()
        .map_err(|err| Usage(format!("cannot listen on {err}")))?;
    let serving = match &site {
        Some(site) => format!("serving {}", site.root().display()),
        None => "serving the embedded welcome site".to_owned(),
    };
    let mut ready = format!(
        "celer: listening on {} ({}{serving})",
        bound.local_specs().join(", "),
        if tls.is_some() { "HTTPS, " } else { "" }
    );
    let redirects = bound.redirect_specs();
    if !redirects.is_empty() {
        ready.push_str(&format!("; redirecting {} to HTTPS", redirects.join(", ")));
    }
    let tasks = match args.tasks {
        true => Some(open_tasks(args)?),
        false => None,
    };
    if tasks.is_some() {
        ready.push_str(&format!(
            "; tasks at /tasks (dashboard /tasks/ui{}), stored in {}",
            if args.tasks_require_key {
                ", API key required"
            } else {
                ""
            },
            args.data_dir.display()
        ));
    }
    let feeds = match build_feeds(args)? {
        Some((feeds, sources)) => {
            let thread =
                celer_apps::feed::start(sources).context("cannot start the feed sources")?;
            Some((feeds, thread))
        }
        None => None,
    };
    if let Some((feeds, _)) = &feeds {
        let names: Vec<&str> = feeds.iter().map(|feed| feed.name()).collect();
        ready.push_str(&format!("; feeds at /feeds/: {}", names.join(", ")));
    }
    let signal = shutdown_signal(ready, tls);
    let served = match (&tasks, site, &feeds) {
        (Some(tasks), Some(site), _) => {
            with_feeds(celer_apps::tasks::with_tasks(tasks, site), &feeds).run(bound, signal)
        }
        (Some(tasks), None, _) => {
            with_feeds(celer_apps::tasks::with_tasks(tasks, Welcome::new()), &feeds)
                .run(bound, signal)
        }
        (None, Some(site), Some(_)) => {
            with_feeds(celer_apps::feed::with_site(site), &feeds).run(bound, signal)
        }
        (None, None, Some(_)) => {
            with_feeds(celer_apps::feed::with_site(Welcome::new()), &feeds).run(bound, signal)
        }
        (None, Some(site), None) => bound.run(site, signal),
        (None, None, None) => bound.run(Welcome::new(), signal),
    };
    if let Some((_, sources)) = feeds {
        sources.stop();
    }
    if let Some(tasks) = tasks {
        // Running tasks go back to the store for the next start.
        tasks.shutdown();
    }
    served.context("server failed")?;
    tracing::info!(target: "celer::serve", "stopped");
    Ok(ExitCode::SUCCESS)
}

/// `--check`: everything `run` would refuse before serving, without
/// binding, opening the task store or starting feed sources.
fn check(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    args.tls.config(args.http2.enabled())?;
    if args.tasks {
        task_settings(args)?;
    }
    build_feeds(args)?;
    match &args.config {
        Some(path) => eprintln!("celer: configuration OK ({} and the flags)", path.display()),
        None => eprintln!("celer: configuration OK (the flags)"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The feeds of `--feed` and their sources (not started); `None` without
/// any. Schemas are read and compiled here.
fn build_feeds(
    args: &ServeArgs,
) -> anyhow::Result<Option<(celer::feed::Feeds, celer_apps::feed::Sources)>> {
    if args.feeds.is_empty() {
        return Ok(None);
    }
    let mut every = celer::feed::limits::DEFAULT_INTERVAL;
    let mut intervals = Vec::new();
    for spec in &args.feed_interval {
        let (name, secs) = match spec.split_once('=') {
            Some((name, secs)) => (Some(name), secs),
            None => (None, spec.as_str()),
        };
        let secs: Secs = secs
            .parse()
            .map_err(|err| Usage(format!("--feed-interval {spec:?}: {err}")))?;
        if secs.0.is_zero() {
            return Err(Usage(format!("--feed-interval {spec:?}: must be more than 0")).into());
        }
        match name {
            Some(name) => intervals.push((name.to_owned(), secs.0)),
            None => every = secs.0,
        }
    }
    let ca_pem = match &args.feed_ca {
        Some(path) => Some(
            std::fs::read(path)
                .map_err(|err| Usage(format!("--feed-ca {}: {err}", path.display())))?,
        ),
        None => None,
    };
    let options = celer_apps::feed::FeedOptions {
        interval: every,
        intervals,
        max_document_bytes: usize::try_from(args.feed_max_bytes.0).unwrap_or(usize::MAX),
        ca_pem,
    };
    let mut schemas = Vec::new();
    for spec in &args.feed_schema {
        let (name, path) = spec
            .split_once('=')
            .ok_or_else(|| Usage(format!("--feed-schema {spec:?}: expected NAME=FILE")))?;
        if !args.feeds.iter().any(|feed| feed.name == name) {
            return Err(Usage(format!(
                "--feed-schema {spec:?}: no feed named {name:?} to check"
            ))
            .into());
        }
        let schema = celer_apps::feed::Schema::load(std::path::Path::new(path))
            .map_err(|err| Usage(format!("feed {name:?} schema {err}")))?;
        schemas.push((name.to_owned(), schema));
    }
    let built = celer_apps::feed::build_with(&args.feeds, &options, |spec, mut builder| {
        if let Some((_, max)) = args
            .feed_max_bytes_each
            .iter()
            .rev()
            .find(|(name, _)| *name == spec.name)
        {
            builder = builder.max_document_bytes(usize::try_from(max.0).unwrap_or(usize::MAX));
        }
        // The last schema given for a feed wins (the command line's come
        // after the file's).
        if let Some((_, schema)) = schemas.iter().rev().find(|(name, _)| *name == spec.name) {
            builder = builder.validator(schema.clone().into_validator());
        }
        Ok(builder)
    });
    let (feeds, sources) = built.map_err(|err| Usage(format!("--feed: {err}")))?;
    Ok(Some((feeds, sources)))
}

/// `app` with the feeds mounted, if any.
fn with_feeds(
    mut app: celer::App,
    feeds: &Option<(celer::feed::Feeds, celer_apps::feed::SourceThread)>,
) -> celer::App {
    if let Some((feeds, _)) = feeds {
        celer_apps::feed::mount(&mut app, feeds);
    }
    app
}

/// Opens the task store in `data_dir` and starts its runner, with the
/// built-in kinds.
fn open_tasks(args: &ServeArgs) -> anyhow::Result<celer_tasks::Tasks> {
    let kinds = task_settings(args)?;
    let mut config = celer_tasks::TasksConfig::new(&args.data_dir);
    config.lease = args.task_lease.0;
    config.require_key = args.tasks_require_key;
    let tasks = celer_tasks::Tasks::open(config, kinds)
        .with_context(|| format!("cannot open the task store in {}", args.data_dir.display()))?;
    if !args.tasks_require_key {
        // Keys exist but nothing asks for them: say so, once.
        let live = tasks.store().keys().map_or(0, |keys| {
            keys.iter().filter(|k| k.revoked_at.is_none()).count()
        });
        if live > 0 {
            tracing::warn!(
                target: "celer::serve",
                keys = live,
                "the task store has API keys, but without --tasks-require-key the task API \
                 does not ask for them"
            );
        }
    }
    Ok(tasks)
}

/// The task kinds of `--task-command`, the lease checked.
fn task_settings(args: &ServeArgs) -> Result<celer_tasks::Kinds, Usage> {
    if args.task_lease.0.is_zero() {
        return Err(Usage("--task-lease must be at least 1 second".to_owned()));
    }
    let mut kinds = celer_tasks::Kinds::new();
    for spec in &args.task_command {
        let (name, command) = task_command(spec, &kinds)
            .map_err(|err| Usage(format!("--task-command {spec:?}: {err}")))?;
        kinds.register_command(&name, command);
    }
    Ok(kinds)
}

/// Parses `NAME=["argv0", "arg", ...]`.
fn task_command(
    spec: &str,
    kinds: &celer_tasks::Kinds,
) -> Result<(String, celer_tasks::CommandKind), String> {
    let (name, argv) = spec
        .split_once('=')
        .ok_or("expected NAME=ARGV, ARGV a JSON array of strings")?;
    if !kinds.is_free_name(name) {
        return Err(format!(
            "{name:?} is taken or not a kind name (ASCII letters, digits, '-', '_', '.')"
        ));
    }
    let argv: Vec<String> = serde_json::from_str(argv)
        .map_err(|err| format!("ARGV is not a JSON array of strings: {err}"))?;
    let command = celer_tasks::CommandKind::new(argv).ok_or("ARGV is empty")?;
    Ok((name.to_owned(), command))
}

/// The engine configured from the command line.
fn builder(args: &ServeArgs, tls: Option<TlsConfig>) -> celer_server::Builder {
    let mut builder = Server::builder()
        .limits(limits_of(args))
        .server_header((!args.no_server_header).then(|| args.server_header.clone()))
        .http2(args.http2.enabled())
        .threading(match args.threading {
            ThreadingArg::PerCore => Threading::PerCore,
            ThreadingArg::WorkStealing => Threading::WorkStealing,
        })
        .bind_options(BindOptions {
            backlog: args.backlog,
            unix_mode: args.unix_mode,
            ..BindOptions::default()
        });
    if let Some(n) = args.workers {
        builder = builder.workers(n.into());
    }
    let default_listen = if tls.is_some() {
        DEFAULT_LISTEN_TLS
    } else {
        DEFAULT_LISTEN
    };
    let default_listen = [Listen::parse(default_listen).expect("a valid default")];
    let listens = if args.listen.is_empty() {
        &default_listen[..]
    } else {
        &args.listen[..]
    };
    for listen in listens {
        builder = match tls {
            Some(_) => builder.listen_tls(listen.clone()),
            None => builder.listen(listen.clone()),
        };
    }
    for listen in args.tls.redirect_http() {
        builder = builder.redirect_http(listen.clone());
    }
    if let Some(tls) = tls {
        builder = builder.tls(tls).hsts(args.tls.hsts());
    }
    builder
}

fn limits_of(args: &ServeArgs) -> Limits {
    let mut limits = Limits {
        max_head_bytes: usize::try_from(args.max_head.0).unwrap_or(usize::MAX),
        max_body_bytes: (args.max_body.0 != 0).then_some(args.max_body.0),
        max_uri_bytes: usize::try_from(args.max_uri.0).unwrap_or(usize::MAX),
        max_headers: args.max_headers as usize,
        max_drain_bytes: args.max_drain.0,
        max_connections: args.max_connections as usize,
        max_requests_per_connection: (args.max_requests_per_connection != 0)
            .then_some(args.max_requests_per_connection),
        head_timeout: args.head_timeout.0,
        body_timeout: args.body_timeout.0,
        keep_alive_timeout: args.keep_alive_timeout.0,
        write_timeout: args.write_timeout.0,
        shutdown_timeout: args.shutdown_timeout.0,
        ..Limits::default()
    };
    args.tls.apply_limits(&mut limits);
    args.http2.apply_limits(&mut limits);
    limits
}

/// Resolves on the first SIGTERM or SIGINT; reloads the TLS certificates on
/// each SIGHUP. The handlers are installed on the first poll, before the
/// start-up line is printed, so a signal sent by whoever reads that line is
/// always caught.
async fn shutdown_signal(ready: String, tls: Option<TlsConfig>) {
    use tokio::signal::unix::{SignalKind, signal};
    let handlers = signal(SignalKind::terminate()).and_then(|t| {
        Ok((
            t,
            signal(SignalKind::interrupt())?,
            signal(SignalKind::hangup())?,
        ))
    });
    eprintln!("{ready}");
    let (mut term, mut int, mut hup) = match handlers {
        Ok(handlers) => handlers,
        Err(err) => {
            tracing::error!(target: "celer::serve", error = %err, "cannot catch SIGTERM, SIGINT and SIGHUP");
            return std::future::pending().await;
        }
    };
    let name = loop {
        tokio::select! {
            _ = term.recv() => break "SIGTERM",
            _ = int.recv() => break "SIGINT",
            _ = hup.recv() => match &tls {
                // Reading files blocks; this thread serves no connections.
                Some(tls) => tls::reload(tls),
                None => tracing::info!(target: "celer::serve", "SIGHUP: no TLS certificates to reload"),
            },
        }
    };
    tracing::info!(target: "celer::serve", signal = name, "shutting down gracefully");
}

fn header_value(s: &str) -> Result<HeaderValue, String> {
    HeaderValue::from_str(s).map_err(|_| format!("{s:?} is not a valid header value"))
}

pub(crate) fn octal_mode(s: &str) -> Result<u32, String> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode <= 0o7777 => Ok(mode),
        _ => Err(format!(
            "{s:?} is not an octal file mode (such as 660 or 0600)"
        )),
    }
}
