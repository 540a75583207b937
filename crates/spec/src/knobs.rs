//! Kernel templates and their knobs (docs/templates.md): what the knob tuner searches over.

use crate::error::{parse_toml, Problems, SpecError};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One value of a knob.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KnobValue {
    Bool(bool),
    Int(i64),
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knob {
    pub name: String,
    /// The allowed values in order; neighbours are adjacent values.
    pub values: Vec<KnobValue>,
    pub default: KnobValue,
    /// Pattern ids of the knowledge base whose priors seed ratings of this knob.
    pub tags: Vec<String>,
    pub help: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constraint {
    /// A boolean expression over knob names and `hw.<figure>`.
    pub expr: String,
    pub reason: String,
}

/// A knob assignment, in the knob file's order.
pub type Assignment = IndexMap<String, KnobValue>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnobSpace {
    pub knobs: Vec<Knob>,
    pub constraints: Vec<Constraint>,
}

/// A task's kernel template with its knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelTemplate {
    /// The file the rendered kernel is named (the template's name without `.j2`).
    pub file: String,
    pub source: String,
    pub space: KnobSpace,
}

/// Largest number of values one knob may have (a range expands to its values).
const MAX_VALUES: usize = 4096;

impl KnobSpace {
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
        };
        for (i, c) in space.constraints.iter().enumerate() {
            if let Err(e) = evalexpr::build_operator_tree(&hw_names(&c.expr)) {
                p.push(format!("constraint[{i}].expr"), format!("does not parse: {e}"));
            }
        }
        p.into_result()?;
        Ok(space)
    }

    pub fn default_assignment(&self) -> Assignment {
        self.knobs.iter().map(|k| (k.name.clone(), k.default.clone())).collect()
    }

    pub fn knob(&self, name: &str) -> Option<&Knob> {
        self.knobs.iter().find(|k| k.name == name)
    }

    /// The number of assignments, valid or not.
    pub fn size(&self) -> u128 {
        self.knobs.iter().map(|k| k.values.len() as u128).product()
    }

    /// `Ok` when every constraint holds for `a` on hardware `hw`; `Err` names the first that
    /// fails (with its reason) or cannot be evaluated.
    pub fn check(&self, a: &Assignment, hw: &IndexMap<String, f64>) -> Result<(), String> {
        let mut ctx = evalexpr::HashMapContext::new();
        let set = |ctx: &mut evalexpr::HashMapContext, name: String, v: evalexpr::Value| {
            evalexpr::ContextWithMutableVariables::set_value(ctx, name, v).map_err(|e| e.to_string())
        };
        for (name, value) in a {
            let v = match value {
                KnobValue::Bool(b) => evalexpr::Value::Boolean(*b),
                KnobValue::Int(i) => evalexpr::Value::Int(*i),
                KnobValue::Str(s) => evalexpr::Value::String(s.clone()),
            };
            set(&mut ctx, name.clone(), v)?;
        }
        for (name, value) in hw {
            // Whole figures as integers, so `==` and `%` behave as written (evalexpr compares
            // an integer and a float as different values).
            let v = if value.fract() == 0.0 && value.abs() < 1e15 {
                evalexpr::Value::Int(*value as i64)
            } else {
                evalexpr::Value::Float(*value)
            };
            set(&mut ctx, format!("hw_{name}"), v)?;
        }
        for c in &self.constraints {
            match evalexpr::eval_boolean_with_context(&hw_names(&c.expr), &ctx) {
                Ok(true) => {}
                Ok(false) => return Err(format!("{} ({})", c.reason, c.expr)),
                Err(e) => return Err(format!("constraint `{}` cannot be evaluated: {e}", c.expr)),
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

/// evalexpr identifiers cannot contain '.', so `hw.l1_kb` is evaluated as `hw_l1_kb`.
fn hw_names(expr: &str) -> String {
    expr.replace("hw.", "hw_")
}

impl KernelTemplate {
    /// Checks that the template parses and uses no variable other than the knobs and `hw`.
    pub fn validate(&self, file: &str) -> Result<(), SpecError> {
        let mut env = minijinja::Environment::new();
        env.add_template("kernel", &self.source)
            .map_err(|e| SpecError::one(file, "", format!("does not parse: {e}")))?;
        let template = env
            .get_template("kernel")
            .map_err(|e| SpecError::one(file, "", e.to_string()))?;
        let mut p = Problems::new(file);
        let mut undeclared: Vec<String> = template.undeclared_variables(false).into_iter().collect();
        undeclared.sort();
        for name in undeclared {
            if name != "hw" && self.space.knob(&name).is_none() && !is_jinja_global(&name) {
                p.push("", format!("uses `{name}`, which is not a declared knob"));
            }
        }
        p.into_result()
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
        assert!(s.check(&big, &hw(32.0)).unwrap_err().contains("the tile must fit"));
        // unroll == 1 (8 assignments) or block in {32, 64} (3 x 2 x 2 = 12): integer == and %.
        assert_eq!(s.enumerate_valid(&hw(1e9), 1000).len(), 20);
        assert!(s.enumerate_valid(&hw(32.0), 1000).len() < 32);
        let n = s.neighbours(&d, "unroll");
        assert_eq!(n.len(), 1);
        assert_eq!(n[0]["unroll"], KnobValue::Int(2));
        assert!(s
            .check(&d, &IndexMap::new())
            .unwrap_err()
            .contains("cannot be evaluated"));
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
