//! Counts in words, for the pages and the charts' texts.

/// `1 cycle`, `2 cycles`, `1 234 evaluations`: the number (thousands separated by thin
/// spaces) and the word, plural unless the count is one. Words whose plural is not the
/// singular with an `s` are given both ways (see [`counted_as`]).
pub fn counted(n: u64, word: &str) -> String {
    counted_as(n, word, &format!("{word}s"))
}

/// [`counted`] with the plural given.
pub fn counted_as(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// Thousands separated by thin spaces: 1 234 567.
pub fn thousands(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1, "cycle"), "1 cycle");
        assert_eq!(counted(0, "cycle"), "0 cycles");
        assert_eq!(counted(2, "attempt"), "2 attempts");
        assert_eq!(counted(1234, "token"), "1\u{2009}234 tokens");
        assert_eq!(counted_as(1, "was", "were"), "1 was");
        assert_eq!(counted_as(3, "was", "were"), "3 were");
    }
}
