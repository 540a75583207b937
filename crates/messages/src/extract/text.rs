//! Lines, fences and positions: the text scanning both extractors share.

use std::ops::Range;

// ---------------------------------------------------------------------------------------------
// Fences and lines
// ---------------------------------------------------------------------------------------------

pub(super) struct Fence<'a> {
    /// Line of the opening fence.
    pub(super) line: usize,
    /// The info string after the fence characters, trimmed.
    pub(super) info: &'a str,
    /// The lines between the fences, de-indented like the opening fence, each ending in '\n'.
    pub(super) content: String,
    /// Byte range of the lines between the fences.
    pub(super) content_range: Range<usize>,
    /// Byte range from the opening line to the end of the closing line.
    pub(super) span: Range<usize>,
    pub(super) closed: bool,
    /// The previous non-empty line outside fences (the closing line of a previous block counts),
    /// with its byte offset.
    pub(super) prev_line: Option<(usize, &'a str)>,
}

pub(super) struct Line<'a> {
    pub(super) start: usize,
    /// Start of the next line.
    pub(super) next: usize,
    /// Without the line ending.
    pub(super) text: &'a str,
}

pub(super) fn split_lines(text: &str) -> Vec<Line<'_>> {
    let mut lines = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let next = if end < text.len() { end + 1 } else { end };
        let line = &text[start..end];
        lines.push(Line {
            start,
            next,
            text: line.strip_suffix('\r').unwrap_or(line),
        });
        start = next;
    }
    lines
}

pub(super) struct FenceOpen<'a> {
    pub(super) indent: usize,
    pub(super) ch: u8,
    pub(super) len: usize,
    pub(super) info: &'a str,
}

pub(super) fn fence_open(line: &str) -> Option<FenceOpen<'_>> {
    let trimmed = line.trim_start_matches([' ', '\t']);
    let ch = *trimmed.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = trimmed.bytes().take_while(|&b| b == ch).count();
    if len < 3 {
        return None;
    }
    let info = trimmed[len..].trim();
    if ch == b'`' && info.contains('`') {
        return None;
    }
    Some(FenceOpen {
        indent: line.len() - trimmed.len(),
        ch,
        len,
        info,
    })
}

pub(super) fn fence_closes(line: &str, open: &FenceOpen<'_>) -> bool {
    let t = line.trim();
    let n = t.bytes().take_while(|&b| b == open.ch).count();
    n >= open.len && n == t.len()
}

pub(super) fn scan_fences(text: &str) -> Vec<Fence<'_>> {
    let lines = split_lines(text);
    let mut fences = Vec::new();
    let mut prev_line = None;
    let mut i = 0;
    while i < lines.len() {
        let Some(open) = fence_open(lines[i].text) else {
            if !lines[i].text.trim().is_empty() {
                prev_line = Some((lines[i].start, lines[i].text));
            }
            i += 1;
            continue;
        };
        let mut content = String::new();
        let mut j = i + 1;
        while j < lines.len() && !fence_closes(lines[j].text, &open) {
            let line = lines[j].text;
            let strip = line
                .bytes()
                .take(open.indent)
                .take_while(|&b| b == b' ' || b == b'\t')
                .count();
            content.push_str(&line[strip..]);
            content.push('\n');
            j += 1;
        }
        let closed = j < lines.len();
        let content_start = lines.get(i + 1).map_or(text.len(), |l| l.start);
        let content_end = if closed { lines[j].start } else { text.len() };
        fences.push(Fence {
            line: i + 1,
            info: open.info,
            content,
            content_range: content_start..content_end,
            span: lines[i].start..if closed { lines[j].next } else { text.len() },
            closed,
            prev_line,
        });
        prev_line = lines.get(j).map(|l| (l.start, l.text));
        i = j + 1;
    }
    fences
}

pub(super) fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let bytes = &text.as_bytes()[..offset.min(text.len())];
    let line_start = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let line = 1 + bytes[..line_start].iter().filter(|&&b| b == b'\n').count();
    let column = 1 + bytes[line_start..].iter().filter(|&&b| b & 0xC0 != 0x80).count();
    (line, column)
}

/// `3`, `3 and 20`, `3, 20 and 41`.
pub(super) fn list_numbers(numbers: &[usize]) -> String {
    match numbers {
        [] => String::new(),
        [only] => only.to_string(),
        [init @ .., last] => format!(
            "{} and {last}",
            init.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}
