//! The delegation catalogue as this crate's `cargo test`: each scenario is a named test (`cargo test --test conformance -- zc/` runs the zero-child ones).
//!
//! A real host replaces `reference_host()` with
//! `Conformance::command("target/debug/my-host --adapter")` (its adapter
//! speaking host protocol v1) and adds `.expectations("ci/known.json")`.
use delegation_runner::Conformance;

fn main() -> std::process::ExitCode {
    let catalogue = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
    Conformance::reference_host()
        .catalogue(catalogue)
        .libtest_main()
}
