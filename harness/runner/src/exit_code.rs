//! The documented exit codes of `delegation-harness run` (and of every subcommand).
//!
//! CI scripts branch on these, so they never change meaning.

/// Every selected scenario passed, or ended as unsupported, inconclusive or a listed known failure.
pub const OK: i32 = 0;
/// At least one scenario failed, errored (host crashed, timed out, broke the protocol) or is a stale known failure.
pub const VIOLATIONS: i32 = 1;
/// The harness could not do its job: a usage error, an unreadable or invalid scenario or expectations file, a reporter that could not write.
pub const HARNESS_ERROR: i32 = 2;
