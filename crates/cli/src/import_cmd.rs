//! `ksearch import kernelbench FILE` and `ksearch import gpumode FOLDER`: other benchmarks'
//! problems as ksearch task folders (docs/importers.md).

use crate::EXIT_BAD_INPUT;
use ksearch_import::{import_gpumode, import_kernelbench, Imported, Options};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `ksearch import kernelbench` and `ksearch import gpumode`.
#[derive(clap::Subcommand)]
pub(crate) enum ImportCommand {
    /// A KernelBench problem file (class Model, get_inputs, get_init_inputs).
    Kernelbench {
        /// The problem's .py file.
        file: PathBuf,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// A GPU MODE task folder (task.yml, reference.py with ref_kernel and generate_input).
    Gpumode {
        /// The folder holding task.yml.
        folder: PathBuf,
        /// The reference function to import, for a reference.py without ref_kernel (one task per
        /// function: `--entry reference_forward`, `--entry reference_backward`).
        #[arg(long, value_name = "FUNCTION")]
        entry: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// The arguments both importers take.
#[derive(clap::Args)]
pub(crate) struct CommonArgs {
    /// The task folder to write.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The task's name (default: the file's or folder's name).
    #[arg(long)]
    name: Option<String>,
    /// The Python that runs the problem to find its shapes (default: $KSEARCH_PYTHON, else python3).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Find shapes with ksearch's stand-in for PyTorch even when PyTorch is installed.
    #[arg(long)]
    stand_in: bool,
    /// Overwrite the importer's files in a non-empty --out folder.
    #[arg(long)]
    force: bool,
    /// How long running the problem may take, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    timeout: u64,
}

impl CommonArgs {
    fn options(&self) -> Options {
        Options {
            out: self.out.clone(),
            name: self.name.clone(),
            python: self.python.clone(),
            stand_in: self.stand_in,
            force: self.force,
            timeout: Duration::from_secs(self.timeout),
            entry: None,
        }
    }
}

/// Imports the problem and prints what was written; returns the exit status (2 when the problem
/// cannot be imported).
pub(crate) fn run(command: &ImportCommand) -> anyhow::Result<u8> {
    let result = match command {
        ImportCommand::Kernelbench { file, common } => import_kernelbench(file, &common.options()),
        ImportCommand::Gpumode { folder, entry, common } => import_gpumode(
            folder,
            &Options {
                entry: entry.clone(),
                ..common.options()
            },
        ),
    };
    match result {
        Ok(imported) => {
            print!("{}", report(&imported));
            Ok(0)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(EXIT_BAD_INPUT)
        }
    }
}

/// What was imported, the files written, what to check, and the next command.
fn report(i: &Imported) -> String {
    let engine = if i.engine == "stand-in" {
        "shapes from ksearch's stand-in for PyTorch".to_string()
    } else {
        format!("shapes from {}", i.engine)
    };
    let mut out = format!("Imported {} into {} ({engine})\n", i.source, i.dir.display());
    let width = i.written.iter().map(|(f, _)| f.len()).max().unwrap_or(0);
    for (file, what) in &i.written {
        out.push_str(&format!(" + {file:<width$}  {what}\n"));
    }
    if !i.checks.is_empty() {
        out.push_str("Check:\n");
        for c in &i.checks {
            out.push_str(&format!(" - {c}\n"));
        }
    }
    let dir = shell_word(&i.dir);
    out.push_str(&format!(
        "Next: ksearch eval {dir} {}  (needs PyTorch where it runs)\n",
        shell_word(&i.dir.join("seed.py"))
    ));
    out
}

fn shell_word(p: &Path) -> String {
    let s = p.display().to_string();
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c)) {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
