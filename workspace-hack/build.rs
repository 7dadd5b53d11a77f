//! A build script, so that cargo applies the `[build-dependencies]` this package lists.
fn main() {}
