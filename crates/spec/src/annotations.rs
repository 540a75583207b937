//! Knobs declared inside a kernel's own source (docs/templates.md, "Knobs in written kernels").
//!
//! A coder (an LLM, an agent, a person) marks a constant it is unsure about and lists the values
//! worth trying; the engine then sweeps them cheaply after the kernel passes, without asking the
//! coder again. One knob per line, in the syntax of the kernel's language:
//!
//! ```text
//! #define BLOCK 128  // ksearch: knob values=[64, 128, 256]      (C, CUDA, Metal)
//! BLOCK = 128  # ksearch: knob values=[64, 128, 256]               (Python, Triton)
//! ```
//!
//! The current value must be one of the listed values. Values are taken as source text, so
//! integers, floats, booleans and identifiers all work; they may not contain spaces, commas or
//! brackets. Rewriting a knob changes only the value token on its line, so the kernel and its
//! annotation stay in step.

use regex::Regex;
use std::sync::LazyLock;

/// At most this many knobs per kernel and values per knob: a sweep must stay a small share of
/// the search budget, and a longer list is more likely a mistake than a plan.
pub const MAX_ANNOTATED_KNOBS: usize = 8;
/// At most this many values per annotated knob (see [`MAX_ANNOTATED_KNOBS`] for why).
pub const MAX_ANNOTATED_VALUES: usize = 16;

/// One annotated constant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotatedKnob {
    /// The constant's name as the source spells it (`BLOCK` in `#define BLOCK 128`).
    pub name: String,
    /// The source file and 1-based line that declare it.
    pub file: String,
    /// 1-based line number in `file`.
    pub line: usize,
    /// The value the source holds now.
    pub current: String,
    /// The values worth trying, in the order given (the current one among them).
    pub values: Vec<String>,
}

/// `#define NAME VALUE // ksearch: knob values=[...]` (or a `/* */` comment).
static C_KNOB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\s*#\s*define\s+([A-Za-z_]\w*)\s+)(\S+)(\s*(?://|/\*)\s*ksearch:\s*knob\b(.*))$")
        .expect("static regex")
});
/// `NAME = VALUE # ksearch: knob values=[...]`, optionally with a type annotation.
static PY_KNOB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\s*([A-Za-z_]\w*)\s*(?::\s*[\w.\[\]]+\s*)?=\s*)([^\s#]+)(\s*#\s*ksearch:\s*knob\b(.*))$")
        .expect("static regex")
});
static VALUES: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*values\s*=\s*\[([^\]]*)\]\s*(?:\*/)?\s*$").expect("static regex"));
/// Any mention of the marker, to catch annotations whose syntax is off instead of ignoring them.
static MARKER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"ksearch:\s*knob\b").expect("static regex"));

/// The annotated knobs of a kernel's sources (`(path, content)` pairs), in source order.
/// `Err` lists every problem as `file:line: what is wrong`, so the coder can be told.
pub fn annotated_knobs<'a>(
    sources: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Vec<AnnotatedKnob>, Vec<String>> {
    let mut knobs: Vec<AnnotatedKnob> = Vec::new();
    let mut problems = Vec::new();
    for (file, content) in sources {
        for (i, text) in content.lines().enumerate() {
            if !MARKER.is_match(text) {
                continue;
            }
            let at = format!("{file}:{}", i + 1);
            let Some(caps) = C_KNOB.captures(text).or_else(|| PY_KNOB.captures(text)) else {
                problems.push(format!(
                    "{at}: a `ksearch: knob` annotation must end a `#define NAME VALUE` line (C, CUDA, Metal) or a \
                     `NAME = VALUE` line (Python)"
                ));
                continue;
            };
            let name = caps[2].to_string();
            let current = caps[3].to_string();
            let Some(list) = VALUES.captures(&caps[5]) else {
                problems.push(format!(
                    "{at}: knob {name}: expected `values=[v1, v2, ...]` after `ksearch: knob`"
                ));
                continue;
            };
            let values: Vec<String> = list[1]
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            let mut bad = |why: String| problems.push(format!("{at}: knob {name}: {why}"));
            if values.len() < 2 {
                bad("lists fewer than two values, so there is nothing to try".into());
            } else if values.len() > MAX_ANNOTATED_VALUES {
                bad(format!("lists {} values; at most {MAX_ANNOTATED_VALUES}", values.len()));
            } else if let Some(v) = values.iter().find(|v| v.contains(char::is_whitespace)) {
                bad(format!("value '{v}' contains a space"));
            } else if let Some(dup) = values.iter().enumerate().find(|(j, v)| values[..*j].contains(v)) {
                bad(format!("value '{}' is listed twice", dup.1));
            } else if !values.contains(&current) {
                bad(format!(
                    "the source holds '{current}', which is not among the listed values [{}]",
                    values.join(", ")
                ));
            } else if knobs.iter().any(|k| k.name == name) {
                bad("is annotated twice".into());
            } else {
                knobs.push(AnnotatedKnob {
                    name,
                    file: file.to_string(),
                    line: i + 1,
                    current,
                    values,
                });
            }
        }
    }
    if knobs.len() > MAX_ANNOTATED_KNOBS {
        problems.push(format!(
            "{} knobs are annotated; at most {MAX_ANNOTATED_KNOBS} (annotate the ones that matter most)",
            knobs.len()
        ));
    }
    if problems.is_empty() {
        Ok(knobs)
    } else {
        Err(problems)
    }
}

/// `content` of `file` with each knob of `file` in `set` (name -> value) rewritten on its line.
/// Knobs of other files and names not in `set` are left alone.
pub fn set_annotated_values(file: &str, content: &str, knobs: &[AnnotatedKnob], set: &[(String, String)]) -> String {
    let mut lines: Vec<String> = content.split('\n').map(str::to_string).collect();
    for knob in knobs.iter().filter(|k| k.file == file) {
        let Some((_, value)) = set.iter().find(|(n, _)| *n == knob.name) else {
            continue;
        };
        let Some(line) = lines.get_mut(knob.line - 1) else {
            continue;
        };
        let replaced = C_KNOB
            .captures(line)
            .or_else(|| PY_KNOB.captures(line))
            .map(|c| format!("{}{}{}", &c[1], value, &c[4]));
        if let Some(r) = replaced {
            *line = r;
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "#include <stdint.h>\n\
        #define BLOCK 64 // ksearch: knob values=[32, 64, 128]\n\
        #define UNROLL 4 /* ksearch: knob values=[1,2,4,8] */\n\
        #define EPS 1e-6\n\
        void k(void) {}\n";

    #[test]
    fn reads_c_and_python_annotations() {
        let py = "import triton\nBLOCK_M: int = 128  # ksearch: knob values=[64, 128]\nnum_warps = 4 # ksearch: knob values=[4, 8]\n";
        let knobs = annotated_knobs([("k.c", KERNEL), ("k.py", py)]).unwrap();
        let names: Vec<_> = knobs
            .iter()
            .map(|k| (k.name.as_str(), k.current.as_str(), k.line))
            .collect();
        assert_eq!(
            names,
            [
                ("BLOCK", "64", 2),
                ("UNROLL", "4", 3),
                ("BLOCK_M", "128", 2),
                ("num_warps", "4", 3)
            ]
        );
        assert_eq!(knobs[1].values, ["1", "2", "4", "8"]);
    }

    #[test]
    fn rewrites_only_the_value_token() {
        let knobs = annotated_knobs([("k.c", KERNEL)]).unwrap();
        let out = set_annotated_values("k.c", KERNEL, &knobs, &[("UNROLL".into(), "8".into())]);
        assert!(
            out.contains("#define UNROLL 8 /* ksearch: knob values=[1,2,4,8] */\n"),
            "{out}"
        );
        assert!(out.contains("#define BLOCK 64 // ksearch"), "{out}");
        assert_eq!(out.len(), KERNEL.len());
        // The rewritten kernel still parses, with the new current value.
        let again = annotated_knobs([("k.c", out.as_str())]).unwrap();
        assert_eq!(again[1].current, "8");
    }

    #[test]
    fn every_malformed_annotation_is_reported_with_file_and_line() {
        let bad = "#define A 3 // ksearch: knob values=[1, 2]\n\
            #define B 2 // ksearch: knob values=[2]\n\
            int x; // ksearch: knob values=[1, 2]\n\
            #define C 1 // ksearch: knob choices=[1, 2]\n\
            #define D 1 // ksearch: knob values=[1, 1, 2]\n";
        let errs = annotated_knobs([("bad.c", bad)]).unwrap_err();
        assert_eq!(errs.len(), 5, "{errs:#?}");
        assert!(
            errs[0].starts_with("bad.c:1: knob A: the source holds '3'"),
            "{}",
            errs[0]
        );
        assert!(
            errs[1].contains("bad.c:2: knob B: lists fewer than two values"),
            "{}",
            errs[1]
        );
        assert!(
            errs[2].starts_with("bad.c:3: a `ksearch: knob` annotation must end"),
            "{}",
            errs[2]
        );
        assert!(errs[3].contains("bad.c:4: knob C: expected `values=["), "{}", errs[3]);
        assert!(errs[4].contains("value '1' is listed twice"), "{}", errs[4]);
    }

    #[test]
    fn a_kernel_without_annotations_has_no_knobs() {
        assert_eq!(
            annotated_knobs([("k.c", "#define N 4\nvoid k(void) {}\n")]).unwrap(),
            vec![]
        );
    }
}
