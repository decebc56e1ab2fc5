//! ws-syscalls: what batched submission (io_uring) changes in the CPU cost of
//! WebSocket fan-out and echo over loopback TCP, against plain syscalls.
//!
//! ```text
//! ws-syscalls fanout [--conns 10000] [--rounds 40] [--warmup 3] [--only V,..]
//!                    [--sender-cpu 0] [--recv-cpu 1] [--csv FILE] [--perf "ARGS"]
//! ws-syscalls echo   [--conns 256] [--phase-ms 2000] [--repeats 7] [--only V,..]
//!                    [--client-cpu 1] [--csv FILE] [--perf "ARGS"]
//! ```
//! Run the sender/server under `taskset -c 0`; the receiver/client is
//! started under `taskset -c <--recv-cpu/--client-cpu>`. `--perf "stat -e
//! raw_syscalls:sys_enter -o FILE"` attaches `perf` to this process for the
//! measured rounds only (give a single variant with `--only`).

mod echo;
mod fanout;
mod ring;
mod util;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let a = util::Args(argv.clone());
    let port = || {
        argv.get(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| util::die("missing PORT"))
    };
    let count = || {
        argv.get(2)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| util::die("missing N"))
    };
    let r = match argv.first().map(|s| s.as_str()) {
        Some("fanout") => fanout::run(&a),
        Some("fanout-recv") => fanout::recv(port(), count()),
        Some("echo") => echo::run(&a),
        Some("echo-client") => echo::client(port(), count()),
        _ => util::die("usage: ws-syscalls fanout|echo [options] (see src/main.rs)"),
    };
    if let Err(e) = r {
        util::die(&e.to_string());
    }
}
