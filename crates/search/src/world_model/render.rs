//! The compact, deterministic rendering of the decision tree for prompts, within size caps.

use std::collections::HashMap;

use super::node::{fmt_num, Node, NodeStatus};
use super::WorldModel;

/// Default cap on rendered nodes.
pub const DEFAULT_MAX_NODES: usize = 60;
/// Default cap on rendered characters.
pub const DEFAULT_MAX_CHARS: usize = 6000;

const DECISION_CHARS: usize = 60;
const CHOICE_CHARS: usize = 80;
const TITLE_CHARS: usize = 60;
const REASON_CHARS: usize = 80;

/// How much of a node's line is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    /// Everything the doc lists.
    Full,
    /// Id, status and result (when even the protected paths do not fit in full).
    Short,
    /// The id alone, without omission summaries (the last resort before truncation).
    IdOnly,
}

/// One output line.
enum Item {
    Node(usize),
    /// Hidden nodes attached below a visible node: (depth of the line, open, solved, closed).
    Summary(usize, [usize; 3]),
}

struct Layout<'a> {
    nodes: &'a [Node],
    children: Vec<Vec<usize>>,
    parent: Vec<Option<usize>>,
    depth: Vec<usize>,
    /// The node or one of its ancestors is closed or too hard (the node is pruned).
    pruned: Vec<bool>,
    root: Option<usize>,
    lines: [Vec<String>; 3],
}

impl WorldModel {
    /// The decision tree as an indented list, one line per node: id, `decision: choice`,
    /// rating and confidence, status (with the too-hard reason), the action's title with
    /// difficulty and score, and the attached result (`speedup 1.42x @ round 5`); the active
    /// leaf is marked `<- active`. Children follow their parent in node order.
    ///
    /// When more than `max_nodes` nodes or `max_chars` characters would be shown, the deepest
    /// closed and too-hard subtrees are summarised first (`(k closed nodes omitted)`), then open
    /// leaves far from the active path, then any other node far from it; the paths from the root
    /// to the active leaf and to the best solved node are never omitted (they may exceed
    /// `max_nodes`). If those paths alone exceed `max_chars`, their lines are shortened (id,
    /// status, result; then ids alone) and, as a last resort, the text is cut at `max_chars`.
    /// The result never exceeds `max_chars` characters.
    pub fn render_compact(&self, max_nodes: usize, max_chars: usize) -> String {
        let layout = Layout::new(self);
        let n = layout.nodes.len();
        let mut protected = vec![false; n];
        let mut on_active_path = vec![false; n];
        let tree = &self.decision_tree;
        let index: HashMap<&str, usize> = layout
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.node_id.as_str(), i))
            .collect();
        for node in tree.path_to(&tree.active_leaf_id) {
            if let Some(&i) = index.get(node.node_id.as_str()) {
                protected[i] = true;
                on_active_path[i] = true;
            }
        }
        if let Some(best) = tree.best_solved() {
            for node in tree.path_to(&best.node_id) {
                if let Some(&i) = index.get(node.node_id.as_str()) {
                    protected[i] = true;
                }
            }
        }
        // Distance of each node to the active path (through its deepest ancestor on the path).
        let distance: Vec<usize> = (0..n)
            .map(|i| {
                let mut cursor = Some(i);
                let mut steps = 0;
                while let Some(c) = cursor {
                    if on_active_path[c] || steps > n {
                        break;
                    }
                    steps += 1;
                    cursor = layout.parent[c];
                }
                steps
            })
            .collect();

        let mut hidden = vec![false; n];
        let fits = |hidden: &[bool], detail: Detail| {
            let (count, chars) = layout.measure(hidden, detail);
            count <= max_nodes && chars <= max_chars
        };

        // Phase 1: the deepest closed / too-hard subtrees.
        while !fits(&hidden, Detail::Full) {
            let pick = (0..n)
                .filter(|&i| {
                    !hidden[i]
                        && !protected[i]
                        && matches!(layout.nodes[i].status, NodeStatus::Closed | NodeStatus::TooHard)
                })
                .max_by_key(|&i| (layout.depth[i], i));
            let Some(i) = pick else { break };
            layout.hide_subtree(i, &mut hidden);
        }
        // Phase 2: open leaves far from the active path; phase 3: any other node far from it.
        for only_open in [true, false] {
            while !fits(&hidden, Detail::Full) {
                let pick = (0..n)
                    .filter(|&i| {
                        !hidden[i]
                            && !protected[i]
                            && (!only_open || layout.nodes[i].status == NodeStatus::Open)
                            && layout.children[i].iter().all(|&c| hidden[c])
                    })
                    .max_by_key(|&i| (distance[i], layout.depth[i], i));
                let Some(i) = pick else { break };
                hidden[i] = true;
            }
        }

        let detail = [Detail::Full, Detail::Short, Detail::IdOnly]
            .into_iter()
            .find(|&d| layout.measure(&hidden, d).1 <= max_chars)
            .unwrap_or(Detail::IdOnly);
        let text = layout.emit(&hidden, detail);
        if text.chars().count() <= max_chars {
            text
        } else {
            text.chars().take(max_chars).collect()
        }
    }
}

impl<'a> Layout<'a> {
    fn new(wm: &'a WorldModel) -> Self {
        let tree = &wm.decision_tree;
        let nodes = tree.nodes();
        let n = nodes.len();
        let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.node_id.as_str(), i)).collect();
        let parent: Vec<Option<usize>> = nodes
            .iter()
            .map(|n| n.parent_id.as_deref().and_then(|p| index.get(p).copied()))
            .collect();
        let mut children = vec![Vec::new(); n];
        for (i, p) in parent.iter().enumerate() {
            if let Some(p) = p {
                children[*p].push(i);
            }
        }
        let depth: Vec<usize> = (0..n)
            .map(|i| {
                let mut d = 0;
                let mut cursor = parent[i];
                while let Some(c) = cursor {
                    d += 1;
                    if d > n {
                        break;
                    }
                    cursor = parent[c];
                }
                d
            })
            .collect();
        let pruned: Vec<bool> = (0..n)
            .map(|i| {
                let mut cursor = Some(i);
                let mut steps = 0;
                while let Some(c) = cursor {
                    if matches!(nodes[c].status, NodeStatus::Closed | NodeStatus::TooHard) {
                        return true;
                    }
                    steps += 1;
                    if steps > n {
                        break;
                    }
                    cursor = parent[c];
                }
                false
            })
            .collect();
        let root = index.get(tree.root_id()).copied();
        let active = index.get(tree.active_leaf_id()).copied();
        let line = |detail: Detail| -> Vec<String> {
            (0..n)
                .map(|i| node_line(&nodes[i], depth[i], Some(i) == active, detail))
                .collect()
        };
        let lines = [line(Detail::Full), line(Detail::Short), line(Detail::IdOnly)];
        Layout {
            nodes,
            children,
            parent,
            depth,
            pruned,
            root,
            lines,
        }
    }

    fn hide_subtree(&self, i: usize, hidden: &mut [bool]) {
        let mut stack = vec![i];
        while let Some(c) = stack.pop() {
            if !hidden[c] {
                hidden[c] = true;
                stack.extend(self.children[c].iter().copied());
            }
        }
    }

    /// The lines in output order: pre-order from the root, children in node order, each visible
    /// node followed (after its visible children) by the summary of the hidden nodes below it.
    fn items(&self, hidden: &[bool], detail: Detail) -> Vec<Item> {
        let n = self.nodes.len();
        // Hidden nodes are attached to their nearest visible ancestor.
        let mut summaries: HashMap<usize, [usize; 3]> = HashMap::new();
        if detail != Detail::IdOnly {
            for h in (0..n).filter(|&h| hidden[h]) {
                let mut cursor = self.parent[h];
                let mut steps = 0;
                while let Some(c) = cursor {
                    if !hidden[c] || steps > n {
                        break;
                    }
                    steps += 1;
                    cursor = self.parent[c];
                }
                if let Some(v) = cursor.filter(|&c| !hidden[c]) {
                    let slot = match self.nodes[h].status {
                        _ if self.pruned[h] => 2,
                        NodeStatus::Solved => 1,
                        _ => 0,
                    };
                    summaries.entry(v).or_insert([0; 3])[slot] += 1;
                }
            }
        }
        enum Visit {
            Node(usize),
            After(usize),
        }
        let mut out = Vec::new();
        let mut stack: Vec<Visit> = self.root.filter(|&r| !hidden[r]).map(Visit::Node).into_iter().collect();
        while let Some(visit) = stack.pop() {
            match visit {
                Visit::Node(i) => {
                    if out.len() > 2 * n + 2 {
                        break; // a cycle: impossible while the invariants hold
                    }
                    out.push(Item::Node(i));
                    stack.push(Visit::After(i));
                    for &c in self.children[i].iter().rev() {
                        if !hidden[c] {
                            stack.push(Visit::Node(c));
                        }
                    }
                }
                Visit::After(i) => {
                    if let Some(counts) = summaries.get(&i) {
                        out.push(Item::Summary(self.depth[i] + 1, *counts));
                    }
                }
            }
        }
        out
    }

    fn detail_index(detail: Detail) -> usize {
        match detail {
            Detail::Full => 0,
            Detail::Short => 1,
            Detail::IdOnly => 2,
        }
    }

    /// (visible nodes, characters) of the rendering.
    fn measure(&self, hidden: &[bool], detail: Detail) -> (usize, usize) {
        let items = self.items(hidden, detail);
        let lines = &self.lines[Self::detail_index(detail)];
        let mut nodes = 0;
        let mut chars = items.len().saturating_sub(1); // newlines between lines
        for item in &items {
            chars += match item {
                Item::Node(i) => {
                    nodes += 1;
                    lines[*i].chars().count()
                }
                Item::Summary(depth, counts) => summary_line(*depth, counts).chars().count(),
            };
        }
        (nodes, chars)
    }

    fn emit(&self, hidden: &[bool], detail: Detail) -> String {
        let lines = &self.lines[Self::detail_index(detail)];
        let rendered: Vec<String> = self
            .items(hidden, detail)
            .iter()
            .map(|item| match item {
                Item::Node(i) => lines[*i].clone(),
                Item::Summary(depth, counts) => summary_line(*depth, counts),
            })
            .collect();
        rendered.join("\n")
    }
}

fn summary_line(depth: usize, counts: &[usize; 3]) -> String {
    let [open, solved, closed] = *counts;
    let total = open + solved + closed;
    let plural = |k: usize, word: &str| format!("{k} {word}{}", if k == 1 { "" } else { "s" });
    let text = if open == 0 && solved == 0 {
        format!("({} omitted)", plural(closed, "closed node"))
    } else {
        let parts: Vec<String> = [(open, "open"), (solved, "solved"), (closed, "closed")]
            .into_iter()
            .filter(|(k, _)| *k > 0)
            .map(|(k, w)| format!("{k} {w}"))
            .collect();
        format!("({} omitted: {})", plural(total, "node"), parts.join(", "))
    };
    format!("{}{text}", "  ".repeat(depth))
}

/// One-line text: newlines and tabs become spaces; longer than `max` chars is cut with `…`.
fn clip(s: &str, max: usize) -> String {
    let flat: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        flat.to_string()
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

fn node_line(node: &Node, depth: usize, active: bool, detail: Detail) -> String {
    let mut line = "  ".repeat(depth);
    line.push_str(&node.node_id);
    if detail == Detail::IdOnly {
        return line;
    }
    if detail == Detail::Full {
        line.push_str(&format!(
            " {}: {} [rating {}, conf {}]",
            clip(&node.decision, DECISION_CHARS),
            clip(&node.choice, CHOICE_CHARS),
            fmt_num(node.overall_rating),
            fmt_num(node.confidence)
        ));
    }
    line.push(' ');
    line.push_str(node.status.as_str());
    if detail == Detail::Full {
        if let Some(reason) = &node.status_reason {
            line.push_str(&format!(" ({})", clip(reason, REASON_CHARS)));
        }
        if let Some(a) = &node.action {
            line.push_str(&format!(
                " | action: {} (difficulty {}, score {}",
                clip(&a.title, TITLE_CHARS),
                a.difficulty,
                fmt_num(a.score)
            ));
            if let Some(e) = a.expected_speedup {
                line.push_str(&format!(", expects {}x", fmt_num(e)));
            }
            line.push(')');
        }
    }
    if let Some(sol) = &node.solution_ref {
        line.push_str(&format!(" | speedup {:.2}x @ round {}", sol.speedup, sol.round));
    }
    if active {
        line.push_str(" <- active");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_flattens_and_cuts() {
        assert_eq!(clip("a\nb\tc", 10), "a b c");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("  padded  ", 10), "padded");
        assert_eq!(clip("ééééé", 3), "éé…");
    }

    #[test]
    fn summaries_name_what_was_omitted() {
        assert_eq!(summary_line(1, &[0, 0, 1]), "  (1 closed node omitted)");
        assert_eq!(summary_line(0, &[0, 0, 4]), "(4 closed nodes omitted)");
        assert_eq!(
            summary_line(2, &[2, 1, 3]),
            "    (6 nodes omitted: 2 open, 1 solved, 3 closed)"
        );
        assert_eq!(summary_line(0, &[1, 0, 0]), "(1 node omitted: 1 open)");
    }
}
