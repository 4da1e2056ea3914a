//! Example crate: see `tests/conformance.rs`, the whole of what a Rust host adds to run the delegation catalogue in its own `cargo test`.
