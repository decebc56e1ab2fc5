//! Serves the guestbook with the standard server flags
//! (`example-guestbook --help` lists them):
//! `example-guestbook --listen tcp://127.0.0.1:8080`.
//! Sign in as `demo` / `guestbook`. Ctrl-C or SIGTERM shut it down
//! gracefully.

use std::process::ExitCode;

use example_guestbook::Config;

fn main() -> ExitCode {
    tracing_subscriber::fmt::init();
    let app = Config::random()
        .map_err(|err| err.to_string())
        .and_then(|config| example_guestbook::app(config).map_err(|err| err.to_string()));
    match app {
        Ok(app) => celer::serve_from_args(app),
        Err(err) => {
            eprintln!("example-guestbook: {err}");
            ExitCode::FAILURE
        }
    }
}
