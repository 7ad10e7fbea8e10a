//! The one integration test binary: shared support in `common`, cases in `suite`.
mod common;
mod suite;
