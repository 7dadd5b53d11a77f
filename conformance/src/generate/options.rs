//! Deterministic write options: every commit, tag and branch gets a fixed time and writer id.

use tessera::WriteOptions;

/// 2025-01-01T00:00:00Z in Unix milliseconds: the time of the first commit of every fixture.
const EPOCH_MS: u64 = 1_735_689_600_000;

/// Hands out commit times (one minute apart) and writer ids (`tessera-fixture` + a counter).
#[derive(Debug, Default)]
pub(crate) struct Clock {
    commits: u8,
}

impl Clock {
    /// A clock at the first commit.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Options for the next commit, tag or branch, on top of `base`.
    pub(crate) fn next(&mut self, base: WriteOptions) -> WriteOptions {
        let n = self.commits;
        self.commits = self.commits.wrapping_add(1);
        let mut id = *b"tessera-fixture\0";
        id[15] = n;
        WriteOptions { timestamp_ms: Some(EPOCH_MS + u64::from(n) * 60_000), writer_id: Some(id), ..base }
    }

    /// Options for the next commit with default sizes.
    pub(crate) fn tick(&mut self) -> WriteOptions {
        self.next(WriteOptions::default())
    }
}
