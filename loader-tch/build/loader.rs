//! Build script of `tessera-loader-tch`: the link settings every crate that links libtorch
//! shares (`../build.rs`), plus the small C++ shim in `csrc/` (storage use counts, which tch
//! does not expose), compiled against the same libtorch headers.
#[path = "../build.rs"]
mod link;

fn main() {
    link::main();
    println!("cargo:rerun-if-changed=csrc/storage.cpp");
    let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") else {
        panic!("torch-sys did not report libtorch's lib directory (DEP_TCH_LIBTORCH_LIB)");
    };
    let root = std::path::Path::new(&lib).parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .include(root.join("include"))
        .include(root.join("include/torch/csrc/api/include"))
        .warnings(false)
        .file("csrc/storage.cpp")
        .compile("tessera_storage");
}
