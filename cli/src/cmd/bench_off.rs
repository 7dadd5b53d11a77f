//! `tessera bench` in a build without the `bench` feature: the loader links libtorch, which
//! the rest of the CLI does not need, so the command says how to get it instead.

use super::Ctx;
use crate::error::{CliError, CliResult, Exit};

/// Arguments of `tessera bench` (accepted and ignored: the command is not built in).
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The arguments of the full command (see `tessera bench --help` in a build with it).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    _args: Vec<String>,
}

/// Refuses with a usage error (exit 2) that names the cargo feature.
///
/// # Errors
/// Always.
pub(crate) fn run(_ctx: Ctx, _args: &Args) -> CliResult<Exit> {
    Err(CliError::usage("this tessera was built without `tessera bench`, which links libtorch")
        .note("build it with: cargo build --release -p tessera-cli --features bench (needs libtorch, see README)"))
}
