//! What an ingest tells its caller while it runs: the work ahead, progress, and lines for the
//! user (skipped inputs, notes). The CLI draws a progress bar from it; the Python package
//! ignores it.

/// What progress counts for a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Total {
    /// A known number of units of the given name (`images`, `rows`, `clips`, `videos`).
    Count(u64, &'static str),
    /// A known number of input bytes (progress advances by bytes consumed).
    Bytes(u64),
}

/// Receives an ingest's progress. Every method has an empty default.
pub trait Observer {
    /// The work ahead, once the inputs are opened (before any is decoded).
    fn start(&mut self, total: Total) {
        let _ = total;
    }

    /// `units` more of the total's unit are done (ignored for byte totals), holding `rows`
    /// rows and `bytes` input bytes.
    fn advance(&mut self, units: u64, rows: u64, bytes: u64) {
        let _ = (units, rows, bytes);
    }

    /// A line for the user: an input skipped as bad, or a note on the options.
    fn message(&mut self, line: &str) {
        let _ = line;
    }

    /// Decoding is over; the commit follows.
    fn decoded(&mut self) {}
}

/// An [`Observer`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Observer for Silent {}
