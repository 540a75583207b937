use std::path::PathBuf;

/// Why a report could not be made; each names the run and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] ksearch_store::StoreError),

    #[error("{}: event {seq} ({kind}) is unreadable: {message}", path.display())]
    Event {
        path: PathBuf,
        seq: i64,
        kind: String,
        message: String,
    },

    #[error("{}: the event log does not replay: {message}", path.display())]
    Replay { path: PathBuf, message: String },

    /// A template failed to render: a bug of this crate, not of the run.
    #[error("report template {template}: {message}")]
    Template { template: String, message: String },

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
    pub given: String,
}
