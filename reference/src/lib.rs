//! placeholder
#![allow(missing_docs)]
pub mod error; pub mod limits; pub mod dtype; pub mod schema; pub mod envelope; pub mod codec; pub mod paths; pub mod column; mod kinds; pub mod datafile; pub mod manifest; pub mod store; pub mod batch; mod stats; pub mod dataset; pub mod commit; pub mod dump;
pub use error::{Error, ErrorClass, Result}; pub use limits::Limits;
pub use schema::*; pub use dtype::*; pub use column::ColumnData; pub use batch::Batch; pub use dataset::{At, Dataset}; pub use commit::WriteOptions; pub use store::Store;
