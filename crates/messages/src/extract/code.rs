//! Finding the source files in an answer: file tags, named fences, headings, comments.
//!
//! Submodules: `tags` (`<file>` tags), `names` (file names from fence info strings, headings and
//! first-line comments). This module puts the files together and checks their paths.

mod names;
mod tags;

use super::text::*;
use super::{CodeFile, ExtractError};
pub(super) use names::parse_info;
use names::{name_from_first_comment, name_from_heading, Strength};
use std::collections::HashMap;
use tags::scan_file_tags;

/// The source files in a code answer, in the order they appear; see the module documentation
/// for the recognised forms. `default_name` names a single unnamed code block.
pub fn code_files(text: &str, default_name: Option<&str>) -> Result<Vec<CodeFile>, ExtractError> {
    let text = strip_bom(text);
    if text.trim().is_empty() {
        return Err(ExtractError::EmptyAnswer);
    }
    let tags = scan_file_tags(text)?;

    // Fences are looked for outside the tags only.
    let mut masked = text.as_bytes().to_vec();
    for tag in &tags {
        for b in &mut masked[tag.span.clone()] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    let masked = String::from_utf8_lossy(&masked).into_owned();
    let fences = scan_fences(&masked);
    if let Some(open) = fences.iter().find(|f| !f.closed) {
        return Err(ExtractError::UnterminatedFence { line: open.line });
    }

    struct Found {
        offset: usize,
        line: usize,
        path: String,
        language: Option<String>,
        content: String,
    }
    let tag_starts: Vec<usize> = tags.iter().map(|t| t.span.start).collect();
    let mut found: Vec<Found> = tags
        .into_iter()
        .map(|tag| Found {
            offset: tag.span.start,
            line: tag.line,
            path: tag.path,
            language: tag.language,
            content: tag.content,
        })
        .collect();
    let mut unnamed: Vec<(usize, Option<String>, String)> = Vec::new();
    let mut not_code: Vec<(usize, String)> = Vec::new();
    let mut empty_blocks: Vec<usize> = Vec::new();

    for fence in &fences {
        let (language, info_name) = parse_info(fence.info);
        let is_not_code = language.as_deref().is_some_and(is_not_code_language);
        let accept = |strength: Strength| !is_not_code || strength == Strength::Explicit;
        let mut content = fence.content.clone();
        let mut name = info_name.or_else(|| {
            fence
                .prev_line
                // A <file> tag between the line and the fence cuts them apart.
                .filter(|(at, _)| !tag_starts.iter().any(|t| (*at..fence.span.start).contains(t)))
                .and_then(|(_, line)| name_from_heading(line))
                .filter(|(_, strength)| accept(*strength))
                .map(|(name, _)| name)
        });
        if name.is_none() {
            if let Some((comment_name, strength, rest)) = name_from_first_comment(&content) {
                if accept(strength) {
                    name = Some(comment_name);
                    content = rest;
                }
            }
        }
        match name {
            Some(path) => found.push(Found {
                offset: fence.span.start,
                line: fence.line,
                path,
                language,
                content,
            }),
            None if is_not_code => {
                not_code.push((fence.line, language.unwrap_or_default()));
            }
            None if content.trim().is_empty() => empty_blocks.push(fence.line),
            None => unnamed.push((fence.line, language, content)),
        }
    }

    if found.is_empty() {
        match (unnamed.len(), default_name) {
            (0, _) => {
                return Err(ExtractError::NoCode {
                    detail: no_code_detail(&fences, &not_code, &empty_blocks),
                })
            }
            (1, Some(default)) => {
                let (line, language, content) = unnamed.remove(0);
                found.push(Found {
                    offset: 0,
                    line,
                    path: default.to_owned(),
                    language,
                    content,
                });
            }
            (1, None) => {
                return Err(ExtractError::MissingFileName { line: unnamed[0].0 });
            }
            _ => {
                return Err(ExtractError::UnnamedBlocks {
                    lines: unnamed.iter().map(|(line, _, _)| *line).collect(),
                })
            }
        }
    }

    found.sort_by_key(|f| f.offset);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut files = Vec::with_capacity(found.len());
    for f in found {
        let path = check_path(&f.path)?;
        if let Some(&first_line) = seen.get(&path) {
            return Err(ExtractError::DuplicateFile {
                path,
                first_line,
                second_line: f.line,
            });
        }
        if f.content.trim().is_empty() {
            return Err(ExtractError::EmptyFile { path, line: f.line });
        }
        seen.insert(path.clone(), f.line);
        files.push(CodeFile {
            path,
            language: f.language.map(|l| l.to_ascii_lowercase()),
            content: f.content,
        });
    }
    Ok(files)
}

pub(super) fn no_code_detail(fences: &[Fence<'_>], not_code: &[(usize, String)], empty: &[usize]) -> String {
    if fences.is_empty() {
        return "expected each file in a <file path=\"NAME\">...</file> tag or a fenced code block (```), and the answer has neither".to_owned();
    }
    let mut parts: Vec<String> = not_code
        .iter()
        .map(|(line, language)| format!("line {line} is tagged `{language}`"))
        .collect();
    if !empty.is_empty() {
        parts.push(format!(
            "the block{} at line{} {} {} empty",
            if empty.len() == 1 { "" } else { "s" },
            if empty.len() == 1 { "" } else { "s" },
            list_numbers(empty),
            if empty.len() == 1 { "is" } else { "are" },
        ));
    }
    format!(
        "its fenced blocks hold no source file ({}); put each file in a <file path=\"NAME\">...</file> tag",
        parts.join("; ")
    )
}

/// Fence languages that hold commands, output or data rather than source files.
pub(super) fn is_not_code_language(language: &str) -> bool {
    matches!(
        language.to_ascii_lowercase().as_str(),
        "json"
            | "jsonc"
            | "json5"
            | "text"
            | "txt"
            | "plaintext"
            | "plain"
            | "bash"
            | "sh"
            | "shell"
            | "zsh"
            | "console"
            | "terminal"
            | "shell-session"
            | "output"
            | "log"
            | "diff"
            | "patch"
    )
}

/// A relative, normalized path (`./a//b.c` -> `a/b.c`), or why it is not allowed.
pub(super) fn check_path(path: &str) -> Result<String, ExtractError> {
    let bad = |reason: &str| ExtractError::BadPath {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    let trimmed = path.trim();
    if trimmed.is_empty() {
        return Err(bad("it is empty"));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(bad("it contains control characters"));
    }
    let drive = trimmed.len() >= 2 && trimmed.as_bytes()[0].is_ascii_alphabetic() && trimmed.as_bytes()[1] == b':';
    if trimmed.starts_with('/') || trimmed.starts_with('\\') || trimmed.starts_with('~') || drive {
        return Err(bad(
            "it is absolute; give a path relative to the working directory, such as \"kernel.c\"",
        ));
    }
    if trimmed.contains('\\') {
        return Err(bad("it contains a backslash; separate directories with '/'"));
    }
    if trimmed.ends_with('/') {
        return Err(bad("it names a directory, not a file"));
    }
    let mut parts = Vec::new();
    for part in trimmed.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(bad("it leaves the working directory ('..'); give a path inside it")),
            _ => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Err(bad("it names a directory, not a file"));
    }
    Ok(parts.join("/"))
}
