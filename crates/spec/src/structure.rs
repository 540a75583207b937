//! What an integer input holds, read from the definition's constraints, so that an input whose
//! safetensors blob is absent can be synthesised with the structure the reference relies on.
//! The rules and their limits are documented in docs/task-format.md ("Absent safetensors
//! blobs"); they cover FlashInfer-Bench's paged-attention definitions:
//!
//! 1. offsets: a 1-D integer input `P` with a constraint `E == P[-1]` (also `P[-1].item()`,
//!    `int(P[-1])`, either side, `=` for `==`) holds segment offsets from 0 to `E`, an
//!    expression over axes (`kv_indptr`, `qo_indptr`);
//! 2. indices: a 1-D integer input whose axis is the `E` of rule 1 holds one entry per
//!    segment element; its values are distinct indices into the one leading axis of the float
//!    inputs that is not a segment count, a segment total or an offsets length (`kv_indices`
//!    into `num_pages`);
//! 3. last page length: an integer input named `*last_page_len` of a definition with a
//!    `page_size` axis holds values in `[1, page_size]`.

use super::InputSpec;
use crate::definition::Definition;
use crate::task_config::{Bound, Distribution};
use indexmap::IndexMap;
use regex::Regex;
use std::sync::OnceLock;

/// What to draw for `input` of a workload with `axes` when its blob is absent, and why.
pub(super) fn synthesise(def: &Definition, input: &str, axes: &IndexMap<String, i64>) -> (InputSpec, String) {
    let is_integer = def.inputs.get(input).is_some_and(|t| t.dtype.is_integer());
    let Some((dist, why)) = structured(def, input) else {
        let how = if is_integer {
            format!(
                "random integers (no rule finds a structure for '{input}'; if the reference needs one, \
                 give task.toml [inputs.{input}] a distribution)"
            )
        } else {
            "random values, like any random input".to_string()
        };
        return (InputSpec::Random, how);
    };
    let len = def.inputs[input]
        .dims()
        .iter()
        .map(|a| axes.get(a).copied().unwrap_or(0))
        .product::<i64>();
    match &dist {
        Distribution::Unique { low, high } => {
            if let (Some(l), Some(h)) = (low.value(axes), high.value(axes)) {
                if len > h - l {
                    let how = format!(
                        "indices in [{}, {}) with repeats: {why}, but this workload has {len} of them \
                         and only {} distinct values exist",
                        describe(low),
                        describe(high),
                        h - l
                    );
                    return (
                        InputSpec::Distributed(Distribution::Randint {
                            low: low.clone(),
                            high: high.clone(),
                        }),
                        how,
                    );
                }
            }
        }
        Distribution::Offsets { total } if len < 2 && total.value(axes).is_some_and(|t| t != 0) => {
            let how = format!(
                "random integers: {why}, but this workload gives it {len} element(s), too few to \
                 end at {}",
                describe(total)
            );
            return (InputSpec::Random, how);
        }
        _ => {}
    }
    let how = match &dist {
        Distribution::Offsets { total } => {
            format!("offsets from 0 to {}, random segment lengths: {why}", describe(total))
        }
        Distribution::Unique { low, high } => {
            format!("distinct indices in [{}, {}): {why}", describe(low), describe(high))
        }
        Distribution::Randint { low, high } => {
            format!("integers in [{}, {}): {why}", describe(low), describe(high))
        }
        other => format!("{}: {why}", other.name()),
    };
    (InputSpec::Distributed(dist), how)
}

fn describe(b: &Bound) -> String {
    match b {
        Bound::Value(v) => v.to_string(),
        Bound::Axis(a) => a.clone(),
    }
}

/// The distribution rules 1-3 give `input`, with the reason, or `None`.
pub(super) fn structured(def: &Definition, input: &str) -> Option<(Distribution, String)> {
    let tensor = def.inputs.get(input)?;
    if !tensor.dtype.is_integer() {
        return None;
    }
    let offsets = offsets_inputs(def);
    if let Some(o) = offsets.iter().find(|o| o.input == input) {
        return Some((
            Distribution::Offsets {
                total: Bound::Axis(o.total.clone()),
            },
            format!("constraint '{}'", o.constraint),
        ));
    }
    if let [axis] = tensor.dims() {
        if let Some(o) = offsets.iter().find(|o| &o.total == axis) {
            let excluded = excluded_axes(def, &offsets);
            let mut leading: Vec<&str> = Vec::new();
            let mut users: Vec<&str> = Vec::new();
            for (name, t) in &def.inputs {
                let Some(first) = t.dims().first() else { continue };
                if t.dtype.is_integer() || excluded.contains(first) {
                    continue;
                }
                if !leading.contains(&first.as_str()) {
                    leading.push(first);
                }
                users.push(name);
            }
            if let [pool] = leading[..] {
                return Some((
                    Distribution::Unique {
                        low: Bound::Value(0),
                        high: Bound::Axis(pool.to_string()),
                    },
                    format!(
                        "'{input}' has one entry per element of the segments of '{}' (constraint '{}'), \
                         and {pool} is the leading axis of {}",
                        o.input,
                        o.constraint,
                        users.join(", ")
                    ),
                ));
            }
        }
    }
    if input.ends_with("last_page_len") && def.axes.contains_key("page_size") {
        return Some((
            Distribution::Randint {
                low: Bound::Value(1),
                high: Bound::Axis("page_size + 1".into()),
            },
            "the valid length of a sequence's last page is 1 to page_size".into(),
        ));
    }
    None
}

/// A rule-1 input: `input` holds offsets ending at the expression `total`.
struct Offsets {
    input: String,
    total: String,
    constraint: String,
}

fn offsets_inputs(def: &Definition) -> Vec<Offsets> {
    static LAST: OnceLock<Regex> = OnceLock::new();
    let last = LAST.get_or_init(|| {
        Regex::new(r"^(?:int\s*\(\s*)?([A-Za-z_]\w*)\s*\[\s*-\s*1\s*\](?:\s*\.\s*item\s*\(\s*\))?\s*\)?$")
            .unwrap_or_else(|e| panic!("built-in pattern: {e}"))
    });
    let mut found: Vec<Offsets> = Vec::new();
    for constraint in &def.constraints {
        let Some((left, right)) = equality(constraint) else {
            continue;
        };
        for (a, b) in [(left, right), (right, left)] {
            let Some(name) = last.captures(a).and_then(|c| c.get(1)).map(|m| m.as_str()) else {
                continue;
            };
            let Some(t) = def.inputs.get(name) else { continue };
            let total = Bound::Axis(b.to_string());
            if t.dtype.is_integer()
                && t.dims().len() == 1
                && total.check(def).is_ok()
                && !found.iter().any(|o| o.input == name)
            {
                found.push(Offsets {
                    input: name.to_string(),
                    total: b.to_string(),
                    constraint: constraint.trim().to_string(),
                });
            }
        }
    }
    found
}

/// Axes that cannot be what indices point into: segment totals, offsets lengths, and every
/// axis a constraint ties to an offsets length (the segment count, `batch_size`).
fn excluded_axes(def: &Definition, offsets: &[Offsets]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let lengths: Vec<&String> = offsets
        .iter()
        .filter_map(|o| def.inputs[&o.input].dims().first())
        .collect();
    for o in offsets {
        out.extend(identifiers(&o.total));
    }
    for length in &lengths {
        out.push((*length).clone());
        for constraint in &def.constraints {
            let names = identifiers(constraint);
            if names.iter().any(|n| n == *length) {
                out.extend(names.into_iter().filter(|n| def.axes.contains_key(n)));
            }
        }
    }
    out
}

fn identifiers(text: &str) -> Vec<String> {
    static IDENT: OnceLock<Regex> = OnceLock::new();
    let ident = IDENT.get_or_init(|| Regex::new(r"[A-Za-z_]\w*").unwrap_or_else(|e| panic!("built-in pattern: {e}")));
    ident.find_iter(text).map(|m| m.as_str().to_string()).collect()
}

/// The two sides of `a == b` (or `a = b`), trimmed.
fn equality(constraint: &str) -> Option<(&str, &str)> {
    if let Some((a, b)) = constraint.split_once("==") {
        return (!b.contains('=')).then_some((a.trim(), b.trim()));
    }
    let (a, b) = constraint.split_once('=')?;
    let bad = |c: Option<char>| matches!(c, Some('<' | '>' | '!' | '='));
    if bad(a.chars().last()) || bad(b.chars().next()) || b.contains('=') {
        return None;
    }
    Some((a.trim(), b.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FlashInfer-Bench's gqa_paged_decode_h32_kv4_d128_ps64, reduced to what the rules read.
    fn paged() -> Definition {
        Definition::parse(
            "d.json",
            r#"{"name": "gqa", "op_type": "gqa_paged",
                "axes": {"batch_size": {"type": "var"}, "num_pages": {"type": "var"}, "len_indptr": {"type": "var"},
                         "num_kv_indices": {"type": "var"}, "page_size": {"type": "const", "value": 64},
                         "head_dim": {"type": "const", "value": 8}},
                "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
                "inputs": {"q": {"shape": ["batch_size", "head_dim"], "dtype": "bfloat16"},
                           "k_cache": {"shape": ["num_pages", "page_size", "head_dim"], "dtype": "bfloat16"},
                           "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
                           "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
                           "kv_last_page_len": {"shape": ["batch_size"], "dtype": "int32"},
                           "sm_scale": {"shape": null, "dtype": "float32"}},
                "outputs": {"output": {"shape": ["batch_size", "head_dim"], "dtype": "bfloat16"}},
                "reference": "def run(q, k_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):\n    return q\n"}"#,
        )
        .unwrap()
    }

    #[test]
    fn paged_attention_inputs_get_their_structure() {
        let def = paged();
        let (indptr, why) = structured(&def, "kv_indptr").unwrap();
        assert_eq!(
            indptr,
            Distribution::Offsets {
                total: Bound::Axis("num_kv_indices".into())
            }
        );
        assert!(why.contains("num_kv_indices == kv_indptr[-1].item()"), "{why}");
        let (indices, why) = structured(&def, "kv_indices").unwrap();
        assert_eq!(
            indices,
            Distribution::Unique {
                low: Bound::Value(0),
                high: Bound::Axis("num_pages".into())
            }
        );
        assert!(why.contains("leading axis of k_cache"), "{why}");
        let (last, _) = structured(&def, "kv_last_page_len").unwrap();
        assert_eq!(
            last,
            Distribution::Randint {
                low: Bound::Value(1),
                high: Bound::Axis("page_size + 1".into())
            }
        );
        assert_eq!(structured(&def, "q"), None);
        assert_eq!(structured(&def, "sm_scale"), None);
    }

    #[test]
    fn forms_of_the_constraint() {
        for c in [
            "kv_indptr[-1] == num_kv_indices",
            "num_kv_indices = int(kv_indptr[-1])",
            "num_kv_indices==kv_indptr[ -1 ]",
        ] {
            let text = serde_json::to_string(&paged())
                .unwrap()
                .replace("num_kv_indices == kv_indptr[-1].item()", c);
            let def = Definition::parse("d.json", &text).unwrap();
            assert!(
                matches!(structured(&def, "kv_indptr"), Some((Distribution::Offsets { .. }, _))),
                "{c}"
            );
        }
        for c in [
            "num_kv_indices <= kv_indptr[-1]",
            "num_kv_indices == kv_indptr[0]",
            "nothing == kv_indptr[-1]",
        ] {
            let text = serde_json::to_string(&paged())
                .unwrap()
                .replace("num_kv_indices == kv_indptr[-1].item()", c);
            let def = Definition::parse("d.json", &text).unwrap();
            assert_eq!(structured(&def, "kv_indptr"), None, "{c}");
            assert_eq!(structured(&def, "kv_indices"), None, "{c}");
        }
    }

    #[test]
    fn too_many_indices_fall_back_to_repeats_and_short_offsets_to_random() {
        let def = paged();
        let axes: IndexMap<String, i64> = [
            ("num_pages", 4),
            ("num_kv_indices", 9),
            ("len_indptr", 1),
            ("batch_size", 0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let (spec, how) = synthesise(&def, "kv_indices", &axes);
        assert!(
            matches!(spec, InputSpec::Distributed(Distribution::Randint { .. })),
            "{spec:?}"
        );
        assert!(how.contains("with repeats") && how.contains("only 4 distinct"), "{how}");
        let (spec, how) = synthesise(&def, "kv_indptr", &axes);
        assert_eq!(spec, InputSpec::Random);
        assert!(how.contains("too few"), "{how}");
        let (spec, how) = synthesise(&def, "q", &axes);
        assert_eq!(spec, InputSpec::Random);
        assert!(how.starts_with("random values"), "{how}");
    }
}
