//! The crate's one error type and the spec's error classes.
//!
//! Every failure maps to an [`ErrorClass`] through [`Error::class`]. The first five classes are
//! the ones SPEC.md assigns to faults in stored bytes (`malformed`, `invalid`, `unsupported`,
//! `limit`, `io`); the others describe what a caller asked for (`not_found`, `conflict`,
//! `usage`) and never result from reading a dataset that exists.

use std::fmt;

/// The error classes of SPEC.md §"Error classes", plus the caller-side ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The bytes cannot be decoded structurally (bad magic, truncation, checksum mismatch).
    Malformed,
    /// The bytes decode but break a semantic MUST (overlapping ranges, size mismatch).
    Invalid,
    /// Well-formed, but needs something this implementation does not know (major version,
    /// reader flag, dtype or codec code).
    Unsupported,
    /// A declared size or count exceeds a hard or configured limit.
    Limit,
    /// The storage failed (network, permissions, disk).
    Io,
    /// The requested version, branch or tag does not exist.
    NotFound,
    /// A concurrent writer won the race for a version, or a ref already exists.
    Conflict,
    /// The caller's arguments are wrong (schema mismatch in an append, bad name, …).
    Usage,
}

impl ErrorClass {
    /// The class name as SPEC.md and the conformance protocol spell it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Invalid => "invalid",
            Self::Unsupported => "unsupported",
            Self::Limit => "limit",
            Self::Io => "io",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::Usage => "usage",
        }
    }

    /// Parses a class name (the inverse of [`ErrorClass::as_str`]).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "malformed" => Self::Malformed,
            "invalid" => Self::Invalid,
            "unsupported" => Self::Unsupported,
            "limit" => Self::Limit,
            "io" => Self::Io,
            "not_found" => Self::NotFound,
            "conflict" => Self::Conflict,
            "usage" => Self::Usage,
            _ => return None,
        })
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every error this crate returns.
///
/// `what` fields name the object and field at fault (for example
/// `data/3f…e1.tsd: column 2 page 0`), so a message alone locates the fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Structurally undecodable bytes.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// The object and field.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// A checksum did not match.
    #[error("malformed {what}: CRC-32 mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        /// The object and field.
        what: String,
        /// The CRC stored in the file.
        stored: u32,
        /// The CRC of the bytes read.
        computed: u32,
    },
    /// Decodable bytes that break a semantic rule of the spec.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// The object and field.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// A feature, version or code this implementation does not support.
    #[error("unsupported {what}: {reason}")]
    Unsupported {
        /// The object and field.
        what: String,
        /// What is not supported.
        reason: String,
    },
    /// A size or count above a limit.
    #[error("limit exceeded for {what}: {actual} > {limit}")]
    Limit {
        /// What was measured.
        what: String,
        /// The limit in force.
        limit: u64,
        /// The declared or computed value.
        actual: u64,
    },
    /// The storage layer failed.
    #[error("storage error at {path}: {source}")]
    Io {
        /// The object key or URL.
        path: String,
        /// The underlying error.
        #[source]
        source: object_store::Error,
    },
    /// A requested version, branch or tag does not exist.
    #[error("not found: {what}")]
    NotFound {
        /// What was looked for.
        what: String,
    },
    /// Another writer committed first, or a ref exists already.
    #[error("conflict: {what}")]
    Conflict {
        /// What collided.
        what: String,
    },
    /// The caller asked for something impossible.
    #[error("usage: {0}")]
    Usage(String),
}

impl Error {
    /// The spec's class of this error.
    #[must_use]
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Malformed { .. } | Self::Checksum { .. } => ErrorClass::Malformed,
            Self::Invalid { .. } => ErrorClass::Invalid,
            Self::Unsupported { .. } => ErrorClass::Unsupported,
            Self::Limit { .. } => ErrorClass::Limit,
            Self::Io { .. } => ErrorClass::Io,
            Self::NotFound { .. } => ErrorClass::NotFound,
            Self::Conflict { .. } => ErrorClass::Conflict,
            Self::Usage(_) => ErrorClass::Usage,
        }
    }

    pub(crate) fn malformed(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Malformed { what: what.into(), reason: reason.into() }
    }

    pub(crate) fn invalid(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid { what: what.into(), reason: reason.into() }
    }

    pub(crate) fn unsupported(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Unsupported { what: what.into(), reason: reason.into() }
    }

    pub(crate) fn limit(what: impl Into<String>, limit: u64, actual: u64) -> Self {
        Self::Limit { what: what.into(), limit, actual }
    }

    pub(crate) fn usage(reason: impl Into<String>) -> Self {
        Self::Usage(reason.into())
    }

    /// Checks `actual <= limit`, else a [`Error::Limit`].
    pub(crate) fn check_limit(what: impl FnOnce() -> String, limit: u64, actual: u64) -> Result<()> {
        if actual > limit { Err(Self::limit(what(), limit, actual)) } else { Ok(()) }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_round_trip() {
        for c in [
            ErrorClass::Malformed,
            ErrorClass::Invalid,
            ErrorClass::Unsupported,
            ErrorClass::Limit,
            ErrorClass::Io,
            ErrorClass::NotFound,
            ErrorClass::Conflict,
            ErrorClass::Usage,
        ] {
            assert_eq!(ErrorClass::parse(c.as_str()), Some(c));
        }
        assert_eq!(ErrorClass::parse("bogus"), None);
    }

    #[test]
    fn every_variant_displays_its_context() {
        let e = Error::Checksum { what: "data/x.tsd: footer".into(), stored: 1, computed: 2 };
        assert_eq!(e.class(), ErrorClass::Malformed);
        assert!(e.to_string().contains("data/x.tsd: footer"));
        let e = Error::limit("manifest body", 10, 11);
        assert_eq!(e.to_string(), "limit exceeded for manifest body: 11 > 10");
        assert_eq!(Error::usage("x").class(), ErrorClass::Usage);
    }
}
