//! File names given around a fenced block: in its info string, on the line before it, or in a
//! comment on its first line; and what looks like a file name at all.

/// How surely a name was given: `Explicit` names hold even for blocks tagged as output or data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strength {
    Explicit,
    Weak,
}

/// (language, file name) from a fence info string: `c kernel.c`, `cuda title="kernel.cu"`,
/// `c:kernel.c`, `kernel.c`, `{.c file=kernel.c}`.
pub(in crate::extract) fn parse_info(info: &str) -> (Option<String>, Option<String>) {
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
fn split_info(info: &str) -> Vec<&str> {
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

fn unquote(s: &str) -> &str {
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

fn strip_list_marker(s: &str) -> &str {
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
fn strip_file_prefix(s: &str) -> (&str, bool) {
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
fn looks_like_file_name(s: &str) -> bool {
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
fn looks_like_source_file(s: &str) -> bool {
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
