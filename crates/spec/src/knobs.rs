//! Kernel templates and their knobs (docs/templates.md): what the knob tuner searches over.

use crate::error::{parse_toml, Problems, SpecError};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One value of a knob, as knobs.toml writes it (TOML floats are not knob values). All values of
/// one knob have the same variant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KnobValue {
    /// A TOML boolean; a template sees `true`/`false`.
    Bool(bool),
    /// A TOML integer.
    Int(i64),
    /// A TOML string; [`Display`](fmt::Display) quotes it.
    Str(String),
}

impl KnobValue {
    fn kind(&self) -> &'static str {
        match self {
            KnobValue::Bool(_) => "boolean",
            KnobValue::Int(_) => "integer",
            KnobValue::Str(_) => "string",
        }
    }
}

impl fmt::Display for KnobValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobValue::Bool(b) => write!(f, "{b}"),
            KnobValue::Int(i) => write!(f, "{i}"),
            KnobValue::Str(s) => write!(f, "{s:?}"),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct KnobFile {
    #[serde(default)]
    knob: Vec<KnobEntry>,
    #[serde(default)]
    constraint: Vec<Constraint>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct KnobEntry {
    name: String,
    #[serde(default)]
    values: Option<Vec<KnobValue>>,
    #[serde(default)]
    range: Option<Range>,
    default: KnobValue,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    help: String,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Range {
    min: i64,
    max: i64,
    step: i64,
}

/// One `[[knob]]` of knobs.toml, validated, with a `range` expanded to its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knob {
    /// The template variable it sets; an identifier, unique in its file.
    pub name: String,
    /// The allowed values in order; neighbours are adjacent values.
    pub values: Vec<KnobValue>,
    /// The naive choice, one of `values`; the seed configuration uses every knob's default.
    pub default: KnobValue,
    /// Pattern ids of the knowledge base whose priors seed ratings of this knob.
    pub tags: Vec<String>,
    /// What the knob controls, for people and prompts; may be empty.
    pub help: String,
}

/// One `[[constraint]]` of knobs.toml: a condition every assignment must meet before it is
/// rendered or evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constraint {
    /// A boolean expression over knob names and `hw.<figure>`.
    pub expr: String,
    /// Why it must hold, for people; [`ConstraintError::Violated`] shows it.
    pub reason: String,
}

/// A knob assignment, in the knob file's order.
pub type Assignment = IndexMap<String, KnobValue>;

/// A parsed knobs.toml: the knobs and the constraints over them. The search space is the
/// product of the knobs' values ([`KnobSpace::size`]), less the assignments a constraint rules
/// out on the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnobSpace {
    /// The knobs in file order; at least one.
    pub knobs: Vec<Knob>,
    /// The constraints in file order; each was checked at parse time to name only knobs and
    /// `hw.` figures and to be a boolean.
    pub constraints: Vec<Constraint>,
    /// The knob file as messages name it (the path `parse` was given).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file: String,
}

/// A task's kernel template with its knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelTemplate {
    /// The file the rendered kernel is named (the template's name without `.j2`).
    pub file: String,
    /// The minijinja source, knobs as variables (docs/templates.md).
    pub source: String,
    /// The knobs the template's variables range over.
    pub space: KnobSpace,
}

/// Largest number of values one knob may have (a range expands to its values).
const MAX_VALUES: usize = 4096;

/// Why an assignment is not valid on some hardware: the first constraint it breaks, or one
/// that cannot be evaluated there.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConstraintError {
    /// The assignment breaks a constraint.
    #[error("{reason} (constraint[{index}]: `{expr}`)")]
    Violated {
        /// The constraint's 0-based position in the knob file.
        index: usize,
        /// The constraint's expression.
        expr: String,
        /// The constraint's reason.
        reason: String,
    },
    /// A constraint could not be evaluated for the assignment (a figure the hardware lacks, a
    /// result that is not a boolean, an evaluation error).
    #[error("constraint[{index}] (`{expr}`) cannot be evaluated: {message}")]
    Unevaluable {
        /// The constraint's 0-based position in the knob file.
        index: usize,
        /// The constraint's expression.
        expr: String,
        /// What went wrong.
        message: String,
    },
}

/// A template that failed to render one assignment: where in the template, for which
/// assignment, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: does not render for {assignment}: {reason}", at(.template, *.line))]
pub struct RenderError {
    /// The template as messages name it (its path in the task folder).
    pub template: String,
    /// The template's line, when minijinja knows it.
    pub line: Option<usize>,
    /// `knob=value ...`.
    pub assignment: String,
    /// minijinja's message.
    pub reason: String,
}

fn at(template: &str, line: Option<usize>) -> String {
    match line {
        Some(l) => format!("{template}:{l}"),
        None => template.to_string(),
    }
}

/// The static type of a constraint's subexpression; `Any` where it cannot be known before
/// evaluation (a function's result).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ty {
    Bool,
    Num,
    Str,
    Any,
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ty::Bool => "boolean",
            Ty::Num => "number",
            Ty::Str => "string",
            Ty::Any => "value",
        })
    }
}

impl KnobSpace {
    /// Parses and validates a knobs.toml; `file` names it in messages. Checks names, values,
    /// defaults and every constraint's identifiers and type; not the tags (the knowledge base
    /// does) nor the `hw.` figures, which depend on the target ([`KnobSpace::check_figures`]).
    pub fn parse(file: &str, text: &str) -> Result<KnobSpace, SpecError> {
        let raw: KnobFile = parse_toml(file, text)?;
        let mut p = Problems::new(file);
        let mut knobs = Vec::new();
        for (i, k) in raw.knob.iter().enumerate() {
            let at = format!("knob[{i}] ({})", k.name);
            if !crate::definition::is_c_identifier(&k.name) {
                p.push(&at, "the name must be an identifier (letters, digits, '_')");
            }
            if raw.knob[..i].iter().any(|o| o.name == k.name) {
                p.push(&at, "this name is declared twice");
            }
            let values = match (&k.values, k.range) {
                (Some(v), None) => v.clone(),
                (None, Some(r)) => {
                    if r.step <= 0 || r.min > r.max {
                        p.push(
                            format!("{at}.range"),
                            format!("needs step > 0 and min <= max, got {r:?}"),
                        );
                        continue;
                    }
                    let n = ((r.max - r.min) / r.step + 1) as usize;
                    if n > MAX_VALUES {
                        p.push(format!("{at}.range"), format!("has {n} values; at most {MAX_VALUES}"));
                        continue;
                    }
                    (0..n as i64).map(|j| KnobValue::Int(r.min + j * r.step)).collect()
                }
                _ => {
                    p.push(&at, "give exactly one of `values` and `range`");
                    continue;
                }
            };
            if values.is_empty() {
                p.push(format!("{at}.values"), "is empty");
                continue;
            }
            if let Some(odd) = values.iter().find(|v| v.kind() != values[0].kind()) {
                p.push(
                    format!("{at}.values"),
                    format!("mixes {} and {} values ({odd})", values[0].kind(), odd.kind()),
                );
            }
            if values.iter().enumerate().any(|(j, v)| values[..j].contains(v)) {
                p.push(format!("{at}.values"), "lists a value twice");
            }
            if !values.contains(&k.default) {
                p.push(
                    format!("{at}.default"),
                    format!("{} is not one of the values", k.default),
                );
            }
            knobs.push(Knob {
                name: k.name.clone(),
                values,
                default: k.default.clone(),
                tags: k.tags.clone(),
                help: k.help.clone(),
            });
        }
        if raw.knob.is_empty() {
            p.push("knob", "declares no knob");
        }
        let space = KnobSpace {
            knobs,
            constraints: raw.constraint,
            file: file.to_string(),
        };
        // Every identifier and the type of every constraint are checked here, not when an
        // assignment first reaches them: a misspelt knob in a branch the defaults never
        // evaluate (`acc == 1 || rowblock > 0`) would otherwise surface mid-search, or never.
        for (i, c) in space.constraints.iter().enumerate() {
            let at = constraint_at(i, c);
            let tree = match evalexpr::build_operator_tree(&hw_names(&c.expr)) {
                Ok(tree) => tree,
                Err(e) => {
                    p.push(at, format!("does not parse: {e}"));
                    continue;
                }
            };
            let mut unknown: Vec<&str> = tree
                .iter_variable_identifiers()
                .filter(|id| space.knob(id).is_none() && !id.starts_with("hw_"))
                .collect();
            unknown.sort_unstable();
            unknown.dedup();
            for id in &unknown {
                p.push(
                    &at,
                    format!("unknown knob '{id}' (knobs: {})", space.knob_names().join(", ")),
                );
            }
            if !unknown.is_empty() {
                continue;
            }
            match space.infer(&tree) {
                Ok(Ty::Bool | Ty::Any) => {}
                Ok(ty) => p.push(
                    at,
                    format!("is a {ty}, not a boolean: write a comparison such as `x <= 8`"),
                ),
                Err(e) => p.push(at, e),
            }
        }
        p.into_result()?;
        Ok(space)
    }

    /// Every knob at its default, in file order: the seed configuration.
    pub fn default_assignment(&self) -> Assignment {
        self.knobs.iter().map(|k| (k.name.clone(), k.default.clone())).collect()
    }

    /// The knob named `name`, if declared.
    pub fn knob(&self, name: &str) -> Option<&Knob> {
        self.knobs.iter().find(|k| k.name == name)
    }

    fn knob_names(&self) -> Vec<&str> {
        self.knobs.iter().map(|k| k.name.as_str()).collect()
    }

    /// The knob file's name for messages (`knobs.toml` when the space was not parsed from one).
    pub fn file_name(&self) -> &str {
        if self.file.is_empty() {
            "knobs.toml"
        } else {
            &self.file
        }
    }

    /// The number of assignments, valid or not.
    pub fn size(&self) -> u128 {
        self.knobs.iter().map(|k| k.values.len() as u128).product()
    }

    /// The static type of a parsed constraint (identifiers already known to exist), or why it
    /// cannot be evaluated as written.
    fn infer(&self, node: &evalexpr::Node) -> Result<Ty, String> {
        use evalexpr::Operator as O;
        let kids = node.children();
        let kid = |i: usize| -> Result<Ty, String> {
            kids.get(i)
                .ok_or_else(|| format!("`{}` lacks an operand", node.operator()))
                .and_then(|k| self.infer(k))
        };
        let numeric = |op: &str, a: Ty, b: Ty| -> Result<Ty, String> {
            match (a, b) {
                (Ty::Num | Ty::Any, Ty::Num | Ty::Any) => Ok(Ty::Num),
                _ => Err(format!("`{op}` needs numbers, not a {a} and a {b}")),
            }
        };
        match node.operator() {
            O::RootNode => match kids.len() {
                0 => Err("is empty".into()),
                1 => kid(0),
                _ => Err("is several expressions; a constraint is one".into()),
            },
            O::Const { value } => Ok(match value {
                evalexpr::Value::Boolean(_) => Ty::Bool,
                evalexpr::Value::Int(_) | evalexpr::Value::Float(_) => Ty::Num,
                evalexpr::Value::String(_) => Ty::Str,
                _ => Ty::Any,
            }),
            O::VariableIdentifierRead { identifier } => Ok(match self.knob(identifier) {
                Some(k) => match k.values.first() {
                    Some(KnobValue::Bool(_)) => Ty::Bool,
                    Some(KnobValue::Int(_)) => Ty::Num,
                    Some(KnobValue::Str(_)) => Ty::Str,
                    None => Ty::Any,
                },
                // `hw.<figure>`: every figure is a number.
                None => Ty::Num,
            }),
            O::Add => match (kid(0)?, kid(1)?) {
                (Ty::Str, Ty::Str) => Ok(Ty::Str),
                (a, b) => numeric("+", a, b),
            },
            op @ (O::Sub | O::Mul | O::Div | O::Mod | O::Exp) => numeric(&op.to_string(), kid(0)?, kid(1)?),
            O::Neg => numeric("-", kid(0)?, Ty::Num),
            op @ (O::Eq | O::Neq) => match (kid(0)?, kid(1)?) {
                (a, b) if a != b && a != Ty::Any && b != Ty::Any => Err(format!(
                    "`{op}` compares a {a} with a {b}, which is never equal (quote strings: \"ijk\")"
                )),
                _ => Ok(Ty::Bool),
            },
            op @ (O::Gt | O::Lt | O::Geq | O::Leq) => match (kid(0)?, kid(1)?) {
                (Ty::Str, Ty::Str) => Ok(Ty::Bool),
                (a, b) => numeric(&op.to_string(), a, b).map(|_| Ty::Bool),
            },
            op @ (O::And | O::Or) => match (kid(0)?, kid(1)?) {
                (Ty::Bool | Ty::Any, Ty::Bool | Ty::Any) => Ok(Ty::Bool),
                (a, b) => Err(format!("`{op}` needs booleans, not a {a} and a {b}")),
            },
            O::Not => match kid(0)? {
                Ty::Bool | Ty::Any => Ok(Ty::Bool),
                a => Err(format!("`!` needs a boolean, not a {a}")),
            },
            // Built-in functions (`min`, `max`, ...) and their argument lists: the operands are
            // checked, the result is known only when evaluated.
            O::FunctionIdentifier { .. } | O::Tuple => {
                for k in kids {
                    self.infer(k)?;
                }
                Ok(Ty::Any)
            }
            _ => Err("assigns or chains (`=`, `;`); a constraint is one expression".into()),
        }
    }

    /// Checks that every `hw.<figure>` the constraints use is a figure of this hardware, so an
    /// assignment is never judged by a constraint that cannot be evaluated there. Errors name
    /// the knob file, the constraint and the figures there are.
    pub fn check_figures(&self, hw: &IndexMap<String, f64>) -> Result<(), SpecError> {
        let mut p = Problems::new(self.file_name());
        for (i, c) in self.constraints.iter().enumerate() {
            let Ok(tree) = evalexpr::build_operator_tree(&hw_names(&c.expr)) else {
                continue;
            };
            let mut missing: Vec<&str> = tree
                .iter_variable_identifiers()
                .filter(|id| self.knob(id).is_none())
                .filter_map(|id| id.strip_prefix("hw_"))
                .filter(|figure| !hw.contains_key(*figure))
                .collect();
            missing.sort_unstable();
            missing.dedup();
            for figure in missing {
                p.push(
                    constraint_at(i, c),
                    format!(
                        "'hw.{figure}' is not a hardware figure of this target (figures: {})",
                        figure_list(hw)
                    ),
                );
            }
        }
        p.into_result()
    }

    /// `Ok` when every constraint holds for `a` on hardware `hw`; `Err` names the first that
    /// fails (with its reason) or cannot be evaluated (a missing figure, a non-boolean result).
    pub fn check(&self, a: &Assignment, hw: &IndexMap<String, f64>) -> Result<(), ConstraintError> {
        let mut ctx = evalexpr::HashMapContext::new();
        let set = |ctx: &mut evalexpr::HashMapContext, name: String, v: evalexpr::Value| {
            evalexpr::ContextWithMutableVariables::set_value(ctx, name, v)
        };
        let mut failed_to_set = None;
        for (name, value) in hw {
            // Whole figures as integers, so `==` and `%` behave as written (evalexpr compares
            // an integer and a float as different values).
            let v = if value.fract() == 0.0 && value.abs() < 1e15 {
                evalexpr::Value::Int(*value as i64)
            } else {
                evalexpr::Value::Float(*value)
            };
            if let Err(e) = set(&mut ctx, format!("hw_{name}"), v) {
                failed_to_set.get_or_insert(e.to_string());
            }
        }
        // Knobs after figures: a knob's name wins over a figure's (`parse` resolves names so).
        for (name, value) in a {
            let v = match value {
                KnobValue::Bool(b) => evalexpr::Value::Boolean(*b),
                KnobValue::Int(i) => evalexpr::Value::Int(*i),
                KnobValue::Str(s) => evalexpr::Value::String(s.clone()),
            };
            if let Err(e) = set(&mut ctx, name.clone(), v) {
                failed_to_set.get_or_insert(e.to_string());
            }
        }
        for (index, c) in self.constraints.iter().enumerate() {
            let unevaluable = |message: String| ConstraintError::Unevaluable {
                index,
                expr: c.expr.clone(),
                message,
            };
            if let Some(message) = &failed_to_set {
                return Err(unevaluable(message.clone()));
            }
            match evalexpr::eval_with_context(&hw_names(&c.expr), &ctx) {
                Ok(evalexpr::Value::Boolean(true)) => {}
                Ok(evalexpr::Value::Boolean(false)) => {
                    return Err(ConstraintError::Violated {
                        index,
                        expr: c.expr.clone(),
                        reason: c.reason.clone(),
                    })
                }
                Ok(other) => return Err(unevaluable(format!("it evaluates to {other}, not a boolean"))),
                Err(e) => return Err(unevaluable(e.to_string())),
            }
        }
        Ok(())
    }

    /// Assignments that differ from `a` in knob `name` only, by one step either way.
    pub fn neighbours(&self, a: &Assignment, name: &str) -> Vec<Assignment> {
        let Some(knob) = self.knob(name) else { return Vec::new() };
        let Some(pos) = a.get(name).and_then(|v| knob.values.iter().position(|x| x == v)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for j in [pos.checked_sub(1), Some(pos + 1)].into_iter().flatten() {
            if let Some(v) = knob.values.get(j) {
                let mut b = a.clone();
                b.insert(name.to_string(), v.clone());
                out.push(b);
            }
        }
        out
    }

    /// Every valid assignment on `hw`, in lexicographic order of value positions, up to `limit`.
    pub fn enumerate_valid(&self, hw: &IndexMap<String, f64>, limit: usize) -> Vec<Assignment> {
        let mut out = Vec::new();
        let mut idx = vec![0usize; self.knobs.len()];
        loop {
            let a: Assignment = self
                .knobs
                .iter()
                .zip(&idx)
                .map(|(k, &i)| (k.name.clone(), k.values[i].clone()))
                .collect();
            if self.check(&a, hw).is_ok() {
                out.push(a);
                if out.len() >= limit {
                    return out;
                }
            }
            // Odometer increment, last knob fastest.
            let mut d = self.knobs.len();
            loop {
                if d == 0 {
                    return out;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < self.knobs[d].values.len() {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

/// How messages name constraint `i`: its index and its expression as written.
fn constraint_at(i: usize, c: &Constraint) -> String {
    format!("constraint[{i}] (`{}`)", c.expr)
}

fn figure_list(hw: &IndexMap<String, f64>) -> String {
    if hw.is_empty() {
        "none".to_string()
    } else {
        hw.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
    }
}

/// evalexpr identifiers cannot contain '.', so `hw.l1_kb` is evaluated as `hw_l1_kb`.
fn hw_names(expr: &str) -> String {
    expr.replace("hw.", "hw_")
}

/// `knob=value ...`, as messages name an assignment.
pub fn describe_assignment(a: &Assignment) -> String {
    a.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

impl KernelTemplate {
    /// The variables the template reads that it does not set itself (`nested`: with their
    /// attributes, as `hw.l1_kb`); an error naming `file` when it does not parse.
    fn undeclared_variables(&self, file: &str, nested: bool) -> Result<std::collections::HashSet<String>, SpecError> {
        let mut env = minijinja::Environment::new();
        env.add_template("kernel", &self.source)
            .map_err(|e| SpecError::one(file, "", format!("does not parse: {e}")))?;
        let template = env
            .get_template("kernel")
            .map_err(|e| SpecError::one(file, "", e.to_string()))?;
        Ok(template.undeclared_variables(nested))
    }

    /// Checks that the template parses and uses no variable other than the knobs and `hw`.
    pub fn validate(&self, file: &str) -> Result<(), SpecError> {
        let mut p = Problems::new(file);
        let mut undeclared: Vec<String> = self.undeclared_variables(file, false)?.into_iter().collect();
        undeclared.sort();
        for name in undeclared {
            if name != "hw" && self.space.knob(&name).is_none() && !is_jinja_global(&name) {
                p.push("", format!("uses `{name}`, which is not a declared knob"));
            }
        }
        p.into_result()
    }

    /// Checks that every `hw.<figure>` the template reads is a figure of this hardware: with
    /// strict rendering a missing one fails every render that reaches it, and before strict
    /// rendering it printed nothing. `file` names the template in the message.
    pub fn check_figures(&self, file: &str, hw: &IndexMap<String, f64>) -> Result<(), SpecError> {
        let mut used: Vec<String> = self
            .undeclared_variables(file, true)?
            .into_iter()
            .filter_map(|v| {
                v.strip_prefix("hw.")
                    .map(|f| f.split('.').next().unwrap_or(f).to_string())
            })
            .collect();
        used.sort();
        used.dedup();
        let mut p = Problems::new(file);
        for figure in used.iter().filter(|f| !hw.contains_key(*f)) {
            p.push(
                "",
                format!(
                    "uses `hw.{figure}`, which is not a hardware figure of this target (figures: {})",
                    figure_list(hw)
                ),
            );
        }
        p.into_result()
    }

    /// A renderer of this template; `path` names it in error messages (its path in the task
    /// folder, so a message points at the file to fix).
    pub fn renderer(&self, path: &str) -> Result<TemplateRenderer, SpecError> {
        let mut env = minijinja::Environment::new();
        env.set_keep_trailing_newline(true);
        // An undefined variable or attribute is an error, not an empty string: `{{ hw.nosuch }}`
        // would otherwise render a kernel with a hole in it.
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        let python = self.file.ends_with(".py");
        // Booleans printed with `{{ }}` in the kernel's own spelling: C, C++, CUDA and Metal take
        // 1 and 0 (C has no `true` without <stdbool.h>), Python takes True and False.
        env.set_formatter(move |out, state, value| {
            if value.kind() == minijinja::value::ValueKind::Bool {
                let text = match (value.is_true(), python) {
                    (true, true) => "True",
                    (false, true) => "False",
                    (true, false) => "1",
                    (false, false) => "0",
                };
                return out.write_str(text).map_err(minijinja::Error::from);
            }
            minijinja::escape_formatter(out, state, value)
        });
        env.add_template_owned(path.to_string(), self.source.clone())
            .map_err(|e| SpecError::one(path, "", format!("does not parse: {e}")))?;
        Ok(TemplateRenderer {
            name: path.to_string(),
            env,
        })
    }
}

/// A parsed template, ready to render assignments (`KernelTemplate::renderer`).
#[derive(Debug, Clone)]
pub struct TemplateRenderer {
    name: String,
    env: minijinja::Environment<'static>,
}

impl TemplateRenderer {
    /// The template's name in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel for `a` on hardware `hw`, every knob a variable and `hw` the figures.
    pub fn render(&self, a: &Assignment, hw: &IndexMap<String, f64>) -> Result<String, RenderError> {
        let error = |line: Option<usize>, reason: String| RenderError {
            template: self.name.clone(),
            line,
            assignment: describe_assignment(a),
            reason,
        };
        let mut ctx: serde_json::Map<String, serde_json::Value> = serde_json::Map::new();
        for (k, v) in a {
            let value = serde_json::to_value(v).map_err(|e| error(None, e.to_string()))?;
            ctx.insert(k.clone(), value);
        }
        let figures = serde_json::to_value(hw).map_err(|e| error(None, e.to_string()))?;
        ctx.insert("hw".into(), figures);
        let template = self
            .env
            .get_template(&self.name)
            .map_err(|e| error(e.line(), e.to_string()))?;
        template.render(serde_json::Value::Object(ctx)).map_err(|e| {
            let reason = match e.detail() {
                Some(detail) => format!("{}: {detail}", e.kind()),
                None => e.kind().to_string(),
            };
            error(e.line(), reason)
        })
    }
}

fn is_jinja_global(name: &str) -> bool {
    matches!(
        name,
        "range" | "loop" | "true" | "false" | "none" | "namespace" | "dict" | "debug"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOBS: &str = r#"
[[knob]]
name = "unroll"
values = [1, 2, 4, 8]
default = 1
tags = ["unroll"]

[[knob]]
name = "block"
range = { min = 16, max = 64, step = 16 }
default = 16

[[knob]]
name = "fast_exp"
values = [false, true]
default = false

[[constraint]]
expr = "block * unroll <= hw.l1_kb * 4"
reason = "the tile must fit"

[[constraint]]
expr = "unroll == 1 || block % 32 == 0"
reason = "unrolled loops need whole 32-column blocks"
"#;

    fn hw(l1: f64) -> IndexMap<String, f64> {
        [("l1_kb".to_string(), l1)].into_iter().collect()
    }

    #[test]
    fn parses_ranges_defaults_and_constraints() {
        let s = KnobSpace::parse("knobs.toml", KNOBS).unwrap();
        assert_eq!(s.knob("block").unwrap().values.len(), 4);
        assert_eq!(s.size(), 4 * 4 * 2);
        let d = s.default_assignment();
        assert_eq!(d["unroll"], KnobValue::Int(1));
        assert!(s.check(&d, &hw(32.0)).is_ok());
        let mut big = d.clone();
        big.insert("unroll".into(), KnobValue::Int(8));
        big.insert("block".into(), KnobValue::Int(64));
        assert!(s
            .check(&big, &hw(32.0))
            .unwrap_err()
            .to_string()
            .contains("the tile must fit"));
        // unroll == 1 (8 assignments) or block in {32, 64} (3 x 2 x 2 = 12): integer == and %.
        assert_eq!(s.enumerate_valid(&hw(1e9), 1000).len(), 20);
        assert!(s.enumerate_valid(&hw(32.0), 1000).len() < 32);
        let n = s.neighbours(&d, "unroll");
        assert_eq!(n.len(), 1);
        assert_eq!(n[0]["unroll"], KnobValue::Int(2));
        assert!(s
            .check(&d, &IndexMap::new())
            .unwrap_err()
            .to_string()
            .contains("cannot be evaluated"));
    }

    fn constraint_problems(expr: &str) -> Vec<String> {
        let text = format!("{KNOBS}\n[[constraint]]\nexpr = '{expr}'\nreason = \"r\"\n");
        match KnobSpace::parse("t/knobs.toml", &text) {
            Ok(_) => vec![],
            Err(e) => e.problems().iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn every_identifier_of_every_constraint_is_checked_at_load() {
        // The misspelt knob sits in a branch the defaults (unroll = 1) never evaluate.
        assert_eq!(
            constraint_problems("unroll == 1 || blok > 0"),
            ["t/knobs.toml: constraint[2] (`unroll == 1 || blok > 0`): unknown knob 'blok' (knobs: unroll, block, fast_exp)"]
        );
        assert!(constraint_problems("unroll == 1 || hw.l1_kb > 0").is_empty());
        assert!(constraint_problems("min(block, 32) <= hw.l1_kb").is_empty());
        assert!(constraint_problems("!fast_exp || unroll >= 2").is_empty());
    }

    #[test]
    fn a_constraint_that_is_not_a_boolean_is_rejected_at_load() {
        let cases = [
            ("block * unroll", "is a number, not a boolean"),
            ("unroll && fast_exp", "`&&` needs booleans, not a number and a boolean"),
            ("fast_exp == 1", "`==` compares a boolean with a number"),
            ("block = 3", "assigns or chains"),
            ("!block", "`!` needs a boolean, not a number"),
        ];
        for (expr, want) in cases {
            let got = constraint_problems(expr);
            assert_eq!(got.len(), 1, "{expr}: {got:?}");
            assert!(
                got[0].starts_with(&format!("t/knobs.toml: constraint[2] (`{expr}`): ")) && got[0].contains(want),
                "{expr}: {got:?}"
            );
        }
    }

    #[test]
    fn figures_the_target_lacks_are_named_with_the_file_and_the_constraint() {
        let text = format!("{KNOBS}\n[[constraint]]\nexpr = \"unroll == 1 || block <= hw.l2_kb\"\nreason = \"r\"\n");
        let s = KnobSpace::parse("t/knobs.toml", &text).unwrap();
        assert_eq!(
            s.check_figures(&hw(32.0)).unwrap_err().to_string(),
            "t/knobs.toml: constraint[2] (`unroll == 1 || block <= hw.l2_kb`): 'hw.l2_kb' is not a hardware figure \
             of this target (figures: l1_kb)"
        );
        let mut more = hw(32.0);
        more.insert("l2_kb".into(), 1024.0);
        s.check_figures(&more).unwrap();
    }

    #[test]
    fn rendering_is_strict_and_prints_booleans_in_the_kernels_language() {
        let space = KnobSpace::parse("knobs.toml", KNOBS).unwrap();
        let template = |file: &str, source: &str| KernelTemplate {
            file: file.into(),
            source: source.into(),
            space: space.clone(),
        };
        let mut a = space.default_assignment();
        a.insert("fast_exp".into(), KnobValue::Bool(true));
        let c = template(
            "k.c",
            "#define FAST {{ fast_exp }}\n{{ fast_exp | int }} {{ 'true' if fast_exp else 'false' }}\n",
        );
        assert_eq!(
            c.renderer("t/k.c.j2").unwrap().render(&a, &hw(32.0)).unwrap(),
            "#define FAST 1\n1 true\n"
        );
        let py = template("k.py", "FAST = {{ fast_exp }}\nSLOW = {{ not fast_exp }}\n");
        assert_eq!(
            py.renderer("t/k.py.j2").unwrap().render(&a, &hw(32.0)).unwrap(),
            "FAST = True\nSLOW = False\n"
        );
        // An attribute the figures lack is an error naming the template, its line and the
        // assignment, not an empty string.
        let bad = template("k.c", "int x;\nint y = {{ hw.nosuch }};\n");
        let e = bad.renderer("t/k.c.j2").unwrap().render(&a, &hw(32.0)).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(
            e.to_string()
                .starts_with("t/k.c.j2:2: does not render for unroll=1 block=16 fast_exp=true: undefined value"),
            "{e}"
        );
        // The same figure is caught before any rendering.
        assert_eq!(
            bad.check_figures("t/k.c.j2", &hw(32.0)).unwrap_err().to_string(),
            "t/k.c.j2: uses `hw.nosuch`, which is not a hardware figure of this target (figures: l1_kb)"
        );
        let ok = template("k.c", "{{ hw.l1_kb | int }}{% if hw.l1_kb > 2 %}x{% endif %}");
        ok.check_figures("t/k.c.j2", &hw(32.0)).unwrap();
        assert_eq!(ok.renderer("k").unwrap().render(&a, &hw(32.0)).unwrap(), "32x");
    }

    #[test]
    fn invalid_knob_files_name_the_knob_and_the_reason() {
        let text = "[[knob]]\nname = \"u\"\nvalues = [1, true]\ndefault = 3\n[[knob]]\nname = \"b\"\nrange = { min = 8, max = 4, step = 1 }\ndefault = 4\n";
        let e = KnobSpace::parse("knobs.toml", text).unwrap_err();
        let msgs: Vec<String> = e.problems().iter().map(|p| p.to_string()).collect();
        assert_eq!(
            msgs,
            [
                "knobs.toml: knob[0] (u).values: mixes integer and boolean values (true)",
                "knobs.toml: knob[0] (u).default: 3 is not one of the values",
                "knobs.toml: knob[1] (b).range: needs step > 0 and min <= max, got Range { min: 8, max: 4, step: 1 }",
            ]
        );
    }

    #[test]
    fn templates_may_use_only_their_knobs() {
        let space = KnobSpace::parse("knobs.toml", KNOBS).unwrap();
        let ok = KernelTemplate {
            file: "k.c".into(),
            source: "{% for i in range(unroll) %}x{% endfor %}{{ block }}{{ hw.l1_kb }}".into(),
            space: space.clone(),
        };
        ok.validate("k.c.j2").unwrap();
        let bad = KernelTemplate {
            file: "k.c".into(),
            source: "{{ blocks }}".into(),
            space,
        };
        assert_eq!(
            bad.validate("k.c.j2").unwrap_err().to_string(),
            "k.c.j2: uses `blocks`, which is not a declared knob"
        );
    }
}
