//! Authentication of the harness's protocol lines (docs/protocol.md, "Authenticated lines").
//!
//! Every evaluation gets a fresh random key, sent in the request on the harness's stdin. The
//! harness ends each line with a tab and the hex HMAC-SHA256 of `"SEQ:" + JSON` under that key,
//! SEQ counting lines from 0. A line that does not verify at the next sequence number was not
//! written by the harness in that order: a candidate that found a way into the stream (reopening
//! the pipe through /proc, writing to an inherited descriptor) cannot produce one, nor replay,
//! reorder or drop one unnoticed. The candidate never holds the key: it runs in a process forked
//! before the harness read the request (backend c on Linux), see docs/threat-model.md for where
//! it does not.

use sha2::{Digest, Sha256};

/// A fresh 32-byte key from the kernel's random source.
pub(crate) fn new_key() -> std::io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    let mut filled = 0;
    while filled < key.len() {
        // SAFETY: getrandom writes at most `len` bytes into the buffer we own.
        let n = unsafe { libc::getrandom(key[filled..].as_mut_ptr().cast(), key.len() - filled, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        filled += n as usize;
    }
    Ok(key)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key` (at most one block long).
fn hmac_sha256(key: &[u8], message: &[&[u8]]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut padded = [0u8; BLOCK];
    if key.len() > BLOCK {
        padded[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        padded[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(padded.map(|b| b ^ 0x36));
    for part in message {
        inner.update(part);
    }
    let mut outer = Sha256::new();
    outer.update(padded.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The code the harness appends to line `seq`.
pub(crate) fn code(key: &[u8], seq: u64, json: &str) -> String {
    hex(&hmac_sha256(key, &[format!("{seq}:").as_bytes(), json.as_bytes()]))
}

/// What verification left: the authenticated lines' JSON, in order, and the rest.
pub(crate) struct Verified {
    pub lines: Vec<Result<String, String>>,
    /// Lines that did not verify, shortened for a reason.
    pub unauthenticated: Vec<String>,
    pub authenticated: usize,
}

/// Splits each line into JSON and code and keeps the JSON of lines that verify in sequence.
/// Lines the supervisor already replaced by an error note (too long, too much) stay as they are.
pub(crate) fn verify(key: &[u8], lines: Vec<Result<String, String>>) -> Verified {
    let mut out = Verified {
        lines: Vec::with_capacity(lines.len()),
        unauthenticated: Vec::new(),
        authenticated: 0,
    };
    let mut seq = 0u64;
    for line in lines {
        let text = match line {
            Ok(text) => text,
            Err(note) => {
                out.lines.push(Err(note));
                continue;
            }
        };
        let verified = text
            .rsplit_once('\t')
            .filter(|(json, mac)| mac.len() == 64 && constant_time_eq(code(key, seq, json).as_bytes(), mac.as_bytes()));
        match verified {
            Some((json, _)) => {
                out.lines.push(Ok(json.to_string()));
                out.authenticated += 1;
                seq += 1;
            }
            None => out.unauthenticated.push(text.chars().take(120).collect()),
        }
    }
    out
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_long_key_is_hashed_first_rfc_4231_case_6() {
        let key = [0xaau8; 131];
        let mac = hmac_sha256(&key, &[b"Test Using Larger Than Block-Size Key - Hash Key First"]);
        assert_eq!(
            hex(&mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    fn signed(key: &[u8], seq: u64, json: &str) -> Result<String, String> {
        Ok(format!("{json}\t{}", code(key, seq, json)))
    }

    #[test]
    fn forged_replayed_and_reordered_lines_are_refused() {
        let key = new_key().unwrap();
        let a = r#"{"event":"progress","stage":"compile"}"#;
        let b = r#"{"event":"done"}"#;
        let lines = vec![
            signed(&key, 0, a),
            Ok(r#"{"event":"workload","status":"passed"}"#.to_string()),
            signed(&[7u8; 32], 1, b), // another key
            signed(&key, 0, a),       // a replay
            signed(&key, 1, b),
            Err("a protocol line longer than 100 bytes was dropped".to_string()),
        ];
        let v = verify(&key, lines);
        assert_eq!(v.authenticated, 2);
        assert_eq!(v.unauthenticated.len(), 3);
        assert_eq!(
            v.lines,
            vec![
                Ok(a.to_string()),
                Ok(b.to_string()),
                Err("a protocol line longer than 100 bytes was dropped".to_string())
            ]
        );
        // Out of order: line 1 before line 0.
        let v = verify(&key, vec![signed(&key, 1, b), signed(&key, 0, a)]);
        assert_eq!((v.authenticated, v.unauthenticated.len()), (1, 1));
    }

    #[test]
    fn keys_differ() {
        assert_ne!(new_key().unwrap(), new_key().unwrap());
    }
}
