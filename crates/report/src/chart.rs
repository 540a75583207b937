//! Charts as SVG.
//!
//! Axes, grid, lines and legends are drawn with plotters' SVG backend. The points are drawn on
//! top with the `svg` crate, at the pixel positions plotters maps them to, because each point
//! carries a `<title>` (what it is, shown on hover) and plotters' backend cannot attach one. The
//! two are joined in one `<svg>`: plotters' drawing as a nested `<svg>`, the points after it.
//!
//! The progress chart draws every attempt as one circle (and nothing else as a circle: legends
//! use squares and lines, final re-measurements are diamonds), so counting the chart's circles
//! counts the attempts. Attempts that failed have no speedup; they sit on a band at the bottom of
//! the chart, coloured by status.

use crate::axis::{series, Missing, Series, XAxis};
use crate::error::ReportError;
use crate::model::{Attempt, RunReport};
use plotters::coord::Shift;
use plotters::prelude::*;
use svg::node::element::path::Data;
use svg::node::element::{Circle as SvgCircle, Group, Path as SvgPath, Title};
use svg::node::Blob;
use svg::Document;

/// Status colours, shared with the HTML (status badges) so the legend and tables agree.
pub fn status_colour(status: &str) -> &'static str {
    match status {
        "passed" => "#1a9850",
        s if s.starts_with("incorrect") => "#f28e2b",
        "compile_error" => "#d62728",
        "runtime_error" => "#9467bd",
        "timeout" => "#8c564b",
        "rejected" => "#7f7f7f",
        "format_error" | "llm_error" => "#bcbd22",
        _ => "#17becf",
    }
}

/// Colours of runs on the comparison chart, in order.
const RUN_COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
];

pub(crate) fn run_colour(i: usize) -> &'static str {
    RUN_COLOURS[i % RUN_COLOURS.len()]
}

fn rgb(hex: &str) -> RGBColor {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap_or(0);
    RGBColor((v >> 16) as u8, (v >> 8) as u8, v as u8)
}

fn chart_err<E: std::fmt::Debug>(e: E) -> ReportError {
    ReportError::Chart(format!("{e:?}"))
}

type SpeedupChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::combinators::WithKeyPoints<LogCoord<f64>>>,
>;

/// What goes across a chart: its range (in plotted units), what it is, how many values to
/// name and how, and how many of the run's units make one plotted unit (seconds shown in
/// minutes, so that plotters names round minutes rather than odd seconds).
struct XRange {
    lo: f64,
    hi: f64,
    desc: String,
    labels: usize,
    unit: f64,
    fmt: fn(f64) -> String,
}

impl XRange {
    /// Whole rounds, each in the middle of its slot.
    fn rounds(last_round: u32) -> XRange {
        XRange {
            lo: -0.5,
            hi: last_round as f64 + 0.5,
            desc: "round".into(),
            labels: last_round.min(12) as usize + 1,
            unit: 1.0,
            fmt: |x| format!("{x:.0}"),
        }
    }

    /// From nothing spent to a little past the most any run spent (`reached`, in the axis's
    /// own units), in a unit that keeps the named values round.
    fn spent(axis: XAxis, reached: f64) -> XRange {
        let (unit, suffix): (f64, &str) = match axis {
            XAxis::DeviceSeconds | XAxis::WallTime if reached >= 3.0 * 3600.0 => (3600.0, " (h)"),
            XAxis::DeviceSeconds | XAxis::WallTime if reached >= 600.0 => (60.0, " (min)"),
            XAxis::DeviceSeconds | XAxis::WallTime => (1.0, " (s)"),
            _ => (1.0, ""),
        };
        // Counts are whole: a range of at least a few keeps plotters from naming fractions.
        let least = match axis {
            XAxis::Evaluations | XAxis::Tokens | XAxis::Round => 5.0,
            _ => 0.0,
        };
        let hi = (reached / unit * 1.04).max(least);
        XRange {
            lo: 0.0,
            hi: if hi > 0.0 { hi } else { 1.0 },
            desc: format!("{}{suffix}", axis.title()),
            labels: 8,
            unit,
            fmt: if axis == XAxis::Dollars {
                |x| format!("${}", trimmed(x, 4))
            } else {
                compact
            },
        }
    }
}

/// `x` with at most `decimals` decimals, trailing zeros dropped (`0.5`, `12`, never `-0`).
fn trimmed(x: f64, decimals: usize) -> String {
    let text = format!("{:.decimals$}", x + 0.0);
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    if text == "-0" {
        "0".into()
    } else {
        text
    }
}

/// A tick of a count or a time: `750`, `1.5k`, `20k`, `1.2M`.
fn compact(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{}M", trimmed(x / 1e6, 3))
    } else if a >= 1e4 {
        format!("{}k", trimmed(x / 1e3, 3))
    } else {
        trimmed(x, 3)
    }
}

/// `x` across, speedup up (log scale, labelled at `scale.ticks`), with the mesh both charts
/// share.
fn speedup_axes<'a, 'b>(
    plot: &'a DrawingArea<SVGBackend<'b>, Shift>,
    x: &XRange,
    scale: &YScale,
    y_desc: &str,
) -> Result<SpeedupChart<'a, 'b>, ReportError> {
    let mut chart = ChartBuilder::on(plot)
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(52)
        .build_cartesian_2d(
            x.lo..x.hi,
            (scale.lo..scale.hi).log_scale().with_key_points(scale.ticks.clone()),
        )
        .map_err(chart_err)?;
    let fmt = x.fmt;
    chart
        .configure_mesh()
        .x_desc(x.desc.as_str())
        .y_desc(y_desc)
        .x_labels(x.labels)
        .x_label_formatter(&|v| fmt(*v))
        .y_label_formatter(&|y| tick_label(*y))
        .bold_line_style(RGBColor(236, 236, 236))
        .light_line_style(WHITE)
        .draw()
        .map_err(chart_err)?;
    Ok(chart)
}

/// The best speedup so far after each round: `(round, best)` steps, from the passing attempts.
pub fn best_so_far(attempts: &[Attempt]) -> Vec<(u32, f64)> {
    let mut passed: Vec<(u32, f64)> = attempts
        .iter()
        .filter_map(|a| a.speedup.map(|s| (a.round, s)))
        .collect();
    passed.sort_by_key(|p| p.0);
    let mut out: Vec<(u32, f64)> = Vec::new();
    for (round, s) in passed {
        let best = out.last().map_or(s, |l| l.1.max(s));
        match out.last_mut() {
            Some(last) if last.0 == round => last.1 = best,
            _ => out.push((round, best)),
        }
    }
    out
}

/// A log-scale speedup axis: its range, and the speedups named on it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct YScale {
    pub lo: f64,
    pub hi: f64,
    /// Ascending; each one labelled and drawn as a grid line.
    pub ticks: Vec<f64>,
}

/// Mantissas of the tick ladders, coarsest first: powers of ten, then 1-2-5, then finer ones
/// for ranges too narrow to name enough values with 1-2-5.
const LADDERS: [&[f64]; 4] = [
    &[1.0],
    &[1.0, 2.0, 5.0],
    &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0],
    &[1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
];

/// Ticks wanted at least (so that a dot is never far from a named value) and at most (so that
/// labels never crowd the 300 pixels of a dashboard chart).
const MIN_TICKS: usize = 4;
const MAX_TICKS: usize = 12;

/// The values `m * 10^e` of a ladder between `lo` and `hi`, ascending.
fn ladder(mantissas: &[f64], lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let (e0, e1) = (lo.log10().floor() as i32 - 1, hi.log10().ceil() as i32 + 1);
    for e in e0..=e1 {
        for m in mantissas {
            // Through decimal text, so that 3 * 0.1 is 0.3 and not 0.30000000000000004.
            let v = m * 10f64.powi(e);
            let v = format!("{v:.9e}").parse::<f64>().unwrap_or(v);
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                out.push(v);
            }
        }
    }
    out
}

/// The y axis for these speedups (and 1x, always shown): a padded range whose ticks are chosen
/// from the coarsest ladder that names at least [`MIN_TICKS`] values, stretched to the ladder's
/// values just below and above the data, so every point lies between two labels.
pub(crate) fn y_scale(values: impl Iterator<Item = f64>) -> YScale {
    let (dlo, dhi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = (dlo / 1.6, dhi * 1.3);
    let mantissas = if ladder(LADDERS[1], lo, hi).len() > MAX_TICKS {
        LADDERS[0]
    } else {
        LADDERS[1..]
            .iter()
            .copied()
            .find(|m| ladder(m, lo, hi).len() >= MIN_TICKS)
            .unwrap_or(LADDERS[3])
    };
    let below = ladder(mantissas, dlo / 1e3, dlo).last().copied().unwrap_or(lo);
    let above = ladder(mantissas, dhi, dhi * 1e3).first().copied().unwrap_or(hi);
    let (lo, hi) = (lo.min(below), hi.max(above));
    YScale {
        lo,
        hi,
        ticks: ladder(mantissas, lo, hi),
    }
}

/// The band of attempts without a speedup: below the lowest named value, so that none can be
/// read as a very slow kernel. Stretches the axis down to make room when there are `failures`;
/// returns the band's top and where its points sit.
fn fail_band(scale: &mut YScale, failures: bool) -> (f64, f64) {
    let band_top = scale.ticks.first().copied().unwrap_or(scale.lo) / 1.3;
    if failures {
        scale.lo = scale.lo.min(band_top / 1.6);
    }
    (band_top, (scale.lo * band_top).sqrt())
}

/// A tick's label: as many decimals as the value needs (`0.05x`, `1.5x`, `20x`).
fn tick_label(y: f64) -> String {
    if !y.is_finite() || y <= 0.0 {
        return String::new();
    }
    let digits = (1 - y.log10().floor() as i32).clamp(0, 12) as usize;
    let text = format!("{y:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{text}x")
}

/// Draws the steps of a best-so-far line up to `until`.
fn steps(best: &[(f64, f64)], until: f64) -> Vec<(f64, f64)> {
    let mut pts = Vec::new();
    for (i, &(x, s)) in best.iter().enumerate() {
        if let Some(&(_, prev)) = i.checked_sub(1).and_then(|j| best.get(j)) {
            pts.push((x, prev));
        }
        pts.push((x, s));
    }
    if let Some(&(x, s)) = best.last() {
        if until > x {
            pts.push((until, s));
        }
    }
    pts
}

/// `best_so_far`'s steps with their rounds as positions.
fn by_round(best: &[(u32, f64)]) -> Vec<(f64, f64)> {
    best.iter().map(|&(r, s)| (r as f64, s)).collect()
}

/// A point drawn over plotters' drawing: where (pixels), how, and what its tooltip says.
struct Mark {
    at: (i32, i32),
    shape: Shape,
    colour: &'static str,
    title: String,
}

enum Shape {
    /// An attempt (class `attempt`): a filled circle.
    Dot,
    /// A final re-measurement (class `final`): a hollow diamond, gold for the one the headline
    /// reports.
    Diamond { headline: bool },
    /// A point of a run's best-so-far line on the comparison chart (class `best-point`).
    Step,
}

/// A diamond's outline around `(x, y)`, `r` pixels from the centre to each corner.
fn diamond(x: f64, y: f64, r: f64) -> Data {
    Data::new()
        .move_to((x, y - r))
        .line_to((x + r, y))
        .line_to((x, y + r))
        .line_to((x - r, y))
        .close()
}

impl Mark {
    fn node(&self) -> Group {
        let (x, y) = (self.at.0 as f64, self.at.1 as f64);
        let title = Title::new(self.title.clone());
        let g = Group::new();
        match self.shape {
            Shape::Dot => g.set("class", "attempt").add(
                SvgCircle::new()
                    .set("cx", x)
                    .set("cy", y)
                    .set("r", 4)
                    .set("fill", self.colour)
                    .add(title),
            ),
            Shape::Step => g.set("class", "best-point").add(
                SvgPath::new()
                    .set("d", diamond(x, y, 4.0))
                    .set("fill", self.colour)
                    .add(title),
            ),
            Shape::Diamond { headline } => g.set("class", "final").add(
                SvgPath::new()
                    .set("d", diamond(x, y, 6.5))
                    .set("fill", "none")
                    .set("stroke", if headline { HEADLINE } else { self.colour })
                    .set("stroke-width", if headline { 2.5 } else { 1.6 })
                    .add(title),
            ),
        }
    }
}

/// The gold of the best kernel (the tree outlines its node in the same colour).
const HEADLINE: &str = "#d4a000";
const FINAL: &str = "#222222";

/// The marks as one group of `class`.
fn marks_group(class: &str, marks: &[Mark]) -> Group {
    marks
        .iter()
        .fold(Group::new().set("class", class), |g, m| g.add(m.node()))
}

/// Plotters' drawing (`plot`, an `<svg>` of `size`) with the points on top, as one `<svg>`.
fn with_points(plot: String, size: (u32, u32), points: Group) -> String {
    Document::new()
        .set("width", size.0)
        .set("height", size.1)
        .set("viewBox", (0, 0, size.0, size.1))
        .set("font-family", "sans-serif")
        // Plotters escapes the text it writes (labels, legend), so its output goes in as is.
        .add(Blob::new(plot))
        .add(points)
        .to_string()
}

/// One line about an attempt: who, where, and what came of it (a point's tooltip).
fn attempt_title(a: &Attempt) -> String {
    let what = match a.candidate {
        Some(id) => match a.parent {
            Some(p) => format!("candidate {id} (from {p}, {})", a.origin),
            None => format!("candidate {id} ({})", a.origin),
        },
        None => "coder answer without a candidate".to_string(),
    };
    let node = a.node_id.as_deref().map(|n| format!(", node {n}")).unwrap_or_default();
    let status = a.status.as_deref().unwrap_or("evaluating");
    let outcome = match a.speedup {
        Some(s) => format!("{status}, {s:.2}x the reference"),
        None => match a.reason.as_deref().and_then(|r| r.lines().next()) {
            Some(r) => format!("{status}: {}", crate::tree::clip(r, 160)),
            None => status.to_string(),
        },
    };
    let noise = a
        .relative_noise
        .map(|n| format!(", noise {:.1}%", n * 100.0))
        .unwrap_or_default();
    format!("{what}{node}, round {}\n{outcome}{noise}", a.round)
}

/// Every attempt at its round, coloured by status, with the best-so-far line, and the final
/// re-measurements (what the headline's best is chosen on) as hollow diamonds beside their
/// attempts. `size` in pixels.
pub fn progress_chart(run: &RunReport, size: (u32, u32)) -> Result<String, ReportError> {
    let done: Vec<&Attempt> = run.attempts.iter().filter(|a| a.is_done()).collect();
    let last_round = done.iter().map(|a| a.round).max().unwrap_or(0).max(run.round).max(1);
    let x_range = XRange::rounds(last_round);
    let mut scale = y_scale(done.iter().flat_map(|a| [a.speedup, a.final_speedup]).flatten());
    let failures = done.iter().any(|a| a.speedup.is_none());
    let (band_top, fail_y) = fail_band(&mut scale, failures);
    let best = best_so_far(&run.attempts);
    let headline = run.best.as_ref().filter(|b| b.measured == "final").map(|b| b.candidate);
    let mut marks = Vec::new();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let (plot, legend_area) = root.split_horizontally(size.0.saturating_sub(LEGEND_W));
        let mut legend = Vec::new();
        let mut chart = speedup_axes(&plot, &x_range, &scale, "speedup vs reference")?;
        let axis = RGBColor(150, 150, 150);
        chart
            .draw_series(LineSeries::new(
                [(-0.5, 1.0), (last_round as f64 + 0.5, 1.0)],
                axis.stroke_width(1),
            ))
            .map_err(chart_err)?;
        legend.push(("reference (1x)".to_string(), Swatch::Line(axis)));
        if failures {
            let x_end = last_round as f64 + 0.5;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(-0.5, scale.lo), (x_end, band_top)],
                    RGBColor(244, 244, 246).filled(),
                )))
                .map_err(chart_err)?;
            let font = ("sans-serif", 11).into_font().color(&RGBColor(120, 120, 120));
            chart
                .draw_series(std::iter::once(Text::new(
                    "failed: no speedup",
                    (x_end, band_top),
                    font.pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Right,
                        plotters::style::text_anchor::VPos::Top,
                    )),
                )))
                .map_err(chart_err)?;
        }
        let line = rgb("#1f77b4");
        chart
            .draw_series(LineSeries::new(
                steps(&by_round(&best), last_round as f64),
                line.stroke_width(2),
            ))
            .map_err(chart_err)?;
        legend.push(("best so far (search)".to_string(), Swatch::Line(line)));
        // Attempts of one round spread a little sideways so that they do not hide each other.
        let mut per_round: std::collections::HashMap<u32, (usize, usize)> = Default::default();
        for a in &done {
            per_round.entry(a.round).or_default().1 += 1;
        }
        let mut statuses: Vec<&str> = Vec::new();
        let mut finals = 0;
        for a in &done {
            let status = a.status.as_deref().unwrap_or("");
            if !statuses.contains(&status) {
                statuses.push(status);
            }
            let slot = per_round.entry(a.round).or_default();
            let spread = 0.5f64.min(0.1 * (slot.1 as f64 - 1.0));
            let x = if slot.1 > 1 {
                a.round as f64 - spread / 2.0 + spread * slot.0 as f64 / (slot.1 as f64 - 1.0)
            } else {
                a.round as f64
            };
            slot.0 += 1;
            marks.push(Mark {
                at: chart.backend_coord(&(x, a.speedup.unwrap_or(fail_y))),
                shape: Shape::Dot,
                colour: status_colour(status),
                title: attempt_title(a),
            });
            if let (Some(final_status), Some(id)) = (a.final_status.as_deref(), a.candidate) {
                finals += 1;
                let search = a.speedup.map(|s| format!(" (search: {s:.2}x)")).unwrap_or_default();
                let is_headline = headline == Some(id);
                let title = match a.final_speedup {
                    Some(f) => format!("candidate {id}, final re-measurement: {f:.2}x the reference{search}"),
                    None => format!("candidate {id}, final re-measurement: {final_status}{search}"),
                };
                marks.push(Mark {
                    at: chart.backend_coord(&(x, a.final_speedup.unwrap_or(fail_y))),
                    shape: Shape::Diamond { headline: is_headline },
                    colour: if a.final_speedup.is_some() {
                        FINAL
                    } else {
                        status_colour(final_status)
                    },
                    title: if is_headline {
                        format!("{title}\nthe best: the figure the summary reports")
                    } else {
                        title
                    },
                });
            }
        }
        for status in statuses {
            let text = if status == "passed" {
                "passed".to_string()
            } else {
                format!("{status} (bottom band)")
            };
            legend.push((text, Swatch::Square(rgb(status_colour(status)))));
        }
        if finals > 0 {
            legend.push(("final re-measurement".to_string(), Swatch::Diamond(rgb(FINAL))));
            if headline.is_some() {
                legend.push(("the best (headline figure)".to_string(), Swatch::Diamond(rgb(HEADLINE))));
            }
        }
        side_legend(&legend_area, &legend)?;
        root.present().map_err(chart_err)?;
    }
    Ok(with_points(svg, size, marks_group("points", &marks)))
}

/// What a legend entry shows: a thin bar for a line, a square for a kind of point, a diamond
/// for re-measurements, nothing for a line of text under the entry above.
enum Swatch {
    Line(RGBColor),
    Square(RGBColor),
    Diamond(RGBColor),
    None,
}

const LEGEND_W: u32 = 210;

/// The legend, in its own area right of the plot, so that it never hides a point.
fn side_legend(area: &DrawingArea<SVGBackend, Shift>, entries: &[(String, Swatch)]) -> Result<(), ReportError> {
    let font = ("sans-serif", 12).into_font().color(&RGBColor(50, 50, 50));
    for (i, (text, swatch)) in entries.iter().enumerate() {
        let y = 22 + 20 * i as i32;
        match swatch {
            Swatch::Line(c) => area.draw(&Rectangle::new([(8, y - 1), (24, y + 2)], c.filled())),
            Swatch::Square(c) => area.draw(&Rectangle::new([(11, y - 5), (21, y + 5)], c.filled())),
            Swatch::Diamond(c) => area.draw(&PathElement::new(
                vec![(16, y - 6), (22, y), (16, y + 6), (10, y), (16, y - 6)],
                c.stroke_width(2),
            )),
            Swatch::None => Ok(()),
        }
        .map_err(chart_err)?;
        // Long names are clipped to the legend's width (about 6.5 pixels a character).
        let room = (LEGEND_W as usize - 40) / 6;
        let shown: String = if text.chars().count() > room {
            text.chars().take(room - 1).chain(['…']).collect()
        } else {
            text.clone()
        };
        area.draw(&Text::new(shown, (30, y - 6), font.clone()))
            .map_err(chart_err)?;
    }
    Ok(())
}

/// Best speedup so far along `axis`, one line per run (the dashboard's comparison), with a
/// marker at each passing attempt (each round, for rounds), so that a run whose only passing
/// candidate is the seed still shows. A run that did not record the quantity (dollars of a
/// knob-tuner run) has no line and says why in the legend, rather than being left out.
///
/// The points are grouped per run, `<g class="series">` (`series missing` for a run without a
/// line, its `<title>` saying why), so there is one group per run whatever is across.
pub fn comparison_chart(runs: &[&RunReport], axis: XAxis, size: (u32, u32)) -> Result<String, ReportError> {
    let lines: Vec<Result<Series, Missing>> = runs.iter().map(|r| series(r, axis)).collect();
    let x_range = match axis {
        XAxis::Round => XRange::rounds(
            runs.iter()
                .flat_map(|r| r.attempts.iter().map(|a| a.round).chain([r.round, r.rounds]))
                .max()
                .unwrap_or(0)
                .max(1),
        ),
        _ => XRange::spent(axis, lines.iter().flatten().map(|l| l.reached).fold(0.0, f64::max)),
    };
    let unit = x_range.unit;
    let scale = y_scale(lines.iter().flatten().flat_map(|l| l.points.iter().map(|p| p.1)));
    let mut groups = Vec::new();
    let mut svg = String::new();
    {
        let root: DrawingArea<SVGBackend, Shift> = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let (plot, legend_area) = root.split_horizontally(size.0.saturating_sub(LEGEND_W));
        let mut legend = Vec::new();
        let mut chart = speedup_axes(&plot, &x_range, &scale, "best speedup so far")?;
        for (i, (run, line)) in runs.iter().zip(&lines).enumerate() {
            let colour = rgb(run_colour(i));
            legend.push((format!("{}. {}", i + 1, run.name), Swatch::Line(colour)));
            legend.push((format!("    {}, {}", run.strategy, run.brain.kind), Swatch::None));
            let group = Group::new().set("data-run", i + 1);
            let line = match line {
                Ok(line) => line,
                Err(missing) => {
                    legend.push((format!("    {}", missing.note()), Swatch::None));
                    groups.push(group.set("class", "series missing").add(Title::new(format!(
                        "{}. {}: {}, so no line along {}",
                        i + 1,
                        run.name,
                        missing.note(),
                        axis.title()
                    ))));
                    continue;
                }
            };
            let scaled: Vec<(f64, f64)> = line.points.iter().map(|&(x, s)| (x / unit, s)).collect();
            chart
                .draw_series(LineSeries::new(
                    steps(&scaled, line.reached / unit),
                    colour.stroke_width(2),
                ))
                .map_err(chart_err)?;
            let marks: Vec<Mark> = line
                .points
                .iter()
                .zip(&scaled)
                .map(|(&(x, s), at)| Mark {
                    at: chart.backend_coord(at),
                    shape: Shape::Step,
                    colour: run_colour(i),
                    title: format!("{}. {}: best {s:.2}x the reference {}", i + 1, run.name, axis.after(x)),
                })
                .collect();
            groups.push(marks.iter().fold(group.set("class", "series"), |g, m| g.add(m.node())));
            if line.points.is_empty() {
                let why = if run.attempts.iter().any(|a| a.is_done()) {
                    "    no passing candidate"
                } else {
                    "    nothing evaluated yet"
                };
                legend.push((why.to_string(), Swatch::None));
            }
            if let Some(note) = &line.note {
                legend.push((format!("    {note}"), Swatch::None));
            }
        }
        side_legend(&legend_area, &legend)?;
        root.present().map_err(chart_err)?;
    }
    let points = groups
        .into_iter()
        .fold(Group::new().set("class", "points"), |g, s| g.add(s));
    Ok(with_points(svg, size, points))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(round: u32, speedup: Option<f64>) -> Attempt {
        let status = if speedup.is_some() { "passed" } else { "compile_error" };
        Attempt::for_test(round as i64, None, round, status, speedup)
    }

    #[test]
    fn best_so_far_keeps_the_maximum_per_round_and_never_falls() {
        let a = [
            attempt(0, Some(1.0)),
            attempt(1, Some(0.5)),
            attempt(2, None),
            attempt(2, Some(1.5)),
            attempt(2, Some(1.2)),
            attempt(3, Some(1.4)),
        ];
        assert_eq!(best_so_far(&a), vec![(0, 1.0), (1, 1.0), (2, 1.5), (3, 1.5)]);
    }

    fn labels(scale: &YScale) -> Vec<String> {
        scale.ticks.iter().map(|t| tick_label(*t)).collect()
    }

    #[test]
    fn the_axis_names_values_around_every_point_without_repeating_a_label() {
        for values in [
            vec![0.38, 0.9, 1.4],
            vec![],
            vec![1.0],
            vec![1.0, 2.2],
            vec![1.0, 4.0],
            vec![0.011, 48.0],
            vec![0.002, 900.0],
            vec![9.0, 11.0],
            vec![0.05, 0.06],
        ] {
            let scale = y_scale(values.iter().copied());
            let l = labels(&scale);
            assert!(scale.ticks.len() >= MIN_TICKS, "{values:?}: {l:?}");
            assert!(scale.ticks.len() <= MAX_TICKS, "{values:?}: {l:?}");
            let mut unique = l.clone();
            unique.dedup();
            assert_eq!(unique, l, "{values:?}: a label printed twice");
            assert!(scale.ticks.windows(2).all(|w| w[0] < w[1]), "{l:?}");
            assert!(scale.ticks.iter().all(|t| *t >= scale.lo && *t <= scale.hi), "{l:?}");
            // Every point (and 1x) between two named values.
            for v in values.iter().chain([&1.0]) {
                assert!(
                    scale.ticks[0] <= *v && *v <= *scale.ticks.last().unwrap(),
                    "{v} not within {l:?}"
                );
            }
        }
        // Points at 0.38x: labels below 1x, not just 1x and 2x.
        let l = labels(&y_scale([0.38, 1.2].into_iter()));
        assert_eq!(l, ["0.3x", "0.5x", "0.7x", "1x", "1.5x"]);
        // An all-fail run still has a labelled axis around 1x.
        assert_eq!(
            labels(&y_scale(std::iter::empty())),
            ["0.7x", "0.8x", "0.9x", "1x", "1.2x"]
        );
        // Wide ranges: 1-2-5, then powers of ten.
        assert_eq!(
            labels(&y_scale([0.5, 40.0].into_iter())),
            ["0.5x", "1x", "2x", "5x", "10x", "20x", "50x"]
        );
        assert_eq!(
            labels(&y_scale([0.002, 900.0].into_iter())),
            ["0.001x", "0.01x", "0.1x", "1x", "10x", "100x", "1000x"]
        );
    }

    #[test]
    fn failed_attempts_sit_below_every_named_value() {
        for values in [vec![0.05, 2.0], vec![], vec![1.0, 1.1]] {
            let mut scale = y_scale(values.iter().copied());
            let (top, y) = fail_band(&mut scale, true);
            assert!(
                scale.lo < y && y < top && top < scale.ticks[0],
                "{values:?}: {scale:?} {top} {y}"
            );
            assert!(values.iter().all(|v| *v > top));
        }
    }

    #[test]
    fn steps_hold_the_level_until_the_next_improvement() {
        assert_eq!(
            steps(&[(0.0, 1.0), (2.0, 1.5)], 4.0),
            vec![(0.0, 1.0), (2.0, 1.0), (2.0, 1.5), (4.0, 1.5)]
        );
    }
}
