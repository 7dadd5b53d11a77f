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

    trycmd::TestCases::new()
        .register_bin("tessera", PathBuf::from(env!("CARGO_BIN_EXE_tessera")))
        .register_bin("make_inputs", example("make_inputs"))
        .env("NO_COLOR", "1")
        .case(&case)
        .run();
}
