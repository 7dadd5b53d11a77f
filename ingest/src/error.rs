//! The ingest's error: a message, the reference's error class (which decides the CLI's exit
//! code and the Python exception), and notes (hints, and what a failure left behind).

use std::fmt;
use std::path::Path;

use tessera::ErrorClass;

/// Why an ingest stopped. Nothing was committed when an ingest returns one; its notes say
/// what, if anything, was left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestError {
    class: ErrorClass,
    message: String,
    notes: Vec<String>,
}

/// `Result` with [`IngestError`].
pub type IngestResult<T> = Result<T, IngestError>;

impl IngestError {
    /// An error of `class`.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        Self { class, message: message.into(), notes: Vec::new() }
    }

    /// Bad arguments or a schema question: a shape that does not fit, an unknown column
    /// (class `usage`).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Usage, message)
    }

    /// A dataset, branch or input that does not exist (class `not_found`).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::NotFound, message)
    }

    /// An input that cannot be decoded or breaks a value rule (class `malformed`).
    pub fn data(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Malformed, message)
    }

    /// Anything else: storage and file-system failures (class `io`).
    pub fn other(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Io, message)
    }

    /// A file-system error on a local path: a missing path is `not_found`, the rest `io`.
    #[must_use]
    pub fn io(path: &Path, e: &std::io::Error) -> Self {
        let class = if e.kind() == std::io::ErrorKind::NotFound { ErrorClass::NotFound } else { ErrorClass::Io };
        Self::new(class, format!("{}: {e}", path.display()))
    }

    /// Adds a note (a hint, or a consequence of the failure).
    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    /// The error class (SPEC.md's names; the CLI's exit code follows from it).
    #[must_use]
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// The one-line message.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The notes, in the order they were added.
    #[must_use]
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

impl fmt::Display for IngestError {
    /// The message, then each note on its own line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        for n in &self.notes {
            write!(f, "\n  note: {n}")?;
        }
        Ok(())
    }
}

impl std::error::Error for IngestError {}

impl From<tessera::Error> for IngestError {
    fn from(e: tessera::Error) -> Self {
        Self::new(e.class(), e.to_string())
    }
}
