//! Pulls structured answers out of the free text that language models write.
//!
//! Models wrap their answers in prose, Markdown code fences or XML-ish tags, make small JSON
//! mistakes and sometimes stop mid-answer. The functions here find the structure anyway and,
//! when they cannot, return an [`ExtractError`] whose message is written to be sent back to the
//! model as it is (see [`retry_instruction`]). Line numbers in messages count from 1 in the
//! answer as the model wrote it.
//!
//! # JSON
//!
//! [`first_json_object`] and [`parse_json_as`] look for a JSON object:
//!
//! - inside fenced blocks tagged `json` (or `jsonc`, `json5`) first, then anywhere in the text;
//! - candidates are delimited by a brace matcher that knows strings, escapes and comments; a
//!   candidate that does not parse is skipped and the search goes on after it (a candidate
//!   that runs to the end of the answer and stops like a truncated object ends the search);
//! - small mistakes are repaired first: a leading byte-order mark, trailing commas before `}` or
//!   `]`, `//` and `/* */` comments, raw newlines, carriage returns and tabs inside strings;
//! - an empty object `{}` is taken only when nothing else parses (prose often shows `{}`);
//! - [`parse_json_as`] takes the first object that deserializes into the wanted type, and
//!   otherwise says which field is wrong (`steps[1].kind`) and where.
//!
//! # Code files
//!
//! [`code_files`] recognises, for each file:
//!
//! 1. `<file path="kernel.cu">...</file>` tags (`name=` or `filename=` also, either quote, an
//!    optional `language=`); the body may itself be one fenced block;
//! 2. fenced blocks whose info string names the file: ```` ```c kernel.c ````,
//!    ```` ```cuda title="kernel.cu" ```` (also `file=`, `filename=`, `name=`, `path=`),
//!    ```` ```c:kernel.c ````, ```` ```kernel.c ````;
//! 3. fenced blocks whose previous non-empty line names the file: `**kernel.c**`,
//!    `` `kernel.c` ``, `File: kernel.c`, `// kernel.c`, `### kernel.c`, `- kernel.c:`, or a
//!    sentence ending in a colon that quotes exactly one source file name
//!    (``Here is the updated `kernel.cu`:``);
//! 4. fenced blocks whose first line is a comment naming the file: `// file: kernel.c`,
//!    `/* kernel.c */`, `# file: launcher.py` (that line is dropped from the content);
//! 5. when no file is named at all, a single unnamed code block gets `default_name`.
//!
//! Fences are ```` ``` ```` or `~~~`, three or more; a fence closes only with the same character
//! at least as many times, so shorter fences nest inside longer ones. Blocks tagged as
//! commands, output or data (`bash`, `sh`, `console`, `output`, `text`, `json`, `diff`, ...)
//! are not code unless they are named explicitly (forms 1, 2, `File:` headings, and comments
//! with `file:`). Unnamed code blocks are ignored when some file is named. Paths must be
//! relative, without `..`; each path may appear once. Every file's content ends with a newline.

mod code;
mod json;
#[cfg(test)]
mod tests;
mod text;

pub use code::code_files;
use json::describe_path;
pub use json::{first_json_object, parse_json_as};
use text::list_numbers;

/// Why no structured answer could be taken from a model's text. The messages are addressed to
/// the model and can be sent back verbatim (see [`retry_instruction`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// The answer has no text, or only whitespace.
    #[error("the answer is empty")]
    EmptyAnswer,

    /// No `{` anywhere in the answer.
    #[error("no JSON object found in the answer (it has {chars} characters and no '{{')")]
    NoJsonObject {
        /// The answer's length in characters, to show it was not empty.
        chars: usize,
    },

    /// An object was found but does not parse, even after the small repairs.
    #[error("the JSON object starting at line {line} does not parse: {message}{}",
        if *.truncated { " — the answer looks truncated" } else { "" })]
    InvalidJson {
        /// Line of the object's `{`.
        line: usize,
        /// serde_json's message, with the position in the answer.
        message: String,
        /// The object runs to the end of the answer and stops before it is complete.
        truncated: bool,
    },

    /// An object parses as JSON but does not deserialize into the wanted type.
    #[error("the JSON object starting at line {line} does not have the expected form: {message} at {} (line {at_line}, column {at_column})",
        describe_path(.path))]
    WrongShape {
        /// Line of the object's `{`.
        line: usize,
        /// serde_json's message without its position, e.g. "missing field `steps`".
        message: String,
        /// Where in the object, e.g. `steps[1].kind`; empty for the top level.
        path: String,
        /// Line (from 1) in the answer of the offending value.
        at_line: usize,
        /// Column (from 1) of the offending value on `at_line`.
        at_column: usize,
    },

    /// No file and no code block to take (and no single unnamed block for a default name).
    #[error("no code found in the answer: {detail}")]
    NoCode {
        /// What was seen instead, e.g. fences that hold prose or empty blocks.
        detail: String,
    },

    /// No file is named and there are several code blocks naming none, so the default name fits none.
    #[error("the answer has {} code blocks without file names (at lines {}), so it is not clear which file each one is; put each file in its own <file path=\"NAME\">...</file> tag",
        .lines.len(), list_numbers(.lines))]
    UnnamedBlocks {
        /// The opening fence line (from 1) of each unnamed block.
        lines: Vec<usize>,
    },

    /// No file is named and the one code block names none either, with no default name to give it.
    #[error(
        "the code block at line {line} does not say which file it is; put it in a <file path=\"NAME\">...</file> tag"
    )]
    MissingFileName {
        /// Line (from 1) in the answer where the unnamed block's fence opens.
        line: usize,
    },

    /// A file path that is absolute, escapes with `..`, is empty or has control characters.
    #[error("the file path \"{path}\" is not allowed: {reason}")]
    BadPath {
        /// The path as the model wrote it.
        path: String,
        /// Which rule it breaks, e.g. "it is empty".
        reason: String,
    },

    /// Two blocks or tags name the same (normalized) path.
    #[error(
        "the file \"{path}\" is given twice (lines {first_line} and {second_line}); send each file once, complete"
    )]
    DuplicateFile {
        /// The normalized path both name.
        path: String,
        /// Line (from 1) in the answer where the first one starts.
        first_line: usize,
        /// Line (from 1) in the answer where the second one starts.
        second_line: usize,
    },

    /// A named file whose content is only whitespace.
    #[error("the file \"{path}\" (line {line}) is empty")]
    EmptyFile {
        /// The normalized path.
        path: String,
        /// Line (from 1) in the answer where the file's block or tag starts.
        line: usize,
    },

    /// A fence opened and the answer ended before its closing fence.
    #[error("the code block starting at line {line} is not closed — the answer looks truncated")]
    UnterminatedFence {
        /// Line (from 1) in the answer where the fence opens.
        line: usize,
    },

    /// A `<file>` tag opened and the answer ended before `</file>`.
    #[error("the <file> tag opened at line {line} is not closed with </file> — the answer looks truncated")]
    UnterminatedFileTag {
        /// Line (from 1) in the answer where the tag opens.
        line: usize,
    },

    /// A `<file>` tag opened and another one opened before `</file>`.
    #[error("the <file> tag opened at line {line} is not closed with </file> before the next <file> tag at line {next_line}")]
    FileTagNotClosed {
        /// Line (from 1) in the answer where the unclosed tag opens.
        line: usize,
        /// Line (from 1) in the answer where the next `<file>` tag opens.
        next_line: usize,
    },

    /// A `<file>` tag without a `path=` (or `name=`, `filename=`) attribute.
    #[error("the <file> tag at line {line} has no path; write it as <file path=\"NAME\">...</file>")]
    FileTagWithoutPath {
        /// Line (from 1) in the answer where the tag is.
        line: usize,
    },
}

impl ExtractError {
    /// Whether the answer seems cut off (a larger output limit may help on retry).
    pub fn is_truncated(&self) -> bool {
        matches!(
            self,
            ExtractError::InvalidJson { truncated: true, .. }
                | ExtractError::UnterminatedFence { .. }
                | ExtractError::UnterminatedFileTag { .. }
        )
    }
}

/// The feedback sent to the model after an unusable answer, e.g. `retry_instruction(&err, "one
/// JSON object in a ```json block")`.
pub fn retry_instruction(err: &ExtractError, expected: &str) -> String {
    let err = err.to_string();
    format!(
        "Your previous answer could not be used: {}. Resend the complete answer as {}.",
        err.trim_end_matches('.'),
        expected.trim().trim_end_matches('.')
    )
}

/// One source file taken from an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFile {
    /// Relative path, `/`-separated, without `.` components.
    pub path: String,
    /// The language the answer gave (fence info string or `language=`), lowercased.
    pub language: Option<String>,
    /// The file's text, ending with a newline.
    pub content: String,
}
