//! Terminal and Markdown renderings of a report.

use std::fmt::Write;

use super::{
    FanoutReport, HangReport, Latency, Output, RoundReport, RunReport, Settings, SseReport,
    SweepLevel,
};

/// A latency in µs, in the unit that reads best.
pub(crate) fn duration_us(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.1}µs")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// An integer with thousands separators.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (idx, ch) in digits.chars().enumerate() {
        if idx > 0 && (digits.len() - idx).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Bytes in B, KiB, MiB or GiB.
pub(crate) fn bytes(n: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = n;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

/// One line describing the run.
pub(crate) fn describe(output: &Output) -> String {
    let settings = &output.settings;
    if let Some(hang) = &output.hang {
        let what = if settings.websocket.is_some() {
            "idle WebSockets"
        } else {
            "idle keep-alive connections"
        };
        return format!("{} {what} held for {}s", hang.connections, hang.idle_s);
    }
    if let Some(sse) = &output.sse {
        return format!(
            "SSE fan-out to {} subscribers, {} updates of {} ({} bytes), {} threads{}",
            sse.subscribers,
            sse.updates_planned,
            sse.file,
            sse.document_bytes,
            settings.threads,
            if settings.tls { ", TLS" } else { "" },
        );
    }
    if let Some(fanout) = &output.fanout {
        return format!(
            "broadcast fan-out to {} receivers, {} rounds, {}-byte {} messages sent by {} to {}{}",
            fanout.receivers,
            fanout.rounds_planned,
            settings.websocket.as_ref().map_or(0, |ws| ws.message_size),
            message_kind(settings),
            fanout.trigger,
            fanout.trigger_url,
            deflate_note(settings),
        );
    }
    let mut line = describe_load(settings);
    if let Some(levels) = &output.sweep {
        let levels: Vec<String> = levels.iter().map(|l| l.connections.to_string()).collect();
        line = format!(
            "sweep over {} connections; each level: {line}",
            levels.join(", ")
        );
    }
    line
}

fn describe_load(settings: &Settings) -> String {
    let how_long = match (settings.duration_s, settings.requests) {
        (Some(d), Some(n)) => format!("{d}s or {} requests", count(n)),
        (Some(d), None) => format!("{d}s"),
        (None, Some(n)) => format!("{} requests", count(n)),
        (None, None) => String::new(),
    };
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    if let Some(ws) = &settings.websocket {
        let how_long = how_long.replace("requests", "messages");
        let what = match &ws.message_file {
            Some(path) => format!(
                "echo of the {} messages of {path} (mean {} bytes)",
                message_kind(settings),
                ws.message_size
            ),
            None => format!(
                "echo of {}-byte {} messages",
                ws.message_size,
                message_kind(settings)
            ),
        };
        let mut line = format!(
            "{how_long}, {}, {}, {what}, {} in flight per connection{}",
            plural(settings.threads, "thread"),
            plural(settings.connections, "WebSocket"),
            ws.in_flight,
            deflate_note(settings),
        );
        if settings.warmup_s > 0.0 {
            let _ = write!(line, ", {}s warm-up", settings.warmup_s);
        }
        return line;
    }
    let mut line = format!(
        "{how_long}, {}, {}, {}",
        plural(settings.threads, "thread"),
        plural(settings.connections, "connection"),
        if settings.keep_alive {
            "keep-alive"
        } else {
            "close"
        },
    );
    if settings.pipeline > 1 {
        let _ = write!(line, ", pipeline {}", settings.pipeline);
    }
    match settings.rate {
        Some(rate) => {
            let _ = write!(line, ", open loop at {rate} req/s");
        }
        None => line.push_str(", closed loop"),
    }
    if settings.warmup_s > 0.0 {
        let _ = write!(line, ", {}s warm-up", settings.warmup_s);
    }
    line
}

fn message_kind(settings: &Settings) -> &'static str {
    match &settings.websocket {
        Some(ws) if ws.binary => "binary",
        _ => "text",
    }
}

fn deflate_note(settings: &Settings) -> &'static str {
    match &settings.websocket {
        Some(ws) if ws.deflate_offered => ", permessage-deflate offered",
        _ => "",
    }
}

const PERCENTILES: [&str; 8] = ["p50", "p75", "p90", "p99", "p99.9", "max", "mean", "stdev"];

fn latency_cells(latency: &Latency) -> [String; 8] {
    [
        latency.p50,
        latency.p75,
        latency.p90,
        latency.p99,
        latency.p999,
        latency.max,
        latency.mean,
        latency.stdev,
    ]
    .map(duration_us)
}

fn error_line(run: &RunReport) -> String {
    if run.errors.is_empty() {
        return "none".to_string();
    }
    let parts: Vec<String> = run
        .errors
        .iter()
        .map(|(kind, n)| format!("{kind} {}", count(*n)))
        .collect();
    parts.join(", ")
}

/// Connections set up and failed set-ups over the whole run, warm-up
/// included.
fn setup_line(run: &RunReport) -> String {
    let mut line = format!(
        "{} connections set up (warm-up included)",
        count(run.connections_set_up)
    );
    if run.setup_errors.is_empty() {
        line.push_str(", no failure");
    } else {
        let parts: Vec<String> = run
            .setup_errors
            .iter()
            .map(|(kind, n)| format!("{kind} {}", count(*n)))
            .collect();
        line.push_str(&format!(", FAILED: {}", parts.join(", ")));
    }
    line
}

fn status_line(run: &RunReport) -> String {
    let parts: Vec<String> = run
        .status
        .iter()
        .map(|(code, n)| format!("{code}: {}", count(*n)))
        .collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// The server's CPU over a push run, and per delivery when known.
fn server_delivery_lines(lines: &mut Vec<(&'static str, String)>, server: &super::ServerCpu) {
    lines.push((
        "server CPU",
        format!(
            "{:.2}s over {:.2}s ({:.2} cores)",
            server.cpu_seconds, server.wall_seconds, server.cores
        ),
    ));
    if let Some(us) = server.cpu_us_per_request {
        lines.push(("server CPU per delivery", format!("{us:.2} µs")));
    }
}

/// Counts by kind, `"refused 2, reset 1"`, or `"none"`.
fn by_kind(map: &std::collections::BTreeMap<&'static str, u64>) -> String {
    let parts: Vec<String> = map.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// The terminal rendering.
pub(crate) fn terminal(output: &Output) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "celer bench {}", output.settings.urls.join(", "));
    let _ = writeln!(out, "  {}", describe(output));
    let websocket = output.settings.websocket.is_some();
    if let Some(run) = &output.run {
        terminal_run(&mut out, run, websocket);
    }
    if let Some(levels) = &output.sweep {
        terminal_sweep(&mut out, levels);
    }
    if let Some(hang) = &output.hang {
        terminal_hang(&mut out, hang);
    }
    let rounds = output
        .fanout
        .as_ref()
        .map(|f| ("round", fanout_lines(f), &f.rounds))
        .or_else(|| {
            output
                .sse
                .as_ref()
                .map(|s| ("update", sse_lines(s), &s.updates))
        });
    if let Some((what, lines, rounds)) = rounds {
        out.push('\n');
        for (name, value) in lines {
            let _ = writeln!(out, "  {name:<27}{value}");
        }
        let _ = write!(out, "\n  {what:>6}");
        for name in ROUND_COLUMNS {
            let _ = write!(out, "{name:>11}");
        }
        out.push('\n');
        for cells in round_rows(rounds) {
            let _ = write!(out, "  {:>6}", cells[0]);
            for cell in &cells[1..] {
                let _ = write!(out, "{cell:>11}");
            }
            out.push('\n');
        }
    }
    out
}

const ROUND_COLUMNS: [&str; 6] = ["received", "missing", "first", "p50", "p99", "last"];

fn round_rows(rounds: &[RoundReport]) -> Vec<[String; 7]> {
    let cell = |us: Option<f64>| us.map_or_else(|| "-".to_string(), duration_us);
    rounds
        .iter()
        .map(|r| {
            [
                r.round.to_string(),
                count(r.received as u64),
                count(r.missing as u64),
                cell(r.first_us),
                cell(r.p50_us),
                cell(r.p99_us),
                cell(r.last_us),
            ]
        })
        .collect()
}

fn sse_lines(sse: &SseReport) -> Vec<(&'static str, String)> {
    let cell = |us: Option<f64>| us.map_or_else(|| "n/a".to_string(), duration_us);
    let mut lines = vec![
        (
            "subscribers ready",
            format!(
                "{} of {} in {:.2}s",
                count(sse.ready as u64),
                count(sse.subscribers as u64),
                sse.subscribe_s
            ),
        ),
        ("subscribe failures", by_kind(&sse.errors)),
        ("streams lost", by_kind(&sse.lost)),
        (
            "updates complete",
            format!("{} of {}", sse.complete_updates, sse.updates.len()),
        ),
        ("deliveries missing", count(sse.missing)),
    ];
    if let Some(l) = &sse.latency_us {
        lines.push((
            "update to receipt",
            format!(
                "p50 {}, p99 {}, max {} ({} deliveries)",
                duration_us(l.p50),
                duration_us(l.p99),
                duration_us(l.max),
                count(l.count)
            ),
        ));
    }
    lines.push(("median time to last", cell(sse.median_last_us)));
    if let (Some(before), Some(after)) = (sse.rss_before, sse.rss_subscribed) {
        lines.push((
            "server RSS",
            format!(
                "{} before, {} subscribed: {} per subscriber",
                bytes(before as f64),
                bytes(after as f64),
                sse.bytes_per_subscriber
                    .map_or_else(|| "n/a".to_string(), bytes)
            ),
        ));
    }
    if let Some(server) = &sse.server {
        server_delivery_lines(&mut lines, server);
    }
    if let Some(gzip) = &sse.gzip {
        lines.push((
            "gzip streams",
            format!(
                "{}: {} read as {} ({} segments, {} inflated, {} subscribers on their own inflater)",
                count(gzip.streams),
                bytes(gzip.compressed_bytes as f64),
                bytes(gzip.plain_bytes as f64),
                count(gzip.segments),
                count(gzip.inflated),
                count(gzip.continuous)
            ),
        ));
    }
    lines
}

fn fanout_lines(fanout: &FanoutReport) -> Vec<(&'static str, String)> {
    let cell = |us: Option<f64>| us.map_or_else(|| "n/a".to_string(), duration_us);
    let mut lines = vec![
        (
            "receivers connected",
            format!(
                "{} of {}",
                count(fanout.connected as u64),
                count(fanout.receivers as u64)
            ),
        ),
        (
            "rounds complete",
            format!("{} of {}", fanout.complete_rounds, fanout.rounds.len()),
        ),
        ("messages missing", count(fanout.missing)),
        ("median time to last", cell(fanout.median_last_us)),
        ("median time to p50", cell(fanout.median_p50_us)),
        ("median time to p99", cell(fanout.median_p99_us)),
        ("receiver errors", by_kind(&fanout.errors)),
        ("trigger errors", by_kind(&fanout.trigger_errors)),
    ];
    if let Some(server) = &fanout.server {
        server_delivery_lines(&mut lines, server);
    }
    lines
}

fn terminal_latency(out: &mut String, title: &str, latency: &Latency) {
    let _ = write!(out, "  {title:<12}");
    for name in PERCENTILES {
        let _ = write!(out, "{name:>10}");
    }
    let _ = write!(out, "\n  {:<12}", "");
    for cell in latency_cells(latency) {
        let _ = write!(out, "{cell:>10}");
    }
    out.push('\n');
}

fn terminal_run(out: &mut String, run: &RunReport, websocket: bool) {
    let (noun, unit, each) = if websocket {
        ("Messages", "msg/s", "message")
    } else {
        ("Requests", "req/s", "request")
    };
    out.push('\n');
    terminal_latency(out, "Latency", &run.latency_us);
    if let Some(uncorrected) = &run.uncorrected_latency_us {
        terminal_latency(out, "Uncorrected", uncorrected);
    }
    let _ = writeln!(
        out,
        "\n  {:<12}{} in {:.2}s, {:.2} {unit}",
        noun,
        count(run.responses),
        run.elapsed_s,
        run.requests_per_sec
    );
    let _ = writeln!(
        out,
        "  {:<12}{} read, {}/s, {:.3} Gbit/s",
        "Transfer",
        bytes(run.bytes as f64),
        bytes(run.bytes_per_sec),
        run.gbit_per_sec
    );
    if let Some(connect) = &run.connect_us {
        let _ = writeln!(
            out,
            "  {:<12}{} opened, p50 {}, p99 {}, max {}",
            "Connect",
            count(run.connections_opened),
            duration_us(connect.p50),
            duration_us(connect.p99),
            duration_us(connect.max)
        );
    }
    let _ = writeln!(out, "  {:<12}{}", "Set-up", setup_line(run));
    if let Some(tls) = &run.tls_handshake_us {
        let _ = writeln!(
            out,
            "  {:<12}p50 {}, p99 {}, max {}",
            "TLS",
            duration_us(tls.p50),
            duration_us(tls.p99),
            duration_us(tls.max)
        );
    }
    if let Some(upgrade) = &run.upgrade_us {
        let _ = writeln!(
            out,
            "  {:<12}p50 {}, p99 {}, max {}",
            "Upgrade",
            duration_us(upgrade.p50),
            duration_us(upgrade.p99),
            duration_us(upgrade.max)
        );
    }
    if !websocket {
        let _ = writeln!(out, "  {:<12}{}", "Status", status_line(run));
    }
    let _ = writeln!(out, "  {:<12}{}", "Errors", error_line(run));
    if run.status_errors > 0 {
        let _ = writeln!(out, "  {:<12}{}", "4xx/5xx", count(run.status_errors));
    }
    if let Some(server) = &run.server {
        let per_request = server
            .cpu_us_per_request
            .map_or_else(|| "n/a".to_string(), |us| format!("{us:.2} µs"));
        let per_cpu_second = server
            .per_cpu_second
            .map_or_else(|| "n/a".to_string(), |n| format!("{n:.0}"));
        let _ = writeln!(
            out,
            "  {:<12}{:.2}s over {:.2}s ({:.2} cores), {per_request} per {each}, \
             {per_cpu_second} {unit} per CPU-second (pid {:?})",
            "Server CPU", server.cpu_seconds, server.wall_seconds, server.cores, server.pids
        );
    }
}

fn sweep_cells(level: &SweepLevel) -> [String; 7] {
    [
        level.connections.to_string(),
        count(level.responses),
        duration_us(level.p50_us),
        duration_us(level.p99_us),
        format!("{:.1}", level.requests_per_sec),
        format!("{:.2}%", level.error_rate * 100.0),
        level
            .cpu_us_per_request
            .map_or_else(|| "-".to_string(), |us| format!("{us:.2}")),
    ]
}

const SWEEP_COLUMNS: [&str; 7] = [
    "users",
    "requests",
    "p50",
    "p99",
    "req/s",
    "errors",
    "cpu µs/req",
];

fn terminal_sweep(out: &mut String, levels: &[SweepLevel]) {
    out.push('\n');
    for name in SWEEP_COLUMNS {
        let _ = write!(out, "{name:>12}");
    }
    out.push('\n');
    for level in levels {
        for cell in sweep_cells(level) {
            let _ = write!(out, "{cell:>12}");
        }
        out.push('\n');
    }
}

fn hang_lines(hang: &HangReport) -> Vec<(&'static str, String)> {
    let mut lines = vec![
        ("connections", count(hang.connections as u64)),
        ("established", count(hang.established)),
        ("alive at end", count(hang.alive_at_end)),
        ("idle time", format!("{:.2}s", hang.idle_s)),
    ];
    let errors: Vec<String> = hang
        .errors
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    lines.push((
        "errors",
        if errors.is_empty() {
            "none".to_string()
        } else {
            errors.join(", ")
        },
    ));
    for (name, value) in [
        ("server RSS before", hang.rss_before),
        ("server RSS idle", hang.rss_during),
        ("server RSS after", hang.rss_after),
    ] {
        if let Some(value) = value {
            lines.push((name, bytes(value as f64)));
        }
    }
    if let Some(per) = hang.bytes_per_idle_connection {
        lines.push(("bytes per idle connection", format!("{per:.0}")));
    }
    lines
}

fn terminal_hang(out: &mut String, hang: &HangReport) {
    out.push('\n');
    for (name, value) in hang_lines(hang) {
        let _ = writeln!(out, "  {name:<27}{value}");
    }
}

/// The Markdown rendering.
pub(crate) fn markdown(output: &Output) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## celer bench {}\n", output.settings.urls.join(", "));
    let _ = writeln!(out, "{}\n", describe(output));
    let websocket = output.settings.websocket.is_some();
    if let Some(run) = &output.run {
        markdown_run(&mut out, run, websocket);
    }
    let rounds = output
        .fanout
        .as_ref()
        .map(|f| ("round", fanout_lines(f), &f.rounds))
        .or_else(|| {
            output
                .sse
                .as_ref()
                .map(|s| ("update", sse_lines(s), &s.updates))
        });
    if let Some((what, lines, rounds)) = rounds {
        table_row(&mut out, &["measure".to_string(), "value".to_string()]);
        table_rule(&mut out, 2);
        for (name, value) in lines {
            table_row(&mut out, &[name.to_string(), value]);
        }
        out.push('\n');
        let mut header = vec![what.to_string()];
        header.extend(ROUND_COLUMNS.map(String::from));
        table_row(&mut out, &header);
        table_rule(&mut out, header.len());
        for cells in round_rows(rounds) {
            table_row(&mut out, &cells);
        }
    }
    if let Some(levels) = &output.sweep {
        table_row(&mut out, &SWEEP_COLUMNS.map(String::from));
        table_rule(&mut out, SWEEP_COLUMNS.len());
        for level in levels {
            table_row(&mut out, &sweep_cells(level));
        }
    }
    if let Some(hang) = &output.hang {
        table_row(&mut out, &["measure".to_string(), "value".to_string()]);
        table_rule(&mut out, 2);
        for (name, value) in hang_lines(hang) {
            table_row(&mut out, &[name.to_string(), value]);
        }
    }
    out
}

fn table_row(out: &mut String, cells: &[String]) {
    out.push('|');
    for cell in cells {
        let _ = write!(out, " {cell} |");
    }
    out.push('\n');
}

fn table_rule(out: &mut String, columns: usize) {
    out.push('|');
    for _ in 0..columns {
        out.push_str("---:|");
    }
    out.push('\n');
}

fn markdown_run(out: &mut String, run: &RunReport, websocket: bool) {
    let (noun, unit, each) = if websocket {
        ("messages", "msg/s", "server CPU per message")
    } else {
        ("requests", "req/s", "server CPU per request")
    };
    let mut header = vec!["latency".to_string()];
    header.extend(PERCENTILES.map(String::from));
    table_row(out, &header);
    table_rule(out, header.len());
    let mut row = vec!["measured".to_string()];
    row.extend(latency_cells(&run.latency_us));
    table_row(out, &row);
    if let Some(uncorrected) = &run.uncorrected_latency_us {
        let mut row = vec!["uncorrected".to_string()];
        row.extend(latency_cells(uncorrected));
        table_row(out, &row);
    }
    out.push('\n');
    table_row(out, &["measure".to_string(), "value".to_string()]);
    table_rule(out, 2);
    let mut rows = vec![
        (noun, count(run.responses)),
        ("elapsed", format!("{:.2}s", run.elapsed_s)),
        (unit, format!("{:.2}", run.requests_per_sec)),
        ("transfer/s", format!("{}/s", bytes(run.bytes_per_sec))),
        ("Gbit/s", format!("{:.3}", run.gbit_per_sec)),
        ("status", status_line(run)),
        ("errors", error_line(run)),
        ("set-up", setup_line(run)),
    ];
    if let Some(server) = &run.server {
        rows.push(("server CPU", format!("{:.2}s", server.cpu_seconds)));
        if let Some(us) = server.cpu_us_per_request {
            rows.push((each, format!("{us:.2} µs")));
        }
        if let Some(n) = server.per_cpu_second {
            rows.push(("per server CPU-second", format!("{n:.0}")));
        }
    }
    for (name, value) in rows {
        table_row(out, &[name.to_string(), value]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_formatted_for_people() {
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(duration_us(52.14), "52.1µs");
        assert_eq!(duration_us(1_500.0), "1.50ms");
        assert_eq!(duration_us(2_000_000.0), "2.00s");
        assert_eq!(bytes(2048.0), "2.00 KiB");
    }
}
