//! What the dashboard's comparison chart puts across: rounds, or one of the quantities a run
//! spends (evaluations, device time, wall time, LLM dollars, LLM tokens). Runs are compared
//! side by side to see which strategy or brain does more with the same budget, and rounds cost
//! different amounts to different brains (a tuner's round is one evaluation and no LLM call).
//!
//! [`series`] gives one run's line along an axis: its best speedup so far at each passing
//! attempt, placed by what the run had spent when that attempt's outcome was known
//! ([`Attempt::spent`](crate::Attempt::spent)); or, for a run that did not record the quantity
//! (dollars of a knob-tuner run), why it has no line, which the chart says in its legend.

use crate::error::UnknownXAxis;
use crate::model::{Attempt, RunReport, Spent};
use serde::Serialize;
use std::str::FromStr;

/// The comparison chart's x axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum XAxis {
    /// The engine's rounds (the default: every run has them).
    #[default]
    Round,
    /// Evaluations finished.
    Evaluations,
    /// Evaluation wall time added up.
    DeviceSeconds,
    /// Wall time since the run's first event.
    WallTime,
    /// LLM dollars spent.
    Dollars,
    /// LLM tokens spent, in and out.
    Tokens,
}

impl XAxis {
    /// Every axis, in the order the dashboard offers them.
    pub const ALL: [XAxis; 6] = [
        XAxis::Round,
        XAxis::Evaluations,
        XAxis::DeviceSeconds,
        XAxis::WallTime,
        XAxis::Dollars,
        XAxis::Tokens,
    ];

    /// The name in `?x=` and `--x-axis`.
    pub fn as_str(self) -> &'static str {
        match self {
            XAxis::Round => "round",
            XAxis::Evaluations => "evaluations",
            XAxis::DeviceSeconds => "device-seconds",
            XAxis::WallTime => "wall-time",
            XAxis::Dollars => "dollars",
            XAxis::Tokens => "tokens",
        }
    }

    /// What the selector offers, and what a heading says the runs are compared by.
    pub fn title(self) -> &'static str {
        match self {
            XAxis::Round => "round",
            XAxis::Evaluations => "evaluations",
            XAxis::DeviceSeconds => "device-seconds (evaluation wall time)",
            XAxis::WallTime => "wall time since start",
            XAxis::Dollars => "LLM dollars",
            XAxis::Tokens => "LLM tokens (in + out)",
        }
    }

    /// Where a run stood along the axis when it had spent `s`.
    fn of(self, a: &Attempt, s: &Spent) -> f64 {
        match self {
            XAxis::Round => a.round as f64,
            XAxis::Evaluations => s.evaluations as f64,
            XAxis::DeviceSeconds => s.device_seconds,
            XAxis::WallTime => s.wall_seconds,
            XAxis::Dollars => s.dollars,
            XAxis::Tokens => s.tokens as f64,
        }
    }

    /// How far a run has got along the axis: its round, or its totals.
    fn reached(self, run: &RunReport) -> f64 {
        let b = &run.budget;
        match self {
            XAxis::Round => run.attempts.iter().map(|a| a.round).max().unwrap_or(0).max(run.round) as f64,
            XAxis::Evaluations => b.evaluations as f64,
            XAxis::DeviceSeconds => b.device_seconds,
            XAxis::WallTime => b.wall_seconds,
            XAxis::Dollars => b.dollars,
            XAxis::Tokens => (b.input_tokens + b.output_tokens) as f64,
        }
    }

    /// `after round 3`, `after 12 evaluations`, `after $0.0300`: a point's tooltip.
    pub(crate) fn after(self, x: f64) -> String {
        match self {
            XAxis::Round => format!("after round {x:.0}"),
            XAxis::Evaluations => format!("after {}", crate::words::counted(x as u64, "evaluation")),
            XAxis::DeviceSeconds => format!("after {x:.1} device-seconds"),
            XAxis::WallTime => format!("{x:.1} s after the start"),
            XAxis::Dollars => format!("after ${x:.4} of LLM calls"),
            XAxis::Tokens => format!("after {}", crate::words::counted(x as u64, "LLM token")),
        }
    }
}

impl std::fmt::Display for XAxis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for XAxis {
    type Err = UnknownXAxis;

    fn from_str(s: &str) -> Result<XAxis, UnknownXAxis> {
        XAxis::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| UnknownXAxis { given: s.to_string() })
    }
}

/// One run's line along an axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// `(x, best speedup so far)` at each passing attempt, x ascending, one point per x (the
    /// best of the attempts that share it).
    pub points: Vec<(f64, f64)>,
    /// How far the run has got along the axis: its line is held level up to there.
    pub reached: f64,
    /// Something the reader should know about the line (calls of unknown price left out).
    pub note: Option<String>,
}

/// Why a run has no line along an axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// No LLM of ksearch's answered (the knob tuner, an agent, a replay): it spent no dollars
    /// or tokens, and a line at zero would claim it did as well for free.
    NoLlm {
        /// The run's brain kind (`tuner`, `agent`, `replay`).
        brain: String,
    },
    /// The store has none of the quantity: no LLM call had a known price, or the provider
    /// reported no token counts, or no evaluation its wall time, or a passing attempt cannot
    /// be placed.
    NotRecorded {
        /// What is missing, in words for the chart's note (e.g. `LLM prices`).
        what: &'static str,
    },
}

impl Missing {
    /// The legend's note: short, as the legend's column is narrow (about 28 characters).
    pub fn note(&self) -> String {
        match self {
            Missing::NoLlm { brain } => {
                let who = match brain.as_str() {
                    "tuner" => "knob tuner",
                    other => other,
                };
                format!("no LLM ({who})")
            }
            Missing::NotRecorded { what } => format!("no {what}"),
        }
    }
}

/// The run's best speedup so far along `axis`, or why it has none.
pub fn series(run: &RunReport, axis: XAxis) -> Result<Series, Missing> {
    let b = &run.budget;
    let llm_used = b.llm_calls + b.failed_llm_calls > 0;
    let no_llm = || Missing::NoLlm {
        brain: run.brain.kind.clone(),
    };
    let mut note = None;
    match axis {
        XAxis::Dollars | XAxis::Tokens if run.brain.kind != "llm" && !llm_used => return Err(no_llm()),
        XAxis::Dollars if b.llm_calls > 0 && b.unpriced_calls == b.llm_calls => {
            return Err(Missing::NotRecorded { what: "LLM prices" })
        }
        XAxis::Dollars if b.unpriced_calls > 0 => {
            note = Some(format!(
                "excl. {}",
                crate::words::counted(b.unpriced_calls as u64, "unpriced call")
            ));
        }
        XAxis::Tokens if b.llm_calls > 0 && b.input_tokens + b.output_tokens == 0 => {
            return Err(Missing::NotRecorded { what: "token counts" })
        }
        XAxis::DeviceSeconds if b.evaluations > 0 && b.device_seconds <= 0.0 => {
            return Err(Missing::NotRecorded {
                what: "evaluation times",
            })
        }
        _ => {}
    }
    let mut passed: Vec<(f64, f64)> = Vec::new();
    for a in &run.attempts {
        let Some(speedup) = a.speedup else { continue };
        let x = match (axis, a.spent.as_ref()) {
            (XAxis::Round, _) => a.round as f64,
            (_, Some(s)) => axis.of(a, s),
            // A passing attempt whose moment is unknown cannot be placed; leaving it out
            // would draw a best that is not the run's.
            (_, None) => return Err(Missing::NotRecorded { what: "attempt times" }),
        };
        passed.push((x, speedup));
    }
    // Stable: attempts at the same x stay in the order they were made.
    passed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (x, s) in passed {
        let best = points.last().map_or(s, |l| l.1.max(s));
        match points.last_mut() {
            Some(last) if last.0 == x => last.1 = best,
            _ => points.push((x, best)),
        }
    }
    let reached = points.iter().map(|p| p.0).fold(axis.reached(run), f64::max);
    Ok(Series { points, reached, note })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Budget, RunReport};

    /// An attempt at `round` whose outcome was known after `evaluations` evaluations, with
    /// the other quantities proportional to it.
    fn attempt(round: u32, evaluations: usize, speedup: Option<f64>) -> Attempt {
        let status = if speedup.is_some() { "passed" } else { "compile_error" };
        let mut a = Attempt::for_test(evaluations as i64, None, round, status, speedup);
        let n = evaluations as f64;
        a.spent = Some(Spent {
            evaluations,
            device_seconds: 0.5 * n,
            wall_seconds: 10.0 * n,
            dollars: 0.02 * (n - 1.0),
            tokens: 1000 * (evaluations as u64 - 1),
        });
        a
    }

    fn run(brain: &str, attempts: Vec<Attempt>, budget: Budget) -> RunReport {
        let mut r = RunReport::for_test("r", brain);
        r.round = attempts.iter().map(|a| a.round).max().unwrap_or(0);
        r.attempts = attempts;
        r.budget = budget;
        r
    }

    fn llm_run() -> RunReport {
        run(
            "llm",
            vec![
                attempt(0, 1, Some(1.0)),
                attempt(1, 2, None),
                attempt(1, 3, Some(1.4)),
                attempt(2, 4, Some(1.2)),
                attempt(3, 5, Some(2.0)),
            ],
            Budget {
                llm_calls: 6,
                input_tokens: 5000,
                output_tokens: 1000,
                dollars: 0.1,
                evaluations: 7,
                device_seconds: 3.5,
                wall_seconds: 70.0,
                ..Budget::default()
            },
        )
    }

    #[test]
    fn each_axis_places_the_best_so_far_by_what_was_spent() {
        let r = llm_run();
        let along = |axis| series(&r, axis).unwrap();
        let xs = |axis| along(axis).points.iter().map(|p| p.0).collect::<Vec<_>>();
        let ys = |axis| along(axis).points.iter().map(|p| p.1).collect::<Vec<_>>();
        // The best never falls, whatever is across.
        for axis in XAxis::ALL {
            assert_eq!(ys(axis), [1.0, 1.4, 1.4, 2.0], "{axis}");
        }
        assert_eq!(xs(XAxis::Round), [0.0, 1.0, 2.0, 3.0]);
        // The failed attempt (the second evaluation) makes no point but moves the others on.
        assert_eq!(xs(XAxis::Evaluations), [1.0, 3.0, 4.0, 5.0]);
        assert_eq!(xs(XAxis::DeviceSeconds), [0.5, 1.5, 2.0, 2.5]);
        assert_eq!(xs(XAxis::WallTime), [10.0, 30.0, 40.0, 50.0]);
        assert_eq!(xs(XAxis::Tokens), [0.0, 2000.0, 3000.0, 4000.0]);
        let dollars = xs(XAxis::Dollars);
        assert!((dollars[3] - 0.08).abs() < 1e-12, "{dollars:?}");
        // The line goes on to what the run has spent in all (the final re-measurements'
        // evaluations, calls after the last passing attempt), or to its last round.
        assert_eq!(along(XAxis::Round).reached, 3.0);
        assert_eq!(along(XAxis::Evaluations).reached, 7.0);
        assert_eq!(along(XAxis::DeviceSeconds).reached, 3.5);
        assert_eq!(along(XAxis::WallTime).reached, 70.0);
        assert_eq!(along(XAxis::Tokens).reached, 6000.0);
        assert_eq!(along(XAxis::Dollars).reached, 0.1);
        assert!(XAxis::ALL.iter().all(|a| along(*a).note.is_none()));
    }

    #[test]
    fn attempts_at_the_same_place_make_one_point_with_their_best() {
        let mut a = attempt(1, 2, Some(1.1));
        let mut b = attempt(1, 3, Some(1.3));
        // A tuner's sweep: two variants evaluated in one round, and (in parallel) recorded
        // by the same second.
        let same = Spent {
            wall_seconds: 20.0,
            ..Spent::default()
        };
        a.spent = Some(same);
        b.spent = Some(same);
        let r = run("tuner", vec![attempt(0, 1, Some(1.2)), b, a], Budget::default());
        assert_eq!(series(&r, XAxis::Round).unwrap().points, [(0.0, 1.2), (1.0, 1.3)]);
        assert_eq!(series(&r, XAxis::WallTime).unwrap().points, [(10.0, 1.2), (20.0, 1.3)]);
    }

    #[test]
    fn a_run_without_the_quantity_says_why_instead_of_drawing_zeros() {
        let tuner = run("tuner", vec![attempt(0, 1, Some(1.0))], Budget::default());
        for axis in [XAxis::Dollars, XAxis::Tokens] {
            let missing = series(&tuner, axis).unwrap_err();
            assert_eq!(missing, Missing::NoLlm { brain: "tuner".into() });
            assert_eq!(missing.note(), "no LLM (knob tuner)");
        }
        assert!(series(&tuner, XAxis::Evaluations).is_ok());
        assert!(series(&tuner, XAxis::WallTime).is_ok());

        // Calls none of which has a price: no dollars to plot, tokens still.
        let mut unpriced = llm_run();
        unpriced.budget.unpriced_calls = unpriced.budget.llm_calls;
        unpriced.budget.dollars = 0.0;
        assert_eq!(series(&unpriced, XAxis::Dollars).unwrap_err().note(), "no LLM prices");
        assert!(series(&unpriced, XAxis::Tokens).is_ok());
        // Some priced: drawn, with what is left out said.
        unpriced.budget.unpriced_calls = 1;
        assert_eq!(
            series(&unpriced, XAxis::Dollars).unwrap().note.as_deref(),
            Some("excl. 1 unpriced call")
        );

        // Evaluations without their wall time (a store written before it was recorded).
        let mut untimed = llm_run();
        untimed.budget.device_seconds = 0.0;
        assert!(matches!(
            series(&untimed, XAxis::DeviceSeconds),
            Err(Missing::NotRecorded { .. })
        ));
        // A passing attempt that cannot be placed: no line rather than a wrong one.
        let mut unplaced = llm_run();
        unplaced.attempts[2].spent = None;
        assert!(series(&unplaced, XAxis::Evaluations).is_err());
        assert!(series(&unplaced, XAxis::Round).is_ok());
    }

    #[test]
    fn axes_are_named_as_the_command_line_and_the_address_name_them() {
        for axis in XAxis::ALL {
            assert_eq!(axis.as_str().parse::<XAxis>(), Ok(axis));
            assert_eq!(serde_json::to_value(axis).unwrap(), axis.as_str());
        }
        let e = "cost".parse::<XAxis>().unwrap_err().to_string();
        assert!(
            e.contains("`cost`") && e.contains("round, evaluations, device-seconds, wall-time, dollars, tokens"),
            "{e}"
        );
        assert_eq!(XAxis::default(), XAxis::Round);
    }
}
