use std::path::PathBuf;

/// Why an import failed. Every variant names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file or folder could not be read or written (the source, the output folder, the
    /// probe's scratch files).
    #[error("{path}: {message}")]
    Io {
        /// The path at fault, as messages show it.
        path: String,
        /// The operating system's (or serializer's) message.
        message: String,
    },
    /// The file is not what the importer expects (no `Model` class, no `get_inputs`, ...).
    #[error("{file}: {message}")]
    Problem {
        /// The problem file, as given.
        file: String,
        /// What is missing or wrong.
        message: String,
    },
    /// The stand-in for PyTorch lacks something the file uses.
    #[error(
        "{file}: {where_} uses {what}, which ksearch's stand-in for PyTorch does not provide; \
         install PyTorch to import this problem (with `--python PATH` naming an interpreter that has it)"
    )]
    NeedsTorch {
        /// The problem file, as given.
        file: String,
        /// Which step of running it got there (`loading the file`, a call such as
        /// `generate_input(**{...})`).
        where_: String,
        /// The missing torch name or feature.
        what: String,
    },
    /// The problem's own code raised while it was run to find the shapes.
    #[error("{file}: {where_} raised {message}{hint}\n{trace}")]
    Raised {
        /// The problem file, as given.
        file: String,
        /// Which step of running it raised (as for [`ImportError::NeedsTorch`]).
        where_: String,
        /// The exception, as Python prints it.
        message: String,
        /// Empty, or (when the stand-in ran the file) a sentence starting with a space that
        /// suggests installing PyTorch.
        hint: String,
        /// The Python traceback, trailing whitespace removed.
        trace: String,
    },
    /// A value the importer cannot express in a task (a dict input, a tensor init argument).
    #[error("{file}: {message}")]
    Unsupported {
        /// The problem file (or GPU MODE's reference.py), as given.
        file: String,
        /// What cannot be expressed, and where.
        message: String,
    },
    /// The problem cannot be checked as it stands, whatever the importer does: its output is
    /// identically zero (or not finite) on its own inputs, or its forward is random. A defect
    /// of the problem, which the message names; a task made of it would only be refused later
    /// by `ksearch eval`, or pass a kernel that writes zeros.
    #[error("{file}: {message}")]
    Uncheckable {
        /// The problem file, as given.
        file: String,
        /// What makes it uncheckable, and what would fix it.
        message: String,
    },
    /// A GPU MODE task.yml that does not parse or asks for what the importer does not support
    /// (a language other than Python, ...).
    #[error("{file}: {field}{sep}{message}", sep = if field.is_empty() { "" } else { ": " })]
    TaskYml {
        /// The task.yml, as messages show it.
        file: String,
        /// The key at fault; empty when the problem is the whole file.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The Python probe could not be started, ran past [`Options::timeout`](crate::Options),
    /// exited without an answer, or answered in a form ksearch does not read.
    #[error("cannot run the Python probe with {python}: {message}")]
    Python {
        /// The interpreter, as messages show it.
        python: String,
        /// What went wrong, with the tail of the probe's log when it exited without an answer.
        message: String,
    },
    /// The output folder is not empty and [`Options::force`](crate::Options) is not set.
    #[error(
        "{path} exists and is not empty; choose another --out or pass --force to overwrite the files the \
         importer writes"
    )]
    OutExists {
        /// The output folder.
        path: PathBuf,
    },
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
