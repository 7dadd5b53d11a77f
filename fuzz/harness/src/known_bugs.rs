//! Where filters for open bugs of the reference crate go, and the helpers they share.
//!
//! A fuzzer stops at the first crash, so while a reported bug is not fixed the harness skips
//! the inputs that reach it (a filter here, named after its finding in `fuzz/README.md`) and
//! the rest of the input space keeps being explored. The minimized inputs stay in
//! `fuzz/regressions/<target>/`; once the bug is fixed the filter is deleted and the replay test
//! runs them through the fixed code.
//!
//! No bug is open today: TFZ-1 to TFZ-5 are fixed in the reference and their inputs replay
//! unfiltered.

use serde::de::DeserializeOwned;

/// Byte budget of [`bounded_decode`]: above every body the harness limits allow.
///
/// (TFZ-1, a string's declared length allocated before any check, is fixed in the reference:
/// `envelope::decode_body` bounds every length by a limit of about twice the body `[ENC-04]`.
/// The harness still decodes with a budget of its own wherever it decodes outside the reader.)
const DECODE_BUDGET: usize = 4 << 20;

/// Decodes a bincode body with the format's configuration plus a byte budget, so a declared
/// length can never allocate more than the budget; trailing bytes are an error, as in the
/// reference's `decode_body`.
///
/// # Errors
/// Whatever bincode reports (`LimitExceeded` for a declared length above the budget).
pub fn bounded_decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, bincode::error::DecodeError> {
    let cfg = bincode::config::standard().with_little_endian().with_fixed_int_encoding().with_limit::<DECODE_BUDGET>();
    let (v, used) = bincode::serde::decode_from_slice(bytes, cfg)?;
    if used == bytes.len() { Ok(v) } else { Err(bincode::error::DecodeError::OtherString("trailing bytes".into())) }
}

/// The in-memory store the store targets write into. (TFZ-3, empty block ranges rejected by
/// `InMemory`, is fixed in the reference: `Store::get_ranges` serves empty ranges itself.)
#[must_use]
pub fn memory_store() -> tessera::Store {
    tessera::Store::from_object_store(std::sync::Arc::new(object_store::memory::InMemory::new()), "", true)
}
