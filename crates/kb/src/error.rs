/// One thing wrong with a knowledge-base file: the same `file: field: message` type as task
/// files use (`field` is a dotted path such as `figures.memory_bandwidth_gbs.value`).
pub use ksearch_spec::Problem;

/// Why the knowledge base could not be loaded or a lookup failed.
#[derive(Debug, thiserror::Error)]
pub enum KbError {
    /// Files were read but are not valid; every problem found is listed.
    #[error("{}", join_problems(.0))]
    Invalid(Vec<Problem>),
    /// A file or folder of the knowledge base could not be read (an override folder, say).
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file or folder that failed.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A device name that no hardware spec's name or alias matches.
    #[error("no hardware named '{name}' in the knowledge base; known: {available}")]
    UnknownHardware {
        /// The name as asked for (before [`crate::normalize_name`]).
        name: String,
        /// The known names, listed for the message.
        available: String,
    },
    /// A task asks for something its device cannot do (a dialect the device does not run).
    #[error("{0}")]
    Unsupported(String),
}

impl KbError {
    /// A validation failure with a single problem: `file: field: message`.
    pub fn one(file: impl Into<String>, field: impl Into<String>, message: impl Into<String>) -> Self {
        KbError::Invalid(vec![Problem::new(file, field, message)])
    }

    /// The problems, if this error is a validation failure.
    pub fn problems(&self) -> &[Problem] {
        match self {
            KbError::Invalid(p) => p,
            _ => &[],
        }
    }
}

fn join_problems(problems: &[Problem]) -> String {
    problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n")
}

/// Collects problems while validating, so an author sees every mistake at once.
#[derive(Debug)]
pub(crate) struct Problems {
    file: String,
    list: Vec<Problem>,
}

impl Problems {
    pub(crate) fn new(file: &str) -> Self {
        Problems {
            file: file.to_string(),
            list: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.list.push(Problem::new(self.file.clone(), field, message));
    }

    pub(crate) fn into_list(self) -> Vec<Problem> {
        self.list
    }
}

/// Parses TOML into `T`, reporting the path of the first field that does not fit and its line.
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, Vec<Problem>> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let field = if path == "." { String::new() } else { path };
        let message = inner.message().trim_end().to_string();
        let message = match inner.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!("{message} (line {line})")
            }
            None => message,
        };
        vec![Problem::new(file, field, message)]
    })
}
