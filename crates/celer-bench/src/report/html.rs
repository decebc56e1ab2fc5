//! The self-contained HTML report: tables plus inline SVG charts, no scripts,
//! no fonts, no network.

use std::fmt::Write;

use super::svg::{Chart, Series, escape, line_chart};
use super::text::{count, describe, duration_us, markdown};
use super::{FanoutReport, Latency, Output, RoundReport, RunReport, SweepLevel};

const STYLE: &str = "body{font-family:sans-serif;max-width:780px;margin:2em auto;color:#111}\
pre{background:#f9fafb;padding:1em;overflow-x:auto}figure{margin:1.5em 0}";

/// Renders the whole page.
pub(crate) fn render(output: &Output) -> String {
    let mut page = String::new();
    let title = format!("celer bench {}", output.settings.urls.join(", "));
    let _ = write!(
        page,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head><body><h1>{}</h1><p>{}</p>",
        escape(&title),
        escape(&title),
        escape(&describe(output))
    );
    if let Some(run) = &output.run {
        page.push_str(&figure(&latency_chart(run)));
        if run.timeline.len() > 1 {
            let websocket = output.settings.websocket.is_some();
            page.push_str(&figure(&timeline_chart(run, websocket)));
        }
    }
    if let Some(fanout) = output.fanout.as_ref().filter(|f| !f.rounds.is_empty()) {
        page.push_str(&figure(&fanout_chart(fanout)));
    }
    if let Some(levels) = output.sweep.as_deref().filter(|l| !l.is_empty()) {
        page.push_str(&figure(&sweep_rate_chart(levels)));
        page.push_str(&figure(&sweep_latency_chart(levels)));
    }
    // The tables are the Markdown report, shown as preformatted text.
    let _ = writeln!(
        page,
        "<h2>Figures</h2><pre>{}</pre></body></html>",
        escape(&markdown(output))
    );
    page
}

fn figure(chart: &Chart) -> String {
    format!("<figure>{}</figure>", line_chart(chart))
}

/// Maps a percentile to "nines": 90% → 1, 99% → 2, 99.9% → 3.
fn nines(percentile: f64) -> f64 {
    -(1.0 - percentile / 100.0).log10()
}

fn spectrum(name: &str, latency: &Latency) -> Series {
    Series {
        name: name.to_string(),
        points: latency
            .spectrum
            .iter()
            .filter(|[p, _]| *p < 100.0)
            .map(|[p, us]| (nines(*p), us / 1e3))
            .collect(),
    }
}

fn latency_chart(run: &RunReport) -> Chart {
    let mut series = vec![spectrum("latency", &run.latency_us)];
    if let Some(uncorrected) = &run.uncorrected_latency_us {
        series.push(spectrum("uncorrected (from actual send)", uncorrected));
    }
    let labels = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"];
    Chart {
        title: "Latency by percentile".to_string(),
        x_label: "percentile".to_string(),
        y_label: "latency (ms)".to_string(),
        x_ticks: labels
            .iter()
            .enumerate()
            .map(|(idx, l)| (idx as f64, l.to_string()))
            .collect(),
        series,
        y_format: |ms| duration_us(ms * 1e3),
    }
}

fn timeline_chart(run: &RunReport, websocket: bool) -> Chart {
    let (title, y_label, name) = if websocket {
        ("Messages per second", "echoes", "msg/s")
    } else {
        ("Requests per second", "responses", "req/s")
    };
    let points: Vec<(f64, f64)> = run
        .timeline
        .iter()
        .map(|p| (p.second as f64 + 1.0, p.responses as f64))
        .collect();
    let step = (points.len() / 10).max(1);
    Chart {
        title: title.to_string(),
        x_label: "second".to_string(),
        y_label: y_label.to_string(),
        x_ticks: points
            .iter()
            .step_by(step)
            .map(|p| (p.0, format!("{}", p.0)))
            .collect(),
        series: vec![Series {
            name: name.to_string(),
            points,
        }],
        y_format: |n| count(n as u64),
    }
}

fn sweep_ticks(levels: &[SweepLevel]) -> Vec<(f64, String)> {
    levels
        .iter()
        .enumerate()
        .map(|(idx, l)| (idx as f64, l.connections.to_string()))
        .collect()
}

fn sweep_series(name: &str, levels: &[SweepLevel], value: fn(&SweepLevel) -> f64) -> Series {
    Series {
        name: name.to_string(),
        points: levels
            .iter()
            .enumerate()
            .map(|(idx, l)| (idx as f64, value(l)))
            .collect(),
    }
}

fn sweep_rate_chart(levels: &[SweepLevel]) -> Chart {
    Chart {
        title: "Throughput by concurrency".to_string(),
        x_label: "connections".to_string(),
        y_label: "req/s".to_string(),
        x_ticks: sweep_ticks(levels),
        series: vec![sweep_series("req/s", levels, |l| l.requests_per_sec)],
        y_format: |n| count(n as u64),
    }
}

fn sweep_latency_chart(levels: &[SweepLevel]) -> Chart {
    Chart {
        title: "Latency by concurrency".to_string(),
        x_label: "connections".to_string(),
        y_label: "latency (ms)".to_string(),
        x_ticks: sweep_ticks(levels),
        series: vec![
            sweep_series("p50", levels, |l| l.p50_us / 1e3),
            sweep_series("p99", levels, |l| l.p99_us / 1e3),
        ],
        y_format: |ms| duration_us(ms * 1e3),
    }
}

fn fanout_chart(fanout: &FanoutReport) -> Chart {
    let series = |name: &str, value: fn(&RoundReport) -> Option<f64>| Series {
        name: name.to_string(),
        points: fanout
            .rounds
            .iter()
            .filter_map(|r| Some((f64::from(r.round), value(r)? / 1e3)))
            .collect(),
    };
    let step = (fanout.rounds.len() / 10).max(1);
    Chart {
        title: "Arrival after the send, per round".to_string(),
        x_label: "round".to_string(),
        y_label: "time (ms)".to_string(),
        x_ticks: fanout
            .rounds
            .iter()
            .step_by(step)
            .map(|r| (f64::from(r.round), r.round.to_string()))
            .collect(),
        series: vec![
            series("p50", |r| r.p50_us),
            series("p99", |r| r.p99_us),
            series("last", |r| r.last_us),
        ],
        y_format: |ms| duration_us(ms * 1e3),
    }
}
