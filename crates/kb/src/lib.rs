//! ksearch's knowledge base: hardware specs and the optimisation pattern library as versioned
//! data (knowledge is data, not code), and the slice of it a prompt gets. It knows nothing of
//! runs, searches or evaluations, and does no I/O beyond reading its own files.
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
//! - `kb/translation/<source>-to-<target>.toml`: one translation layer each ([`Translation`]):
//!   the primitive mapping table from the source platform (CUDA) to the target (Metal through
//!   MLX, MLX's CUDA backend), each row with the constraint that changes the design, the
//!   patterns that carry over with a note for the target, and target-specific properties per
//!   task family. Adding a (source, target) pair is a new file, no code.
//! - `kb/assertions/<family>.toml`: one task family each ([`AssertionFamily`]): the op_types it
//!   covers and the properties every candidate must keep.
//!
//! Every file carries `schema = 1`; every struct denies unknown fields; validation collects every
//! problem as `file: field: what is wrong`, references between files included (a layer naming
//! an unknown pattern or family is an error).
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
//! # Task context
//! [`Kb::task_context`] is what a task's prompts cite: given a [`TaskQuery`] (device, kernel
//! language, op_type, the languages of the task's expertise) and a [`ContextLevel`], the
//! device's figures (`hardware`), or the figures, patterns, translation layers and properties to
//! keep (`full`), or nothing (`none`).
//!
//! # Overrides
//! [`Kb::from_dir`] loads the same layout from a folder that is complete in itself (tests);
//! [`Kb::with_dir`] lays a folder of a user's own devices, patterns, translation layers and
//! families over the built-in knowledge base (what `KSEARCH_KB=DIR` does), replacing entries
//! by name or id and checking references across both; [`Kb::with_overrides`] does the same with
//! a knowledge base already loaded.

#![warn(missing_docs)]

mod assertions;
mod context;
mod error;
mod hardware;
mod kinds;
mod load;
mod pattern;
mod render;
mod translation;

pub use assertions::AssertionFamily;
pub use context::{ContextLevel, Selection, TaskQuery, MAX_LAYER_CHARS, MAX_TASK_CONTEXT_CHARS};
pub use error::{KbError, Problem};
pub use hardware::{
    normalize_name, Basis, Figure, FigureMeta, Figures, HardwareSpec, Measurement, FIGURE_META, SCHEMA_VERSION,
};
pub use kinds::{Context, DeviceKind, Regime, TargetKind};
pub use pattern::{Hints, Pattern, Priors};
pub use translation::{FamilyProperties, Mapping, PatternNote, Translation};

use load::{parse_all, Entry, Sources};
use std::collections::BTreeMap;
use std::path::Path;

/// The most characters a `full` prompt slice for one target may have (checked by the tests for
/// every built-in device).
pub const MAX_SLICE_CHARS: usize = 4000;

/// Parsed, individually valid entries of each folder, not yet checked as a whole.
struct Parts {
    hardware: Vec<Entry<HardwareSpec>>,
    patterns: Vec<Entry<Pattern>>,
    translations: Vec<Entry<Translation>>,
    families: Vec<Entry<AssertionFamily>>,
}

/// The loaded, validated knowledge base. Entries are sorted by name/id.
#[derive(Debug, Clone)]
pub struct Kb {
    hardware: Vec<Entry<HardwareSpec>>,
    patterns: Vec<Entry<Pattern>>,
    translations: Vec<Entry<Translation>>,
    families: Vec<Entry<AssertionFamily>>,
    /// Normalised name or alias -> index into `hardware`.
    index: BTreeMap<String, usize>,
}

impl Kb {
    /// The knowledge base embedded in this binary (the repository's `kb/` folder).
    pub fn builtin() -> Result<Kb, KbError> {
        Kb::from_sources(load::builtin()?)
    }

    /// A knowledge base read from `dir`, laid out like `kb/` (`hardware/`, `patterns/`,
    /// `translation/`, `assertions/`; any may be missing, not all). It must be complete in
    /// itself: the patterns and families its translation layers name must be in it too.
    pub fn from_dir(dir: &Path) -> Result<Kb, KbError> {
        Kb::from_sources(load::folder_with_some(dir)?)
    }

    /// This knowledge base with the files of `dir` (laid out like `kb/`) laid over it: each file
    /// adds an entry, or replaces the one of the same name or id (which is also its file name).
    /// Unlike [`Kb::from_dir`], the folder need not be complete in itself: a new translation
    /// layer may name built-in patterns and families, a new pattern may be named by a built-in
    /// layer. Every problem is reported as `file: field: what is wrong` with the file's path
    /// under `dir`, including a `.toml` file outside the four folders (it would be ignored).
    /// This is what `KSEARCH_KB=DIR` does for the CLI.
    pub fn with_dir(self, dir: &Path) -> Result<Kb, KbError> {
        self.merge(Kb::parse(load::folder_with_some(dir)?)?)
    }

    fn from_sources(sources: Sources) -> Result<Kb, KbError> {
        let Parts {
            hardware,
            patterns,
            translations,
            families,
        } = Kb::parse(sources)?;
        Kb::assemble(hardware, patterns, translations, families)
    }

    /// Parses and validates every file on its own (what [`Kb::assemble`] checks is left to it).
    fn parse(sources: Sources) -> Result<Parts, KbError> {
        let [hw, pats, layers, fams] = sources;
        let mut problems = Vec::new();
        let parts = Parts {
            hardware: parse_all(hw, HardwareSpec::validate, &mut problems),
            patterns: parse_all(pats, Pattern::validate, &mut problems),
            translations: parse_all(layers, Translation::validate, &mut problems),
            families: parse_all(fams, AssertionFamily::validate, &mut problems),
        };
        if !problems.is_empty() {
            return Err(KbError::Invalid(problems));
        }
        Ok(parts)
    }

    /// Sorts, indexes and checks what no single file can: unique names, aliases and ids, and
    /// that translation layers name existing patterns and families and never compete for the
    /// same tasks.
    fn assemble(
        mut hardware: Vec<Entry<HardwareSpec>>,
        mut patterns: Vec<Entry<Pattern>>,
        mut translations: Vec<Entry<Translation>>,
        mut families: Vec<Entry<AssertionFamily>>,
    ) -> Result<Kb, KbError> {
        hardware.sort_by(|a, b| a.item.name.cmp(&b.item.name));
        patterns.sort_by(|a, b| a.item.id.cmp(&b.item.id));
        translations.sort_by(|a, b| a.item.id.cmp(&b.item.id));
        families.sort_by(|a, b| a.item.family.cmp(&b.item.family));
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
        for w in translations.windows(2) {
            if w[0].item.id == w[1].item.id {
                problems.push(Problem::new(
                    &w[1].file,
                    "id",
                    format!("'{}' is also defined in {}", w[1].item.id, w[0].file),
                ));
            }
        }
        for w in families.windows(2) {
            if w[0].item.family == w[1].item.family {
                problems.push(Problem::new(
                    &w[1].file,
                    "family",
                    format!("'{}' is also defined in {}", w[1].item.family, w[0].file),
                ));
            }
        }
        for (i, f) in families.iter().enumerate() {
            for (j, op) in f.item.op_types.iter().enumerate() {
                if let Some(other) = families[..i].iter().find(|o| o.item.covers(op)) {
                    problems.push(Problem::new(
                        &f.file,
                        format!("op_types[{j}]"),
                        format!(
                            "'{op}' already belongs to family '{}' ({})",
                            other.item.family, other.file
                        ),
                    ));
                }
            }
        }
        for (i, e) in translations.iter().enumerate() {
            let t = &e.item;
            for (j, n) in t.patterns.iter().enumerate() {
                match patterns.iter().find(|p| p.item.id == n.id) {
                    None => problems.push(Problem::new(
                        &e.file,
                        format!("patterns[{j}].id"),
                        format!("'{}' is not a pattern of the knowledge base (kb/patterns/)", n.id),
                    )),
                    Some(p) if !p.item.applies_to(t.dialect) => problems.push(Problem::new(
                        &e.file,
                        format!("patterns[{j}].id"),
                        format!(
                            "pattern '{}' does not list '{}' among its targets ({})",
                            n.id, t.dialect, p.file
                        ),
                    )),
                    Some(_) => {}
                }
            }
            for (j, a) in t.assertions.iter().enumerate() {
                if !families.iter().any(|f| f.item.family == a.family) {
                    problems.push(Problem::new(
                        &e.file,
                        format!("assertions[{j}].family"),
                        format!("'{}' is not a family of the knowledge base (kb/assertions/)", a.family),
                    ));
                }
            }
            // Two layers from the same source for the same language and dialect would both be
            // cited for one task: which one applies must never be ambiguous.
            for other in &translations[..i] {
                let o = &other.item;
                let shared = t.languages.iter().find(|l| o.languages.contains(l));
                if o.source == t.source && o.dialect == t.dialect {
                    if let Some(language) = shared {
                        problems.push(Problem::new(
                            &e.file,
                            "languages",
                            format!(
                                "'{language}' tasks on {} devices are already translated from {} by {} ({})",
                                t.dialect, t.source, o.id, other.file
                            ),
                        ));
                    }
                }
            }
        }
        if !problems.is_empty() {
            return Err(KbError::Invalid(problems));
        }
        Ok(Kb {
            hardware,
            patterns,
            translations,
            families,
            index,
        })
    }

    /// This knowledge base with `overrides` laid over it: devices, patterns, translation layers
    /// and families of the same name or id are replaced, new ones added.
    pub fn with_overrides(self, overrides: Kb) -> Result<Kb, KbError> {
        self.merge(Parts {
            hardware: overrides.hardware,
            patterns: overrides.patterns,
            translations: overrides.translations,
            families: overrides.families,
        })
    }

    /// This knowledge base with `spec` added, or replacing the device of the same name: how
    /// ksearch puts the CPU it runs on, with the figures it detected there, in place of the
    /// generic one. `origin` says where the entry comes from, in place of a file name (in error
    /// messages and [`Kb::source_file`]). The spec is checked as a file's would be.
    pub fn with_hardware(self, spec: HardwareSpec, origin: &str) -> Result<Kb, KbError> {
        let problems = spec.validate(origin, &spec.name);
        if !problems.is_empty() {
            return Err(KbError::Invalid(problems));
        }
        self.merge(Parts {
            hardware: vec![Entry {
                file: origin.to_string(),
                item: spec,
            }],
            patterns: Vec::new(),
            translations: Vec::new(),
            families: Vec::new(),
        })
    }

    /// Replaces entries by name or id, adds the others, and checks the result as a whole.
    fn merge(self, over: Parts) -> Result<Kb, KbError> {
        fn merge<T>(base: Vec<Entry<T>>, over: Vec<Entry<T>>, key: impl Fn(&T) -> String) -> Vec<Entry<T>> {
            let mut map: BTreeMap<String, Entry<T>> = base.into_iter().map(|e| (key(&e.item), e)).collect();
            for e in over {
                map.insert(key(&e.item), e);
            }
            map.into_values().collect()
        }
        Kb::assemble(
            merge(self.hardware, over.hardware, |h| h.name.clone()),
            merge(self.patterns, over.patterns, |p| p.id.clone()),
            merge(self.translations, over.translations, |t| t.id.clone()),
            merge(self.families, over.families, |f| f.family.clone()),
        )
    }

    /// Every file the entries were loaded from (`kb/hardware/h200.toml`, or a path under the
    /// folder given to [`Kb::from_dir`] or [`Kb::with_dir`]), sorted.
    pub fn files(&self) -> Vec<&str> {
        let mut files: Vec<&str> = (self.hardware.iter().map(|e| e.file.as_str()))
            .chain(self.patterns.iter().map(|e| e.file.as_str()))
            .chain(self.translations.iter().map(|e| e.file.as_str()))
            .chain(self.families.iter().map(|e| e.file.as_str()))
            .collect();
        files.sort_unstable();
        files
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

    /// The pattern whose `id` is exactly `id` (`online-softmax`), if the knowledge base has it.
    pub fn pattern(&self, id: &str) -> Option<&Pattern> {
        self.patterns.iter().map(|e| &e.item).find(|p| p.id == id)
    }

    /// The file a device or pattern was loaded from (`kb/hardware/h200.toml`).
    pub fn source_file(&self, name_or_id: &str) -> Option<&str> {
        if let Some(&i) = self.index.get(&normalize_name(name_or_id)) {
            return Some(&self.hardware[i].file);
        }
        let pattern = self.patterns.iter().find(|e| e.item.id == name_or_id);
        let layer = self.translations.iter().find(|e| e.item.id == name_or_id);
        let family = self.families.iter().find(|e| e.item.family == name_or_id);
        pattern
            .map(|e| e.file.as_str())
            .or(layer.map(|e| e.file.as_str()))
            .or(family.map(|e| e.file.as_str()))
    }

    /// All translation layers, sorted by id.
    pub fn translations(&self) -> impl Iterator<Item = &Translation> {
        self.translations.iter().map(|e| &e.item)
    }

    /// The layer `cuda-to-metal`.
    pub fn translation(&self, id: &str) -> Option<&Translation> {
        self.translations().find(|t| t.id == id)
    }

    /// The layers whose target is `target` (`metal`, `mlx-cuda`), sorted by id.
    pub fn translations_into(&self, target: &str) -> Vec<&Translation> {
        self.translations().filter(|t| t.target == target).collect()
    }

    /// The layers that can apply to tasks on `hw` (their dialect is one `hw` runs).
    pub fn translations_for(&self, hw: &HardwareSpec) -> Vec<&Translation> {
        self.translations()
            .filter(|t| hw.targets.contains(&t.dialect))
            .collect()
    }

    /// The devices a layer can apply to, sorted by name.
    pub fn devices_for(&self, layer: &Translation) -> Vec<&HardwareSpec> {
        self.hardware_specs()
            .filter(|h| h.targets.contains(&layer.dialect))
            .collect()
    }

    /// All task families, sorted by id.
    pub fn families(&self) -> impl Iterator<Item = &AssertionFamily> {
        self.families.iter().map(|e| &e.item)
    }

    /// The task family whose `family` id is exactly `id` (`attention`), if there is one.
    pub fn family(&self, id: &str) -> Option<&AssertionFamily> {
        self.families().find(|f| f.family == id)
    }

    /// The family a definition's `op_type` belongs to.
    pub fn family_for(&self, op_type: &str) -> Option<&AssertionFamily> {
        self.families().find(|f| f.covers(op_type))
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
