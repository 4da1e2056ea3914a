//! The stable numbers: JSON-RPC error codes a host may answer with, and the CLI's exit codes.

/// Error codes in a response's `error.code`, and how the harness reads each.
///
/// A refusal the protocol can express as data (a denied delegation, a
/// terminal instance) is NOT an error: it is a result with
/// `"outcome": "denied"` and a deny reason. Errors are for requests the host
/// could not process at all.
pub mod error_code {
    /// JSON-RPC: the host could not parse the request line. The harness
    /// writes only valid JSON, so this marks the host broken.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON-RPC: the line was JSON but not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// JSON-RPC: the host does not implement this method. Read as
    /// `unsupported` (never as a failure) for scenarios that need the method;
    /// see MODEL.md section 6 for the authority-widening exception.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// JSON-RPC: the params do not fit the method's schema. A host that
    /// rejects params the schema allows is reported as a host error.
    pub const INVALID_PARAMS: i64 = -32602;
    /// JSON-RPC: the host failed internally in a way it cannot describe better.
    pub const INTERNAL_ERROR: i64 = -32603;

    /// Ours: the method is implemented but this option or value is not (a
    /// fault point the host cannot arm, a sandbox kind it does not have).
    /// Read as `unsupported`, like BoGo's distinct "not implemented" exit.
    /// Never use it to refuse a request for MORE authority (a remote target,
    /// a worktree, a full-access child): that must be a `denied` result, or
    /// the harness cannot tell a safe refusal from a missing feature.
    pub const UNSUPPORTED_OPTION: i64 = -32001;
    /// Ours: the host failed internally (its store is unreachable, an
    /// invariant of its own broke). Reported as a host error for the step.
    pub const HOST_FAILURE: i64 = -32002;
    /// Ours: a method other than `initialize` arrived before `initialize`.
    pub const NOT_INITIALIZED: i64 = -32003;
    /// Ours: the host does not speak the `protocol_version` in `initialize`.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32004;

    /// Codes the harness reads as `unsupported` rather than as a failure.
    pub const UNSUPPORTED: &[i64] = &[METHOD_NOT_FOUND, UNSUPPORTED_OPTION];

    /// Every code above, with its name, for documentation and reports.
    pub const ALL: &[(i64, &str)] = &[
        (PARSE_ERROR, "parse_error"),
        (INVALID_REQUEST, "invalid_request"),
        (METHOD_NOT_FOUND, "method_not_found"),
        (INVALID_PARAMS, "invalid_params"),
        (INTERNAL_ERROR, "internal_error"),
        (UNSUPPORTED_OPTION, "unsupported_option"),
        (HOST_FAILURE, "host_failure"),
        (NOT_INITIALIZED, "not_initialized"),
        (UNSUPPORTED_PROTOCOL_VERSION, "unsupported_protocol_version"),
    ];

    /// The name of a code, or `None` for a code the protocol does not define.
    pub fn name(code: i64) -> Option<&'static str> {
        ALL.iter().find(|(c, _)| *c == code).map(|(_, n)| *n)
    }
}

/// Exit codes of the `delegation-harness` CLI, so CI can branch on them.
///
/// When several apply, the highest-priority one wins: harness error, then
/// violations, then inconclusive, then success.
pub mod exit_code {
    /// Every scenario that ran passed. Scenarios reported `unsupported`
    /// (the host lacks the capability) do not change this.
    pub const SUCCESS: i32 = 0;
    /// At least one invariant violation: the host broke a rule, or failed a
    /// step (hung, crashed, wrote a malformed or over-long line).
    pub const VIOLATIONS: i32 = 1;
    /// The harness could not do its job: bad usage, an unreadable scenario, an
    /// adapter that cannot be started at all, a failure of the harness's own
    /// observers. Says nothing about the host.
    pub const HARNESS_ERROR: i32 = 2;
    /// No violation, but at least one result is `inconclusive`: a negative
    /// check's positive control failed (MODEL.md section 5), so "nothing bad
    /// happened" proves nothing; or `unverified`: a check rests only on values
    /// the adapter declared it inferred. Kept apart from success so that CI does not
    /// count "could not tell" as a pass, and apart from violations so that a
    /// host is not blamed for a rule it was never shown to break.
    pub const INCONCLUSIVE: i32 = 3;

    /// The exit code for a run's tallies, by the priority above.
    pub fn for_run(harness_error: bool, violations: usize, inconclusive: usize) -> i32 {
        if harness_error {
            HARNESS_ERROR
        } else if violations > 0 {
            VIOLATIONS
        } else if inconclusive > 0 {
            INCONCLUSIVE
        } else {
            SUCCESS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_distinct_and_named() {
        let mut codes: Vec<i64> = error_code::ALL.iter().map(|(c, _)| *c).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), error_code::ALL.len());
        assert_eq!(error_code::name(-32601), Some("method_not_found"));
        assert_eq!(error_code::name(-1), None);
        // Ours stay in JSON-RPC's range reserved for implementation-defined server errors.
        for (code, name) in error_code::ALL {
            assert!((-32768..=-32000).contains(code), "{name} = {code}");
        }
    }

    #[test]
    fn exit_code_priority() {
        assert_eq!(exit_code::for_run(false, 0, 0), exit_code::SUCCESS);
        assert_eq!(exit_code::for_run(false, 0, 2), exit_code::INCONCLUSIVE);
        assert_eq!(exit_code::for_run(false, 1, 2), exit_code::VIOLATIONS);
        assert_eq!(exit_code::for_run(true, 1, 2), exit_code::HARNESS_ERROR);
    }
}
