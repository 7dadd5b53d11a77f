//! The CLI's error type and the exit codes it maps to.
//!
//! Every failure ends the process with one of a few documented codes (see [`Exit`]), so a
//! script can tell "your data is broken" from "you typed it wrong" from "someone else got
//! there first" without parsing messages.

use std::fmt;
use std::path::Path;

use tessera::ErrorClass;

/// Process exit codes. `tessera --help` documents them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Success.
    Ok = 0,
    /// A data fault: `verify` found corruption, a dataset object failed validation while being
    /// read, or an ingest input file is corrupt (without `--skip-bad`).
    DataFault = 1,
    /// Bad arguments (clap's own usage errors also exit with 2).
    Usage = 2,
    /// A dataset, version, branch, tag, row or input path does not exist.
    NotFound = 3,
    /// A tag or branch exists already, or a commit lost a race it could not rebase over.
    Conflict = 4,
    /// Anything else: storage or I/O failures, unsupported features.
    Other = 5,
}

impl Exit {
    /// The numeric code.
    pub(crate) fn code(self) -> u8 {
        self as u8
    }

    /// A short name for JSON error reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::DataFault => "data_fault",
            Self::Usage => "usage",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::Other => "other",
        }
    }
}

/// An error that ends a command: what to print and which exit code to use.
#[derive(Debug)]
pub(crate) struct CliError {
    /// The exit code.
    pub(crate) exit: Exit,
    /// The message (one line, printed after `error: `).
    pub(crate) message: String,
    /// Extra lines printed after the message (hints, consequences).
    pub(crate) notes: Vec<String>,
}

/// `Result` with [`CliError`].
pub(crate) type CliResult<T> = Result<T, CliError>;

impl CliError {
    /// An error with an exit code and message.
    pub(crate) fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self { exit, message: message.into(), notes: Vec::new() }
    }

    /// A usage error (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    /// A not-found error (exit 3).
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(Exit::NotFound, message)
    }

    /// A data fault (exit 1).
    pub(crate) fn data(message: impl Into<String>) -> Self {
        Self::new(Exit::DataFault, message)
    }

    /// Any other error (exit 5).
    pub(crate) fn other(message: impl Into<String>) -> Self {
        Self::new(Exit::Other, message)
    }

    /// Adds a note line.
    #[must_use]
    pub(crate) fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    /// An I/O error on a local path: missing paths exit 3, the rest 5.
    pub(crate) fn io(path: &Path, e: &std::io::Error) -> Self {
        let exit = if e.kind() == std::io::ErrorKind::NotFound { Exit::NotFound } else { Exit::Other };
        Self::new(exit, format!("{}: {e}", path.display()))
    }
}

/// The exit code of a reference-crate error class.
pub(crate) fn exit_for(class: ErrorClass) -> Exit {
    match class {
        ErrorClass::Malformed | ErrorClass::Invalid | ErrorClass::Limit => Exit::DataFault,
        ErrorClass::NotFound => Exit::NotFound,
        ErrorClass::Conflict => Exit::Conflict,
        ErrorClass::Usage => Exit::Usage,
        _ => Exit::Other,
    }
}

impl From<tessera::Error> for CliError {
    fn from(e: tessera::Error) -> Self {
        Self::new(exit_for(e.class()), e.to_string())
    }
}

impl From<tessera_ingest::IngestError> for CliError {
    fn from(e: tessera_ingest::IngestError) -> Self {
        let mut out = Self::new(exit_for(e.class()), e.message());
        out.notes = e.notes().to_vec();
        out
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
