//! The conformance adapter protocol: how the runner talks to an implementation.
//!
//! An implementation under test is one executable with subcommands (normative text:
//! `conformance/README.md`, "Conformance adapter protocol"):
//!
//! | command | success | reject | not supported |
//! |---|---|---|---|
//! | `ADAPTER info` | exit 0, JSON on stdout | — | — |
//! | `ADAPTER read <dir> [--version N] [--branch B] [--tag T]` | exit 0, canonical dump on stdout | exit 1, stderr `error[<class>]: <message>` | exit 89 |
//! | `ADAPTER write <logical.json> <out-dir>` | exit 0 | exit 1, stderr `error[<class>]: <message>` | exit 89 |
//!
//! Any other exit status, or death by a signal, is a crash; running past the case's time limit
//! is a timeout (the runner kills the adapter's process group).
//!
//! [`Adapter::Reference`] runs the reference implementation in this process instead, with the
//! same outcomes (a panic is a crash).

use std::ffi::OsString;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::case::Args;
use crate::logical::{Logical, RefWrite};
use crate::reference_impl;

/// Exit status of a read or write that rejects its input with an `error[<class>]` line.
pub const EXIT_REJECT: i32 = 1;
/// Exit status of an operation or feature the implementation does not support.
pub const EXIT_NOT_SUPPORTED: i32 = 89;
/// The spec version string adapters list in `info`.
pub const SPEC_VERSION: &str = "1.0-draft";

/// What `ADAPTER info` prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterInfo {
    /// The implementation's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The spec versions it implements: a JSON array of strings, e.g. `["1.0-draft"]`. A lone
    /// string (`"1.0-draft"`) is accepted as a one-element list.
    #[serde(deserialize_with = "string_or_list")]
    pub spec: Vec<String>,
    /// The operations it offers: `read`, `write`.
    pub operations: Vec<String>,
    /// Free-form feature names, recorded in reports (e.g. `codec:zstd`).
    #[serde(default)]
    pub features: Vec<String>,
}

/// `spec` as an array of strings, or one string taken as a one-element array.
fn string_or_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    match OneOrMany::deserialize(d) {
        Ok(OneOrMany::One(s)) => Ok(vec![s]),
        Ok(OneOrMany::Many(v)) => Ok(v),
        Err(_) => Err(serde::de::Error::custom(
            "`spec` must be an array of strings (the spec versions implemented), e.g. [\"1.0-draft\"]",
        )),
    }
}

impl AdapterInfo {
    /// True if `operations` lists `op`.
    #[must_use]
    pub fn offers(&self, op: &str) -> bool {
        self.operations.iter().any(|o| o == op)
    }

    /// Whether the implementation lists `feature` (e.g. [`ENCODED_IMAGES_FEATURE`]).
    #[must_use]
    pub fn has_feature(&self, feature: &str) -> bool {
        self.features.iter().any(|f| f == feature)
    }

    /// The info of the reference implementation.
    #[must_use]
    pub fn reference(name: &str) -> Self {
        Self {
            name: name.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            spec: vec![SPEC_VERSION.to_string()],
            operations: vec!["read".into(), "write".into()],
            features: [
                "codec:none",
                "codec:lz4",
                "codec:zstd",
                "deletion-vectors",
                "branches",
                "tags",
                ENCODED_IMAGES_FEATURE,
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

/// The `info` feature by which a reader says it implements the reader flag `ENCODED_IMAGES`
/// (SPEC.md FLG-08: all three image codecs). A reader without it is a core reader, which must
/// answer `unsupported` for every version that sets the flag; the runner then skips the cases of
/// encoded image columns instead of failing them.
pub const ENCODED_IMAGES_FEATURE: &str = "encoded-images";

/// What one invocation did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Exit 0. For a read: the parsed dump, or why stdout is not one. For a write: `Ok(Null)`.
    Accepted(Result<Value, String>),
    /// Exit 1: the class from the `error[<class>]` line (`None` if the line is missing or
    /// garbled) and the message.
    Rejected {
        /// The error class.
        class: Option<String>,
        /// The message (or the first stderr line when there is no well-formed error line).
        message: String,
    },
    /// Exit 89: the operation or a feature the input needs is not implemented.
    NotSupported(String),
    /// Any other exit status, a signal, a panic, or an adapter that cannot be started.
    Crashed(String),
    /// The time limit passed.
    TimedOut,
}

/// One invocation: its outcome and what the runner saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// The outcome.
    pub outcome: Outcome,
    /// The exit code, when the process exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the process, if any.
    pub signal: Option<i32>,
    /// The first lines of stderr (at most about 1000 characters).
    pub stderr_head: String,
    /// Wall time.
    pub duration: Duration,
}

/// An implementation under test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Adapter {
    /// The reference crate, in this process.
    Reference,
    /// An external command (the adapter executable and leading arguments).
    External {
        /// A short name for reports.
        name: String,
        /// The command line, split into words.
        argv: Vec<String>,
    },
}

/// Splits a command line into words: whitespace separates; single quotes keep everything;
/// double quotes keep everything but `\"` and `\\`; a backslash outside quotes escapes the next
/// character.
///
/// # Errors
/// An unterminated quote or a trailing backslash.
pub fn split_command(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut it = s.chars();
    while let Some(c) = it.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match it.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(format!("unterminated single quote in {s:?}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match it.next() {
                        Some('"') => break,
                        Some('\\') => match it.next() {
                            Some(c @ ('"' | '\\')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err(format!("unterminated double quote in {s:?}")),
                        },
                        Some(c) => cur.push(c),
                        None => return Err(format!("unterminated double quote in {s:?}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.push(it.next().ok_or_else(|| format!("trailing backslash in {s:?}"))?);
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// The class and message of an `error[<class>]: <message>` line.
#[must_use]
pub fn parse_error_line(line: &str) -> Option<(String, String)> {
    let rest = line.trim_end().strip_prefix("error[")?;
    let (class, message) = rest.split_once("]:")?;
    let ok = !class.is_empty() && class.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    ok.then(|| (class.to_string(), message.trim_start().to_string()))
}

fn head(text: &str) -> String {
    let mut out: String = text.lines().take(8).collect::<Vec<_>>().join("\n");
    if out.chars().count() > 1000 {
        out = out.chars().take(1000).collect::<String>() + "…";
    }
    out
}

/// Runs `f` on another thread, waiting at most `timeout`; `None` on timeout or if the thread
/// died. A thread that runs too long is left behind.
fn in_thread<T: Send + 'static>(timeout: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name("in-process implementation".into()).spawn(move || {
        let _ = tx.send(f());
    });
    spawned.ok()?;
    rx.recv_timeout(timeout).ok()
}

/// The raw result of running a command.
struct RawRun {
    status: Option<ExitStatus>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    timed_out: bool,
    start_error: Option<String>,
    duration: Duration,
}

fn reader_thread(mut r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

fn run_command(argv: &[String], extra: &[OsString], timeout: Duration) -> RawRun {
    let start = Instant::now();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).args(extra).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        cmd.process_group(0);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return RawRun {
                status: None,
                stdout: Vec::new(),
                stderr: Vec::new(),
                timed_out: false,
                start_error: Some(format!("cannot start {:?}: {e}", argv[0])),
                duration: start.elapsed(),
            };
        }
    };
    let out = child.stdout.take().map(reader_thread);
    let err = child.stderr.take().map(reader_thread);
    let deadline = start + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                // The adapter runs in its own process group: end the whole group, so helper
                // processes it started cannot keep the pipes open.
                #[cfg(unix)]
                {
                    let _ = Command::new("kill")
                        .args(["-KILL", "--", &format!("-{}", child.id())])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status();
                }
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => break None,
        }
    };
    let duration = start.elapsed();
    let collect = |rx: Option<mpsc::Receiver<Vec<u8>>>| {
        rx.and_then(|rx| rx.recv_timeout(Duration::from_secs(if timed_out { 1 } else { 30 })).ok()).unwrap_or_default()
    };
    RawRun { status, stdout: collect(out), stderr: collect(err), timed_out, start_error: None, duration }
}

impl Adapter {
    /// `ref` or `reference` for the in-process reference; anything else is a command line.
    ///
    /// # Errors
    /// An empty or badly quoted command.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        if spec == "ref" || spec == "reference" {
            return Ok(Self::Reference);
        }
        let (name, cmd) = match spec.split_once('=') {
            Some((n, c)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) => {
                (Some(n.to_string()), c)
            }
            _ => (None, spec),
        };
        let argv = split_command(cmd)?;
        if argv.is_empty() {
            return Err("empty adapter command".into());
        }
        let name = name.unwrap_or_else(|| {
            Path::new(&argv[0]).file_name().map_or_else(|| argv[0].clone(), |n| n.to_string_lossy().into_owned())
        });
        Ok(Self::External { name, argv })
    }

    /// A short name for reports.
    #[must_use]
    pub fn label(&self) -> String {
        match self {
            Self::Reference => "reference (in process)".into(),
            Self::External { name, .. } => name.clone(),
        }
    }

    /// The command line, for reports (`None` in process).
    #[must_use]
    pub fn command(&self) -> Option<&[String]> {
        match self {
            Self::Reference => None,
            Self::External { argv, .. } => Some(argv),
        }
    }

    /// Asks the implementation what it is (`ADAPTER info`).
    ///
    /// # Errors
    /// The adapter failed, timed out or printed something else than an info object.
    pub fn info(&self, timeout: Duration) -> Result<AdapterInfo, String> {
        let Self::External { argv, .. } = self else {
            return Ok(AdapterInfo::reference("tessera-reference (in process)"));
        };
        let r = run_command(argv, &["info".into()], timeout);
        if let Some(e) = r.start_error {
            return Err(e);
        }
        if r.timed_out {
            return Err(format!("`info` ran longer than {} ms", timeout.as_millis()));
        }
        if r.status.and_then(|s| s.code()) != Some(0) {
            return Err(format!(
                "`info` failed ({}): {}",
                describe(r.status),
                head(&String::from_utf8_lossy(&r.stderr))
            ));
        }
        let info: AdapterInfo = serde_json::from_slice(&r.stdout).map_err(|e| {
            format!(
                "`info` printed no info object: {e}; expected {{\"name\": string, \"version\": string, \"spec\": \
                 [\"{SPEC_VERSION}\", ...], \"operations\": [\"read\", \"write\"], \"features\": [string, ...]}}"
            )
        })?;
        if !info.spec.iter().any(|s| s == SPEC_VERSION) {
            return Err(format!("`info` lists spec versions {:?}, not {SPEC_VERSION:?}", info.spec));
        }
        Ok(info)
    }

    /// Reads version `args` of the dataset at `root` and returns its dump.
    #[must_use]
    pub fn read(&self, root: &Path, args: Option<&Args>, timeout: Duration) -> Observation {
        match self {
            Self::Reference => {
                let root = root.to_path_buf();
                let args = args.cloned();
                let start = Instant::now();
                let got = in_thread(timeout, move || reference_impl::read(&root, args.as_ref()));
                let duration = start.elapsed();
                let (outcome, stderr) = match got {
                    None if duration >= timeout => (Outcome::TimedOut, String::new()),
                    None => (Outcome::Crashed("the reading thread died".into()), String::new()),
                    Some(reference_impl::Outcome::Accepted(v)) => (Outcome::Accepted(Ok(v)), String::new()),
                    Some(reference_impl::Outcome::Rejected { class, message }) => {
                        let line = format!("error[{class}]: {message}");
                        (Outcome::Rejected { class: Some(class), message }, line)
                    }
                    Some(reference_impl::Outcome::Crashed(m)) => (Outcome::Crashed(format!("panic: {m}")), m),
                };
                in_process_observation(outcome, &stderr, duration)
            }
            Self::External { argv, .. } => {
                let mut extra: Vec<OsString> = vec!["read".into(), root.as_os_str().to_owned()];
                if let Some(a) = args {
                    if let Some(v) = a.version {
                        extra.extend(["--version".into(), v.to_string().into()]);
                    }
                    if let Some(b) = &a.branch {
                        extra.extend(["--branch".into(), b.into()]);
                    }
                    if let Some(t) = &a.tag {
                        extra.extend(["--tag".into(), t.into()]);
                    }
                    if let Some(v) = &a.view {
                        extra.extend(["--view".into(), v.into()]);
                    }
                }
                interpret(run_command(argv, &extra, timeout), true)
            }
        }
    }

    /// Writes the logical description at `logical` as a dataset rooted at `out` (an existing,
    /// empty directory).
    #[must_use]
    pub fn write(&self, logical: &Path, out: &Path, timeout: Duration) -> Observation {
        match self {
            Self::Reference => {
                let (logical, out) = (logical.to_path_buf(), out.to_path_buf());
                let start = Instant::now();
                let got = in_thread(timeout, move || {
                    catch_unwind(AssertUnwindSafe(|| -> Result<(), (String, String)> {
                        let l = Logical::read(&logical).map_err(|e| ("usage".to_string(), e))?;
                        l.write_with_reference(&out, &RefWrite::default())
                            .map_err(|e| (e.class().as_str().to_string(), e.to_string()))
                    }))
                });
                let duration = start.elapsed();
                let (outcome, stderr) = match got {
                    None if duration >= timeout => (Outcome::TimedOut, String::new()),
                    None => (Outcome::Crashed("the writing thread died".into()), String::new()),
                    Some(Ok(Ok(()))) => (Outcome::Accepted(Ok(Value::Null)), String::new()),
                    Some(Ok(Err((class, message)))) => {
                        let line = format!("error[{class}]: {message}");
                        (Outcome::Rejected { class: Some(class), message }, line)
                    }
                    Some(Err(p)) => {
                        let m = p
                            .downcast_ref::<&str>()
                            .map(ToString::to_string)
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_default();
                        (Outcome::Crashed(format!("panic: {m}")), m)
                    }
                };
                in_process_observation(outcome, &stderr, duration)
            }
            Self::External { argv, .. } => {
                let extra: Vec<OsString> =
                    vec!["write".into(), logical.as_os_str().to_owned(), out.as_os_str().to_owned()];
                interpret(run_command(argv, &extra, timeout), false)
            }
        }
    }
}

fn in_process_observation(outcome: Outcome, stderr: &str, duration: Duration) -> Observation {
    let exit_code = match &outcome {
        Outcome::Accepted(_) => Some(0),
        Outcome::Rejected { .. } => Some(EXIT_REJECT),
        Outcome::NotSupported(_) => Some(EXIT_NOT_SUPPORTED),
        Outcome::Crashed(_) | Outcome::TimedOut => None,
    };
    Observation { outcome, exit_code, signal: None, stderr_head: head(stderr), duration }
}

fn describe(status: Option<ExitStatus>) -> String {
    match status {
        Some(s) => match (s.code(), signal_of(s)) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => "unknown exit status".into(),
        },
        None => "no exit status".into(),
    }
}

#[cfg(unix)]
fn signal_of(s: ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt as _;
    s.signal()
}

#[cfg(not(unix))]
fn signal_of(_: ExitStatus) -> Option<i32> {
    None
}

/// Maps a finished command to an outcome by the protocol's exit codes.
fn interpret(r: RawRun, read: bool) -> Observation {
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    let first = stderr.lines().next().unwrap_or("").to_string();
    let exit_code = r.status.and_then(|s| s.code());
    let signal = r.status.and_then(signal_of);
    let outcome = if let Some(e) = r.start_error {
        Outcome::Crashed(e)
    } else if r.timed_out {
        Outcome::TimedOut
    } else {
        match exit_code {
            Some(0) if read => Outcome::Accepted(
                serde_json::from_slice::<Value>(&r.stdout).map_err(|e| format!("stdout is not one JSON text: {e}")),
            ),
            Some(0) => Outcome::Accepted(Ok(Value::Null)),
            Some(EXIT_REJECT) => match parse_error_line(&first) {
                Some((class, message)) => Outcome::Rejected { class: Some(class), message },
                None => Outcome::Rejected { class: None, message: format!("no `error[<class>]: …` line: {first:?}") },
            },
            Some(EXIT_NOT_SUPPORTED) => Outcome::NotSupported(first),
            _ => Outcome::Crashed(format!("{}: {first}", describe(r.status))),
        }
    };
    Observation { outcome, exit_code, signal, stderr_head: head(&stderr), duration: r.duration }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_spec_is_a_list_or_one_string() {
        let list: AdapterInfo =
            serde_json::from_str(r#"{"name":"n","version":"1","spec":["1.0-draft"],"operations":["read"]}"#).unwrap();
        let one: AdapterInfo =
            serde_json::from_str(r#"{"name":"n","version":"1","spec":"1.0-draft","operations":["read"]}"#).unwrap();
        assert_eq!(list, one);
        let e = serde_json::from_str::<AdapterInfo>(r#"{"name":"n","version":"1","spec":1,"operations":[]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("array of strings"), "{e}");
    }

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split_command(r#"python3 -m  reader "a b" 'c "d"' e\ f"#).unwrap(),
            ["python3", "-m", "reader", "a b", "c \"d\"", "e f"]
        );
        assert!(split_command("'open").is_err());
        assert_eq!(Adapter::parse("ref").unwrap(), Adapter::Reference);
        assert_eq!(
            Adapter::parse("py=python3 x.py").unwrap(),
            Adapter::External { name: "py".into(), argv: vec!["python3".into(), "x.py".into()] }
        );
    }

    #[test]
    fn error_lines() {
        assert_eq!(parse_error_line("error[invalid]: bad thing: x"), Some(("invalid".into(), "bad thing: x".into())));
        assert_eq!(parse_error_line("error[not_found]:x"), Some(("not_found".into(), "x".into())));
        assert_eq!(parse_error_line("error: bad"), None);
        assert_eq!(parse_error_line("error[Invalid]: bad"), None);
    }
}
