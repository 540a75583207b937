//! HTML through minijinja templates (files under `templates/`, compiled into the binary).
//! Templates ending in `.html` auto-escape every value; only the SVG strings made by the chart
//! and tree code, which escape their own text, are marked safe.

use crate::axis::XAxis;
use crate::chart::{comparison_chart, progress_chart, run_colour, status_colour};
use crate::error::ReportError;
use crate::lineage::{lineage_rows, lineage_svg};
use crate::model::RunReport;
use crate::tree::{node_colour, tree_svg, TreeStyle};
use minijinja::{context, Environment, Value};

const TEMPLATES: &[(&str, &str)] = &[
    ("style.css", include_str!("../templates/style.css")),
    ("macros.html", include_str!("../templates/macros.html")),
    ("report.html", include_str!("../templates/report.html")),
    ("dashboard.html", include_str!("../templates/dashboard.html")),
    ("dashboard_body.html", include_str!("../templates/dashboard_body.html")),
];

/// Renders reports and dashboard pages; build one and reuse it.
pub struct Renderer {
    env: Environment<'static>,
}

impl Default for Renderer {
    fn default() -> Self {
        Renderer::new()
    }
}

fn template_err(template: &str, e: minijinja::Error) -> ReportError {
    // The error's Display names the line; its source chain says what went wrong inside.
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    ReportError::Template {
        template: template.to_string(),
        message,
    }
}

impl Renderer {
    /// A renderer with the crate's built-in templates loaded (they are compiled into the binary).
    pub fn new() -> Renderer {
        let mut env = Environment::new();
        for (name, source) in TEMPLATES {
            // The templates are part of this crate; a broken one fails every test.
            if let Err(e) = env.add_template(name, source) {
                panic!("template {name} does not parse: {e}");
            }
        }
        env.add_filter("speedup", fmt_speedup);
        env.add_filter("ns", fmt_ns);
        env.add_filter("pct", fmt_pct);
        env.add_filter("seconds", fmt_seconds);
        env.add_filter("count", fmt_count);
        env.add_filter("dollars", fmt_dollars);
        env.add_filter("num", fmt_num);
        env.add_filter("counted", fmt_counted);
        env.add_function("status_colour", |s: Option<String>| {
            status_colour(s.as_deref().unwrap_or("")).to_string()
        });
        env.add_function("node_colour", |s: String| node_colour(&s).to_string());
        env.add_function("run_colour", |i: usize| run_colour(i).to_string());
        Renderer { env }
    }

    fn render(&self, name: &str, ctx: Value) -> Result<String, ReportError> {
        let t = self.env.get_template(name).map_err(|e| template_err(name, e))?;
        t.render(ctx).map_err(|e| template_err(name, e))
    }

    /// The self-contained report of one run.
    pub fn report(&self, run: &RunReport) -> Result<String, ReportError> {
        let chart = progress_chart(run, (900, 380))?;
        self.render(
            "report.html",
            context! {
                run => Value::from_serialize(run),
                chart => Value::from_safe_string(chart),
                tree => Value::from_safe_string(tree_svg(&run.tree, TreeStyle::FULL)),
                lineage => lineage(run, TreeStyle::FULL),
                noisy_pct => (crate::load::NOISY_ABOVE * 100.0).round() as i64,
                lineage_count => lineage_rows(&run.attempts).len(),
                version => env!("CARGO_PKG_VERSION"),
            },
        )
    }

    /// The dashboard's live part: the comparison chart (along `axis`, with the selector of
    /// axes), a column per run, and the runs that could not be read (`problems`). `links` are
    /// the full reports' addresses, one per run.
    pub fn dashboard_body(
        &self,
        runs: &[&RunReport],
        links: &[String],
        problems: &[String],
        axis: XAxis,
    ) -> Result<String, ReportError> {
        // Side by side, each column is about 560 pixels wide: compact charts and trees.
        let (width, style) = if runs.len() > 1 {
            (540, TreeStyle::COMPACT)
        } else {
            (900, TreeStyle::FULL)
        };
        let mut columns = Vec::new();
        for (i, run) in runs.iter().enumerate() {
            columns.push(context! {
                run => Value::from_serialize(run),
                index => i,
                link => links.get(i).cloned().unwrap_or_default(),
                chart => Value::from_safe_string(progress_chart(run, (width, 300))?),
                tree => Value::from_safe_string(tree_svg(&run.tree, style)),
                lineage => lineage(run, style),
                lineage_count => lineage_rows(&run.attempts).len(),
            });
        }
        let comparison = if runs.len() > 1 {
            Some(Value::from_safe_string(comparison_chart(runs, axis, (1100, 360))?))
        } else {
            None
        };
        let axes: Vec<Value> = XAxis::ALL
            .iter()
            .map(|a| context! { value => a.as_str(), title => a.title() })
            .collect();
        self.render(
            "dashboard_body.html",
            context! {
                columns => columns, comparison => comparison, runs => runs.len(), problems => problems,
                axis => axis.as_str(), axis_title => axis.title(), axes => axes,
            },
        )
    }

    /// The whole dashboard page around a body from [`Renderer::dashboard_body`], with the
    /// script that refreshes it when `api/state` no longer gives `stamp` (every `refresh_ms`).
    pub fn dashboard_page(&self, body: &str, stamp: &str, refresh_ms: u64) -> Result<String, ReportError> {
        self.render(
            "dashboard.html",
            context! {
                body => Value::from_safe_string(body.to_string()),
                // A JavaScript string literal, safe inside <script>.
                stamp_js => Value::from_safe_string(
                    serde_json::to_string(stamp).unwrap_or_default().replace('<', "\\u003c")
                ),
                refresh_ms => refresh_ms,
                version => env!("CARGO_PKG_VERSION"),
            },
        )
    }
}

fn fmt_speedup(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.2}x"),
        _ => "—".into(),
    }
}

/// Nanoseconds in the unit that keeps 3-4 significant digits.
fn fmt_ns(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let a = v.abs();
            if a >= 1e9 {
                format!("{:.3} s", v / 1e9)
            } else if a >= 1e6 {
                format!("{:.3} ms", v / 1e6)
            } else if a >= 1e3 {
                format!("{:.2} µs", v / 1e3)
            } else {
                format!("{v:.0} ns")
            }
        }
        _ => "—".into(),
    }
}

fn fmt_pct(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{:.1}%", v * 100.0),
        _ => "—".into(),
    }
}

fn fmt_seconds(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() && v >= 3600.0 => {
            format!("{}h {:02}m", (v / 3600.0) as u64, ((v % 3600.0) / 60.0) as u64)
        }
        Some(v) if v.is_finite() && v >= 60.0 => format!("{}m {:02}s", (v / 60.0) as u64, (v % 60.0) as u64),
        Some(v) if v.is_finite() => format!("{v:.1} s"),
        _ => "—".into(),
    }
}

/// Thousands separated by thin spaces: 1 234 567.
fn fmt_count(v: Option<u64>) -> String {
    v.map_or_else(|| "—".into(), crate::words::thousands)
}

/// `{{ n|counted("cycle") }}`: `1 cycle`, `2 cycles`; `{{ n|counted("was", "were") }}` for a
/// plural that is not the word with an `s`.
fn fmt_counted(n: u64, one: String, many: Option<String>) -> String {
    match many {
        Some(many) => crate::words::counted_as(n, &one, &many),
        None => crate::words::counted(n, &one),
    }
}

fn fmt_dollars(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("${v:.4}"),
        _ => "—".into(),
    }
}

/// A number with `digits` decimals.
fn fmt_num(v: Option<f64>, digits: Option<usize>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.*}", digits.unwrap_or(2)),
        _ => "—".into(),
    }
}

/// The candidates' lineage, for strategies without a planner (their world model is only its
/// root, so the parent links are what shows how the search went); `None` for world-model runs.
fn lineage(run: &RunReport, style: TreeStyle) -> Option<Value> {
    (run.strategy != "world-model").then(|| {
        let best = run.best.as_ref().map(|b| b.candidate);
        Value::from_safe_string(lineage_svg(&run.attempts, best, style))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_formatted_for_people() {
        assert_eq!(fmt_ns(Some(1507.0)), "1.51 µs");
        assert_eq!(fmt_ns(Some(2.5e6)), "2.500 ms");
        assert_eq!(fmt_ns(None), "—");
        assert_eq!(fmt_count(Some(1234567)), "1\u{2009}234\u{2009}567");
        assert_eq!(fmt_count(Some(999)), "999");
        assert_eq!(fmt_seconds(Some(75.0)), "1m 15s");
        assert_eq!(fmt_speedup(Some(f64::NAN)), "—");
        assert_eq!(fmt_counted(1, "cycle".into(), None), "1 cycle");
        assert_eq!(fmt_counted(2, "cycle".into(), None), "2 cycles");
    }
}
