//! The `delegation-harness` command line.
fn main() {}
