//! API keys: read from the environment only, never shown. A [`Secret`] prints as `***`, and
//! [`redact`] removes a key's value from any text (error bodies echo headers sometimes).

use std::fmt;

/// An API key; its `Debug` prints `Secret(***)`, never the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a key's value as given (untrimmed, unlike [`Secret::from_env`]).
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The key itself, for the one place that needs it: the request header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Reads a key from the environment variable `env`; `None` when unset or empty.
    pub fn from_env(env: &str) -> Option<Secret> {
        std::env::var(env)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| Secret(v.trim().to_string()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Replaces every occurrence of each secret's value in `text` with `***`. Very short values
/// are left alone (they would blank out ordinary words and are not real keys).
pub fn redact(text: &str, secrets: &[&Secret]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if s.0.len() >= 8 {
            out = out.replace(&s.0, "***");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_printed() {
        let s = Secret::new("sk-abcdef123456");
        assert_eq!(format!("{s} {s:?}"), "*** Secret(***)");
        assert_eq!(redact("Bearer sk-abcdef123456 rejected", &[&s]), "Bearer *** rejected");
    }
}
