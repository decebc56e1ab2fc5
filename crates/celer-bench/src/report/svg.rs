//! Inline SVG line charts, drawn by hand so a report needs nothing else.

use std::fmt::Write;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 320.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 44.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 48.0;
const COLOURS: [&str; 4] = ["#2563eb", "#dc2626", "#16a34a", "#9333ea"];

/// One line of a chart.
#[derive(Debug)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
}

/// A line chart; x ticks are given, y ticks are computed from 0 up.
#[derive(Debug)]
pub(crate) struct Chart {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) x_ticks: Vec<(f64, String)>,
    pub(crate) series: Vec<Series>,
    /// Formats a y value for its tick label.
    pub(crate) y_format: fn(f64) -> String,
}

/// Escapes text for XML.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round step giving about five ticks up to `max`.
fn nice_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|&f| f >= fraction)
        .unwrap_or(10.0);
    nice * magnitude
}

/// Renders `chart` as an `<svg>` element.
pub(crate) fn line_chart(chart: &Chart) -> String {
    let xs = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(chart.x_ticks.iter().map(|t| t.0));
    let (x_min, x_max) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    let (x_min, x_max) = if x_min < x_max {
        (x_min, x_max)
    } else {
        (0.0, 1.0)
    };
    let y_top = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let step = nice_step(if y_top > 0.0 { y_top } else { 1.0 });
    let y_max = (y_top / step).ceil().max(1.0) * step;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let px = |x: f64| LEFT + (x - x_min) / (x_max - x_min) * plot_w;
    let py = |y: f64| TOP + plot_h - y / y_max * plot_h;

    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        svg,
        r#"<text x="{}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        escape(&chart.title)
    );
    let mut y = 0.0;
    while y <= y_max + step / 2.0 {
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#e5e7eb"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            py(y) + 4.0,
            escape(&(chart.y_format)(y)),
            py = py(y),
        );
        y += step;
    }
    for (x, label) in &chart.x_ticks {
        let _ = write!(
            svg,
            r##"<line x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{}" stroke="#f3f4f6"/><text x="{px:.1}" y="{}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 16.0,
            escape(label),
            px = px(*x),
        );
    }
    let _ = write!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#9ca3af"/>"##
    );
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 8.0,
        escape(&chart.x_label)
    );
    let _ = write!(
        svg,
        r#"<text transform="translate(14 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        escape(&chart.y_label)
    );
    for (idx, series) in chart.series.iter().enumerate() {
        let colour = COLOURS[idx % COLOURS.len()];
        let path: Vec<String> = series
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for &(x, y) in &series.points {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{colour}"/>"#,
                px(x),
                py(y)
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" fill="{colour}">{}</text>"#,
            LEFT + 8.0,
            TOP + 14.0 + 14.0 * idx as f64,
            escape(&series.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(100.0), 20.0);
        assert_eq!(nice_step(7.0), 2.0);
        assert_eq!(nice_step(1234.0), 250.0);
    }

    #[test]
    fn chart_is_one_svg_element_with_escaped_text() {
        let chart = Chart {
            title: "a < b".to_string(),
            x_label: "x".to_string(),
            y_label: "y".to_string(),
            x_ticks: vec![(0.0, "0".to_string()), (1.0, "1".to_string())],
            series: vec![Series {
                name: "s".to_string(),
                points: vec![(0.0, 1.0), (1.0, 3.0)],
            }],
            y_format: |y| format!("{y}"),
        };
        let svg = line_chart(&chart);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("a &lt; b"));
        assert!(svg.contains("<polyline"));
    }
}
