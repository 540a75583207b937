//! Finding the source files in an answer: file tags, named fences, headings, comments.

use super::text::*;
use super::{CodeFile, ExtractError};
use std::collections::HashMap;
use std::ops::Range;

// ---------------------------------------------------------------------------------------------
// Code files
// ---------------------------------------------------------------------------------------------

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

pub(super) struct FileTag {
    /// Byte range from `<file` to the end of `</file>`.
    pub(super) span: Range<usize>,
    pub(super) line: usize,
    pub(super) path: String,
    pub(super) language: Option<String>,
    pub(super) content: String,
}

pub(super) fn scan_file_tags(text: &str) -> Result<Vec<FileTag>, ExtractError> {
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let is_open_at = |at: usize| {
        lower[at..].starts_with("<file")
            && matches!(
                bytes.get(at + 5),
                Some(b' ' | b'\t' | b'\r' | b'\n' | b'>')
            )
            // `<file path="...">` quoted in prose is an example, not a file.
            && (at == 0 || bytes[at - 1] != b'`')
    };
    let mut tags = Vec::new();
    let mut from = 0;
    while let Some(rel) = lower[from..].find("<file") {
        let start = from + rel;
        if !is_open_at(start) {
            from = start + 5;
            continue;
        }
        let line = line_col(text, start).0;
        let Some(gt) = tag_end(bytes, start + 5) else {
            return Err(ExtractError::UnterminatedFileTag { line });
        };
        let attrs_text = &text[start + 5..gt];
        if attrs_text.trim_end().ends_with('/') {
            // `<file path="x"/>`: no content; not a file.
            from = gt + 1;
            continue;
        }
        let attrs = parse_attributes(attrs_text);
        let attr = |names: &[&str]| {
            attrs
                .iter()
                .find(|(k, _)| names.contains(&k.as_str()))
                .map(|(_, v)| v.clone())
        };
        let Some(path) = attr(&["path", "name", "filename", "file"]) else {
            let starts_line = text[..start]
                .rsplit('\n')
                .next()
                .is_none_or(|before| before.trim().is_empty());
            if starts_line {
                return Err(ExtractError::FileTagWithoutPath { line });
            }
            // `"<file %s>"` in code, say: not a tag.
            from = gt + 1;
            continue;
        };
        let body_start = gt + 1;
        let close = lower[body_start..].find("</file>");
        let next_open =
            (body_start..close.map_or(text.len(), |c| body_start + c)).find(|&i| bytes[i] == b'<' && is_open_at(i));
        if let Some(next) = next_open {
            return Err(ExtractError::FileTagNotClosed {
                line,
                next_line: line_col(text, next).0,
            });
        }
        let Some(close) = close else {
            return Err(ExtractError::UnterminatedFileTag { line });
        };
        let body = &text[body_start..body_start + close];
        let (content, fence_language) = tag_body(body);
        let end = body_start + close + "</file>".len();
        tags.push(FileTag {
            span: start..end,
            line,
            path,
            language: attr(&["language", "lang"]).or(fence_language),
            content,
        });
        from = end;
    }
    Ok(tags)
}

/// The `>` that ends the opening tag whose attributes start at `from` (quotes respected).
pub(super) fn tag_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut quote = None;
    for (i, &b) in bytes.iter().enumerate().skip(from) {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), _) if b == q => quote = None,
            (None, b'>') => return Some(i),
            _ => {}
        }
    }
    None
}

/// `key="value" key='value' key=value` pairs; keys lowercased.
pub(super) fn parse_attributes(s: &str) -> Vec<(String, String)> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !(chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '-') {
            i += 1;
            continue;
        }
        let key_start = i;
        while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '-') {
            i += 1;
        }
        let key: String = chars[key_start..i].iter().collect::<String>().to_lowercase();
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i >= chars.len() || chars[i] != '=' {
            out.push((key, String::new()));
            continue;
        }
        i += 1;
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let value: String = match chars.get(i) {
            Some(&q @ ('"' | '\'')) => {
                let value_start = i + 1;
                i = value_start;
                while i < chars.len() && chars[i] != q {
                    i += 1;
                }
                let v = chars[value_start..i.min(chars.len())].iter().collect();
                i += 1;
                v
            }
            _ => {
                let value_start = i;
                while i < chars.len() && !chars[i].is_whitespace() {
                    i += 1;
                }
                chars[value_start..i].iter().collect()
            }
        };
        out.push((key, value));
    }
    out
}

/// The content of a `<file>` tag: unwrapped when it is one fenced block (whose language is
/// returned), otherwise the text without the blank lines around it.
pub(super) fn tag_body(body: &str) -> (String, Option<String>) {
    let fences = scan_fences(body);
    if let Some(fence) = fences.first() {
        let before = &body[..fence.span.start];
        let after = &body[fence.span.end..];
        if before.trim().is_empty() && after.trim().is_empty() {
            return (fence.content.clone(), parse_info(fence.info).0);
        }
    }
    let body = body.replace("\r\n", "\n");
    let first_text_line = body
        .char_indices()
        .find(|&(_, c)| !c.is_whitespace())
        .map_or(body.len(), |(i, _)| body[..i].rfind('\n').map_or(0, |n| n + 1));
    let content = body[first_text_line..].trim_end();
    if content.is_empty() {
        (String::new(), None)
    } else {
        (format!("{content}\n"), None)
    }
}

/// How surely a name was given: `Explicit` names hold even for blocks tagged as output or data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strength {
    Explicit,
    Weak,
}

/// (language, file name) from a fence info string: `c kernel.c`, `cuda title="kernel.cu"`,
/// `c:kernel.c`, `kernel.c`, `{.c file=kernel.c}`.
pub(super) fn parse_info(info: &str) -> (Option<String>, Option<String>) {
    let mut info = info.trim();
    if let Some(inner) = info.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        info = inner;
    }
    let mut language = None;
    let mut name = None;
    for (k, token) in split_info(info).into_iter().enumerate() {
        if let Some((key, value)) = token.split_once('=') {
            let key = key.trim().to_ascii_lowercase();
            if name.is_none() && matches!(key.as_str(), "title" | "file" | "filename" | "name" | "path") {
                let value = unquote(value.trim());
                if !value.is_empty() {
                    name = Some(value.to_owned());
                }
            }
            continue;
        }
        if k == 0 {
            let token = token.trim_start_matches('.');
            if let Some((lang, file)) = token.split_once(':') {
                if !file.is_empty() {
                    if !lang.is_empty() {
                        language = Some(lang.to_owned());
                    }
                    name = Some(file.to_owned());
                    continue;
                }
            }
            if looks_like_file_name(token) {
                name = Some(token.to_owned());
            } else if !token.is_empty() {
                language = Some(token.trim_end_matches(':').to_owned());
            }
        } else if name.is_none() && looks_like_file_name(token.trim_matches(['"', '\''])) {
            name = Some(token.trim_matches(['"', '\'']).to_owned());
        }
    }
    (language.map(|l| l.to_ascii_lowercase()), name)
}

/// Splits on whitespace outside quotes.
pub(super) fn split_info(info: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let mut start = None;
    let mut quote = None;
    for (i, c) in info.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => {
                quote = Some(c);
                start.get_or_insert(i);
            }
            (Some(q), _) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if let Some(s) = start.take() {
                    tokens.push(&info[s..i]);
                }
            }
            _ => {
                start.get_or_insert(i);
            }
        }
    }
    if let Some(s) = start {
        tokens.push(&info[s..]);
    }
    tokens
}

pub(super) fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

/// A file name from a line such as `**kernel.c**`, `` `kernel.c` ``, `File: kernel.c`,
/// `// kernel.c`, `### kernel.c`, `1. kernel.c:` (explicit), or a sentence ending in a colon
/// that quotes exactly one source file name (weak).
pub(super) fn name_from_heading(line: &str) -> Option<(String, Strength)> {
    let plain: String = line.chars().filter(|&c| c != '*' && c != '`').collect();
    let mut s = plain.trim().trim_start_matches(['#', '>']).trim_start();
    s = strip_list_marker(s);
    s = s.strip_prefix("//").unwrap_or(s).trim();
    s = s.trim_end_matches(':').trim_end();
    let (rest, prefixed) = strip_file_prefix(s);
    let rest = rest.trim().trim_end_matches(':').trim_end();
    if !rest.is_empty() && !rest.contains(char::is_whitespace) && (prefixed || looks_like_file_name(rest)) {
        return Some((rest.to_owned(), Strength::Explicit));
    }
    if prefixed {
        // `File: kernel.cu (complete)`
        let first = rest
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .trim_end_matches([':', ',']);
        if looks_like_file_name(first) {
            return Some((first.to_owned(), Strength::Explicit));
        }
    }

    let end = line.trim_end().trim_end_matches(['*', '_']).trim_end();
    if !end.ends_with(':') {
        return None;
    }
    let mut names: Vec<&str> = Vec::new();
    for quoted in line
        .split('`')
        .skip(1)
        .step_by(2)
        .chain(line.split("**").skip(1).step_by(2))
    {
        let quoted = quoted.trim().trim_matches('`').trim_end_matches(':');
        if looks_like_source_file(quoted) && !names.contains(&quoted) {
            names.push(quoted);
        }
    }
    match names.as_slice() {
        [only] => Some(((*only).to_owned(), Strength::Weak)),
        _ => None,
    }
}

pub(super) fn strip_list_marker(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix(['-', '+']) {
        if rest.starts_with(char::is_whitespace) {
            return rest.trim_start();
        }
    }
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 {
        if let Some(rest) = s[digits..].strip_prefix(['.', ')']) {
            if rest.starts_with(char::is_whitespace) {
                return rest.trim_start();
            }
        }
    }
    s
}

/// Strips `File:`, `Filename:`, `File name:` or `Path:` (any case); says whether one was there.
pub(super) fn strip_file_prefix(s: &str) -> (&str, bool) {
    for prefix in ["filename:", "file name:", "file:", "path:"] {
        if s.len() >= prefix.len() && s.is_char_boundary(prefix.len()) && s[..prefix.len()].eq_ignore_ascii_case(prefix)
        {
            return (s[prefix.len()..].trim_start(), true);
        }
    }
    (s, false)
}

/// A file name from the first non-blank line of a block when it is a comment naming the file
/// (`// file: kernel.c` explicit; `/* kernel.c */`, `# kernel.py` weak), with the content that
/// follows that line.
pub(super) fn name_from_first_comment(content: &str) -> Option<(String, Strength, String)> {
    let mut offset = 0;
    let line = loop {
        let end = content[offset..].find('\n').map(|i| offset + i)?;
        let line = &content[offset..end];
        if !line.trim().is_empty() {
            break line;
        }
        offset = end + 1;
    };
    let rest = content[offset + line.len() + 1..].to_owned();
    let s = line.trim();
    let body = if let Some(r) = s.strip_prefix("/*") {
        r.trim_end().strip_suffix("*/").unwrap_or(r)
    } else if let Some(r) = s.strip_prefix("<!--") {
        r.trim_end().strip_suffix("-->").unwrap_or(r)
    } else {
        ["//", "--", "#", ";"]
            .iter()
            .find_map(|leader| s.strip_prefix(leader))?
    };
    let body: String = body.chars().filter(|&c| c != '`').collect();
    let body = body.trim().trim_start_matches(['/', '*', '#']).trim();
    let (name, prefixed) = strip_file_prefix(body);
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    if prefixed {
        Some((name.to_owned(), Strength::Explicit, rest))
    } else if looks_like_file_name(name) {
        Some((name.to_owned(), Strength::Weak, rest))
    } else {
        None
    }
}

/// `kernel.cu`, `src/util.h`, `Makefile`: path characters only, and a last component with an
/// extension that starts with a letter (or a well-known extensionless name).
pub(super) fn looks_like_file_name(s: &str) -> bool {
    if s.is_empty() || s.len() > 200 || !s.chars().all(|c| c.is_ascii_alphanumeric() || "._-/+@~\\".contains(c)) {
        return false;
    }
    let last = s.rsplit(['/', '\\']).next().unwrap_or(s);
    if matches!(last, "Makefile" | "makefile" | "GNUmakefile" | "Dockerfile" | "Kbuild") {
        return true;
    }
    match last.rfind('.') {
        Some(dot) if dot > 0 => {
            let ext = &last[dot + 1..];
            ext.starts_with(|c: char| c.is_ascii_alphabetic()) && ext.chars().all(|c| c.is_ascii_alphanumeric())
        }
        _ => false,
    }
}

/// A file name with a common source extension (for names taken from prose).
pub(super) fn looks_like_source_file(s: &str) -> bool {
    const EXTENSIONS: &[&str] = &[
        "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx", "inl", "cu", "cuh", "hip", "cl", "metal", "ptx", "s", "asm",
        "ll", "mlir", "py", "pyx", "pxd", "rs", "go", "java", "kt", "js", "ts", "jl", "zig", "swift", "m", "mm", "f",
        "f90", "glsl", "hlsl", "wgsl", "comp", "sh", "mk", "cmake", "txt", "toml", "yaml", "yml", "json", "cfg", "ini",
        "md",
    ];
    looks_like_file_name(s)
        && s.rsplit_once('.')
            .is_some_and(|(_, ext)| EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
}
