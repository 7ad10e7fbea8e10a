//! The one integration test binary: shared support in `common`, cases in `suite`.

// Test helpers panic on the unexpected: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
mod suite;
