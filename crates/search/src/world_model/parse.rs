//! Edit scripts from untrusted JSON (an LLM's answer), with an error for every malformed field
//! naming the op index, the op kind, the node and the field.

use serde_json::{Map, Value};

use super::edit::{
    new_node_problems, update_problems, ActionEdit, ActionPatch, EditError, EditErrors, EditOp, EditScript,
    ImpactPatch, ImpactsPatch, NewNode, NodeUpdate,
};
use super::node::{action_problems, fmt_num, Action, Impacts, NodeStatus, Risk};

const OP_KINDS: &str = "insert_node, update_node, split_node or delete_node";
const NODE_FIELDS: &[&str] = &[
    "node_id",
    "parent_id",
    "decision",
    "choice",
    "overall_rating",
    "confidence",
    "impacts",
    "notes",
    "action",
];
const SET_FIELDS: &[&str] = &[
    "decision",
    "choice",
    "overall_rating",
    "confidence",
    "impacts",
    "notes",
    "action",
    "status",
];
const ACTION_FIELDS: &[&str] = &[
    "title",
    "description",
    "rationale",
    "difficulty",
    "score",
    "expected_speedup",
];
const IMPACT_FIELDS: &[&str] = &["rating", "risk", "notes"];
const ENGINE_OWNED: &[&str] = &["solution_ref", "last_updated_round", "status_reason"];

impl EditScript {
    /// Parses a script from JSON text.
    pub fn from_json(text: &str) -> Result<EditScript, Vec<EditError>> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| vec![EditError::script("script", format!("not valid JSON: {e}"))])?;
        EditScript::from_value(&value)
    }

    /// Parses a script from JSON. A script of the wrong shape (unknown op or field, missing
    /// field, wrong type, engine-owned field) is rejected with every shape error plus every
    /// out-of-range value found; a well-shaped script is returned even if a value is out of
    /// range: [`super::WorldModel::apply`] checks ranges together with the rules that depend on
    /// the tree, so the planner gets all of them at once.
    pub fn from_value(value: &Value) -> Result<EditScript, Vec<EditError>> {
        let parsed = parse_all(value);
        match parsed.script {
            Some(s) if parsed.shape_errors == 0 => Ok(s),
            _ => Err(parsed.errors),
        }
    }
}

/// A script parsed as far as it goes: the ops that parsed (with their indices in the JSON's
/// `ops`), every error found, and how many of them are shape errors.
pub(crate) struct Parsed {
    /// `None` when the whole value is not a script (not an object).
    pub script: Option<EditScript>,
    /// `indices[k]`: the index in the JSON of `script.ops[k]`.
    pub indices: Vec<usize>,
    pub errors: Vec<EditError>,
    pub shape_errors: usize,
}

pub(crate) fn parse_all(value: &Value) -> Parsed {
    let mut errors = Vec::new();
    let mut shape_errors = 0;
    let mut indices = Vec::new();
    let script = parse_script(value, &mut errors, &mut shape_errors, &mut indices);
    Parsed {
        script,
        indices,
        errors,
        shape_errors,
    }
}

impl TryFrom<Value> for EditScript {
    type Error = EditErrors;

    fn try_from(value: Value) -> Result<Self, Self::Error> {
        EditScript::from_value(&value).map_err(EditErrors)
    }
}

/// Where parse errors go, and how they are located.
struct Sink<'e> {
    out: &'e mut Vec<EditError>,
    /// Errors of shape (as opposed to out-of-range values, which `apply` reports anyway).
    shape_errors: &'e mut usize,
    op_index: Option<usize>,
    op_kind: Option<&'static str>,
    node_id: Option<String>,
}

impl Sink<'_> {
    fn err(&mut self, field: &str, message: impl Into<String>) {
        *self.shape_errors += 1;
        self.push(field, message);
    }

    fn push(&mut self, field: &str, message: impl Into<String>) {
        self.out.push(EditError {
            op_index: self.op_index,
            op_kind: self.op_kind.map(str::to_string),
            node_id: self.node_id.clone(),
            field: (!field.is_empty()).then(|| field.to_string()),
            message: message.into(),
        });
    }

    /// Out-of-range values: reported with the shape errors, but not a reason to reject on their
    /// own (then `apply` reports them together with the rules that depend on the tree).
    fn problems(&mut self, prefix: &str, problems: Vec<(String, String)>) {
        for (field, message) in problems {
            self.push(&format!("{prefix}{field}"), message);
        }
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => {
            let short: String = s.chars().take(40).collect();
            if short.len() < s.len() {
                format!("the string \"{short}...\"")
            } else {
                format!("the string \"{short}\"")
            }
        }
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

fn string(v: &Value) -> Result<String, String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("expected a string, got {}", describe(v)))
}

fn number(v: &Value) -> Result<f64, String> {
    v.as_f64()
        .ok_or_else(|| format!("expected a number, got {}", describe(v)))
}

fn difficulty(v: &Value) -> Result<u8, String> {
    match v.as_f64() {
        Some(f) if f == f.trunc() && (0.0..=255.0).contains(&f) => Ok(f as u8),
        Some(f) => Err(format!("expected an integer 1-5, got {}", fmt_num(f))),
        None => Err(format!("expected an integer 1-5, got {}", describe(v))),
    }
}

fn risk(v: &Value) -> Result<Risk, String> {
    v.as_str()
        .and_then(Risk::parse)
        .ok_or_else(|| format!("expected one of low, medium, high, got {}", describe(v)))
}

fn status(v: &Value) -> Result<NodeStatus, String> {
    v.as_str()
        .and_then(NodeStatus::parse)
        .ok_or_else(|| format!("expected 'closed' or 'open', got {}", describe(v)))
}

fn string_list(v: &Value) -> Result<Vec<String>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("expected an array of strings, got {}", describe(v)))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| string(item).map_err(|e| format!("item {i}: {e}")))
        .collect()
}

fn object(v: &Value) -> Result<&Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("expected an object, got {}", describe(v)))
}

/// The value of `key`, converted; `None` when absent or null (an error when `required`) or
/// when the conversion fails (an error).
fn get<'v, T>(
    sink: &mut Sink<'_>,
    map: &'v Map<String, Value>,
    prefix: &str,
    key: &str,
    required: bool,
    convert: impl Fn(&'v Value) -> Result<T, String>,
) -> Option<T> {
    match map.get(key) {
        None | Some(Value::Null) => {
            if required {
                sink.err(&format!("{prefix}{key}"), "missing");
            }
            None
        }
        Some(v) => match convert(v) {
            Ok(t) => Some(t),
            Err(e) => {
                sink.err(&format!("{prefix}{key}"), e);
                None
            }
        },
    }
}

/// Reports every key that is neither allowed nor engine-owned (engine-owned ones get their own
/// message; `forbidden` adds op-specific messages).
fn check_keys(
    sink: &mut Sink<'_>,
    map: &Map<String, Value>,
    prefix: &str,
    allowed: &[&str],
    forbidden: &[(&str, &str)],
) {
    for key in map.keys() {
        if allowed.contains(&key.as_str()) {
            continue;
        }
        let field = format!("{prefix}{key}");
        if let Some((_, why)) = forbidden.iter().find(|(k, _)| k == key) {
            sink.err(&field, *why);
        } else if ENGINE_OWNED.contains(&key.as_str()) {
            sink.err(&field, "engine-owned; the planner cannot set it");
        } else {
            sink.err(
                &field,
                format!("unknown field (expected one of {})", allowed.join(", ")),
            );
        }
    }
}

fn parse_script(
    value: &Value,
    out: &mut Vec<EditError>,
    shape_errors: &mut usize,
    indices: &mut Vec<usize>,
) -> Option<EditScript> {
    let mut sink = Sink {
        out,
        shape_errors,
        op_index: None,
        op_kind: None,
        node_id: None,
    };
    let Some(map) = value.as_object() else {
        sink.err(
            "script",
            format!(
                "expected an object {{\"active_leaf_id\"?, \"ops\": [...]}}, got {}",
                describe(value)
            ),
        );
        return None;
    };
    check_keys(
        &mut sink,
        map,
        "",
        &["active_leaf_id", "kernel_summary", "open_questions", "ops"],
        &[],
    );
    let active_leaf_id = get(&mut sink, map, "", "active_leaf_id", false, string);
    let kernel_summary = get(&mut sink, map, "", "kernel_summary", false, string);
    let open_questions = get(&mut sink, map, "", "open_questions", false, string_list);
    let raw_ops = get(&mut sink, map, "", "ops", true, |v| {
        v.as_array()
            .ok_or_else(|| format!("expected an array of edit operations, got {}", describe(v)))
    });
    let mut ops = Vec::new();
    for (index, raw) in raw_ops.into_iter().flatten().enumerate() {
        if let Some(op) = parse_op(raw, index, sink.out, sink.shape_errors) {
            ops.push(op);
            indices.push(index);
        }
    }
    Some(EditScript {
        active_leaf_id,
        kernel_summary,
        open_questions,
        ops,
    })
}

fn parse_op(value: &Value, index: usize, out: &mut Vec<EditError>, shape_errors: &mut usize) -> Option<EditOp> {
    let mut sink = Sink {
        out,
        shape_errors,
        op_index: Some(index),
        op_kind: None,
        node_id: None,
    };
    let map = match object(value) {
        Ok(m) => m,
        Err(e) => {
            sink.err("", format!("{e} (an op is an object with an \"op\" field)"));
            return None;
        }
    };
    let kind: &'static str = match map.get("op") {
        None | Some(Value::Null) => {
            sink.err("op", format!("missing ({OP_KINDS})"));
            return None;
        }
        Some(v) => match v.as_str() {
            Some("insert_node") => "insert_node",
            Some("update_node") => "update_node",
            Some("split_node") => "split_node",
            Some("delete_node") => "delete_node",
            Some(other) => {
                sink.err("op", format!("unknown op '{other}' (expected {OP_KINDS})"));
                return None;
            }
            None => {
                sink.err("op", format!("expected a string ({OP_KINDS}), got {}", describe(v)));
                return None;
            }
        },
    };
    sink.op_kind = Some(kind);
    let id_source = if kind == "insert_node" {
        map.get("node").and_then(Value::as_object)
    } else {
        Some(map)
    };
    sink.node_id = id_source
        .and_then(|m| m.get("node_id"))
        .and_then(Value::as_str)
        .map(str::to_string);

    match kind {
        "insert_node" => {
            check_keys(&mut sink, map, "", &["op", "node"], &[]);
            let raw = get(&mut sink, map, "", "node", true, object)?;
            let node = parse_new_node(&mut sink, raw, "node.", true)?;
            Some(EditOp::InsertNode { node })
        }
        "update_node" => {
            check_keys(&mut sink, map, "", &["op", "node_id", "set"], &[]);
            let node_id = get(&mut sink, map, "", "node_id", true, string);
            let raw = get(&mut sink, map, "", "set", true, object);
            let set = raw.and_then(|raw| parse_update(&mut sink, raw));
            Some(EditOp::UpdateNode {
                node_id: node_id?,
                set: set?,
            })
        }
        "split_node" => {
            check_keys(&mut sink, map, "", &["op", "node_id", "children"], &[]);
            let node_id = get(&mut sink, map, "", "node_id", true, string);
            let raw = get(&mut sink, map, "", "children", true, |v| {
                v.as_array()
                    .ok_or_else(|| format!("expected an array of nodes, got {}", describe(v)))
            });
            let mut children = Vec::new();
            let mut complete = raw.is_some();
            for (k, child) in raw.into_iter().flatten().enumerate() {
                let prefix = format!("children[{k}].");
                let parsed = match object(child) {
                    Ok(m) => parse_new_node(&mut sink, m, &prefix, false),
                    Err(e) => {
                        sink.err(&format!("children[{k}]"), e);
                        None
                    }
                };
                match parsed {
                    Some(c) => children.push(c),
                    None => complete = false,
                }
            }
            if !complete {
                return None;
            }
            Some(EditOp::SplitNode {
                node_id: node_id?,
                children,
            })
        }
        _ => {
            check_keys(&mut sink, map, "", &["op", "node_id"], &[]);
            let node_id = get(&mut sink, map, "", "node_id", true, string)?;
            Some(EditOp::DeleteNode { node_id })
        }
    }
}

fn parse_new_node(
    sink: &mut Sink<'_>,
    map: &Map<String, Value>,
    prefix: &str,
    parent_required: bool,
) -> Option<NewNode> {
    check_keys(
        sink,
        map,
        prefix,
        NODE_FIELDS,
        &[("status", "engine-owned; new nodes start 'open'")],
    );
    let node_id = get(sink, map, prefix, "node_id", false, string);
    let parent_id = get(sink, map, prefix, "parent_id", parent_required, string);
    let decision = get(sink, map, prefix, "decision", true, string);
    let choice = get(sink, map, prefix, "choice", true, string);
    let overall_rating = get(sink, map, prefix, "overall_rating", true, number);
    let confidence = get(sink, map, prefix, "confidence", true, number);
    let impacts_prefix = format!("{prefix}impacts.");
    let impacts = match map.get("impacts") {
        None | Some(Value::Null) => Some(ImpactsPatch::default()),
        Some(v) => parse_impacts(sink, v, &impacts_prefix),
    };
    let notes = get(sink, map, prefix, "notes", false, string);
    let action_prefix = format!("{prefix}action.");
    let action = match map.get("action") {
        None | Some(Value::Null) => Some(None),
        Some(v) => parse_action(sink, v, &action_prefix).map(Some),
    };
    // Range problems of whatever was read (placeholders for the rest are in range).
    let probe = NewNode {
        node_id: node_id.clone(),
        parent_id: None,
        decision: String::new(),
        choice: String::new(),
        overall_rating: overall_rating.unwrap_or(5.0),
        confidence: confidence.unwrap_or(0.5),
        impacts: ImpactsPatch::default(), // checked by parse_impacts
        notes: None,
        action: None, // checked by parse_action_patch
    };
    sink.problems(prefix, new_node_problems(&probe));
    if parent_required && parent_id.is_none() {
        return None;
    }
    Some(NewNode {
        node_id,
        parent_id,
        decision: decision?,
        choice: choice?,
        overall_rating: overall_rating?,
        confidence: confidence?,
        impacts: impacts?,
        notes,
        action: action?,
    })
}

fn parse_impacts(sink: &mut Sink<'_>, value: &Value, prefix: &str) -> Option<ImpactsPatch> {
    let map = match object(value) {
        Ok(m) => m,
        Err(e) => {
            sink.err(prefix.trim_end_matches('.'), e);
            return None;
        }
    };
    check_keys(sink, map, prefix, &Impacts::DIMENSIONS, &[]);
    let mut patch = ImpactsPatch::default();
    let mut ok = true;
    for (dim, slot) in [
        ("memory_bandwidth", &mut patch.memory_bandwidth),
        ("register_pressure", &mut patch.register_pressure),
        ("compute_intensity", &mut patch.compute_intensity),
    ] {
        let Some(v) = map.get(dim).filter(|v| !v.is_null()) else {
            continue;
        };
        let dim_prefix = format!("{prefix}{dim}.");
        let Ok(m) = object(v) else {
            sink.err(
                &format!("{prefix}{dim}"),
                format!(
                    "expected an object {{\"rating\", \"risk\", \"notes\"}}, got {}",
                    describe(v)
                ),
            );
            ok = false;
            continue;
        };
        let before = *sink.shape_errors;
        check_keys(sink, m, &dim_prefix, IMPACT_FIELDS, &[]);
        let impact = ImpactPatch {
            rating: get(sink, m, &dim_prefix, "rating", false, number),
            risk: get(sink, m, &dim_prefix, "risk", false, risk),
            notes: get(sink, m, &dim_prefix, "notes", false, string),
        };
        ok &= *sink.shape_errors == before;
        *slot = Some(impact);
    }
    sink.problems(prefix, patch.problems(""));
    ok.then_some(patch)
}

fn parse_action_patch(sink: &mut Sink<'_>, value: &Value, prefix: &str) -> Option<ActionPatch> {
    let map = match object(value) {
        Ok(m) => m,
        Err(e) => {
            sink.err(
                prefix.trim_end_matches('.'),
                format!("{e} (or null to remove the action)"),
            );
            return None;
        }
    };
    let before = *sink.shape_errors;
    check_keys(sink, map, prefix, ACTION_FIELDS, &[]);
    let patch = ActionPatch {
        title: get(sink, map, prefix, "title", false, string),
        description: get(sink, map, prefix, "description", false, string),
        rationale: get(sink, map, prefix, "rationale", false, string),
        difficulty: get(sink, map, prefix, "difficulty", false, difficulty),
        score: get(sink, map, prefix, "score", false, number),
        expected_speedup: get(sink, map, prefix, "expected_speedup", false, number),
    };
    sink.problems(
        "",
        action_problems(prefix, patch.difficulty, patch.score, patch.expected_speedup),
    );
    (*sink.shape_errors == before).then_some(patch)
}

fn parse_action(sink: &mut Sink<'_>, value: &Value, prefix: &str) -> Option<Action> {
    let patch = parse_action_patch(sink, value, prefix)?;
    let mut missing = false;
    for (field, absent) in [
        ("title", patch.title.is_none()),
        ("difficulty", patch.difficulty.is_none()),
        ("score", patch.score.is_none()),
    ] {
        if absent {
            sink.err(&format!("{prefix}{field}"), "missing");
            missing = true;
        }
    }
    if missing {
        return None;
    }
    Some(Action {
        title: patch.title?,
        description: patch.description.unwrap_or_default(),
        rationale: patch.rationale.unwrap_or_default(),
        difficulty: patch.difficulty?,
        score: patch.score?,
        expected_speedup: patch.expected_speedup,
    })
}

fn parse_update(sink: &mut Sink<'_>, map: &Map<String, Value>) -> Option<NodeUpdate> {
    let before = *sink.shape_errors;
    check_keys(
        sink,
        map,
        "set.",
        SET_FIELDS,
        &[
            ("node_id", "a node's id cannot change"),
            (
                "parent_id",
                "a node cannot be moved; insert a new node under the new parent instead",
            ),
        ],
    );
    let action = match map.get("action") {
        None => None,
        Some(Value::Null) => Some(ActionEdit::Remove),
        Some(v) => parse_action_patch(sink, v, "set.action.").map(ActionEdit::Set),
    };
    let impacts = match map.get("impacts") {
        None | Some(Value::Null) => None,
        Some(v) => parse_impacts(sink, v, "set.impacts."),
    };
    let update = NodeUpdate {
        decision: get(sink, map, "set.", "decision", false, string),
        choice: get(sink, map, "set.", "choice", false, string),
        overall_rating: get(sink, map, "set.", "overall_rating", false, number),
        confidence: get(sink, map, "set.", "confidence", false, number),
        impacts,
        notes: get(sink, map, "set.", "notes", false, string),
        action,
        status: get(sink, map, "set.", "status", false, status),
    };
    // The ranges of the action and the impacts were reported by their parsers.
    let probe = NodeUpdate {
        action: None,
        impacts: None,
        ..update.clone()
    };
    sink.problems("set.", update_problems(&probe));
    (*sink.shape_errors == before).then_some(update)
}
