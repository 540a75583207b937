//! Prints what a task's prompts cite:
//! `cargo run -p ksearch-kb --example task_context DEVICE LANGUAGE [OP_TYPE] [none|hardware|full]`.
use ksearch_kb::{ContextLevel, Kb, TaskQuery};

fn main() {
    let kb = Kb::builtin().unwrap_or_else(|e| panic!("{e}"));
    let args: Vec<String> = std::env::args().skip(1).collect();
    let query = TaskQuery {
        device: args.first().cloned().unwrap_or_else(|| "m4-max".into()),
        language: args.get(1).cloned().unwrap_or_else(|| "mlx".into()),
        op_type: args.get(2).cloned(),
        expertise_languages: Vec::new(),
    };
    let level: ContextLevel = match args.get(3) {
        Some(l) => l.parse().unwrap_or_else(|e| panic!("{e}")),
        None => ContextLevel::Full,
    };
    let text = kb.task_context(&query, level).unwrap_or_else(|e| panic!("{e}"));
    println!("<!-- {} characters -->\n{text}", text.chars().count());
}
