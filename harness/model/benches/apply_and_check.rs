//! Benchmark: applying one operation to the model and checking every invariant.
fn main() {}
