//! Charts as SVG, drawn with plotters' SVG backend.
//!
//! The progress chart draws every attempt as one circle (and nothing else as a circle: legends
//! use squares), so counting the chart's circles counts the attempts. Attempts that failed have
//! no speedup; they sit on a band at the bottom of the chart, coloured by status.

use crate::error::ReportError;
use crate::model::{Attempt, RunReport};
use plotters::coord::Shift;
use plotters::prelude::*;

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

type SpeedupChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<plotters::coord::types::RangedCoordf64, LogCoord<f64>>>;

/// Rounds across, speedup up (log scale), with the mesh both charts share.
fn speedup_axes<'a, 'b>(
    plot: &'a DrawingArea<SVGBackend<'b>, Shift>,
    last_round: u32,
    (lo, hi): (f64, f64),
    y_desc: &str,
) -> Result<SpeedupChart<'a, 'b>, ReportError> {
    let mut chart = ChartBuilder::on(plot)
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(52)
        .build_cartesian_2d(-0.5f64..(last_round as f64 + 0.5), (lo..hi).log_scale())
        .map_err(chart_err)?;
    chart
        .configure_mesh()
        .x_desc("round")
        .y_desc(y_desc)
        .x_labels(last_round.min(12) as usize + 1)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&nice_label)
        .y_labels(14)
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

/// Labels of the log-scale speedup axis: only 1, 2, 3 and 5 times a power of ten are named,
/// the other ticks stay unnamed so the labels never crowd.
fn nice_label(y: &f64) -> String {
    if !y.is_finite() || *y <= 0.0 {
        return String::new();
    }
    let e = y.log10().floor();
    let m = y / 10f64.powf(e);
    let nice = [1.0, 2.0, 3.0, 5.0, 10.0].iter().any(|n| (m - n).abs() < 1e-6 * n);
    if !nice {
        return String::new();
    }
    let digits = if e < 0.0 { (-e) as usize } else { 0 };
    format!("{y:.digits$}x")
}

/// The y range (log scale) holding every speedup and 1x, with some room.
fn y_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    (lo / 1.6, hi * 1.3)
}

/// Draws the steps of a best-so-far line up to `last_round`.
fn steps(best: &[(u32, f64)], last_round: u32) -> Vec<(f64, f64)> {
    let mut pts = Vec::new();
    for (i, &(r, s)) in best.iter().enumerate() {
        if let Some(&(_, prev)) = i.checked_sub(1).and_then(|j| best.get(j)) {
            pts.push((r as f64, prev));
        }
        pts.push((r as f64, s));
    }
    if let Some(&(r, s)) = best.last() {
        if last_round > r {
            pts.push((last_round as f64, s));
        }
    }
    pts
}

/// Every attempt at its round, coloured by status, with the best-so-far line. `size` in pixels.
pub fn progress_chart(run: &RunReport, size: (u32, u32)) -> Result<String, ReportError> {
    let done: Vec<&Attempt> = run.attempts.iter().filter(|a| a.is_done()).collect();
    let last_round = done.iter().map(|a| a.round).max().unwrap_or(0).max(run.round).max(1);
    let (lo, hi) = y_range(done.iter().filter_map(|a| a.speedup));
    let fail_y = lo * 1.12;
    let best = best_so_far(&run.attempts);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let (plot, legend_area) = root.split_horizontally(size.0.saturating_sub(LEGEND_W));
        let mut legend = Vec::new();
        let mut chart = speedup_axes(&plot, last_round, (lo, hi), "speedup vs reference")?;
        let axis = RGBColor(150, 150, 150);
        chart
            .draw_series(LineSeries::new(
                [(-0.5, 1.0), (last_round as f64 + 0.5, 1.0)],
                axis.stroke_width(1),
            ))
            .map_err(chart_err)?;
        legend.push(("reference (1x)".to_string(), Swatch::Line(axis)));
        let line = rgb("#1f77b4");
        chart
            .draw_series(LineSeries::new(steps(&best, last_round), line.stroke_width(2)))
            .map_err(chart_err)?;
        legend.push(("best so far".to_string(), Swatch::Line(line)));
        // Attempts of one round spread a little sideways so that they do not hide each other.
        let mut per_round: std::collections::HashMap<u32, (usize, usize)> = Default::default();
        for a in &done {
            per_round.entry(a.round).or_default().1 += 1;
        }
        let mut statuses: Vec<&str> = Vec::new();
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
            let y = a.speedup.unwrap_or(fail_y);
            let colour = rgb(status_colour(status));
            chart
                .draw_series(std::iter::once(Circle::new((x, y), 4, colour.filled())))
                .map_err(chart_err)?;
        }
        for status in statuses {
            let text = if status == "passed" {
                "passed".to_string()
            } else {
                format!("{status} (bottom band)")
            };
            legend.push((text, Swatch::Square(rgb(status_colour(status)))));
        }
        side_legend(&legend_area, &legend)?;
        root.present().map_err(chart_err)?;
    }
    Ok(svg)
}

/// What a legend entry shows: a thin bar for a line, a square for a kind of point.
enum Swatch {
    Line(RGBColor),
    Square(RGBColor),
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

/// Best speedup so far vs round, one line per run (the dashboard's comparison).
pub fn comparison_chart(runs: &[&RunReport], size: (u32, u32)) -> Result<String, ReportError> {
    let last_round = runs
        .iter()
        .flat_map(|r| r.attempts.iter().map(|a| a.round).chain([r.round, r.rounds]))
        .max()
        .unwrap_or(0)
        .max(1);
    let bests: Vec<Vec<(u32, f64)>> = runs.iter().map(|r| best_so_far(&r.attempts)).collect();
    let (lo, hi) = y_range(bests.iter().flatten().map(|b| b.1));
    let mut svg = String::new();
    {
        let root: DrawingArea<SVGBackend, Shift> = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let (plot, legend_area) = root.split_horizontally(size.0.saturating_sub(LEGEND_W));
        let mut legend = Vec::new();
        let mut chart = speedup_axes(&plot, last_round, (lo, hi), "best speedup so far")?;
        for (i, (run, best)) in runs.iter().zip(&bests).enumerate() {
            let colour = rgb(run_colour(i));
            let until = run.attempts.iter().map(|a| a.round).max().unwrap_or(0).max(run.round);
            chart
                .draw_series(LineSeries::new(steps(best, until), colour.stroke_width(2)))
                .map_err(chart_err)?;
            legend.push((format!("{}. {}", i + 1, run.name), Swatch::Line(colour)));
            legend.push((format!("    {}, {}", run.strategy, run.brain.kind), Swatch::Line(WHITE)));
        }
        side_legend(&legend_area, &legend)?;
        root.present().map_err(chart_err)?;
    }
    Ok(svg)
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

    #[test]
    fn only_round_speedups_are_labelled() {
        let labels: Vec<String> = [0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 10.0, 20.0]
            .iter()
            .map(nice_label)
            .collect();
        assert_eq!(
            labels,
            ["0.1x", "0.2x", "", "0.3x", "0.5x", "", "1x", "", "2x", "3x", "10x", "20x"]
        );
    }

    #[test]
    fn steps_hold_the_level_until_the_next_improvement() {
        assert_eq!(
            steps(&[(0, 1.0), (2, 1.5)], 4),
            vec![(0.0, 1.0), (2.0, 1.0), (2.0, 1.5), (4.0, 1.5)]
        );
    }
}
