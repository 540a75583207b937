use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Element types, named as in FlashInfer-Bench (plus `float64` and `uint8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DType {
    /// `float64`: IEEE double.
    Float64,
    /// `float32`: IEEE single.
    Float32,
    /// `float16`: IEEE half.
    Float16,
    /// `bfloat16`: 8 exponent bits, 7 mantissa bits.
    Bfloat16,
    /// `float8_e4m3` (also read as PyTorch's `float8_e4m3fn`): 4 exponent bits, 3 mantissa bits.
    #[serde(alias = "float8_e4m3fn")]
    Float8E4m3,
    /// `float8_e5m2`: 5 exponent bits, 2 mantissa bits.
    Float8E5m2,
    /// `float4_e2m1`: 2 exponent bits, 1 mantissa bit.
    Float4E2m1,
    /// `int64`.
    Int64,
    /// `int32`.
    Int32,
    /// `int16`.
    Int16,
    /// `int8`.
    Int8,
    /// `uint8`.
    Uint8,
    /// `bool`.
    Bool,
}

/// Absolute and relative tolerance of the per-element rule `|out - ref| <= atol + rtol * |ref|`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    /// Absolute tolerance, in the output's units.
    pub atol: f64,
    /// Relative tolerance, a fraction of `|ref|`.
    pub rtol: f64,
}

impl DType {
    /// Every dtype, in the order of docs/task-format.md (floats widest first, then integers, then
    /// `bool`).
    pub const ALL: [DType; 13] = [
        DType::Float64,
        DType::Float32,
        DType::Float16,
        DType::Bfloat16,
        DType::Float8E4m3,
        DType::Float8E5m2,
        DType::Float4E2m1,
        DType::Int64,
        DType::Int32,
        DType::Int16,
        DType::Int8,
        DType::Uint8,
        DType::Bool,
    ];

    /// The name in definition files (`float8_e4m3`, `bfloat16`); [`FromStr`] and serde read it.
    pub fn name(self) -> &'static str {
        match self {
            DType::Float64 => "float64",
            DType::Float32 => "float32",
            DType::Float16 => "float16",
            DType::Bfloat16 => "bfloat16",
            DType::Float8E4m3 => "float8_e4m3",
            DType::Float8E5m2 => "float8_e5m2",
            DType::Float4E2m1 => "float4_e2m1",
            DType::Int64 => "int64",
            DType::Int32 => "int32",
            DType::Int16 => "int16",
            DType::Int8 => "int8",
            DType::Uint8 => "uint8",
            DType::Bool => "bool",
        }
    }

    /// Whether this is a signed or unsigned integer type; `bool` and the floats are not.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            DType::Int64 | DType::Int32 | DType::Int16 | DType::Int8 | DType::Uint8
        )
    }

    /// ksearch's default tolerance (docs/task-format.md); `None` where the task must choose (fp8, fp4).
    pub fn default_tolerance(self) -> Option<Tolerance> {
        match self {
            DType::Float64 | DType::Float32 => Some(Tolerance { atol: 1e-4, rtol: 1e-4 }),
            DType::Float16 | DType::Bfloat16 => Some(Tolerance { atol: 1e-2, rtol: 1e-2 }),
            DType::Float8E4m3 | DType::Float8E5m2 | DType::Float4E2m1 => None,
            _ => Some(Tolerance { atol: 0.0, rtol: 0.0 }),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s || (s == "float8_e4m3fn" && *d == DType::Float8E4m3))
            .ok_or_else(|| {
                let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
                format!("unknown dtype '{s}'; expected one of {}", names.join(", "))
            })
    }
}
