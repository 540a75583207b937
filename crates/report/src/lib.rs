//! Reports of ksearch runs.
//!
//! [`load`] reads a run directory (the run store) into a typed [`RunReport`]: the summary, the
//! budget used, every attempt, the world-model tree, the best kernel with its diff against the
//! seed and per-workload numbers, and provenance. [`Renderer`] turns reports into HTML:
//! `ksearch report` writes one self-contained page (no script, no network: charts and the tree
//! are inline SVG), and `ksearch dashboard` serves live views of one or several runs, compared
//! along an axis of the reader's choice ([`XAxis`]: rounds, or what the runs spent).
//!
//! Everything from a run (kernel sources, LLM text, node texts) is untrusted: templates
//! auto-escape it, and the SVG code puts it only into escaped text nodes.
//!
//! This crate only reads a run: it never changes the run store or the run directory.

#![warn(missing_docs)]

mod axis;
mod chart;
mod diff;
mod error;
mod html;
pub mod kernelbench;
mod lineage;
mod load;
mod model;
mod tree;
mod words;

pub use axis::{series, Missing, Series, XAxis};
pub use chart::{best_so_far, comparison_chart, progress_chart, status_colour};
pub use error::{ReportError, UnknownXAxis};
pub use html::Renderer;
pub use lineage::{lineage_rows, lineage_svg, LineageRow};
pub use load::{device_groups, device_of, load, load_at, noise_flag, NOISY_ABOVE, STALLED_AFTER_S};
pub use model::*;
pub use tree::{layout, tree_svg, Layout, TreeStyle};

use std::path::Path;

/// Reads a run and renders its report page.
pub fn report_html(run_dir: &Path) -> Result<String, ReportError> {
    Renderer::new().report(&load(run_dir)?)
}
