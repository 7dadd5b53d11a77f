//! Progress bars (indicatif) with rows/s, MB/s and ETA.
//!
//! A bar is drawn on stderr only when stdout is a terminal and `--quiet` is not given, so
//! pipelines and scripts see clean output. Rates are computed here rather than with
//! indicatif's `{per_sec}` because a bar counts one unit (rows, fragments or bytes) while
//! the message shows two rates (rows and bytes).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What the bar's position counts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Total {
    /// A known number of units of the given name (rows, images, fragments).
    Count(u64, &'static str),
    /// A known number of input bytes (the position advances by bytes consumed).
    Bytes(u64),
}

/// A progress bar that may be hidden.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: ProgressBar,
    start: Instant,
    rows: u64,
    bytes: u64,
    by_bytes: bool,
    unit: &'static str,
    last_message: Option<Instant>,
}

/// True when progress bars should be drawn: not quiet and stdout is a terminal.
pub(crate) fn visible(quiet: bool) -> bool {
    !quiet && std::io::stdout().is_terminal()
}

impl Progress {
    /// A new bar labelled `label`; hidden unless `show`.
    pub(crate) fn new(label: &str, total: Total, show: bool) -> Self {
        let (len, by_bytes, unit) = match total {
            Total::Count(n, unit) => (n, false, unit),
            Total::Bytes(n) => (n, true, "bytes"),
        };
        let bar = if show {
            ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr_with_hz(8))
        } else {
            ProgressBar::hidden()
        };
        let template = if by_bytes {
            "{prefix:>8} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ETA {eta} {msg}"
        } else {
            "{prefix:>8} [{elapsed_precise}] {wide_bar} {pos}/{len} ETA {eta} {msg}"
        };
        let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style.progress_chars("=> "));
        bar.set_prefix(label.to_string());
        Self { bar, start: Instant::now(), rows: 0, bytes: 0, by_bytes, unit, last_message: None }
    }

    /// Records `units` more of the bar's unit (ignored for byte bars), `rows` rows and
    /// `bytes` bytes.
    pub(crate) fn advance(&mut self, units: u64, rows: u64, bytes: u64) {
        self.rows += rows;
        self.bytes += bytes;
        if self.bar.is_hidden() {
            return;
        }
        if self.by_bytes {
            self.bar.inc(bytes);
        } else {
            self.bar.inc(units);
        }
        let now = Instant::now();
        if self.last_message.is_none_or(|t| now - t >= Duration::from_millis(200)) {
            self.last_message = Some(now);
            self.bar.set_message(self.rates());
        }
    }

    /// "N rows/s, M MB/s" so far.
    fn rates(&self) -> String {
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        let unit = if self.unit == "images" { "images" } else { "rows" };
        format!("{:.0} {unit}/s, {:.1} MB/s", self.rows as f64 / secs, self.bytes as f64 / secs / 1e6)
    }

    /// Prints a line above the bar (or to stderr when hidden).
    pub(crate) fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Removes the bar.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// Seconds since the bar was made.
    pub(crate) fn seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}
