//! Serves the guestbook: `example-guestbook [--listen tcp://127.0.0.1:8080]`.
//! Sign in as `demo` / `guestbook`. Ctrl-C or SIGTERM shut it down
//! gracefully.

use celer::serve::Listen;
use example_guestbook::Config;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt::init();
    let args: Vec<String> = std::env::args().collect();
    let listen: Listen = match args.iter().position(|a| a == "--listen") {
        Some(at) => args.get(at + 1).ok_or("--listen needs a value")?.parse()?,
        None => "tcp://127.0.0.1:8080".parse()?,
    };
    let app = example_guestbook::app(Config::random()?)?;
    Ok(celer::serve(listen, app)?)
}
