//! Link settings for libtorch, only when the `bench` feature links it (the loader's own build
//! script, shared so that every crate linking libtorch links it the same way).

#[cfg(feature = "bench")]
#[path = "../loader-tch/build.rs"]
mod tch_link;

fn main() {
    #[cfg(feature = "bench")]
    tch_link::main();
}
