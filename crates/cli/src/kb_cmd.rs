//! `ksearch kb show TARGET`: the knowledge-base slice the prompts cite for a target, and where
//! every figure comes from.

#[derive(clap::Subcommand)]
pub(crate) enum KbCommand {
    /// Print a target's hardware figures (with their sources) and the patterns that apply.
    Show {
        /// A device name or alias: cpu, h100, h200, b200, a100, m1-max ... m4-max.
        target: String,
        /// Print the slice exactly as prompts get it (none, hardware or full context).
        #[arg(long, value_name = "CONTEXT")]
        prompt: Option<String>,
    },
    /// List the devices the knowledge base knows.
    List,
}

pub(crate) fn run(command: &KbCommand) -> anyhow::Result<u8> {
    let kb = crate::knowledge::kb()?;
    match command {
        KbCommand::List => {
            for name in kb.hardware_names() {
                println!("{name}");
            }
        }
        KbCommand::Show { target, prompt } => {
            let spec = kb.hardware(target)?;
            match prompt.as_deref() {
                None => {
                    println!("{}", spec.sources_markdown().trim_end());
                    println!();
                    println!("{}", kb.prompt_slice(target, ksearch_kb::Context::Full)?.trim_end());
                }
                Some(level) => {
                    let context = match level {
                        "none" => ksearch_kb::Context::None,
                        "hardware" => ksearch_kb::Context::Hardware,
                        "full" => ksearch_kb::Context::Full,
                        other => anyhow::bail!("--prompt {other}: expected none, hardware or full"),
                    };
                    println!("{}", kb.prompt_slice(target, context)?);
                }
            }
        }
    }
    Ok(0)
}
