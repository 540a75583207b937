//! Loading the knowledge base: the built-in one, with the folder named by `KSEARCH_KB` laid
//! over it, and what `ksearch doctor` says about it.

use anyhow::Context;
use ksearch_kb::Kb;
use std::path::{Path, PathBuf};

/// The environment variable naming a folder laid out like the repository's `kb/` whose files
/// add to or replace the built-in ones.
pub const KB_ENV: &str = "KSEARCH_KB";

/// The knowledge base: the built-in one, with the folder named by `KSEARCH_KB` laid over it.
pub fn kb() -> anyhow::Result<Kb> {
    kb_with(overrides_dir().as_deref())
}

/// The folder `KSEARCH_KB` names, if set and not empty.
pub fn overrides_dir() -> Option<PathBuf> {
    std::env::var_os(KB_ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The built-in knowledge base with `dir`'s files (laid out like `kb/`) added or replacing
/// entries of the same name. Every problem names the file and the key.
pub fn kb_with(dir: Option<&Path>) -> anyhow::Result<Kb> {
    let kb = Kb::builtin().context("the built-in knowledge base is broken")?;
    match dir {
        None => Ok(kb),
        // The error's own text only: an I/O error's cause is already in it.
        Some(dir) => kb.with_dir(dir).map_err(|e| match e.problems().len() {
            0 | 1 => anyhow::anyhow!("{KB_ENV}={}: {e}", dir.display()),
            n => anyhow::anyhow!("{KB_ENV}={}: {n} problems:\n{e}", dir.display()),
        }),
    }
}

/// What `ksearch doctor` says about the knowledge base: whether it loads, what it holds, and
/// which files `KSEARCH_KB` adds or replaces.
pub fn describe(dir: Option<&Path>) -> (bool, String) {
    let kb = match kb_with(dir) {
        Ok(kb) => kb,
        Err(e) => return (false, format!("{e:#}")),
    };
    let counts = format!(
        "{} devices, {} patterns, {} translation layers, {} task families",
        kb.hardware_names().len(),
        kb.patterns().count(),
        kb.translations().count(),
        kb.families().count()
    );
    match dir {
        None => (true, format!("built-in: {counts} ({KB_ENV} not set)")),
        Some(dir) => {
            let prefix = format!("{}{}", dir.display(), std::path::MAIN_SEPARATOR);
            let ours: Vec<&str> = kb.files().into_iter().filter_map(|f| f.strip_prefix(&prefix)).collect();
            (
                true,
                format!(
                    "built-in + {KB_ENV}={} ({}): {counts}",
                    dir.display(),
                    if ours.is_empty() {
                        "no data files".to_string()
                    } else {
                        ours.join(", ")
                    }
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knowledge::prompt::brief_for;
    use crate::knowledge::test_support::{attention_task, init_prompt, write};
    use crate::knowledge::Platform;
    use ksearch_kb::ContextLevel;

    /// A third translation pair, as a user adds it: one data file.
    const TRITON_TO_METAL: &str = include_str!("../../../kb/tests/fixtures/triton-to-metal.toml");

    #[test]
    fn a_translation_pair_added_through_ksearch_kb() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "translation/triton-to-metal.toml", TRITON_TO_METAL);
        let kb = kb_with(Some(dir.path())).unwrap();
        // (`ksearch kb list` and `kb show` show it: the CLI's kb_cmd tests.) The prompts of an MLX task adapting a Triton kernel on an Apple GPU cite it.
        let (_task_dir, task) = attention_task(
            "targets = [\"h200\", \"m4-max\"]\n[kernel]\nlanguage = \"mlx\"\n\n[[expertise]]\n\
             file = \"expertise/attn.py\"\nlanguage = \"triton\"\ndescription = \"a Triton attention kernel\"\n",
            &[("expertise/attn.py", "import triton\n")],
        );
        let prompt = init_prompt(brief_for(&kb, &task, Platform::MacOs, ContextLevel::Full).unwrap());
        assert!(prompt.contains("Primitive mapping (triton -> metal"), "{prompt}");
        assert!(prompt.contains("tl.program_id(0)") && !prompt.contains("(cuda -> metal"));
        // The built-in knowledge base has no such layer.
        let builtin =
            init_prompt(brief_for(&kb_with(None).unwrap(), &task, Platform::MacOs, ContextLevel::Full).unwrap());
        assert!(!builtin.contains("Primitive mapping"));
        // `ksearch doctor` names the file it adds.
        let (ok, line) = describe(Some(dir.path()));
        assert!(ok, "{line}");
        assert!(
            line.starts_with(&format!(
                "built-in + KSEARCH_KB={} (translation/triton-to-metal.toml): ",
                dir.path().display()
            )) && line.contains(", 3 translation layers,"),
            "{line}"
        );
        assert!(describe(None).1.starts_with("built-in: "));

        // A malformed file: an error naming it and the key, for every command and for doctor.
        let bad = TRITON_TO_METAL.replace("to = \"threadgroup_position_in_grid.x\"\n", "");
        write(dir.path(), "translation/triton-to-metal.toml", &bad);
        let file = dir
            .path()
            .join("translation/triton-to-metal.toml")
            .display()
            .to_string();
        let err = format!("{:#}", kb_with(Some(dir.path())).unwrap_err());
        assert!(
            err.starts_with(&format!(
                "KSEARCH_KB={}: {file}: mappings[0]: missing field `to`",
                dir.path().display()
            )),
            "{err}"
        );
        assert_eq!(describe(Some(dir.path())), (false, err));
    }
}
