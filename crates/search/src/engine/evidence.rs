//! The evidence prompts carry about each attempt (docs/engine.md, "What prompts show"): its
//! parent, the coder's one-line description, knob values of sweep variants, per-workload medians
//! and IQRs, its gain over its parent by the run's rule, the first and last lines of its error,
//! the compiler's resources, and for the latest few the diff to its parent. Everything is
//! bounded so that the section stays within [`ATTEMPTS_BUDGET`] characters.

use super::candidates::{verdict, Candidate};
use super::protocol::{CodeKind, EvalSummary, Source};
use super::resources::resource_brief;
use super::Engine;
use serde::Serialize;

/// Attempts listed under "Recent attempts", newest first.
pub const ATTEMPTS_SHOWN: usize = 8;
/// Characters of the "Recent attempts" section, diffs included; older attempts that do not fit
/// are counted, not shown.
pub const ATTEMPTS_BUDGET: usize = 8000;
/// The latest attempts that show their diff to their parent.
pub const DIFFS_SHOWN: usize = 2;
/// Lines and characters of one diff.
pub const DIFF_MAX_LINES: usize = 60;
/// Characters of one diff (it is cut at whichever limit comes first).
pub const DIFF_MAX_CHARS: usize = 2500;
/// Lines of an error shown from its start and from its end, and the characters of each line.
pub const ERROR_HEAD: usize = 4;
pub const ERROR_TAIL: usize = 3;
pub const LINE_CHARS: usize = 200;
/// Characters of a coder's description.
pub const DESCRIPTION_CHARS: usize = 200;

/// One coder answer or knob sweep variant of the run, in the order they were made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptRecord {
    /// The round it was made in.
    pub round: u32,
    /// The coder request's kind; `None` for a knob sweep variant (made by the engine).
    pub kind: Option<CodeKind>,
    /// The world-model node it worked on.
    pub node_id: String,
    /// The coder request it answered (`r83`), so a brain answering several requests at once can
    /// tell which candidate came of which answer; `None` for a knob sweep variant.
    pub request: Option<String>,
    /// The candidate it was built on (the request's base).
    pub parent: Option<i64>,
    /// The candidate the answer yielded; `None` when no code could be extracted.
    pub candidate: Option<i64>,
    /// The coder's `DESCRIPTION:` line, or a sweep variant's knob values.
    pub description: Option<String>,
    /// Why the answer yielded no candidate.
    pub failure: Option<String>,
}

impl AttemptRecord {
    /// `seed`-less origins as the report names them: `coder` or `knob_sweep`.
    pub fn origin(&self) -> &'static str {
        if self.kind.is_some() {
            "coder"
        } else {
            "knob_sweep"
        }
    }
}

/// The coder's description of its change: the first line outside code blocks that starts with
/// `DESCRIPTION:` (any case, optionally in `**`), clipped to [`DESCRIPTION_CHARS`].
pub fn parse_description(answer: &str) -> Option<String> {
    let (mut fenced, mut tagged) = (false, false);
    for line in answer.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if t.contains("<file ") {
            tagged = !t.contains("</file>");
            continue;
        }
        if tagged {
            tagged = !t.contains("</file>");
            continue;
        }
        if fenced {
            continue;
        }
        let t = t.trim_start_matches(['*', '_', '#', '-', '>', ' ']);
        if !t.get(..11).is_some_and(|h| h.eq_ignore_ascii_case("description")) {
            continue;
        }
        let Some(rest) = t[11..].trim_start_matches(['*', '_']).strip_prefix(':') else {
            continue;
        };
        let text = rest.trim().trim_matches(['*', '_']).trim();
        if !text.is_empty() {
            return Some(clip(text, DESCRIPTION_CHARS));
        }
    }
    None
}

/// `text` flattened to one line and cut at `max` characters (with `...`).
pub fn clip(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

/// The error of a failed evaluation in a few lines: the reason's first [`ERROR_HEAD`] lines
/// with text and its last [`ERROR_TAIL`] (or the log's, when the reason is one line), each
/// clipped, `...` where lines were left out. Empty for a passing one.
pub fn error_excerpt(s: &EvalSummary) -> String {
    if s.passed() {
        return String::new();
    }
    let reason = s.reason.as_deref().unwrap_or("");
    let mut lines: Vec<&str> = reason
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    if lines.len() <= 1 {
        lines.extend(s.log_tail.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()));
    }
    let lines: Vec<String> = lines.iter().map(|l| clip_line(l)).collect();
    if lines.len() <= ERROR_HEAD + ERROR_TAIL {
        return lines.join("\n");
    }
    let omitted = lines.len() - ERROR_HEAD - ERROR_TAIL;
    let mut out: Vec<String> = lines[..ERROR_HEAD].to_vec();
    out.push(format!("... ({omitted} more lines) ..."));
    out.extend(lines[lines.len() - ERROR_TAIL..].iter().cloned());
    out.join("\n")
}

/// At most `n` lines of `text`, each clipped, `...` when lines were left out.
pub(super) fn clip_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines.iter().take(n).map(|l| clip_line(l)).collect();
    if lines.len() > n {
        out.push(format!("... ({} more lines)", lines.len() - n));
    }
    out.join("\n")
}

fn clip_line(line: &str) -> String {
    match line.char_indices().nth(LINE_CHARS) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line.to_string(),
    }
}

/// Per-workload medians and IQRs in one line: `w0 12.1+/-0.4, w1 165+/-4 us` (microseconds,
/// three significant digits), or empty.
pub fn times_line(s: &EvalSummary) -> String {
    let parts: Vec<String> = s
        .workloads
        .iter()
        .filter_map(|w| {
            let m = w.median_ns?;
            let iqr = w.iqr_ns.map(|q| format!("+/-{}", sig3(q / 1e3))).unwrap_or_default();
            Some(format!("{} {}{iqr}", clip(&w.uuid, 40), sig3(m / 1e3)))
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("{} us", parts.join(", "))
    }
}

/// Three significant digits, without an exponent.
pub(super) fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let a = x.abs();
    let decimals = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    };
    format!("{x:.decimals$}")
}

/// `, answer to request r83` for a coder's attempt; empty for a knob sweep variant.
fn request_note(a: &AttemptRecord) -> String {
    a.request
        .as_deref()
        .map(|r| format!(", answer to request {r}"))
        .unwrap_or_default()
}

/// The entry of one attempt: what it was, its verdict and gain over its parent, and the
/// indented lines of evidence (change, times, error, resources, diff when `diff`).
pub(super) fn attempt_entry(e: &Engine, a: &AttemptRecord, diff: bool) -> String {
    let how = match (a.kind, a.parent) {
        (Some(k), Some(p)) => format!("{} of candidate {p}", k.as_str()),
        (Some(k), None) => k.as_str().to_string(),
        (None, Some(p)) => format!("knob sweep of candidate {p}"),
        (None, None) => "knob sweep".to_string(),
    };
    let candidate = a.candidate.and_then(|id| e.candidate(id));
    let mut out = match candidate {
        Some(c) => format!(
            "- candidate {} (round {}, node {}{}, {how}): {}",
            c.id,
            a.round,
            a.node_id,
            request_note(a),
            c.result
                .as_ref()
                .map(verdict)
                .unwrap_or_else(|| "not evaluated yet".into())
        ),
        None => format!(
            "- round {} (node {}{}, {how}): no candidate ({})",
            a.round,
            a.node_id,
            request_note(a),
            clip(a.failure.as_deref().unwrap_or("no code"), LINE_CHARS)
        ),
    };
    if let (Some(c), Some(p)) = (candidate, a.parent) {
        if let Some(text) = e.describe_against(c.id, p) {
            out.push_str(&format!("; {text}"));
        }
    }
    let indent = |label: &str, text: &str| {
        text.lines()
            .enumerate()
            .map(|(i, l)| {
                if i == 0 {
                    format!("\n  {label}: {l}")
                } else {
                    format!("\n    {l}")
                }
            })
            .collect::<String>()
    };
    match (&a.description, a.kind) {
        (Some(d), _) => out.push_str(&indent("change", d)),
        (None, Some(_)) => out.push_str("\n  change: (the coder gave no DESCRIPTION line)"),
        (None, None) => {}
    }
    if let Some(r) = candidate.and_then(|c| c.result.as_ref()) {
        let times = times_line(r);
        if !times.is_empty() {
            out.push_str(&indent("times", &times));
        }
        let error = error_excerpt(r);
        if !error.is_empty() {
            out.push_str(&indent("error", &error));
        }
        let resources = resource_brief(&r.resources);
        if !resources.is_empty() {
            out.push_str(&indent("resources", &resources));
        }
        if let Some(profile) = r.profile.as_deref().filter(|p| !p.trim().is_empty()) {
            out.push_str(&indent("profile", profile));
        }
    }
    if diff {
        if let (Some(c), Some(p)) = (candidate, a.parent.and_then(|p| e.candidate(p))) {
            let d = diff_sources(&p.sources, &c.sources);
            if !d.is_empty() {
                out.push_str(&format!(
                    "\n  diff to candidate {}:\n```diff\n{}\n```",
                    p.id,
                    d.trim_end()
                ));
            }
        }
    }
    out
}

/// "Recent attempts (newest first)": up to [`ATTEMPTS_SHOWN`] entries (or a whole step of the
/// engine's parallel samples, when that is more) within [`ATTEMPTS_BUDGET`] characters. Entries
/// come first: every attempt that fits is listed without its diff, and only then do the latest
/// [`DIFFS_SHOWN`] get their diff, while the section stays within the budget (a brain that
/// answered 8 requests at once sees the fate of all 8 before any diff). Empty when there is none.
pub(super) fn recent_attempts(e: &Engine) -> String {
    let all: Vec<&AttemptRecord> = e.attempts.iter().rev().collect();
    let wanted = ATTEMPTS_SHOWN.max(e.config.samples as usize);
    let mut entries: Vec<String> = Vec::new();
    let mut used = 0;
    for a in all.iter().take(wanted) {
        let entry = attempt_entry(e, a, false);
        if used + entry.len() + 1 > ATTEMPTS_BUDGET {
            break;
        }
        used += entry.len() + 1;
        entries.push(entry);
    }
    if entries.is_empty() {
        return String::new();
    }
    let mut diffs = 0;
    for (i, a) in all.iter().take(entries.len()).enumerate() {
        if diffs == DIFFS_SHOWN {
            break;
        }
        if a.kind.is_none() || a.candidate.is_none() || a.parent.is_none() {
            continue;
        }
        let with_diff = attempt_entry(e, a, true);
        let grows = with_diff.len().saturating_sub(entries[i].len());
        if grows == 0 {
            continue;
        }
        if used + grows <= ATTEMPTS_BUDGET {
            used += grows;
            entries[i] = with_diff;
            diffs += 1;
        }
    }
    let older = all.len() - entries.len();
    let more = if older > 0 {
        format!(
            "\n({older} older attempt{} not shown)",
            if older == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    format!(
        "Recent attempts (newest first; times are medians +/- IQR per workload):\n{}{more}",
        entries.join("\n")
    )
}

/// A unified diff of a candidate's files against its parent's: per changed file, `--- a/F`,
/// `+++ b/F` and hunks with 2 lines of context, cut at [`DIFF_MAX_LINES`] lines and
/// [`DIFF_MAX_CHARS`] characters. Empty when nothing changed.
pub fn diff_sources(old: &[Source], new: &[Source]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut paths: Vec<&str> = old.iter().map(|s| s.path.as_str()).collect();
    for s in new {
        if !paths.contains(&s.path.as_str()) {
            paths.push(&s.path);
        }
    }
    for path in paths {
        let find = |set: &[Source]| {
            set.iter()
                .find(|s| s.path == path)
                .map(|s| s.content.clone())
                .unwrap_or_default()
        };
        let (a, b) = (find(old), find(new));
        if a == b {
            continue;
        }
        out.push(format!("--- a/{path}\n+++ b/{path}"));
        out.extend(unified(&a, &b));
    }
    let mut text = String::new();
    for (i, line) in out.iter().flat_map(|l| l.lines()).enumerate() {
        if i >= DIFF_MAX_LINES || text.len() + line.len() > DIFF_MAX_CHARS {
            let total: usize = out.iter().map(|l| l.lines().count()).sum();
            text.push_str(&format!("... (diff cut: {} more lines)\n", total - i));
            break;
        }
        text.push_str(&clip_line(line));
        text.push('\n');
    }
    text
}

/// The hunks of a line diff of `a` to `b` (longest common subsequence; inputs of more than
/// 2000 lines each are summarised).
fn unified(a: &str, b: &str) -> Vec<String> {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    if a.len() > 2000 || b.len() > 2000 {
        return vec![format!(
            "@@ {} lines -> {} lines (too long to diff) @@",
            a.len(),
            b.len()
        )];
    }
    // lcs[i][j]: the LCS length of a[i..] and b[j..].
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if a[i] == b[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    // The edit script: (' ' | '-' | '+', old line no, new line no, text).
    let mut ops: Vec<(char, usize, usize, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', i, j, a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
            ops.push(('-', i, j, a[i]));
            i += 1;
        } else {
            ops.push(('+', i, j, b[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 2;
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.0 != ' ')
        .map(|(k, _)| k)
        .collect();
    let mut hunks = Vec::new();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k + 1 < changed.len() && changed[k + 1] <= end + 2 * CONTEXT + 1 {
            k += 1;
            end = changed[k];
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        let (o, nn) = (ops[start].1, ops[start].2);
        let old_len = ops[start..end].iter().filter(|x| x.0 != '+').count();
        let new_len = ops[start..end].iter().filter(|x| x.0 != '-').count();
        hunks.push(format!("@@ -{},{old_len} +{},{new_len} @@", o + 1, nn + 1));
        for op in &ops[start..end] {
            hunks.push(format!("{}{}", op.0, op.3));
        }
        k += 1;
    }
    hunks
}

/// What the run's attempts say of `c` in one phrase, for the report and `show`: the coder's
/// description or the sweep's knob values.
pub(super) fn description_of<'a>(e: &'a Engine, c: &'a Candidate) -> Option<&'a str> {
    e.attempts
        .iter()
        .find(|a| a.candidate == Some(c.id))
        .and_then(|a| a.description.as_deref())
        .or(c.note.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_line_is_found_outside_code() {
        let answer = "DESCRIPTION: unrolled the scan by 4\n```c kernel.c\n// DESCRIPTION: not this\n```\n";
        assert_eq!(parse_description(answer).as_deref(), Some("unrolled the scan by 4"));
        let bold = "Some words.\n**Description:** tiled   by 64\nmore";
        assert_eq!(parse_description(bold).as_deref(), Some("tiled by 64"));
        let bold2 = "**DESCRIPTION**: vectorised the loads";
        assert_eq!(parse_description(bold2).as_deref(), Some("vectorised the loads"));
        assert_eq!(parse_description("```c\nDESCRIPTION: inside\n```"), None);
        assert_eq!(parse_description("no description here"), None);
        let long = format!("DESCRIPTION: {}", "x".repeat(500));
        assert_eq!(parse_description(&long).unwrap().chars().count(), DESCRIPTION_CHARS + 3);
    }

    #[test]
    fn a_compile_error_shows_its_first_and_last_lines() {
        let log: Vec<String> = (1..=20)
            .map(|i| format!("kernel.c:{i}:5: error: problem {i}"))
            .collect();
        let s = EvalSummary::failure("compile_error", format!("compilation failed:\n{}", log.join("\n")));
        let x = error_excerpt(&s);
        assert!(
            x.starts_with("compilation failed:\nkernel.c:1:5: error: problem 1\n"),
            "{x}"
        );
        assert!(x.contains("... (14 more lines) ..."), "{x}");
        assert!(x.ends_with("kernel.c:20:5: error: problem 20"), "{x}");
        // A one-line reason takes the log's lines.
        let mut r = EvalSummary::failure("runtime_error", "the kernel crashed".into());
        r.log_tail = "Segmentation fault at k.c:12".into();
        assert_eq!(error_excerpt(&r), "the kernel crashed\nSegmentation fault at k.c:12");
    }

    #[test]
    fn diffs_show_the_changed_lines_with_context() {
        let src = |t: &str| {
            vec![Source {
                path: "k.c".into(),
                content: t.into(),
            }]
        };
        let d = diff_sources(&src("a\nb\nc\nd\ne\nf\ng\n"), &src("a\nb\nc\nD\ne\nf\ng\n"));
        assert_eq!(d, "--- a/k.c\n+++ b/k.c\n@@ -2,5 +2,5 @@\n b\n c\n-d\n+D\n e\n f\n");
        assert_eq!(diff_sources(&src("x"), &src("x")), "");
        let big_old: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let big_new: String = (0..500).map(|i| format!("LINE {i}\n")).collect();
        let d = diff_sources(&src(&big_old), &src(&big_new));
        assert!(d.lines().count() <= DIFF_MAX_LINES + 1, "{}", d.lines().count());
        assert!(d.len() <= DIFF_MAX_CHARS + 100);
        assert!(d.contains("(diff cut:"), "{d}");
    }
}
