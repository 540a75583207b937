use std::path::PathBuf;

/// Why an import failed. Every variant names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// The file is not what the importer expects (no `Model` class, no `get_inputs`, ...).
    #[error("{file}: {message}")]
    Problem { file: String, message: String },
    /// The stand-in for PyTorch lacks something the file uses.
    #[error(
        "{file}: {where_} uses {what}, which ksearch's stand-in for PyTorch does not provide; \
         install PyTorch to import this problem (with `--python PATH` naming an interpreter that has it)"
    )]
    NeedsTorch { file: String, where_: String, what: String },
    /// The problem's own code raised while it was run to find the shapes.
    #[error("{file}: {where_} raised {message}{hint}\n{trace}")]
    Raised {
        file: String,
        where_: String,
        message: String,
        hint: String,
        trace: String,
    },
    /// A value the importer cannot express in a task (a dict input, a tensor init argument).
    #[error("{file}: {message}")]
    Unsupported { file: String, message: String },
    #[error("{file}: {field}{sep}{message}", sep = if field.is_empty() { "" } else { ": " })]
    TaskYml {
        file: String,
        field: String,
        message: String,
    },
    #[error("cannot run the Python probe with {python}: {message}")]
    Python { python: String, message: String },
    #[error(
        "{path} exists and is not empty; choose another --out or pass --force to overwrite the files the \
         importer writes"
    )]
    OutExists { path: PathBuf },
    /// The folder written does not load as a task: a defect of the importer, reported in full.
    #[error("the imported task does not load (please report this): {0}")]
    Invalid(#[from] ksearch_spec::SpecError),
}

impl ImportError {
    pub(crate) fn io(path: &std::path::Path, e: std::io::Error) -> Self {
        ImportError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}
