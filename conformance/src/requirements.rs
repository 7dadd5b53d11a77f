//! The requirement ids of SPEC.md and the coverage allow-list.
//!
//! A requirement is defined by a bullet that starts with its id in brackets, `- [DF-10] …`; its
//! text runs until the next line that is neither blank nor indented. A requirement is
//! *mandatory* when its text uses MUST, MUST NOT, REQUIRED, SHALL or SHALL NOT as a word
//! (quoted keywords, as in the definition of the key words, do not count).
//!
//! `conformance/uncovered.toml` lists the mandatory requirements no case exercises, each with
//! the reason it is not testable by a read or write case: `ID = "reason"` under
//! `[uncovered]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One requirement of SPEC.md.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// The id, e.g. `DF-10`.
    pub id: String,
    /// Its text (the defining bullet and its indented continuation).
    pub text: String,
    /// True when the text says MUST, REQUIRED or SHALL.
    pub mandatory: bool,
}

/// `SPEC.md` of this repository.
#[must_use]
pub fn spec_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("SPEC.md")
}

/// `conformance/uncovered.toml` of this repository.
#[must_use]
pub fn allow_list_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("uncovered.toml")
}

/// The id a line defines, if it is a requirement bullet (`- [ID] …`, possibly indented).
fn defined_id(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("- [")?;
    let (id, _) = rest.split_once(']')?;
    let (prefix, number) = id.split_once('-')?;
    let ok = !prefix.is_empty()
        && prefix.bytes().all(|b| b.is_ascii_uppercase())
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit());
    ok.then_some(id)
}

/// True when the text uses a mandatory key word outside double quotes.
fn is_mandatory(text: &str) -> bool {
    let mut unquoted = String::with_capacity(text.len());
    let mut quoted = false;
    for c in text.chars() {
        if c == '"' {
            quoted = !quoted;
        } else if !quoted {
            unquoted.push(c);
        }
    }
    unquoted.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| matches!(w, "MUST" | "REQUIRED" | "SHALL"))
}

/// Every requirement SPEC.md defines, in document order.
#[must_use]
pub fn parse_spec(spec: &str) -> Vec<Requirement> {
    let mut out: Vec<Requirement> = Vec::new();
    let mut open = false;
    for line in spec.lines() {
        if let Some(id) = defined_id(line) {
            out.push(Requirement { id: id.to_string(), text: line.to_string(), mandatory: false });
            open = true;
        } else if open && (line.trim().is_empty() || line.starts_with(' ')) {
            if let Some(r) = out.last_mut() {
                r.text.push('\n');
                r.text.push_str(line);
            }
        } else {
            open = false;
        }
    }
    for r in &mut out {
        r.mandatory = is_mandatory(&r.text);
    }
    out
}

/// Reads and parses SPEC.md.
///
/// # Errors
/// An I/O error.
pub fn load_spec(path: &Path) -> Result<Vec<Requirement>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(parse_spec(&text))
}

/// Reads the allow-list: `[uncovered]` with `ID = "reason"`, every reason non-empty.
///
/// # Errors
/// A TOML error, an entry outside `[uncovered]`, or an empty reason.
pub fn load_allow_list(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = BTreeMap::new();
    for (key, value) in table {
        if key != "uncovered" {
            return Err(format!("{}: unexpected top-level key {key:?}", path.display()));
        }
        let entries = value.as_table().ok_or("[uncovered] must be a table")?;
        for (id, reason) in entries {
            let reason = reason.as_str().ok_or_else(|| format!("{id}: the reason must be a string"))?;
            if reason.trim().len() < 20 {
                return Err(format!("{id}: give a real reason (at least a sentence)"));
            }
            out.insert(id.clone(), reason.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_ids_and_keywords() {
        let spec = "# T\n\n- [GEN-01] The key words \"MUST\", \"SHALL\" are defined.\n- [DF-02] Bytes MUST be\n  \
                    so; otherwise it is `malformed`.\n\n  More text.\n*Note.* MUST here is not DF-02's.\n- [LIM-01] At \
                    most 4096.\n  - [VAL-04] nested: readers SHALL check.\n";
        let r = parse_spec(spec);
        let ids: Vec<&str> = r.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["GEN-01", "DF-02", "LIM-01", "VAL-04"]);
        let m: Vec<bool> = r.iter().map(|r| r.mandatory).collect();
        assert_eq!(m, [false, true, false, true]);
        assert!(r[1].text.contains("More text."));
        assert!(!r[1].text.contains("Note"));
    }
}
