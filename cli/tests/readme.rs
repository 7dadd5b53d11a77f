//! The README's console blocks, run against the built binaries with `trycmd`, so the
//! two-minute tour cannot drift from the CLI again.
//!
//! Every `console` block of the top-level README.md is one step of a single sequence, run in
//! one fresh scratch directory (the tour's commands build on each other). `[..]` in an
//! expected line and a `...` line stand for output that varies (timings, sizes).
//!
//! The tour's input generator is the `make_inputs` example of this crate, which `cargo test`
//! builds along with the tests.

use std::path::{Path, PathBuf};

/// The `make_inputs` example next to this test's executable (`target/<profile>/examples/`).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    // target/<profile>/deps/readme-<hash> -> target/<profile>/examples/<name>
    let profile_dir = exe.parent().and_then(Path::parent).expect("the test runs from target/<profile>/deps");
    let path = profile_dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is missing: `cargo test -p tessera-cli` builds the examples (or run `cargo build -p tessera-cli --example {name}`)",
        path.display()
    );
    path
}

#[test]
fn readme_console_blocks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md at the workspace root");
    // trycmd runs a `NAME.md` case in a sandbox when `NAME.out/` sits beside it, and only
    // checks the files that `NAME.out/` lists (none here): the tour writes where it likes.
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let case = scratch.path().join("README.md");
    std::fs::write(&case, readme).expect("copy of the README");
    std::fs::create_dir(scratch.path().join("README.out")).expect("the sandbox marker");

    let cases = trycmd::TestCases::new();
    cases
        .register_bin("tessera", PathBuf::from(env!("CARGO_BIN_EXE_tessera")))
        .register_bin("make_inputs", example("make_inputs"))
        .env("NO_COLOR", "1")
        .case(&case);
    // The tour's media part makes its clips with the ffmpeg and sox tools, as a user would
    // (scripts/setup.d/20-media.sh installs them; without them those steps fail).
    for tool in ["ffmpeg", "sox"] {
        if let Some(path) = on_path(tool) {
            cases.register_bin(tool, path);
        }
    }
    cases.run();
}

/// Where `PATH` has an executable `name`.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}
