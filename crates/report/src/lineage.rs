//! Candidate lineage as SVG: which candidate each one was made from.
//!
//! Runs without a planner (strategies `refine` and `evolve`) have a world model that is only its
//! root, so their story is the candidates' parent links: refine improves the best so far, evolve
//! mutates archive members of each island. Drawn like the world-model tree (indented rows,
//! elbow connectors, one `<g class="lineage-node">` per candidate with a `<title>`), each row
//! showing how the candidate was made, its status and speedup. Untrusted text (notes, reasons)
//! goes only into text nodes, escaped by the `svg` crate.

use crate::chart::status_colour;
use crate::model::Attempt;
use crate::tree::{clip, connectors, indented_rows, label, marker, TreeStyle};
use std::collections::HashMap;
use svg::node::element::{Group, Title};
use svg::Document;

const CHAR_W: f64 = 6.6;

/// One candidate in depth-first order of the lineage.
#[derive(Debug, Clone)]
pub struct LineageRow<'a> {
    /// The attempt that produced the candidate.
    pub attempt: &'a Attempt,
    /// How many ancestors it has in the lineage: 0 for a root (the seed, a fresh start).
    pub depth: usize,
    /// Index of the parent's row.
    pub parent: Option<usize>,
}

/// The candidates (attempts that produced one) depth-first from the roots, children in the
/// order they were made. A candidate whose parent is unknown (or not a candidate of this run)
/// is a root.
pub fn lineage_rows(attempts: &[Attempt]) -> Vec<LineageRow<'_>> {
    let candidates: Vec<&Attempt> = attempts.iter().filter(|a| a.candidate.is_some()).collect();
    let known: HashMap<i64, usize> = candidates
        .iter()
        .enumerate()
        .filter_map(|(i, a)| a.candidate.map(|id| (id, i)))
        .collect();
    let mut children: HashMap<Option<usize>, Vec<usize>> = HashMap::new();
    for (i, a) in candidates.iter().enumerate() {
        // A parent made later than its child would be a cycle in a damaged log: treat as root.
        let parent = a.parent.and_then(|p| known.get(&p).copied()).filter(|&p| p < i);
        children.entry(parent).or_default().push(i);
    }
    let mut rows = Vec::with_capacity(candidates.len());
    let mut stack: Vec<(usize, usize, Option<usize>)> = children
        .get(&None)
        .map(|roots| roots.iter().rev().map(|&i| (i, 0, None)).collect())
        .unwrap_or_default();
    while let Some((i, depth, parent_row)) = stack.pop() {
        let row = rows.len();
        rows.push(LineageRow {
            attempt: candidates[i],
            depth,
            parent: parent_row,
        });
        if let Some(kids) = children.get(&Some(i)) {
            for &k in kids.iter().rev() {
                stack.push((k, depth + 1, Some(row)));
            }
        }
    }
    rows
}

fn describe(a: &Attempt) -> String {
    let how = match (a.origin.as_str(), a.note.as_deref()) {
        ("seed", _) => "the seed".to_string(),
        (origin, Some(note)) if !note.is_empty() => format!("{origin}: {note}"),
        (origin, _) => origin.to_string(),
    };
    format!("round {} · {how}", a.round)
}

fn outcome(a: &Attempt) -> String {
    let mut text = match (a.status.as_deref(), a.speedup) {
        (Some("passed"), Some(s)) => format!("{s:.2}x"),
        (Some(status), _) => status.replace('_', " "),
        (None, _) => "being evaluated".to_string(),
    };
    // The best is chosen on the final re-measurement, so it is shown beside the search's.
    match (a.final_speedup, a.final_status.as_deref()) {
        (Some(f), _) => text.push_str(&format!(", final {f:.2}x")),
        (None, Some(status)) => text.push_str(&format!(", final: {}", status.replace('_', " "))),
        _ => {}
    }
    text
}

fn tooltip(a: &Attempt) -> String {
    let mut t = format!("candidate {}: {}", a.candidate.unwrap_or(-1), describe(a));
    if let Some(p) = a.parent {
        t.push_str(&format!("\nmade from candidate {p}"));
    }
    t.push_str(&format!("\n{}", outcome(a)));
    if let Some(r) = &a.reason {
        t.push_str(&format!("\n{}", clip(r, 400)));
    }
    t
}

/// The lineage as one `<svg>` element; `best` is the run's best candidate, outlined. `style`
/// as for the tree: the compact one gives the text and outcome columns less room.
pub fn lineage_svg(attempts: &[Attempt], best: Option<i64>, style: TreeStyle) -> String {
    let rows = lineage_rows(attempts);
    let depths: Vec<usize> = rows.iter().map(|r| r.depth).collect();
    // Wider text than the tree's: a row says how the candidate was made (a knob change, a
    // mutation), then its outcome.
    let (text_w, outcome_w) = if style.compact { (230.0, 190.0) } else { (520.0, 220.0) };
    let l = indented_rows(&depths, style.indent, text_w);
    let outcome_x = l.columns_x;
    let width = outcome_x + outcome_w;
    let mut doc = Document::new()
        .set("viewBox", (0, 0, width.ceil(), l.height.ceil()))
        .set("width", width.ceil())
        .set("height", l.height.ceil())
        .set("font-family", "sans-serif")
        .set("class", "lineage-svg");
    for (text, x) in [("candidate: how it was made", 10.0), ("outcome", outcome_x)] {
        doc = doc.add(label(x, 14.0, text, 11, "#666666").set("font-weight", "bold"));
    }
    let parents: Vec<Option<usize>> = rows.iter().map(|r| r.parent).collect();
    doc = doc.add(connectors(&l.positions, &parents));
    for (row, &(x, y)) in rows.iter().zip(&l.positions) {
        let a = row.attempt;
        let id = a.candidate.unwrap_or(-1).to_string();
        let colour = a.status.as_deref().map(status_colour).unwrap_or("#17becf");
        let id_w = 12.0 + CHAR_W * id.chars().count() as f64;
        let is_best = best.is_some() && a.candidate == best;
        let text_x = x + id_w + 8.0;
        let room = ((outcome_x - text_x - 12.0) / CHAR_W).max(8.0) as usize;
        let mut result = outcome(a);
        if is_best {
            result.push_str("  ◀ best");
        }
        doc = doc.add(
            Group::new()
                .set("class", "lineage-node")
                .set("data-candidate", id.clone())
                .add(Title::new(tooltip(a)))
                .add(marker((x, y), id_w, colour, is_best))
                .add(label(x + 6.0, y + 4.0, id, 12, "#ffffff").set("font-weight", "bold"))
                .add(label(text_x, y + 4.0, clip(&describe(a), room), 12, "#222222"))
                .add(label(
                    outcome_x,
                    y + 4.0,
                    result,
                    12,
                    if is_best { "#b07d00" } else { "#222222" },
                )),
        );
    }
    doc.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(candidate: Option<i64>, parent: Option<i64>, status: &str, speedup: Option<f64>) -> Attempt {
        let id = candidate.unwrap_or(0);
        let mut a = Attempt::for_test(id, parent, id as u32, status, speedup);
        a.candidate = candidate;
        if parent.is_none() {
            a.origin = "seed".into();
        }
        a
    }

    #[test]
    fn children_follow_their_parent_depth_first_in_the_order_they_were_made() {
        let attempts = vec![
            attempt(Some(0), None, "passed", Some(1.0)),
            attempt(Some(1), Some(0), "passed", Some(2.0)),
            attempt(None, None, "format_error", None), // no candidate: not in the lineage
            attempt(Some(2), Some(0), "compile_error", None),
            attempt(Some(3), Some(1), "passed", Some(3.0)),
            attempt(Some(4), Some(99), "passed", Some(1.5)), // unknown parent: a root
        ];
        let rows = lineage_rows(&attempts);
        let order: Vec<i64> = rows.iter().map(|r| r.attempt.candidate.unwrap()).collect();
        assert_eq!(order, vec![0, 1, 3, 2, 4]);
        let depths: Vec<usize> = rows.iter().map(|r| r.depth).collect();
        assert_eq!(depths, vec![0, 1, 2, 1, 0]);
        let parents: Vec<Option<usize>> = rows.iter().map(|r| r.parent).collect();
        assert_eq!(parents, vec![None, Some(0), Some(1), Some(0), None]);
    }

    #[test]
    fn a_parent_made_after_its_child_does_not_loop() {
        let attempts = vec![
            attempt(Some(0), Some(1), "passed", None),
            attempt(Some(1), Some(0), "passed", None),
        ];
        assert_eq!(lineage_rows(&attempts).len(), 2);
    }

    #[test]
    fn every_candidate_is_one_group_the_best_is_marked_and_text_is_escaped() {
        let mut evil = attempt(Some(1), Some(0), "incorrect_numerical", None);
        evil.note = Some("<script>window.__xss=1</script>".into());
        evil.reason = Some("a & b".into());
        let attempts = vec![
            attempt(Some(0), None, "passed", Some(1.0)),
            evil,
            attempt(Some(2), Some(0), "passed", Some(4.0)),
        ];
        let svg = lineage_svg(&attempts, Some(2), TreeStyle::FULL);
        assert_eq!(svg.matches("class=\"lineage-node\"").count(), 3);
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;"));
        assert_eq!(svg.matches("◀ best").count(), 1);
        assert!(svg.contains("4.00x"));
        let mut remeasured = attempt(Some(0), None, "passed", Some(1.0));
        remeasured.final_speedup = Some(1.25);
        assert!(lineage_svg(&[remeasured], None, TreeStyle::COMPACT).contains("1.00x, final 1.25x"));
        assert!(svg.contains("incorrect numerical"));
    }
}
