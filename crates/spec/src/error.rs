use std::fmt;

/// One thing wrong with a task or solution file, located as precisely as we can:
/// `file: field: message`, where `field` is a dotted path (`inputs.x.dtype`) or a line
/// (`line 3: axes.N`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file at fault, as it was named to the loader.
    pub file: String,
    /// Where in the file: a dotted path or a line; empty when the problem is the whole file
    /// (a JSON syntax error carries its position in `message` instead).
    pub field: String,
    /// What is wrong, for a person.
    pub message: String,
}

impl Problem {
    /// A problem at `field` of `file`.
    pub fn new(file: impl Into<String>, field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            file: file.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.field, self.message)
        }
    }
}

/// Why a task or solution could not be loaded. Every variant names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The files were read but are not valid; all problems found are listed.
    #[error("{}", join_problems(.0))]
    Invalid(Vec<Problem>),
    /// A file could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file, as it was named to the loader.
        path: String,
        /// Why reading failed.
        #[source]
        source: std::io::Error,
    },
    /// A task was named that is neither a built-in task nor an existing path.
    #[error("no built-in task named '{name}' and no such path; built-in tasks: {available}")]
    UnknownTask {
        /// The name as given.
        name: String,
        /// The built-in task names, comma-separated, for the message.
        available: String,
    },
}

impl SpecError {
    /// A validation failure with a single problem.
    pub fn one(file: impl Into<String>, field: impl Into<String>, message: impl Into<String>) -> Self {
        SpecError::Invalid(vec![Problem::new(file, field, message)])
    }

    /// The problems, if this error is a validation failure.
    pub fn problems(&self) -> &[Problem] {
        match self {
            SpecError::Invalid(p) => p,
            _ => &[],
        }
    }
}

fn join_problems(problems: &[Problem]) -> String {
    problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n")
}

/// Collects problems while validating, so a user sees every mistake at once.
#[derive(Debug, Default)]
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

    pub(crate) fn into_result(self) -> Result<(), SpecError> {
        if self.list.is_empty() {
            Ok(())
        } else {
            Err(SpecError::Invalid(self.list))
        }
    }
}

/// Parses JSON into `T`, reporting the path of the first field that does not fit.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, SpecError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            let message = format!(
                "invalid JSON at line {}, column {}: {}",
                inner.line(),
                inner.column(),
                strip_position(&inner.to_string())
            );
            return SpecError::one(file, "", message);
        }
        let field = if path == "." { String::new() } else { path };
        SpecError::one(file, field, strip_position(&inner.to_string()))
    })
}

/// Deserialises an already parsed JSON value into `T`, reporting the path of the first field
/// that does not fit.
pub(crate) fn parse_value<T: serde::de::DeserializeOwned>(
    file: &str,
    value: serde_json::Value,
) -> Result<T, SpecError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        SpecError::one(file, field, strip_position(&e.into_inner().to_string()))
    })
}

/// serde_json appends " at line L column C" to its messages; we report positions ourselves.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Parses TOML into `T`, reporting the path of the first field that does not fit.
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, SpecError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let field = if path == "." { String::new() } else { path };
        let message = inner.message().to_string();
        let message = match inner.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!("{message} (line {line})")
            }
            None => message,
        };
        SpecError::one(file, field, message)
    })
}
