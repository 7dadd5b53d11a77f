# Sourced by scripts/test.sh (and by scripts/readme.sh when TESSERA_IN_TEST=1): one build
# profile, one set of build outputs, for the whole test run.
#
# The README's commands build `--release`, as a user would, and the suites want debug
# assertions; building both compiled every dependency twice in a cold run (target/debug and
# target/release, about 10 minutes more on 2 cores). Inside the tests `release` is made a
# debug build instead (no optimisation, debug assertions and overflow checks on, as many
# codegen units as `dev`), and every build of the run uses it: the cargo commands of
# scripts/test.sh, scripts/python.sh (TESSERA_BUILD_PROFILE) and the README's. The profile's
# settings are part of cargo's fingerprint, so a later `cargo build --release` outside the
# tests rebuilds optimised; the test run never leaves slow binaries behind as fast ones.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=0
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256
export TESSERA_BUILD_PROFILE=release
