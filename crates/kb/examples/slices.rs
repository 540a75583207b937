//! Prints the prompt slice of every built-in device, or where its figures come from:
//! `cargo run -p ksearch-kb --example slices [none|hardware|full|sources] [device]`.
use ksearch_kb::{Context, Kb};

fn main() {
    let kb = Kb::builtin().unwrap_or_else(|e| panic!("{e}"));
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sources = args.first().is_some_and(|a| a == "sources");
    let context: Context = match args.first() {
        Some(a) if !sources => a.parse().unwrap_or_else(|e| panic!("{e}")),
        _ => Context::Full,
    };
    let names: Vec<String> = match args.get(1) {
        Some(n) => vec![n.clone()],
        None => kb.hardware_names().iter().map(|s| s.to_string()).collect(),
    };
    for name in names {
        if sources {
            println!(
                "{}",
                kb.hardware(&name).unwrap_or_else(|e| panic!("{e}")).sources_markdown()
            );
            continue;
        }
        let slice = kb.prompt_slice(&name, context).unwrap_or_else(|e| panic!("{e}"));
        println!("<!-- {name}: {} characters -->\n{slice}", slice.chars().count());
    }
}
