//! Reading a JSON file without its indentation, for the typed reader.
//!
//! Published workspaces are pretty-printed: in `workspace_tHu.json` 72 % of the 2.3 MB are the
//! spaces that start its lines, which serde_json skips one byte at a time, and reading the whole
//! file into one buffer faults in a fresh page for every 4 kB of it. Reading it in small chunks
//! and keeping each line from its first non-blank byte leaves a quarter of the bytes to parse and
//! to page in.
//!
//! Dropping the blanks after a line feed never changes what valid JSON means: a raw line feed
//! cannot stand inside a string, so the blanks after one lie between tokens. The line feed itself
//! is kept, so text that is not JSON (a line feed inside a string) stays not JSON. What it does
//! change is the column of every later place, so this text is for the typed reader only, which
//! names no place: where it refuses, the caller reads the file as written and lets the walk
//! name the place ([`crate::workspace_from_file`]).

use std::io::Read;

/// The size of each read: small enough to stay in the cache and to reuse the same pages.
const CHUNK: usize = 64 * 1024;

/// The file's bytes with the spaces and tabs that start each line removed.
pub fn read_unindented(path: &str) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
    // A guess at the unindented size (pretty-printed workspaces shrink to a quarter or a third);
    // the vector grows where it is wrong.
    let mut out = Vec::with_capacity(size / 3 + CHUNK);
    let mut chunk = vec![0u8; CHUNK];
    let mut at_line_start = false;
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        unindent_into(&chunk[..n], &mut at_line_start, &mut out);
    }
    Ok(out)
}

/// Appends `chunk` to `out` without the blanks that follow a line feed; `at_line_start` carries
/// across chunks whether the next byte still follows one.
pub fn unindent_into(mut chunk: &[u8], at_line_start: &mut bool, out: &mut Vec<u8>) {
    loop {
        if *at_line_start {
            chunk = &chunk[indentation(chunk)..];
            if chunk.is_empty() {
                return;
            }
            *at_line_start = false;
        }
        match memchr::memchr(b'\n', chunk) {
            Some(i) => {
                out.extend_from_slice(&chunk[..=i]);
                chunk = &chunk[i + 1..];
                *at_line_start = true;
            }
            None => {
                out.extend_from_slice(chunk);
                return;
            }
        }
    }
}

/// The length of the run of spaces and tabs that `s` starts with, eight spaces at a time where
/// it can (indentation comes in runs of tens of spaces).
fn indentation(s: &[u8]) -> usize {
    let mut i = 0;
    while s.len() - i >= 8 && s[i..i + 8] == *b"        " {
        i += 8;
    }
    while i < s.len() && matches!(s[i], b' ' | b'\t') {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text unindented in chunks of every size from 1 byte up.
    fn unindented_in_chunks(text: &[u8], size: usize) -> Vec<u8> {
        let (mut out, mut at_line_start) = (Vec::new(), false);
        for chunk in text.chunks(size) {
            unindent_into(chunk, &mut at_line_start, &mut out);
        }
        out
    }

    #[test]
    fn only_the_blanks_after_a_line_feed_go() {
        let text = b"{\n  \"a b\": [1, 2],\n\t \t\"c\":\n                  \"x  y\"\n}\n   ";
        let want = b"{\n\"a b\": [1, 2],\n\"c\":\n\"x  y\"\n}\n".to_vec();
        for size in 1..=text.len() {
            assert_eq!(unindented_in_chunks(text, size), want, "chunks of {size}");
        }
    }

    #[test]
    fn a_line_feed_inside_a_string_stays_an_error() {
        let text = "{\"a\": \"x\n   y\"}";
        let out = unindented_in_chunks(text.as_bytes(), 4);
        assert_eq!(out, b"{\"a\": \"x\ny\"}".to_vec());
        assert!(serde_json::from_slice::<serde_json::Value>(&out).is_err());
        assert!(serde_json::from_str::<serde_json::Value>(text).is_err());
    }

    #[test]
    fn a_shipped_workspace_reads_as_written() {
        // (The folder cargo gives the running test: a binary reused from a target shared with a
        // checkout elsewhere carries that checkout's compiled-in path.)
        let dir = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
        let path = &format!("{dir}/../../tests/fixtures/workspace_tHu.json");
        let text = std::fs::read(path).unwrap();
        let out = read_unindented(path).unwrap();
        assert!(
            out.len() * 3 < text.len(),
            "{} of {} bytes left",
            out.len(),
            text.len()
        );
        let a: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let b: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(a, b);
    }
}
