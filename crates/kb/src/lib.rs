//! ksearch's knowledge base: hardware specs and the optimisation pattern library as versioned
//! data (DESIGN.md, property 4 "Knowledge is data"), and the slice of it a prompt gets.
//!
//! # Data
//! The files live in the repository's `kb/` folder and are embedded in the binary at build time:
//! - `kb/hardware/<name>.toml`: one device each ([`HardwareSpec`]). Every figure is a table with
//!   `value`, `basis` (`vendor-spec`, `vendor-peak`, `measured`, `typical`) and `source`, so a
//!   reader can tell a datasheet peak from a number measured on our H200; a figure nobody could
//!   source is left out rather than guessed.
//! - `kb/patterns/<id>.toml`: one optimisation pattern each ([`Pattern`]), with a prior per regime
//!   (memory-, compute-, latency-bound) that the knob tuner uses to seed its ratings.
//!
//! Every file carries `schema = 1`; every struct denies unknown fields; validation collects every
//! problem as `file: field: what is wrong`. Other folders under `kb/` (translation tables and
//! assertions, which come later) are ignored by this loader.
//!
//! # Prompt slices
//! [`Kb::prompt_slice`] renders what a prompt gets about a target at one of three [`Context`]
//! levels, to reproduce the published three-configuration comparison: `none` (empty), `hardware`
//! (the device's spec as compact markdown) and `full` (spec plus the patterns for the device's
//! default kernel dialect). Rendering is deterministic and compact: a full slice stays under
//! [`MAX_SLICE_CHARS`]. That budget is why a pattern has a one-line `summary` for prompts beside
//! its longer `description`, and why figure notes and sources are rendered only by
//! [`HardwareSpec::sources_markdown`].
//!
//! # Overrides
//! [`Kb::from_dir`] loads the same layout from a folder (tests, or a user's own devices and
//! patterns); [`Kb::with_overrides`] lays such a set over the built-in one, replacing entries by
//! name or id.

mod error;
mod hardware;
mod kinds;
mod pattern;

pub use error::{KbError, Problem};
pub use hardware::{
    normalize_name, Basis, Figure, FigureMeta, Figures, HardwareSpec, Measurement, FIGURE_META, SCHEMA_VERSION,
};
pub use kinds::{Context, DeviceKind, Regime, TargetKind};
pub use pattern::{Hints, Pattern, Priors};

use error::parse_toml;
use include_dir::{include_dir, Dir};
use std::collections::BTreeMap;
use std::path::Path;

static BUILTIN: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../kb");

/// The most characters a `full` prompt slice for one target may have (checked by the tests for
/// every built-in device).
pub const MAX_SLICE_CHARS: usize = 4000;

const HARDWARE_DIR: &str = "hardware";
const PATTERNS_DIR: &str = "patterns";

/// One data file before parsing.
struct Source {
    /// How errors name the file (`kb/hardware/h200.toml` or the path given).
    label: String,
    /// File name without `.toml`.
    stem: String,
    text: String,
}

#[derive(Debug, Clone)]
struct Entry<T> {
    file: String,
    item: T,
}

/// The loaded, validated knowledge base. Entries are sorted by name/id.
#[derive(Debug, Clone)]
pub struct Kb {
    hardware: Vec<Entry<HardwareSpec>>,
    patterns: Vec<Entry<Pattern>>,
    /// Normalised name or alias -> index into `hardware`.
    index: BTreeMap<String, usize>,
}

impl Kb {
    /// The knowledge base embedded in this binary (the repository's `kb/` folder).
    pub fn builtin() -> Result<Kb, KbError> {
        let mut problems = Vec::new();
        let mut read = |sub: &str| -> Vec<Source> {
            let mut out = Vec::new();
            let Some(dir) = BUILTIN.get_dir(sub) else {
                return out;
            };
            for file in dir.files() {
                let path = file.path();
                if path.extension().and_then(|e| e.to_str()) != Some("toml") {
                    continue;
                }
                let label = format!("kb/{}", path.display());
                let stem = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_string();
                match file.contents_utf8() {
                    Some(text) => out.push(Source {
                        label,
                        stem,
                        text: text.to_string(),
                    }),
                    None => problems.push(Problem::new(label, "", "is not valid UTF-8")),
                }
            }
            out
        };
        let hw = read(HARDWARE_DIR);
        let pats = read(PATTERNS_DIR);
        if !problems.is_empty() {
            return Err(KbError::Invalid(problems));
        }
        Kb::from_sources(hw, pats)
    }

    /// A knowledge base read from `dir`, laid out like `kb/` (`hardware/*.toml`,
    /// `patterns/*.toml`; either folder may be missing, not both).
    pub fn from_dir(dir: &Path) -> Result<Kb, KbError> {
        let io = |path: &Path, source: std::io::Error| KbError::Io {
            path: path.display().to_string(),
            source,
        };
        std::fs::metadata(dir).map_err(|e| io(dir, e))?;
        let read = |sub: &str| -> Result<Option<Vec<Source>>, KbError> {
            let folder = dir.join(sub);
            let entries = match std::fs::read_dir(&folder) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io(&folder, e)),
            };
            let mut paths = Vec::new();
            for entry in entries {
                let path = entry.map_err(|e| io(&folder, e))?.path();
                if path.extension().and_then(|e| e.to_str()) == Some("toml") && path.is_file() {
                    paths.push(path);
                }
            }
            paths.sort();
            let mut out = Vec::new();
            for path in paths {
                let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
                let stem = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_string();
                out.push(Source {
                    label: path.display().to_string(),
                    stem,
                    text,
                });
            }
            Ok(Some(out))
        };
        let hw = read(HARDWARE_DIR)?;
        let pats = read(PATTERNS_DIR)?;
        if hw.is_none() && pats.is_none() {
            return Err(KbError::one(
                dir.display().to_string(),
                "",
                "has neither a hardware/ nor a patterns/ folder",
            ));
        }
        Kb::from_sources(hw.unwrap_or_default(), pats.unwrap_or_default())
    }

    fn from_sources(hw: Vec<Source>, pats: Vec<Source>) -> Result<Kb, KbError> {
        let mut problems = Vec::new();
        let mut hardware = Vec::new();
        for s in hw {
            match parse_toml::<HardwareSpec>(&s.label, &s.text) {
                Ok(spec) => {
                    let found = spec.validate(&s.label, &s.stem);
                    if found.is_empty() {
                        hardware.push(Entry {
                            file: s.label,
                            item: spec,
                        });
                    }
                    problems.extend(found);
                }
                Err(found) => problems.extend(found),
            }
        }
        let mut patterns = Vec::new();
        for s in pats {
            match parse_toml::<Pattern>(&s.label, &s.text) {
                Ok(pattern) => {
                    let found = pattern.validate(&s.label, &s.stem);
                    if found.is_empty() {
                        patterns.push(Entry {
                            file: s.label,
                            item: pattern,
                        });
                    }
                    problems.extend(found);
                }
                Err(found) => problems.extend(found),
            }
        }
        if !problems.is_empty() {
            return Err(KbError::Invalid(problems));
        }
        Kb::assemble(hardware, patterns)
    }

    /// Sorts, indexes and checks what no single file can: unique names, aliases and ids.
    fn assemble(mut hardware: Vec<Entry<HardwareSpec>>, mut patterns: Vec<Entry<Pattern>>) -> Result<Kb, KbError> {
        hardware.sort_by(|a, b| a.item.name.cmp(&b.item.name));
        patterns.sort_by(|a, b| a.item.id.cmp(&b.item.id));
        let mut problems = Vec::new();
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        for (i, e) in hardware.iter().enumerate() {
            let names = std::iter::once(("name".to_string(), e.item.name.clone())).chain(
                e.item
                    .aliases
                    .iter()
                    .enumerate()
                    .map(|(j, a)| (format!("aliases[{j}]"), normalize_name(a))),
            );
            for (field, name) in names {
                if let Some(&other) = index.get(&name) {
                    problems.push(Problem::new(
                        &e.file,
                        field,
                        format!(
                            "'{name}' already names {} ({})",
                            hardware[other].item.name, hardware[other].file
                        ),
                    ));
                } else {
                    index.insert(name, i);
                }
            }
        }
        for w in patterns.windows(2) {
            if w[0].item.id == w[1].item.id {
                problems.push(Problem::new(
                    &w[1].file,
                    "id",
                    format!("'{}' is also defined in {}", w[1].item.id, w[0].file),
                ));
            }
        }
        if !problems.is_empty() {
            return Err(KbError::Invalid(problems));
        }
        Ok(Kb {
            hardware,
            patterns,
            index,
        })
    }

    /// This knowledge base with `overrides` laid over it: devices and patterns of the same name
    /// or id are replaced, new ones added.
    pub fn with_overrides(self, overrides: Kb) -> Result<Kb, KbError> {
        let mut hardware: BTreeMap<String, Entry<HardwareSpec>> =
            self.hardware.into_iter().map(|e| (e.item.name.clone(), e)).collect();
        for e in overrides.hardware {
            hardware.insert(e.item.name.clone(), e);
        }
        let mut patterns: BTreeMap<String, Entry<Pattern>> =
            self.patterns.into_iter().map(|e| (e.item.id.clone(), e)).collect();
        for e in overrides.patterns {
            patterns.insert(e.item.id.clone(), e);
        }
        Kb::assemble(hardware.into_values().collect(), patterns.into_values().collect())
    }

    /// The device called `name_or_alias` (`h200`, `H200`, `NVIDIA H200`, `m4-max`, `cpu`).
    pub fn hardware(&self, name_or_alias: &str) -> Result<&HardwareSpec, KbError> {
        self.index
            .get(&normalize_name(name_or_alias))
            .map(|&i| &self.hardware[i].item)
            .ok_or_else(|| KbError::UnknownHardware {
                name: name_or_alias.to_string(),
                available: self.hardware_names().join(", "),
            })
    }

    /// Canonical device names, sorted.
    pub fn hardware_names(&self) -> Vec<&str> {
        self.hardware.iter().map(|e| e.item.name.as_str()).collect()
    }

    /// All devices, sorted by name.
    pub fn hardware_specs(&self) -> impl Iterator<Item = &HardwareSpec> {
        self.hardware.iter().map(|e| &e.item)
    }

    /// All patterns, sorted by id.
    pub fn patterns(&self) -> impl Iterator<Item = &Pattern> {
        self.patterns.iter().map(|e| &e.item)
    }

    pub fn pattern(&self, id: &str) -> Option<&Pattern> {
        self.patterns.iter().map(|e| &e.item).find(|p| p.id == id)
    }

    /// The file a device or pattern was loaded from (`kb/hardware/h200.toml`).
    pub fn source_file(&self, name_or_id: &str) -> Option<&str> {
        if let Some(&i) = self.index.get(&normalize_name(name_or_id)) {
            return Some(&self.hardware[i].file);
        }
        self.patterns
            .iter()
            .find(|e| e.item.id == name_or_id)
            .map(|e| e.file.as_str())
    }

    /// Patterns for a kernel dialect, best first. With a regime: only those that can pay in it,
    /// ordered by their prior there; without: all, ordered by their best prior. Ties by id.
    pub fn patterns_for(&self, target: TargetKind, regime: Option<Regime>) -> Vec<&Pattern> {
        let mut out: Vec<(f64, &Pattern)> = self
            .patterns()
            .filter(|p| p.applies_to(target))
            .filter_map(|p| match regime {
                Some(r) => p.prior(r).map(|v| (v, p)),
                None => Some((p.best_prior(), p)),
            })
            .collect();
        out.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
        out.into_iter().map(|(_, p)| p).collect()
    }

    /// What a prompt gets about `target` (a device name or alias) at `context` level; patterns
    /// are those of the device's default dialect (the first of its `targets`). An unknown device
    /// is an error at every level, so a typo is not silently ablated away.
    pub fn prompt_slice(&self, target: &str, context: Context) -> Result<String, KbError> {
        let hw = self.hardware(target)?;
        Ok(self.prompt_slice_for(hw, hw.targets[0], context))
    }

    /// As [`Kb::prompt_slice`], for a chosen dialect (e.g. `triton` on an H200).
    pub fn prompt_slice_for(&self, hw: &HardwareSpec, target: TargetKind, context: Context) -> String {
        match context {
            Context::None => String::new(),
            Context::Hardware => hw.to_markdown(),
            Context::Full => {
                let mut out = hw.to_markdown();
                let patterns = self.patterns_for(target, None);
                if !patterns.is_empty() {
                    out.push_str(&format!(
                        "\n## Optimisation patterns for {target} (prior it helps: M memory-, C compute-, L latency-bound)\n"
                    ));
                    for p in patterns {
                        out.push_str(&p.to_markdown_line(Some(target)));
                        out.push('\n');
                    }
                }
                out
            }
        }
    }
}
