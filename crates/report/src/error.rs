use std::path::PathBuf;

/// Why a report could not be made; each names the run and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The run store could not be opened or read (not a run directory, locked, corrupt).
    #[error(transparent)]
    Store(#[from] ksearch_store::StoreError),

    #[error("{}: event {seq} ({kind}) is unreadable: {message}", path.display())]
    /// An event's body does not deserialize into the engine's event type.
    Event {
        /// The run's database file.
        path: PathBuf,
        /// The event's position in the log.
        seq: i64,
        /// The event's kind as stored.
        kind: String,
        /// serde's message.
        message: String,
    },

    /// The events read, but the engine refused them on replay (a log this engine cannot follow).
    #[error("{}: the event log does not replay: {message}", path.display())]
    Replay {
        /// The run's database file.
        path: PathBuf,
        /// The engine's message.
        message: String,
    },

    /// A template failed to render: a bug of this crate, not of the run.
    #[error("report template {template}: {message}")]
    Template {
        /// The template's name, e.g. `report.html`.
        template: String,
        /// minijinja's message.
        message: String,
    },

    /// The chart library (plotters) failed drawing an SVG chart; its error, debug-printed.
    #[error("chart: {0}")]
    Chart(String),
}

/// An x axis for the comparison chart that does not exist (`--x-axis`, `?x=`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no x axis `{given}`; one of {}",
    crate::axis::XAxis::ALL.map(|a| a.as_str()).join(", ")
)]
pub struct UnknownXAxis {
    /// The axis name as the reader gave it.
    pub given: String,
}
