//! The best kernel against the seed: a unified diff (3 lines of context) as typed lines that
//! the template colours.

use crate::model::DiffLine;
use ksearch_search::engine::Source;
use similar::{ChangeTag, TextDiff};

/// The diff of one file of the best kernel against the seed's file of the same path (or the
/// seed's only file, when the paths differ), and how the two compare.
pub(crate) fn diff_against_seed(path: &str, content: &str, seed: &[Source]) -> (Vec<DiffLine>, String) {
    if seed.is_empty() {
        return (Vec::new(), "no seed".into());
    }
    let base = seed
        .iter()
        .find(|s| s.path == path)
        .or_else(|| (seed.len() == 1).then(|| &seed[0]));
    let Some(base) = base else {
        return (Vec::new(), "new".into());
    };
    if base.content == content {
        return (Vec::new(), "identical".into());
    }
    (unified(&base.content, content), "changed".into())
}

fn unified(old: &str, new: &str) -> Vec<DiffLine> {
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        out.push(DiffLine {
            kind: "hunk".into(),
            text: hunk.header().to_string(),
        });
        for change in hunk.iter_changes() {
            let (kind, sign) = match change.tag() {
                ChangeTag::Insert => ("add", '+'),
                ChangeTag::Delete => ("del", '-'),
                ChangeTag::Equal => ("ctx", ' '),
            };
            let text = change.value().trim_end_matches(['\n', '\r']);
            out.push(DiffLine {
                kind: kind.into(),
                text: format!("{sign}{text}"),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(path: &str, content: &str) -> Source {
        Source {
            path: path.into(),
            content: content.into(),
        }
    }

    #[test]
    fn a_changed_line_shows_as_removed_and_added_with_context() {
        let (lines, how) = diff_against_seed("k.c", "a\nb\nC\nd\n", &[src("k.c", "a\nb\nc\nd\n")]);
        assert_eq!(how, "changed");
        let kinds: Vec<(&str, &str)> = lines.iter().map(|l| (l.kind.as_str(), l.text.as_str())).collect();
        assert_eq!(
            kinds,
            [
                ("hunk", "@@ -1,4 +1,4 @@"),
                ("ctx", " a"),
                ("ctx", " b"),
                ("del", "-c"),
                ("add", "+C"),
                ("ctx", " d")
            ]
        );
    }

    #[test]
    fn identical_new_and_seedless_files_have_no_diff() {
        assert_eq!(diff_against_seed("k.c", "x", &[src("k.c", "x")]).1, "identical");
        assert_eq!(
            diff_against_seed("b.c", "x", &[src("a.c", "x"), src("h.h", "")]).1,
            "new"
        );
        assert_eq!(diff_against_seed("k.c", "x", &[]).1, "no seed");
        // One seed file under another name is still the file to compare with.
        assert_eq!(diff_against_seed("b.c", "y", &[src("a.c", "x")]).1, "changed");
    }
}
