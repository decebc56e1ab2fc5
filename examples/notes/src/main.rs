//! Serves the notes API with the standard server flags
//! (`example-notes --help` lists them): `example-notes --listen tcp://127.0.0.1:8080`.
//! Ctrl-C or SIGTERM shut it down gracefully.

use std::process::ExitCode;

fn main() -> ExitCode {
    tracing_subscriber::fmt::init();
    match example_notes::app(concat!(env!("CARGO_MANIFEST_DIR"), "/static")) {
        Ok(app) => celer::serve_from_args(app),
        Err(err) => {
            eprintln!("example-notes: {err}");
            ExitCode::FAILURE
        }
    }
}
