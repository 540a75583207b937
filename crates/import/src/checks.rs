//! Static checks for imported KernelBench tasks: what a `ModelNew` must not do to look fast.
//!
//! The seed is the problem's own Model, so the model's own torch operations cannot be forbidden
//! (the seed would fail its own checks). What is forbidden instead: reaching the reference
//! (importing the problem, naming `Model`), KernelBench's fall-back bypass (`try:`), changing
//! PyTorch's global precision, compiling the model with PyTorch's compiler, and fused library
//! kernels for computations the model writes out itself (a model that computes attention step
//! by step may not call `scaled_dot_product_attention`). A rule whose pattern appears anywhere
//! in the seed is left out, so the seed always passes.

use regex::Regex;

/// One forbidden pattern with its reason, as task.toml `[checks].forbidden` holds it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rule {
    pub pattern: String,
    pub reason: String,
}

/// What was forbidden, and what was left out because the problem itself uses it.
#[derive(Debug, Default)]
pub(crate) struct RuleSet {
    pub rules: Vec<Rule>,
    /// (what, why it stays allowed).
    pub allowed: Vec<String>,
}

/// Library routines that compute a whole operation at once. (pattern, what it is).
const FUSED: &[(&str, &str)] = &[
    (r"scaled_dot_product_attention", "PyTorch's fused attention (SDPA)"),
    (
        r"\bflash_attn\b|\bflashinfer\b|\bxformers\b",
        "an attention library (FlashAttention, FlashInfer, xFormers)",
    ),
    (
        r"\bmulti_head_attention_forward\b|\bMultiheadAttention\b",
        "PyTorch's multi-head attention",
    ),
    (
        r"\b(layer_norm|group_norm|batch_norm|instance_norm|rms_norm)\s*\(|nn\.(LayerNorm|GroupNorm|BatchNorm[123]d|InstanceNorm[123]d|RMSNorm)\b",
        "a PyTorch normalisation routine",
    ),
    (r"\b(log_)?softmax\s*\(|nn\.(Log)?Softmax\b", "PyTorch's softmax"),
    (r"\blogsumexp\s*\(", "PyTorch's logsumexp"),
    (
        r"torch\.(matmul|mm|bmm|einsum|addmm|baddbmm|addbmm|tensordot)\b|\bF\.linear\b|nn\.Linear\b|\.matmul\s*\(",
        "a PyTorch matrix product",
    ),
    (r"\bconv(_transpose)?[123]d\b|nn\.Conv", "a PyTorch convolution"),
    (
        r"\b(max|avg|adaptive_max|adaptive_avg)_pool[123]d\b|nn\.(Max|Avg|AdaptiveMax|AdaptiveAvg)Pool",
        "a PyTorch pooling routine",
    ),
    (
        r"\bcross_entropy\b|\bnll_loss\b|\bkl_div\b|\bmse_loss\b|\bhuber_loss\b|\bsmooth_l1_loss\b",
        "a PyTorch loss routine",
    ),
    (r"\bcumsum\s*\(|\bcumprod\s*\(", "PyTorch's scan (cumsum, cumprod)"),
];

/// The rule set for a problem file named `stem` whose seed (the problem with Model renamed
/// ModelNew) is `seed`: no rule matches the seed.
pub(crate) fn kernelbench_rules(stem: &str, seed: &str) -> RuleSet {
    let mut set = RuleSet::default();
    let mut add = |pattern: String, reason: String, what: &str| {
        // Our patterns are literals checked by the tests, so a bad one is a defect here.
        let re = Regex::new(&pattern).unwrap_or_else(|e| panic!("built-in pattern {pattern}: {e}"));
        if re.is_match(seed) {
            set.allowed
                .push(format!("{what} (the problem itself uses it, so the seed does)"));
        } else {
            set.rules.push(Rule { pattern, reason });
        }
    };
    // A file name that is not an identifier cannot be imported by name (importlib is below).
    let is_identifier = stem.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if is_identifier {
        add(
            format!(r"\b(import\s+{stem}\b|from\s+{stem}\s+import)"),
            format!("imports the problem module {stem}, which holds the reference Model"),
            "importing the problem module",
        );
    }
    add(
        r"\bModel\b".into(),
        "names the problem's reference class Model; a candidate defines and uses ModelNew only".into(),
        "the name Model",
    );
    add(
        r"\bimportlib\b|\b__import__\s*\(|(^|[^.\w])(exec|eval)\s*\(".into(),
        "loads code at run time, which can reach the problem module and its reference Model".into(),
        "run-time imports, exec and eval",
    );
    add(
        r"\btry\s*:".into(),
        "a try/except can fall back to PyTorch when the custom kernel fails (KernelBench's bypass check); \
         let failures show"
            .into(),
        "try/except",
    );
    add(
        r"allow_tf32|set_float32_matmul_precision|allow_fp16_reduced_precision_reduction|allow_bf16_reduced_precision_reduction".into(),
        "changes PyTorch's global precision settings, which would change other code's results too".into(),
        "changing PyTorch's precision settings",
    );
    add(
        r"torch\.compile\b|torch\._dynamo\b|torch\._inductor\b|torch\.jit\.(script|trace)\b".into(),
        "compiles the model with PyTorch's compiler instead of writing kernels".into(),
        "PyTorch's compiler",
    );
    add(
        r"torch\.ops\.aten\b|torch\._C\b".into(),
        "calls PyTorch's internal operators directly".into(),
        "PyTorch's internal operators",
    );
    for (pattern, what) in FUSED {
        add(
            pattern.to_string(),
            format!("calls {what}, which the problem's Model does not use: the candidate must compute it"),
            what,
        );
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_the_problem_uses_are_left_out_and_the_rest_match_what_they_should() {
        let seed = "import torch\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=1)\n";
        let set = kernelbench_rules("23_Softmax", seed);
        let find = |what: &str| {
            set.rules
                .iter()
                .find(|r| r.reason.contains(what))
                .map(|r| Regex::new(&r.pattern).unwrap())
        };
        assert!(
            set.allowed.iter().any(|a| a.starts_with("PyTorch's softmax")),
            "{:?}",
            set.allowed
        );
        assert!(find("softmax").is_none());
        let model = find("reference class Model").unwrap();
        assert!(model.is_match("from problem import Model") && !model.is_match("class ModelNew:"));
        let sdpa = find("fused attention").unwrap();
        assert!(sdpa.is_match("y = F.scaled_dot_product_attention(q, k, v)"));
        let runtime = find("loads code").unwrap();
        assert!(runtime.is_match("m = importlib.import_module('x')"));
        assert!(runtime.is_match("f = eval('1')"));
        assert!(!runtime.is_match("self.model.eval()"), "a module's .eval() is fine");
        let matmul = find("matrix product").unwrap();
        assert!(matmul.is_match("torch.matmul(a, b)") && matmul.is_match("nn.Linear(4, 4)"));
        assert!(!matmul.is_match("a @ b"));
        // A module name starting with a digit cannot be imported by name, so only names that can
        // get the rule.
        assert!(!set.rules.iter().any(|r| r.reason.contains("imports the problem")));
        let set = kernelbench_rules("gemm", "class ModelNew: pass\n");
        let import = set
            .rules
            .iter()
            .find(|r| r.reason.contains("imports the problem"))
            .unwrap();
        assert!(Regex::new(&import.pattern).unwrap().is_match("from gemm import Model"));
        // Every rule compiles and none matches the problem it was made for.
        for r in &set.rules {
            assert!(
                !Regex::new(&r.pattern).unwrap().is_match("class ModelNew: pass\n"),
                "{}",
                r.pattern
            );
        }
    }
}
