//! Writing an imported task folder and loading it back, plus the bits of task.toml and Python
//! text both importers produce.

use crate::error::ImportError;
use ksearch_spec::{Definition, Task};
use std::path::Path;

/// Everything an importer produces, before it is written.
pub(crate) struct Folder {
    pub definition: Definition,
    pub workloads: Vec<serde_json::Value>,
    pub task_toml: String,
    /// Other files (seed, baselines): path relative to the folder, contents.
    pub files: Vec<(String, String)>,
    /// Binary files copied in (inputs given by the workloads): path relative to the folder,
    /// the file to copy.
    pub blobs: Vec<(String, std::path::PathBuf)>,
}

impl Folder {
    /// Writes the folder to `out` (refusing a non-empty folder unless `force`) and loads it back
    /// as a task, so that what the user gets is known to load.
    pub(crate) fn write(&self, out: &Path, force: bool) -> Result<Task, ImportError> {
        if out.is_file() {
            return Err(ImportError::io(
                out,
                std::io::Error::other("is a file; --out names the task folder to create"),
            ));
        }
        if !force && out.is_dir() {
            let mut entries = std::fs::read_dir(out).map_err(|e| ImportError::io(out, e))?;
            if entries.next().is_some() {
                return Err(ImportError::OutExists {
                    path: out.to_path_buf(),
                });
            }
        }
        let definition = serde_json::to_string_pretty(&self.definition).map_err(|e| ImportError::Io {
            path: out.join("definition.json").display().to_string(),
            message: e.to_string(),
        })?;
        let mut workloads = String::new();
        for w in &self.workloads {
            workloads.push_str(&w.to_string());
            workloads.push('\n');
        }
        let mut all: Vec<(&str, &str)> = vec![
            ("definition.json", &definition),
            ("workloads.jsonl", &workloads),
            ("task.toml", &self.task_toml),
        ];
        all.extend(self.files.iter().map(|(p, c)| (p.as_str(), c.as_str())));
        for (rel, content) in all {
            let path = out.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| ImportError::io(parent, e))?;
            }
            let mut text = content.to_string();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            std::fs::write(&path, text).map_err(|e| ImportError::io(&path, e))?;
        }
        for (rel, from) in &self.blobs {
            let path = out.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| ImportError::io(parent, e))?;
            }
            std::fs::copy(from, &path).map_err(|e| ImportError::io(&path, e))?;
        }
        Ok(Task::load_folder(out)?)
    }
}

/// A TOML string: a literal ('...') when the text allows it (regular expressions read better),
/// else a basic string with escapes.
pub(crate) fn toml_str(text: &str) -> String {
    if !text.contains('\'') && !text.contains('\n') && !text.chars().any(|c| c.is_control()) {
        format!("'{text}'")
    } else {
        toml::Value::String(text.to_string()).to_string()
    }
}

/// A JSON value as an inline TOML value; `None` for what TOML cannot hold (null).
pub(crate) fn toml_value(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::Null => None,
        serde_json::Value::Array(items) => {
            let parts: Option<Vec<String>> = items.iter().map(toml_value).collect();
            Some(format!("[{}]", parts?.join(", ")))
        }
        serde_json::Value::String(s) => Some(toml_str(s)),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Object(_) => None,
    }
}

/// A number as TOML writes a float (`1.0`, `0.0001`).
pub(crate) fn toml_float(x: f64) -> String {
    toml::Value::Float(x).to_string()
}

/// A Python string literal holding `text` (JSON's escapes are Python's).
pub(crate) fn py_str(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// Comment lines (`# ...`) for TOML or Python, wrapped at about 96 columns.
pub(crate) fn comment(text: &str) -> String {
    let mut out = String::new();
    for paragraph in text.lines() {
        let mut line = String::from("#");
        for word in paragraph.split_whitespace() {
            if line.len() + word.len() + 1 > 96 && line.len() > 1 {
                out.push_str(&line);
                out.push('\n');
                line = String::from("#");
            }
            line.push(' ');
            line.push_str(word);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_and_python_literals() {
        assert_eq!(toml_str(r"\bModel\b"), r"'\bModel\b'");
        assert_eq!(toml_str("it's"), "\"it's\"");
        assert_eq!(
            toml_value(&serde_json::json!([64, 1.5, "a", [true]])).as_deref(),
            Some("[64, 1.5, 'a', [true]]")
        );
        assert_eq!(toml_value(&serde_json::json!([1, null])), None);
        assert_eq!(toml_float(1.0), "1.0");
        assert_eq!(py_str("a\"b\n\\"), r#""a\"b\n\\""#);
        let c = comment(&"word ".repeat(40));
        assert!(
            c.lines().count() > 1 && c.lines().all(|l| l.starts_with("# ") && l.len() <= 100),
            "{c}"
        );
    }
}
