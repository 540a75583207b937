//! `<file path="...">...</file>` tags: finding them (outside code that merely quotes one), their
//! attributes and their bodies.

use super::names::parse_info;
use crate::extract::text::{line_col, scan_fences};
use crate::extract::ExtractError;
use std::ops::Range;

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
fn tag_end(bytes: &[u8], from: usize) -> Option<usize> {
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
fn parse_attributes(s: &str) -> Vec<(String, String)> {
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
fn tag_body(body: &str) -> (String, Option<String>) {
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
