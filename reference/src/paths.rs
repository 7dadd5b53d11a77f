//! Object keys under a dataset root, and the rules for paths stored in manifests
//! (SPEC.md §"Dataset layout").

use crate::error::{Error, Result};
use crate::limits::hard;

/// Prefix of data files.
pub const DATA_DIR: &str = "data";
/// Prefix of index segments.
pub const INDEX_DIR: &str = "index";
/// Prefix of deletion vectors.
pub const DELETIONS_DIR: &str = "deletions";
/// Prefix of branch logs.
pub const BRANCHES_DIR: &str = "branches";
/// Prefix of tag records.
pub const TAGS_DIR: &str = "tags";
/// The default branch.
pub const MAIN: &str = "main";

/// Checks a relative path read from a manifest or segment `[LAY-09]`: `/`-separated segments
/// of `[A-Za-z0-9._-]`, none empty, `.` or `..`; no absolute path, backslash or scheme.
///
/// # Errors
/// `invalid` naming the rule; `limit` for a path over 1024 bytes or 8 segments.
pub fn validate_relative(path: &str, what: &str) -> Result<()> {
    Error::check_limit(|| format!("{what}: path bytes"), hard::MAX_PATH_BYTES, path.len() as u64)?;
    let segments = path.split('/').count() as u64;
    Error::check_limit(|| format!("{what}: path segments"), hard::MAX_PATH_SEGMENTS, segments)?;
    for seg in path.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(Error::invalid(what, format!("path {path:?} has an empty, '.' or '..' segment [LAY-09]")));
        }
        if !seg.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
            return Err(Error::invalid(what, format!("path {path:?} has a character outside [A-Za-z0-9._-] [LAY-09]")));
        }
    }
    Ok(())
}

/// Checks a branch or tag name `[LAY-07]`.
///
/// # Errors
/// `usage` when the name breaks the grammar.
pub fn validate_ref_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "{name:?} is not a valid branch or tag name (1..=64 of [A-Za-z0-9._-], not starting with '.')"
        )))
    }
}

/// The key of a version's manifest.
#[must_use]
pub fn manifest_key(branch: &str, version: u64) -> String {
    format!("{BRANCHES_DIR}/{branch}/{version:020}.tsm")
}

/// The version number of a manifest key's file name, if it is one `[LAY-08]`.
#[must_use]
pub fn parse_manifest_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".tsm")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Version 0 does not exist [LAY-08].
    digits.parse().ok().filter(|&v| v > 0)
}

/// The key of a tag record.
#[must_use]
pub fn tag_key(name: &str) -> String {
    format!("{TAGS_DIR}/{name}.tst")
}

/// The content-addressed key of a new object: the first 16 bytes of its SHA-256 in hex `[LAY-04]`.
#[must_use]
pub fn content_key(dir: &str, ext: &str, bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    format!("{dir}/{}.{ext}", hex::encode(&digest[..16]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn hostile_paths_are_invalid() {
        for p in ["/etc/passwd", "../x", "data/../../x", "a//b", "s3://b/k", "c:\\x", "data/./x", "", "a/b/", "dätä/x"]
        {
            let e = validate_relative(p, "t").unwrap_err();
            assert_eq!(e.class(), ErrorClass::Invalid, "{p}");
        }
        assert!(validate_relative("data/0123abcd.tsd", "t").is_ok());
        assert_eq!(
            validate_relative("a/".repeat(9).trim_end_matches('/'), "t").unwrap_err().class(),
            ErrorClass::Limit
        );
        assert_eq!(validate_relative(&"a".repeat(1025), "t").unwrap_err().class(), ErrorClass::Limit);
    }

    #[test]
    fn manifest_names_round_trip() {
        let k = manifest_key("main", 42);
        assert_eq!(k, "branches/main/00000000000000000042.tsm");
        assert_eq!(parse_manifest_name(k.rsplit('/').next().unwrap()), Some(42));
        assert_eq!(parse_manifest_name("42.tsm"), None);
        assert_eq!(parse_manifest_name("0000000000000000004x.tsm"), None);
        assert!(validate_ref_name("v1.0-rc_2").is_ok());
        assert!(validate_ref_name(".hidden").is_err());
        assert!(validate_ref_name("a/b").is_err());
    }
}
