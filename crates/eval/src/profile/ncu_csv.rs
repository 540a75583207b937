//! Reading ncu's raw page (`--csv --page raw`) into launches.

use super::{Launch, ProfileError};

/// Splits one CSV record (RFC 4180 quoting); `None` for an unterminated quote.
pub(super) fn csv_fields(line: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => fields.push(std::mem::take(&mut field)),
            (_, c) => field.push(c),
        }
    }
    if quoted {
        return None;
    }
    fields.push(field);
    Some(fields)
}

/// A metric value as ncu prints it (`1,234.5`, `n/a`, empty), or `None`.
fn number(text: &str) -> Option<f64> {
    let cleaned: String = text.trim().chars().filter(|&c| c != ',').collect();
    cleaned.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Nanoseconds per unit of an ncu time unit (`nsecond`, `usecond`, `msecond`, `second`).
fn time_scale(unit: &str) -> Option<f64> {
    match unit.trim() {
        "nsecond" | "ns" => Some(1.0),
        "usecond" | "us" => Some(1e3),
        "msecond" | "ms" => Some(1e6),
        "second" | "s" => Some(1e9),
        _ => None,
    }
}

/// The launches of an ncu `--csv --page raw` report: a header line (`"ID","Process ID",...,
/// "Kernel Name",...` then one column per metric), a units line (its ID field empty), then one
/// line per kernel launch. ncu's `==PROF==`/`==WARNING==` lines and anything before the header
/// are skipped; time metrics are converted to ns from their unit.
pub fn parse_ncu_csv(text: &str) -> Result<Vec<Launch>, ProfileError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with("==") && !l.trim().is_empty());
    let header = loop {
        let Some((n, line)) = lines.next() else {
            return Err(ProfileError::NoHeader);
        };
        if !line.starts_with("\"ID\"") && !line.starts_with("ID,") {
            continue;
        }
        break csv_fields(line).ok_or(ProfileError::Unterminated { line: n + 1 })?;
    };
    let column = |name: &'static str| {
        header
            .iter()
            .position(|h| h == name)
            .ok_or(ProfileError::MissingColumn(name))
    };
    let id = column("ID")?;
    let name = column("Kernel Name")?;
    let first_metric = header.iter().position(|h| h.contains("__")).unwrap_or(header.len());
    let mut scales: Vec<f64> = vec![1.0; header.len()];
    let mut launches = Vec::new();
    for (n, line) in lines {
        let fields = csv_fields(line).ok_or(ProfileError::Unterminated { line: n + 1 })?;
        if fields.len() != header.len() {
            return Err(ProfileError::FieldCount {
                line: n + 1,
                found: fields.len(),
                expected: header.len(),
            });
        }
        if fields[id].trim().is_empty() {
            // The units line: time metrics scale to ns.
            for (i, unit) in fields.iter().enumerate() {
                scales[i] = time_scale(unit).unwrap_or(1.0);
            }
            continue;
        }
        let metrics = header
            .iter()
            .zip(&fields)
            .enumerate()
            .skip(first_metric)
            .filter_map(|(i, (h, v))| number(v).map(|v| (h.clone(), v * scales[i])))
            .collect();
        launches.push(Launch {
            name: fields[name].clone(),
            metrics,
        });
    }
    Ok(launches)
}
