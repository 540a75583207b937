//! Reusable assertions: one TOML file per task family under `kb/assertions/`, listing the
//! properties the reference has and every candidate must keep (softmax rows are normalised, the
//! scan state is carried across chunks, ...). They go into prompts at the `full` level; a
//! translation layer adds target-specific ones per family.

use crate::error::{Problem, Problems};
use crate::hardware::{valid_id, SCHEMA_VERSION};
use crate::translation::{properties, text};
use serde::{Deserialize, Serialize};

/// One task family and its properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssertionFamily {
    /// Data format version; must be [`SCHEMA_VERSION`].
    pub schema: u32,
    /// Stable identifier; equals the file name without `.toml` (`attention`).
    pub family: String,
    /// Human name of the family (`Attention (prefill, decode, paged, grouped-query)`).
    pub title: String,
    /// The definitions' `op_type` values that belong to this family (`gqa_paged`, `rmsnorm`).
    pub op_types: Vec<String>,
    /// What every candidate must keep, whatever the target.
    pub properties: Vec<String>,
}

const MAX_TITLE: usize = 80;
const MAX_PROPERTIES: usize = 10;

impl AssertionFamily {
    pub(crate) fn validate(&self, file: &str, stem: &str) -> Vec<Problem> {
        let mut p = Problems::new(file);
        if self.schema != SCHEMA_VERSION {
            p.push(
                "schema",
                format!(
                    "unsupported version {}; this ksearch reads {SCHEMA_VERSION}",
                    self.schema
                ),
            );
        }
        if !valid_id(&self.family) {
            p.push(
                "family",
                format!("'{}' must be lower case letters, digits and single dashes", self.family),
            );
        } else if self.family != stem {
            p.push(
                "family",
                format!("'{}' must equal the file name ('{stem}.toml')", self.family),
            );
        }
        text(&mut p, "title", &self.title, MAX_TITLE);
        if self.op_types.is_empty() {
            p.push("op_types", "must name at least one definition op_type");
        }
        for (i, op) in self.op_types.iter().enumerate() {
            let field = format!("op_types[{i}]");
            let ok = !op.is_empty()
                && op
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
            if !ok {
                p.push(
                    field,
                    format!("'{op}' is not an op_type (lower case, digits, '_', '-')"),
                );
            } else if self.op_types[..i].contains(op) {
                p.push(field, format!("'{op}' is listed twice"));
            }
        }
        properties(&mut p, "properties", &self.properties, true);
        if self.properties.len() > MAX_PROPERTIES {
            p.push(
                "properties",
                format!(
                    "{} properties; at most {MAX_PROPERTIES} (they go into prompts)",
                    self.properties.len()
                ),
            );
        }
        p.into_list()
    }

    /// True when a definition of this `op_type` belongs to the family.
    pub fn covers(&self, op_type: &str) -> bool {
        self.op_types.iter().any(|o| o == op_type)
    }
}
