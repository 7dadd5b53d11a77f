//! Test support for Tessera's storage layer.
//!
//! - [`faulty::FaultyStore`]: an `ObjectStore` wrapper that injects seeded, counted faults
//!   (GET/PUT errors, latency, truncated range bodies, slow streams, targeted PUT failures).
//! - [`hostile::HostileStore`]: answers chosen GETs with a huge (or never-ending) body and
//!   counts what the reader pulled, to show reads stay bounded.
//! - [`counting::CountingStore`]: counts requests and bytes (used by the benchmarks).
//! - [`proxy::LatencyProxy`]: a loopback TCP proxy that adds per-connection and per-request
//!   delay (and optionally resets connections) in front of a local S3/Azure server.
//! - [`servers`]: the dataset roots the storage suites run against (local directory, memory,
//!   S3 on moto, Azure on Azurite), and the CI rule that storage tests are never skipped there.
//! - [`rng::XorShift`]: the small seeded generator behind every random choice here.
//!
//! See `testkit/README.md` for the servers, ports and environment variables.

pub mod counting;
pub mod faulty;
pub mod hostile;
pub mod proxy;
pub mod rng;
pub mod servers;

pub use counting::{CountingStore, Counts, LoggedGet};
pub use faulty::{FaultConfig, FaultCounts, FaultyStore, Latency, PutFault};
pub use hostile::{Claim, HostileStore};
pub use proxy::{LatencyProxy, ProxyConfig};
pub use rng::XorShift;
pub use servers::{Backend, TestRoot};
