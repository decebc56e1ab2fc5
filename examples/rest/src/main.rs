//! The `example-rest` server: the API of the library half, served by
//! `celer::serve_from_args`.
//!
//! Run with `cargo run -p example-rest -- --listen tcp://127.0.0.1:8080`.
//!
//! ```text
//! example-rest [--listen SPEC]... [--workers N] (--help for all)
//! ```

fn main() -> std::process::ExitCode {
    celer::serve_from_args(example_rest::app())
}
