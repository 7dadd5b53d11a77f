//! Streams Tessera dataset versions into tch tensors (work in progress).
pub mod sampler;
