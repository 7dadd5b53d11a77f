//! Link settings every crate that links libtorch needs (see README "Building with libtorch"):
//! an rpath so binaries find libtorch without `LD_LIBRARY_PATH`, and `--no-as-needed -ltorch`
//! so the linker keeps `libtorch_cuda.so` and CUDA is available at run time.
pub(crate) fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        if let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.to_string_lossy());
        }
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch");
    }
}
