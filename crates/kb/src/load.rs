//! Reading the data files (embedded or from a folder), parsing and per-file validation. What
//! no single file can check (unique names, references between files) is left to
//! `Kb::assemble`.

use crate::error::{parse_toml, KbError, Problem};
use include_dir::{include_dir, Dir};
use serde::de::DeserializeOwned;
use std::path::Path;

static BUILTIN: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../kb");

/// The folders of a knowledge base, in the order they are read.
pub(crate) const FOLDERS: [&str; 4] = ["hardware", "patterns", "translation", "assertions"];

/// One data file before parsing.
pub(crate) struct Source {
    /// How errors name the file (`kb/hardware/h200.toml` or the path given).
    pub label: String,
    /// File name without `.toml`.
    pub stem: String,
    pub text: String,
}

/// The files of each folder of [`FOLDERS`], `None` where a folder is missing.
pub(crate) type Sources = [Option<Vec<Source>>; 4];

/// The embedded `kb/` folder.
pub(crate) fn builtin() -> Result<Sources, KbError> {
    let mut problems = Vec::new();
    let sources = FOLDERS.map(|sub| {
        let dir = BUILTIN.get_dir(sub)?;
        let mut out = Vec::new();
        for file in dir.files() {
            let path = file.path();
            if path.extension().and_then(|e| e.to_str()) != Some("toml") {
                continue;
            }
            let label = format!("kb/{}", path.display());
            match file.contents_utf8() {
                Some(text) => out.push(Source {
                    label,
                    stem: stem(path),
                    text: text.to_string(),
                }),
                None => problems.push(Problem::new(label, "", "is not valid UTF-8")),
            }
        }
        out.sort_by(|a, b| a.label.cmp(&b.label));
        Some(out)
    });
    if problems.is_empty() {
        Ok(sources)
    } else {
        Err(KbError::Invalid(problems))
    }
}

/// A folder laid out like `kb/` with at least one of [`FOLDERS`]; a missing sub-folder is
/// `None`. A `.toml` file that would be ignored (beside the folders, or in a folder of another
/// name such as `translations/`) is an error naming it, so a misplaced file is not silently
/// left out.
pub(crate) fn folder_with_some(dir: &Path) -> Result<Sources, KbError> {
    let sources = folder(dir)?;
    let list = || FOLDERS.map(|f| format!("{f}/")).join(", ");
    let mut problems = Vec::new();
    if sources.iter().all(Option::is_none) {
        problems.push(Problem::new(
            dir.display().to_string(),
            "",
            format!("has none of the folders {}", list()),
        ));
    }
    for path in entries(dir)? {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() {
            if name.starts_with('.') || FOLDERS.contains(&name) {
                continue;
            }
            if entries(&path)?.iter().any(|p| is_toml(p)) {
                problems.push(Problem::new(
                    path.display().to_string(),
                    "",
                    format!(
                        "is not a folder of the knowledge base, so its files would be ignored; the folders are {}",
                        list()
                    ),
                ));
            }
        } else if is_toml(&path) {
            problems.push(Problem::new(
                path.display().to_string(),
                "",
                format!(
                    "is outside the folders of the knowledge base, so it would be ignored; move it into the one for its kind ({})",
                    list()
                ),
            ));
        }
    }
    if problems.is_empty() {
        Ok(sources)
    } else {
        Err(KbError::Invalid(problems))
    }
}

fn io(path: &Path, source: std::io::Error) -> KbError {
    KbError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The paths in `dir`, sorted.
fn entries(dir: &Path) -> Result<Vec<std::path::PathBuf>, KbError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        out.push(entry.map_err(|e| io(dir, e))?.path());
    }
    out.sort();
    Ok(out)
}

fn is_toml(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()) == Some("toml") && path.is_file()
}

/// A folder laid out like `kb/`; a missing sub-folder is `None`.
fn folder(dir: &Path) -> Result<Sources, KbError> {
    std::fs::metadata(dir).map_err(|e| io(dir, e))?;
    let mut sources: Sources = [None, None, None, None];
    for (slot, sub) in sources.iter_mut().zip(FOLDERS) {
        let folder = dir.join(sub);
        if !folder.exists() {
            continue;
        }
        let mut out = Vec::new();
        for path in entries(&folder)?.into_iter().filter(|p| is_toml(p)) {
            let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
            out.push(Source {
                label: path.display().to_string(),
                stem: stem(&path),
                text,
            });
        }
        *slot = Some(out);
    }
    Ok(sources)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_string()
}

/// One parsed, valid item and the file it came from.
#[derive(Debug, Clone)]
pub(crate) struct Entry<T> {
    pub file: String,
    pub item: T,
}

/// Parses and validates every file of one folder, collecting the problems of all of them.
pub(crate) fn parse_all<T: DeserializeOwned>(
    sources: Option<Vec<Source>>,
    validate: impl Fn(&T, &str, &str) -> Vec<Problem>,
    problems: &mut Vec<Problem>,
) -> Vec<Entry<T>> {
    let mut out = Vec::new();
    for s in sources.unwrap_or_default() {
        match parse_toml::<T>(&s.label, &s.text) {
            Ok(item) => {
                let found = validate(&item, &s.label, &s.stem);
                if found.is_empty() {
                    out.push(Entry { file: s.label, item });
                }
                problems.extend(found);
            }
            Err(found) => problems.extend(found),
        }
    }
    out
}
