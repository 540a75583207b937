//! What the driver is waiting on, for the user: one spinner on a terminal naming every request
//! in flight, or one line per request started when stderr is not a terminal. Quiet shows
//! nothing.

use std::collections::BTreeMap;

pub(super) struct Progress {
    quiet: bool,
    bar: Option<indicatif::ProgressBar>,
    /// Requests in flight, by id: what the spinner names.
    running: BTreeMap<String, String>,
}

impl Progress {
    pub(super) fn new(quiet: bool) -> Progress {
        Progress {
            quiet,
            bar: None,
            running: BTreeMap::new(),
        }
    }

    fn terminal() -> bool {
        std::io::IsTerminal::is_terminal(&std::io::stderr())
    }

    pub(super) fn started(&mut self, id: &str, label: &str) {
        if self.quiet {
            return;
        }
        self.running.insert(id.to_string(), label.to_string());
        if !Self::terminal() {
            eprintln!("  {label} ...");
            return;
        }
        self.refresh();
    }

    pub(super) fn finished(&mut self, id: &str) {
        if self.running.remove(id).is_some() {
            self.refresh();
        }
    }

    /// A line that stays (a result), printed above the spinner.
    pub(super) fn line(&self, text: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }

    pub(super) fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn refresh(&mut self) {
        if self.quiet || !Self::terminal() {
            return;
        }
        if self.running.is_empty() {
            self.clear();
            return;
        }
        let labels: Vec<&str> = self.running.values().map(String::as_str).collect();
        let message = match labels.as_slice() {
            [one] => format!("{one} ..."),
            many => format!("{} at once: {}", many.len(), many.join(" | ")),
        };
        let bar = self.bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            bar
        });
        bar.set_message(message);
    }
}
