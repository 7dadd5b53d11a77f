//! What a successful ingest reports.

/// What an ingest committed, and what it skipped.
#[derive(Clone, Debug, PartialEq)]
pub struct IngestReport {
    /// The dataset's location.
    pub location: String,
    /// The branch committed to.
    pub branch: String,
    /// The version committed.
    pub version: u64,
    /// The dataset did not exist before (its version 1 is empty; the data is version 2).
    pub created: bool,
    /// The input format (`imagefolder`, `wds`, …; class folders of clips are `audiofolder`
    /// or `videofolder`).
    pub format: &'static str,
    /// Rows committed.
    pub rows: u64,
    /// Image values among them.
    pub images: u64,
    /// Decoded bytes of the rows (the columns' raw size).
    pub bytes_raw: u64,
    /// Bytes of the data files written.
    pub bytes_stored: u64,
    /// Bytes of the inputs read.
    pub bytes_input: u64,
    /// Wall time from opening the inputs to the commit.
    pub seconds: f64,
    /// Inputs skipped as bad (only with `skip_bad`).
    pub skipped: Vec<Skipped>,
    /// Files of a class folder that are not of its media (left alone).
    pub ignored_files: usize,
    /// What the ignored files are not (`images`, `clips`, `videos`).
    pub ignored_noun: &'static str,
}

/// An input skipped as bad.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The input: a path, `shard.tar:key`, `file.jsonl:line`, ….
    pub input: String,
    /// Why it could not be decoded.
    pub error: String,
}

impl IngestReport {
    /// The report as JSON: what `tessera ingest --json` prints and `tessera.ingest` returns.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        let skipped: Vec<serde_json::Value> =
            self.skipped.iter().map(|b| serde_json::json!({"input": b.input, "error": b.error})).collect();
        serde_json::json!({
            "dataset": self.location, "branch": self.branch, "version": self.version, "created": self.created,
            "format": self.format, "rows": self.rows, "images": self.images, "bytes_raw": self.bytes_raw,
            "bytes_stored": self.bytes_stored, "bytes_input": self.bytes_input, "seconds": self.seconds,
            "rows_per_sec": self.rows as f64 / self.seconds, "images_per_sec": self.images as f64 / self.seconds,
            "skipped": skipped, "ignored_files": self.ignored_files,
        })
    }
}
