//! Finding, repairing and parsing the JSON object in an answer.

use super::code::parse_info;
use super::text::*;
use super::ExtractError;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::ops::Range;

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------

/// The first JSON object in `text`, preferring the content of ```` ```json ```` blocks.
pub fn first_json_object(text: &str) -> Result<Value, ExtractError> {
    let text = strip_bom(text);
    let attempts = json_attempts(text)?;
    match preferred_parsed(&attempts).first() {
        Some(attempt) => Ok(attempt
            .outcome
            .as_ref()
            .expect("preferred_parsed returns parsed attempts")
            .clone()),
        None => Err(best_failure(text, &attempts)),
    }
}

/// The first JSON object in `text` that deserializes into `T`. When objects parse but none
/// fits, the error names the field (`steps[1].kind`) of the most likely answer.
pub fn parse_json_as<T: DeserializeOwned>(text: &str) -> Result<T, ExtractError> {
    let text = strip_bom(text);
    let attempts = json_attempts(text)?;
    let parsed = preferred_parsed(&attempts);
    if parsed.is_empty() {
        return Err(best_failure(text, &attempts));
    }
    let mut errors = Vec::with_capacity(parsed.len());
    for attempt in &parsed {
        match serde_json::from_str::<T>(&attempt.repaired) {
            Ok(value) => return Ok(value),
            Err(err) => errors.push(err),
        }
    }
    // Report on the object the model most likely meant: the first one in a ```json block,
    // otherwise the largest.
    let chosen = parsed.iter().position(|a| a.in_fence).unwrap_or_else(|| {
        let mut best = 0;
        for (i, a) in parsed.iter().enumerate() {
            if a.end - a.start > parsed[best].end - parsed[best].start {
                best = i;
            }
        }
        best
    });
    Err(shape_error(text, parsed[chosen], &errors[chosen]))
}

/// At most this many candidate objects are tried in one answer.
pub(super) const MAX_CANDIDATES: usize = 1000;

pub(super) struct JsonAttempt {
    /// Byte range of the candidate in the answer.
    pub(super) start: usize,
    pub(super) end: usize,
    /// Found inside a ```` ```json ```` block.
    pub(super) in_fence: bool,
    /// The candidate after repairs.
    pub(super) repaired: String,
    /// Offsets in `repaired` of bytes that repairs inserted.
    pub(super) inserted: Vec<usize>,
    pub(super) outcome: Result<Value, serde_json::Error>,
}

impl JsonAttempt {
    /// The answer's byte offset for an offset in `repaired`.
    fn original_offset(&self, repaired_offset: usize) -> usize {
        self.start + repaired_offset - self.inserted.partition_point(|&p| p < repaired_offset)
    }
}

pub(super) fn json_attempts(text: &str) -> Result<Vec<JsonAttempt>, ExtractError> {
    if text.trim().is_empty() {
        return Err(ExtractError::EmptyAnswer);
    }
    if !text.contains('{') {
        return Err(ExtractError::NoJsonObject {
            chars: text.chars().count(),
        });
    }
    let json_blocks: Vec<Range<usize>> = scan_fences(text)
        .iter()
        .filter(|f| {
            let (language, _) = parse_info(f.info);
            matches!(language.as_deref(), Some("json" | "jsonc" | "json5"))
        })
        .map(|f| f.content_range.clone())
        .collect();
    let mut attempts = Vec::new();
    for block in &json_blocks {
        scan_region(text, block.clone(), true, &[], &mut attempts);
    }
    scan_region(text, 0..text.len(), false, &json_blocks, &mut attempts);
    Ok(attempts)
}

/// Tries every top-level `{` in `region` (outside `skip`) as the start of an object.
pub(super) fn scan_region(
    text: &str,
    region: Range<usize>,
    in_fence: bool,
    skip: &[Range<usize>],
    out: &mut Vec<JsonAttempt>,
) {
    let bytes = text.as_bytes();
    let mut i = region.start;
    while i < region.end && out.len() < MAX_CANDIDATES {
        if bytes[i] != b'{' || skip.iter().any(|r| r.contains(&i)) {
            i += 1;
            continue;
        }
        match match_object(&bytes[i..region.end]) {
            Some(len) => {
                out.push(json_attempt(text, i, i + len, in_fence));
                i += len;
            }
            None => {
                let attempt = json_attempt(text, i, region.end, in_fence);
                let truncated = matches!(&attempt.outcome, Err(e) if e.is_eof());
                out.push(attempt);
                if truncated {
                    // A valid beginning that runs to the end: everything after it is inside it.
                    break;
                }
                i += 1;
            }
        }
    }
}

pub(super) fn json_attempt(text: &str, start: usize, end: usize, in_fence: bool) -> JsonAttempt {
    let (repaired, inserted) = repair_json(&text[start..end]);
    let outcome = serde_json::from_str::<Value>(&repaired);
    JsonAttempt {
        start,
        end,
        in_fence,
        repaired,
        inserted,
        outcome,
    }
}

/// Parsed attempts in the order they should be taken: those in ```json blocks first, and in
/// each group non-empty objects before empty ones.
pub(super) fn preferred_parsed(attempts: &[JsonAttempt]) -> Vec<&JsonAttempt> {
    let mut parsed: Vec<&JsonAttempt> = attempts.iter().filter(|a| a.outcome.is_ok()).collect();
    parsed.sort_by_key(|a| {
        let empty = matches!(&a.outcome, Ok(Value::Object(m)) if m.is_empty());
        (!a.in_fence, empty)
    });
    parsed
}

/// The error for the failed candidate that got furthest (those in ```json blocks first).
pub(super) fn best_failure(text: &str, attempts: &[JsonAttempt]) -> ExtractError {
    let any_in_fence = attempts.iter().any(|a| a.in_fence);
    let mut best: Option<(&JsonAttempt, &serde_json::Error, usize)> = None;
    for attempt in attempts.iter().filter(|a| a.in_fence || !any_in_fence) {
        if let Err(err) = &attempt.outcome {
            let progress = if err.is_eof() {
                attempt.repaired.len()
            } else {
                offset_of(&attempt.repaired, err.line(), err.column())
            };
            if best.is_none_or(|(_, _, p)| progress > p) {
                best = Some((attempt, err, progress));
            }
        }
    }
    let Some((attempt, err, _)) = best else {
        // Every '{' was skipped (candidate limit); should not happen with real answers.
        return ExtractError::NoJsonObject {
            chars: text.chars().count(),
        };
    };
    // serde_json puts EOF errors on the last character or just after it; say "just after".
    let at = if err.is_eof() {
        attempt.end
    } else {
        attempt.original_offset(offset_of(&attempt.repaired, err.line(), err.column()))
    };
    let (at_line, at_column) = line_col(text, at);
    ExtractError::InvalidJson {
        line: line_col(text, attempt.start).0,
        message: format!("{} at line {at_line} column {at_column}", message_without_position(err)),
        truncated: err.is_eof() && text[attempt.end..].trim().is_empty(),
    }
}

pub(super) fn shape_error(text: &str, attempt: &JsonAttempt, err: &serde_json::Error) -> ExtractError {
    let message = message_without_position(err);
    let (path, at) = if err.line() == 0 {
        (String::new(), attempt.start)
    } else {
        let offset = offset_of(&attempt.repaired, err.line(), err.column());
        let path = json_path_at(&attempt.repaired, offset, message.starts_with("missing field"));
        (path, attempt.original_offset(offset))
    };
    let (at_line, at_column) = line_col(text, at);
    ExtractError::WrongShape {
        line: line_col(text, attempt.start).0,
        message,
        path,
        at_line,
        at_column,
    }
}

pub(super) fn message_without_position(err: &serde_json::Error) -> String {
    let full = err.to_string();
    if err.line() == 0 {
        return full;
    }
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    match full.strip_suffix(&suffix) {
        Some(message) => message.to_owned(),
        None => full,
    }
}

/// The byte offset that serde_json's (line, column) points at: the offending byte.
pub(super) fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n')
            .nth(line - 2)
            .map_or(text.len(), |(i, _)| i + 1)
    };
    (line_start + column.saturating_sub(1)).min(text.len())
}

/// The end (exclusive) of the object that starts at `bytes[0] == b'{'`, or `None` when it is
/// not closed. Braces inside strings and comments do not count.
pub(super) fn match_object(bytes: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if i >= bytes.len() {
                    return None;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let close = find_bytes(&bytes[i + 2..], b"*/")?;
                i += 2 + close + 1;
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

pub(super) fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Repairs small JSON mistakes: comments and trailing commas become spaces (offsets kept), raw
/// newlines, carriage returns and tabs inside strings become escapes (one byte inserted each;
/// their offsets in the output are returned).
pub(super) fn repair_json(json: &str) -> (String, Vec<usize>) {
    let bytes = json.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + 8);
    let mut inserted = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                out.push(b);
                i += 1;
                while i < bytes.len() {
                    let c = bytes[i];
                    match c {
                        b'\\' => {
                            out.push(c);
                            if let Some(&next) = bytes.get(i + 1) {
                                out.push(next);
                            }
                            i += 2;
                            continue;
                        }
                        b'"' => break,
                        b'\n' | b'\r' | b'\t' => {
                            out.push(b'\\');
                            inserted.push(out.len());
                            out.push(match c {
                                b'\n' => b'n',
                                b'\r' => b'r',
                                _ => b't',
                            });
                        }
                        _ => out.push(c),
                    }
                    i += 1;
                }
                if i < bytes.len() {
                    out.push(b'"');
                }
            }
            b'/' if matches!(bytes.get(i + 1), Some(b'/' | b'*')) => {
                let end = comment_end(bytes, i);
                out.extend(bytes[i..end].iter().map(|&c| if c == b'\n' { c } else { b' ' }));
                i = end;
                continue;
            }
            b',' if matches!(next_significant(bytes, i + 1), Some(b'}' | b']')) => out.push(b' '),
            _ => out.push(b),
        }
        i += 1;
    }
    (String::from_utf8_lossy(&out).into_owned(), inserted)
}

/// The end of the comment starting at `bytes[start] == b'/'` (a `//` comment ends before the
/// newline).
pub(super) fn comment_end(bytes: &[u8], start: usize) -> usize {
    if bytes.get(start + 1) == Some(&b'/') {
        bytes[start..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(bytes.len(), |p| start + p)
    } else {
        find_bytes(&bytes[start + 2..], b"*/").map_or(bytes.len(), |p| start + 2 + p + 2)
    }
}

/// The next byte after `from` that is not whitespace or inside a comment.
pub(super) fn next_significant(bytes: &[u8], mut from: usize) -> Option<u8> {
    while from < bytes.len() {
        match bytes[from] {
            b' ' | b'\t' | b'\n' | b'\r' => from += 1,
            b'/' if matches!(bytes.get(from + 1), Some(b'/' | b'*')) => {
                from = comment_end(bytes, from);
            }
            c => return Some(c),
        }
    }
    None
}

pub(super) enum PathStep {
    Key(Option<String>),
    Index(usize),
}

/// The path (`steps[1].kind`) of the value being read at byte `offset` of `json`; with
/// `object_itself`, the path of the innermost object rather than of its last key.
pub(super) fn json_path_at(json: &str, offset: usize, object_itself: bool) -> String {
    let bytes = json.as_bytes();
    let mut stack: Vec<PathStep> = Vec::new();
    let mut expecting_key = false;
    let mut i = 0;
    while i < offset.min(bytes.len()) {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(bytes.len());
                if expecting_key {
                    if let Some(PathStep::Key(key)) = stack.last_mut() {
                        let raw = &json[start..i];
                        *key = Some(
                            serde_json::from_str::<String>(raw).unwrap_or_else(|_| raw.trim_matches('"').to_owned()),
                        );
                    }
                    expecting_key = false;
                }
                continue;
            }
            b'{' => {
                stack.push(PathStep::Key(None));
                expecting_key = true;
            }
            b'[' => stack.push(PathStep::Index(0)),
            b'}' | b']' => {
                stack.pop();
                expecting_key = false;
            }
            b',' => match stack.last_mut() {
                Some(PathStep::Key(_)) => expecting_key = true,
                Some(PathStep::Index(n)) => *n += 1,
                None => {}
            },
            _ => {}
        }
        i += 1;
    }
    if object_itself {
        if let Some(PathStep::Key(key)) = stack.last_mut() {
            *key = None;
        }
    }
    let mut path = String::new();
    for step in &stack {
        match step {
            PathStep::Key(Some(key)) => {
                let plain = !key.is_empty() && key.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
                if !plain {
                    path.push('[');
                    path.push_str(&serde_json::to_string(key).unwrap_or_default());
                    path.push(']');
                } else {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                }
            }
            PathStep::Key(None) => {}
            PathStep::Index(n) => path.push_str(&format!("[{n}]")),
        }
    }
    path
}

pub(super) fn describe_path(path: &str) -> String {
    if path.is_empty() {
        "the top level".to_owned()
    } else {
        format!("`{path}`")
    }
}
