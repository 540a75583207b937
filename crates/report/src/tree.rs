//! The world-model tree as SVG: an indented layout (one row per node, children under their
//! parent, elbow connectors), computed here and drawn with the `svg` crate.
//!
//! An indented tree stays readable with hundreds of nodes and long texts, and lines up every
//! node's rating, confidence and result in columns so they can be compared at a glance. Each
//! node is one `<g class="wm-node">` (tests count them) with a `<title>` holding its full text.
//! Untrusted text goes only into text nodes (escaped by the crate); attribute values are numbers,
//! constants and node ids reduced to their allowed characters.
//!
//! The report draws the full layout (about 900-1100 pixels wide: long texts, rating and
//! confidence bars); the dashboard's side-by-side columns are about 520 pixels wide, so they get
//! the compact one ([`TreeStyle::COMPACT`]): shorter texts, the two figures as numbers, the
//! result and the flags in one short column. Either way the tooltip has everything.

use crate::model::{Tree, TreeNode};
use svg::node::element::path::Data;
use svg::node::element::{Group, Path, Rectangle, Text, Title};
use svg::Document;

const ROW: f64 = 30.0;
const TOP: f64 = 34.0;
const LEFT: f64 = 10.0;
/// Approximate width of one character of the 12px label font.
const CHAR_W: f64 = 6.6;
const BAR_W: f64 = 64.0;
/// Width of the rating and confidence columns' numbers after their bars.
const BAR_GAP: f64 = 46.0;
/// Width of the result column; the active and best flags follow it.
const RESULT_W: f64 = 240.0;

/// How wide the tree is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeStyle {
    /// Indentation per level.
    pub indent: f64,
    /// Room for the id and `decision: choice — action` at depth 0.
    pub text_w: f64,
    /// Rating and confidence as numbers in one column instead of two bars; result and flags in
    /// one short column.
    pub compact: bool,
}

impl TreeStyle {
    /// The report's.
    pub const FULL: TreeStyle = TreeStyle {
        indent: 22.0,
        text_w: 430.0,
        compact: false,
    };
    /// The dashboard's side-by-side columns'.
    pub const COMPACT: TreeStyle = TreeStyle {
        indent: 14.0,
        text_w: 165.0,
        compact: true,
    };
}

/// Width of the compact layout's figures column (`6.0 · 0.50`) and of its result column, which
/// holds `12.34x (c123, r45) ◀ active, best` at most.
const COMPACT_FIGURES_W: f64 = 84.0;
const COMPACT_RESULT_W: f64 = 215.0;

/// Where each node goes: its row and its depth; and where the columns start.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// `(x, y)` of each node's marker, in the tree's node order.
    pub positions: Vec<(f64, f64)>,
    /// Index of each node's parent in the node list.
    pub parents: Vec<Option<usize>>,
    /// Where the figure columns start (right of the deepest node's text), in SVG units (px).
    pub columns_x: f64,
    /// The whole drawing's width, in SVG units.
    pub width: f64,
    /// The whole drawing's height, in SVG units.
    pub height: f64,
}

/// Rows in node order (the tree's nodes are already depth-first), indented by depth.
pub fn layout(tree: &Tree, style: TreeStyle) -> Layout {
    let depths: Vec<usize> = tree.nodes.iter().map(|n| n.depth).collect();
    let parents = tree
        .nodes
        .iter()
        .map(|n| {
            n.parent
                .as_ref()
                .and_then(|p| tree.nodes.iter().position(|m| &m.id == p))
        })
        .collect();
    let rows = indented_rows(&depths, style.indent, style.text_w);
    let width = if style.compact {
        rows.columns_x + COMPACT_FIGURES_W + COMPACT_RESULT_W
    } else {
        rows.columns_x + 2.0 * (BAR_W + BAR_GAP) + RESULT_W + 110.0
    };
    Layout { parents, width, ..rows }
}

/// One row per entry, indented by `indent` per level; the columns start `text_w` right of the
/// deepest row. (`parents` is left empty and `width` at the columns' start, for the caller.)
pub(crate) fn indented_rows(depths: &[usize], indent: f64, text_w: f64) -> Layout {
    let max_depth = depths.iter().copied().max().unwrap_or(0) as f64;
    let positions: Vec<(f64, f64)> = depths
        .iter()
        .enumerate()
        .map(|(i, &d)| (LEFT + d as f64 * indent, TOP + i as f64 * ROW))
        .collect();
    let columns_x = LEFT + max_depth * indent + text_w;
    Layout {
        positions,
        parents: Vec::new(),
        columns_x,
        width: columns_x,
        height: TOP + depths.len() as f64 * ROW + 8.0,
    }
}

pub fn node_colour(status: &str) -> &'static str {
    match status {
        "solved" => "#1a9850",
        "too_hard" => "#d62728",
        "closed" => "#9e9e9e",
        _ => "#4c78a8",
    }
}

/// A node id reduced to the characters ids may have (they are validated, but this is markup).
fn safe_id(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        .collect()
}

pub(crate) fn clip(text: &str, chars: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= chars {
        return flat;
    }
    let cut: String = flat.chars().take(chars.saturating_sub(1)).collect();
    format!("{cut}…")
}

pub(crate) fn label(x: f64, y: f64, text: impl Into<String>, size: u32, fill: &str) -> Text {
    Text::new(text.into())
        .set("x", x)
        .set("y", y)
        .set("font-size", size)
        .set("fill", fill)
}

/// Everything about a node, for its tooltip.
fn tooltip(n: &TreeNode) -> String {
    let mut lines = vec![
        format!("{}  {}: {}", n.id, n.decision, n.choice),
        format!(
            "status {}{}",
            n.status,
            n.status_reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
        format!("rating {:.1}/10, confidence {:.2}", n.rating, n.confidence),
    ];
    if let Some(a) = &n.action {
        let expects = n
            .expected_speedup
            .map(|e| format!(", expects {e:.2}x"))
            .unwrap_or_default();
        lines.push(format!(
            "action: {a} (difficulty {}, score {:.2}{expects})",
            n.difficulty.unwrap_or(0),
            n.score.unwrap_or(0.0)
        ));
    }
    if let Some(r) = &n.result {
        lines.push(format!(
            "result: {:.2}x, candidate {} @ round {}",
            r.speedup, r.candidate, r.round
        ));
    }
    lines.push(format!(
        "{} attempts; last updated in round {}",
        n.attempts, n.last_updated_round
    ));
    if !n.notes.trim().is_empty() {
        lines.push(format!("notes: {}", n.notes.trim()));
    }
    lines.join("\n")
}

/// A bar of `value` in 0..=`max` with its number.
fn bar(x: f64, y: f64, value: f64, max: f64, colour: &str, text: String) -> Group {
    let frac = if max > 0.0 { (value / max).clamp(0.0, 1.0) } else { 0.0 };
    Group::new()
        .add(
            Rectangle::new()
                .set("x", x)
                .set("y", y - 5.0)
                .set("width", BAR_W)
                .set("height", 8)
                .set("fill", "#eeeeee"),
        )
        .add(
            Rectangle::new()
                .set("x", x)
                .set("y", y - 5.0)
                .set("width", (BAR_W * frac * 10.0).round() / 10.0)
                .set("height", 8)
                .set("fill", colour),
        )
        .add(label(x + BAR_W + 6.0, y + 3.0, text, 11, "#333333"))
}

fn node_group(n: &TreeNode, (x, y): (f64, f64), columns_x: f64, style: TreeStyle) -> Group {
    let colour = node_colour(&n.status);
    let dim = matches!(n.status.as_str(), "closed" | "too_hard");
    let text_colour = if dim { "#777777" } else { "#222222" };
    let id = safe_id(&n.id);
    let id_w = 12.0 + CHAR_W * id.chars().count() as f64;
    let marker = marker((x, y), id_w, colour, n.best);
    let text_x = x + id_w + 8.0;
    let room = ((columns_x - text_x - 12.0) / CHAR_W).max(8.0) as usize;
    let mut main = format!("{}: {}", n.decision, n.choice);
    if let Some(a) = &n.action {
        main.push_str(" — ");
        main.push_str(a);
    }
    let mut text = label(text_x, y + 4.0, clip(&main, room), 12, text_colour);
    if n.status == "closed" {
        text = text.set("text-decoration", "line-through");
    }
    let result = match (&n.result, n.status.as_str(), style.compact) {
        (Some(r), _, false) => format!("{:.2}x @ round {} (candidate {})", r.speedup, r.round, r.candidate),
        (Some(r), _, true) => format!("{:.2}x (c{}, r{})", r.speedup, r.candidate, r.round),
        (None, "too_hard", false) => format!(
            "too hard: {}",
            clip(n.status_reason.as_deref().unwrap_or("no passing candidate"), 28)
        ),
        (None, "too_hard", true) => "too hard".to_string(),
        (None, "closed", _) => "closed".to_string(),
        (None, _, false) if n.attempts > 0 => {
            format!("{}, none passed", crate::words::counted(n.attempts as u64, "attempt"))
        }
        (None, _, true) if n.attempts > 0 => format!("0/{} passed", n.attempts),
        _ => String::new(),
    };
    let mut tags = Vec::new();
    if n.active {
        tags.push("active");
    }
    if n.best {
        tags.push("best");
    }
    let mut g = Group::new()
        .set("class", format!("wm-node wm-{}", n.status))
        .set("data-node", id.clone())
        .add(Title::new(tooltip(n)))
        .add(marker)
        .add(label(x + 6.0, y + 4.0, id, 12, "#ffffff").set("font-weight", "bold"))
        .add(text);
    let result_colour = if dim { "#a33" } else { "#222222" };
    if style.compact {
        let result_x = columns_x + COMPACT_FIGURES_W;
        g = g
            .add(label(
                columns_x,
                y + 4.0,
                format!("{:.1} · {:.2}", n.rating, n.confidence),
                11,
                "#333333",
            ))
            .add(label(result_x, y + 4.0, result.clone(), 12, result_colour));
        if !tags.is_empty() {
            // Right after the result, in the same short column.
            let tag_x = result_x + CHAR_W * (result.chars().count() as f64 + 1.0);
            g = g
                .add(label(tag_x, y + 4.0, format!("◀ {}", tags.join(", ")), 11, "#b07d00").set("font-weight", "bold"));
        }
    } else {
        let result_x = columns_x + 2.0 * (BAR_W + BAR_GAP);
        g = g
            .add(bar(columns_x, y, n.rating, 10.0, "#4c78a8", format!("{:.1}", n.rating)))
            .add(bar(
                columns_x + BAR_W + BAR_GAP,
                y,
                n.confidence,
                1.0,
                "#72b7b2",
                format!("{:.2}", n.confidence),
            ))
            .add(label(result_x, y + 4.0, result, 12, result_colour));
        if !tags.is_empty() {
            g = g.add(
                label(
                    result_x + RESULT_W,
                    y + 4.0,
                    format!("◀ {}", tags.join(", ")),
                    12,
                    "#b07d00",
                )
                .set("font-weight", "bold"),
            );
        }
    }
    if dim {
        g = g.set("opacity", 0.75);
    }
    g
}

/// Elbow connectors from each row's parent down and across to the row.
pub(crate) fn connectors(positions: &[(f64, f64)], parents: &[Option<usize>]) -> Group {
    let mut edges = Group::new()
        .set("fill", "none")
        .set("stroke", "#b0b0b0")
        .set("stroke-width", 1.2);
    for (i, parent) in parents.iter().enumerate() {
        if let Some(p) = parent {
            let (px, py) = positions[*p];
            let (x, y) = positions[i];
            let data = Data::new()
                .move_to((px + 8.0, py + 10.0))
                .vertical_line_to(y)
                .horizontal_line_to(x);
            edges = edges.add(Path::new().set("d", data));
        }
    }
    edges
}

/// A row's id marker: a rounded box in the status colour, outlined in gold for the best.
pub(crate) fn marker((x, y): (f64, f64), width: f64, colour: &str, best: bool) -> Rectangle {
    let r = Rectangle::new()
        .set("x", x)
        .set("y", y - 10.0)
        .set("width", width)
        .set("height", 20)
        .set("rx", 4)
        .set("fill", colour);
    if best {
        r.set("stroke", "#f0b400").set("stroke-width", 3)
    } else {
        r
    }
}

/// The tree as one `<svg>` element.
pub fn tree_svg(tree: &Tree, style: TreeStyle) -> String {
    let l = layout(tree, style);
    let mut doc = Document::new()
        .set("viewBox", (0, 0, l.width.ceil(), l.height.ceil()))
        .set("width", l.width.ceil())
        .set("height", l.height.ceil())
        .set("font-family", "sans-serif")
        .set("class", "wm-tree-svg");
    let headings = if style.compact {
        vec![
            ("node: decision: choice — action", LEFT),
            ("rating · conf.", l.columns_x),
            ("result", l.columns_x + COMPACT_FIGURES_W),
        ]
    } else {
        vec![
            ("node: decision: choice — action", LEFT),
            ("rating", l.columns_x),
            ("confidence", l.columns_x + BAR_W + BAR_GAP),
            ("result", l.columns_x + 2.0 * (BAR_W + BAR_GAP)),
        ]
    };
    for (text, x) in headings {
        doc = doc.add(label(x, 14.0, text, 11, "#666666").set("font-weight", "bold"));
    }
    // Connectors first, so that markers are drawn over them.
    doc = doc.add(connectors(&l.positions, &l.parents));
    for (n, pos) in tree.nodes.iter().zip(&l.positions) {
        doc = doc.add(node_group(n, *pos, l.columns_x, style));
    }
    doc.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, parent: Option<&str>, depth: usize) -> TreeNode {
        TreeNode {
            id: id.into(),
            parent: parent.map(Into::into),
            depth,
            decision: "d".into(),
            choice: "c".into(),
            rating: 5.0,
            confidence: 0.5,
            status: "open".into(),
            status_reason: None,
            action: None,
            difficulty: None,
            score: None,
            expected_speedup: None,
            result: None,
            notes: String::new(),
            attempts: 0,
            last_updated_round: 0,
            active: false,
            best: false,
        }
    }

    fn tree(nodes: Vec<TreeNode>) -> Tree {
        Tree {
            kernel_summary: String::new(),
            open_questions: vec![],
            active_leaf: "root".into(),
            nodes,
        }
    }

    #[test]
    fn children_sit_one_indent_right_of_their_parent_on_later_rows() {
        let t = tree(vec![
            node("root", None, 0),
            node("a", Some("root"), 1),
            node("a1", Some("a"), 2),
            node("b", Some("root"), 1),
        ]);
        let l = layout(&t, TreeStyle::FULL);
        assert_eq!(l.parents, vec![None, Some(0), Some(1), Some(0)]);
        for (i, p) in l.parents.iter().enumerate() {
            if let Some(p) = p {
                assert_eq!(l.positions[i].0, l.positions[*p].0 + TreeStyle::FULL.indent);
                assert!(l.positions[i].1 > l.positions[*p].1);
            }
        }
        assert!(l.columns_x > l.positions.iter().map(|p| p.0).fold(0.0, f64::max));
    }

    #[test]
    fn every_node_is_one_group_and_text_is_escaped() {
        let mut evil = node("n1", Some("root"), 1);
        evil.decision = "</svg><script>alert(1)</script>".into();
        for style in [TreeStyle::FULL, TreeStyle::COMPACT] {
            let svg = tree_svg(&tree(vec![node("root", None, 0), evil.clone()]), style);
            assert_eq!(svg.matches("class=\"wm-node ").count(), 2);
            assert!(!svg.contains("<script"), "{svg}");
            assert!(svg.contains("&lt;/svg&gt;&lt;script&gt;"), "{svg}");
        }
    }

    #[test]
    fn the_compact_tree_fits_a_dashboard_column() {
        // Four levels deep, long texts, a result and both flags on the deepest node.
        let mut deep = node("n3", Some("n2"), 3);
        deep.decision = "a very long decision text that goes on and on ".repeat(4);
        deep.result = Some(crate::model::NodeResult {
            candidate: 123,
            speedup: 12.34,
            round: 45,
        });
        deep.active = true;
        deep.best = true;
        let t = tree(vec![
            node("root", None, 0),
            node("n1", Some("root"), 1),
            node("n2", Some("n1"), 2),
            deep,
        ]);
        let compact = layout(&t, TreeStyle::COMPACT);
        let full = layout(&t, TreeStyle::FULL);
        // A dashboard column is at least 560 pixels, less 2 x 18 of padding and borders.
        assert!(compact.width <= 520.0, "{}", compact.width);
        assert!(full.width > 900.0, "{}", full.width);
        let svg = tree_svg(&t, TreeStyle::COMPACT);
        assert!(svg.contains("12.34x (c123, r45)"), "{svg}");
        assert!(svg.contains("◀ active, best"), "{svg}");
        // The flags end inside the drawing: result column, a space, the flags (11px font).
        // (About 6 pixels a character of the flags' 11px font.)
        let flags_end = compact.columns_x + COMPACT_FIGURES_W + CHAR_W * (18.0 + 1.0) + 6.0 * 14.0;
        assert!(flags_end <= compact.width + 1.0, "{flags_end} > {}", compact.width);
    }
}
