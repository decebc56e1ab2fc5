//! [`Options`]: the standard command-line flags of a server (`--listen`,
//! `--listen-tls`, `--tls-cert`, `--tls-key`, `--workers`, `--threading`),
//! parsed from the arguments, with a usage error that names the problem,
//! and turned into a bound server.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;

use super::{Bound, Builder, Listen, Server, Threading, TlsConfig};
use crate::App;

/// Where [`Options`] listens when no `--listen` or `--listen-tls` is given.
pub const DEFAULT_LISTEN: &str = "tcp://127.0.0.1:8080";

/// The standard flags of a server built on Celer, parsed from the command
/// line: what makes a `main` one line ([`serve_from_args`](crate::serve_from_args)).
///
/// ```text
#[doc = include_str!("options.txt")]
/// ```
///
/// An app with flags of its own takes the standard ones out first
/// ([`Options::extract`]) and parses the rest with its own parser (clap,
/// say), appending [`Options::HELP`] to its help:
///
/// ```
/// use celer::serve::Options;
///
/// let mut args: Vec<String> = ["app", "--listen", "tcp://127.0.0.1:0", "--level", "9", "--workers=2"]
///     .map(String::from)
///     .into();
/// let options = Options::extract(&mut args)?;
/// assert_eq!(args, ["app", "--level", "9"]); // left for the app's parser
/// assert_eq!(options.workers, Some(2));
/// let bound = options.bind()?;
/// assert!(bound.tcp_addr().is_some());
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// `--listen SPEC` (repeatable): plain listeners, or TLS ones when
    /// `--tls-cert` is given without `--listen-tls`.
    pub listen: Vec<Listen>,
    /// `--listen-tls SPEC` (repeatable): TLS listeners.
    pub listen_tls: Vec<Listen>,
    /// `--tls-cert PEM`: the certificate chain of the TLS listeners.
    pub tls_cert: Option<PathBuf>,
    /// `--tls-key PEM`: its private key.
    pub tls_key: Option<PathBuf>,
    /// `--workers N`: worker threads; `None` is one per CPU.
    pub workers: Option<usize>,
    /// `--threading per-core|work-stealing`; default per-core.
    pub threading: Threading,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            listen: Vec::new(),
            listen_tls: Vec::new(),
            tls_cert: None,
            tls_key: None,
            workers: None,
            threading: Threading::PerCore,
        }
    }
}

/// A command line [`Options`] cannot use: the message names the flag and
/// what is wrong with it (`--help` is one too, with the help as message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    message: String,
    help: bool,
}

impl UsageError {
    fn new(message: impl Into<String>) -> UsageError {
        UsageError {
            message: message.into(),
            help: false,
        }
    }

    /// True when the command line asked for `--help` (or `-h`): the
    /// message is then the help, and the program should exit with success.
    pub fn is_help(&self) -> bool {
        self.help
    }

    /// Prints the message (to stdout for `--help`, else to stderr with the
    /// program's name and a pointer to `--help`) and exits: 0 for
    /// `--help`, 2 for a usage error.
    pub fn exit(&self) -> ! {
        if self.help {
            println!("{}", self.message);
            std::process::exit(0);
        }
        let program = program_name();
        eprintln!(
            "{program}: {}\nTry '{program} --help' for the options.",
            self.message
        );
        std::process::exit(2);
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UsageError {}

impl From<UsageError> for io::Error {
    fn from(err: UsageError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, err)
    }
}

/// The program's file name, for messages.
pub(super) fn program_name() -> String {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "server".to_owned())
}

/// The flags that take a value.
const FLAGS: [&str; 6] = [
    "--listen",
    "--listen-tls",
    "--tls-cert",
    "--tls-key",
    "--workers",
    "--threading",
];

impl Options {
    /// The help text of the standard flags.
    pub const HELP: &'static str = include_str!("options.txt");

    /// [`Options::HELP`] under a heading, for the help of an app's own
    /// parser (clap's `after_help`, say).
    pub fn help() -> String {
        format!("Server options:\n{}", Options::HELP.trim_end())
    }

    /// Parses the standard flags from `args` (the program's name not
    /// included); anything else is an error naming it, `--help` an error
    /// whose [`is_help`](UsageError::is_help) is true. Values come as
    /// `--flag VALUE` or `--flag=VALUE`.
    ///
    /// ```
    /// use celer::serve::Options;
    /// let err = Options::parse(["--workers", "many"]).unwrap_err();
    /// assert_eq!(err.to_string(), "--workers: expected a number of threads (1 or more), got \"many\"");
    /// let err = Options::parse(["--listen-tls", "tcp://127.0.0.1:8443"]).unwrap_err();
    /// assert_eq!(err.to_string(), "--listen-tls needs --tls-cert and --tls-key");
    /// ```
    pub fn parse<I>(args: I) -> Result<Options, UsageError>
    where
        I: IntoIterator,
        I::Item: Into<OsString>,
    {
        let mut args = strings(args)?;
        args.insert(0, String::new());
        if args.iter().any(|a| a == "--help" || a == "-h") {
            return Err(UsageError {
                message: format!("Usage: {} [OPTIONS]\n\n{}", program_name(), Options::help()),
                help: true,
            });
        }
        let options = Options::extract(&mut args)?;
        if let Some(extra) = args.get(1) {
            return Err(UsageError::new(if extra.starts_with('-') {
                format!("unknown option {extra}")
            } else {
                format!("unexpected argument {extra:?}")
            }));
        }
        Ok(options)
    }

    /// Takes the standard flags out of `args` (a whole command line, the
    /// program's name first, which is kept), leaving everything else, in
    /// order, for the app's own parser. A value that does not parse, a
    /// flag without its value or TLS flags that do not go together are
    /// errors naming them.
    pub fn extract(args: &mut Vec<String>) -> Result<Options, UsageError> {
        let mut options = Options::default();
        let mut rest = Vec::with_capacity(args.len());
        let mut iter = std::mem::take(args).into_iter();
        if let Some(program) = iter.next() {
            rest.push(program);
        }
        while let Some(arg) = iter.next() {
            if arg == "--" {
                rest.push(arg);
                rest.extend(iter.by_ref());
                break;
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) if FLAGS.contains(&flag) => {
                    (flag.to_owned(), Some(value.to_owned()))
                }
                _ if FLAGS.contains(&arg.as_str()) => (arg.clone(), None),
                _ => {
                    rest.push(arg);
                    continue;
                }
            };
            let value = match inline.or_else(|| iter.next()) {
                Some(value) => value,
                None => return Err(UsageError::new(format!("{flag} needs a value"))),
            };
            options.set(&flag, &value)?;
        }
        *args = rest;
        options.check()?;
        Ok(options)
    }

    /// Parses the process's arguments ([`Options::parse`]); on `--help`
    /// prints the help and exits, on a usage error prints it and exits
    /// with status 2.
    pub fn from_env() -> Options {
        match Options::parse(std::env::args_os().skip(1)) {
            Ok(options) => options,
            Err(err) => err.exit(),
        }
    }

    /// Takes the standard flags out of the process's arguments
    /// ([`Options::extract`]) and returns them with the rest (the program's
    /// name first) for the app's own parser; a usage error is printed and
    /// exits with status 2. `--help` is left in the rest: the app's parser
    /// prints its help, which should include [`Options::HELP`].
    pub fn from_env_with_rest() -> (Options, Vec<String>) {
        let mut args = match strings(std::env::args_os()) {
            Ok(args) => args,
            Err(err) => err.exit(),
        };
        match Options::extract(&mut args) {
            Ok(options) => (options, args),
            Err(err) => err.exit(),
        }
    }

    /// Listens on `spec` when no `--listen` or `--listen-tls` was given
    /// (instead of [`DEFAULT_LISTEN`]).
    pub fn or_listen(mut self, spec: Listen) -> Options {
        if self.listen.is_empty() && self.listen_tls.is_empty() {
            self.listen.push(spec);
        }
        self
    }

    fn set(&mut self, flag: &str, value: &str) -> Result<(), UsageError> {
        let listen = || {
            value
                .parse::<Listen>()
                .map_err(|err| UsageError::new(format!("{flag}: {err}")))
        };
        match flag {
            "--listen" => self.listen.push(listen()?),
            "--listen-tls" => self.listen_tls.push(listen()?),
            "--tls-cert" => self.tls_cert = Some(PathBuf::from(value)),
            "--tls-key" => self.tls_key = Some(PathBuf::from(value)),
            "--workers" => match value.parse::<usize>() {
                Ok(n) if n > 0 => self.workers = Some(n),
                _ => {
                    return Err(UsageError::new(format!(
                        "--workers: expected a number of threads (1 or more), got {value:?}"
                    )));
                }
            },
            "--threading" => {
                self.threading = match value {
                    "per-core" => Threading::PerCore,
                    "work-stealing" => Threading::WorkStealing,
                    _ => {
                        return Err(UsageError::new(format!(
                            "--threading: expected per-core or work-stealing, got {value:?}"
                        )));
                    }
                }
            }
            _ => unreachable!("only flags of FLAGS are set"),
        }
        Ok(())
    }

    fn check(&self) -> Result<(), UsageError> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => return Err(UsageError::new("--tls-cert needs --tls-key")),
            (None, Some(_)) => return Err(UsageError::new("--tls-key needs --tls-cert")),
            (None, None) if !self.listen_tls.is_empty() => {
                return Err(UsageError::new(
                    "--listen-tls needs --tls-cert and --tls-key",
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// A server [`Builder`] with these listeners, workers and threading,
    /// and the TLS certificate loaded (an error names the file that does
    /// not load). With `--tls-cert` and no `--listen-tls`, the `--listen`
    /// listeners serve TLS; with neither kind of listener,
    /// [`DEFAULT_LISTEN`].
    pub fn builder(&self) -> io::Result<Builder> {
        self.check()?;
        let mut builder = Server::builder().threading(self.threading);
        if let Some(n) = self.workers {
            builder = builder.workers(n);
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(
                TlsConfig::builder()
                    .cert_files(cert, key)
                    .build()
                    .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err))?,
            ),
            _ => None,
        };
        let mut listen = self.listen.clone();
        if listen.is_empty() && self.listen_tls.is_empty() {
            listen.push(DEFAULT_LISTEN.parse().expect("a valid spec"));
        }
        let all_tls = tls.is_some() && self.listen_tls.is_empty();
        for l in listen {
            builder = if all_tls {
                builder.listen_tls(l)
            } else {
                builder.listen(l)
            };
        }
        for l in self.listen_tls.iter().cloned() {
            builder = builder.listen_tls(l);
        }
        if let Some(tls) = tls {
            builder = builder.tls(tls);
        }
        Ok(builder)
    }

    /// Binds [`Options::builder`]'s server.
    pub fn bind(&self) -> io::Result<Bound> {
        self.builder()?.bind()
    }

    /// Serves `app` as [`celer::serve`](crate::serve()) does (until Ctrl-C
    /// or `SIGTERM`, then gracefully), on these options; raises the limit
    /// of open files to its hard limit first, since every connection is
    /// one.
    pub fn serve(self, app: App) -> io::Result<()> {
        super::inside_runtime("Options::serve", "options.serve_async(app).await")?;
        let bound = self.bind_logged()?;
        app.run(bound, super::shutdown_signal())
    }

    /// [`Options::serve`] on the current tokio runtime.
    pub async fn serve_async(self, app: App) -> io::Result<()> {
        let bound = self.bind_logged()?;
        super::serve_bound_async(bound, app).await
    }

    fn bind_logged(&self) -> io::Result<Bound> {
        let _ = super::raise_fd_limit();
        let bound = self.bind()?;
        super::log_listening(&bound);
        Ok(bound)
    }
}

fn strings<I>(args: I) -> Result<Vec<String>, UsageError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    args.into_iter()
        .map(|arg| {
            arg.into()
                .into_string()
                .map_err(|arg| UsageError::new(format!("argument {arg:?} is not valid UTF-8")))
        })
        .collect()
}
