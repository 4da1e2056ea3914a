//! Verdicts and the evidence behind them: what every reporter renders.

use std::time::Duration;

use delegation_model::{InvariantId, ReportedValue, Tier};
use serde::Serialize;
use serde_json::Value;

/// The verdict of one scenario against one host.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Verdict {
    Pass,
    /// An expectation failed or an invariant was violated; see the failures.
    Fail,
    /// The positive control did not pass, so this negative proves nothing.
    Inconclusive {
        control: String,
        control_verdict: String,
    },
    /// The host lacks a capability the scenario needs.
    Unsupported {
        missing: Vec<String>,
    },
    /// Nothing failed on what was observed, but some check held (or failed)
    /// only on values the adapter declared it inferred: not a pass, and not
    /// the host's failure either (the provenance rule).
    Unverified {
        /// Each such check, as `at (values inferred by the adapter)`.
        rests_on: Vec<String>,
    },
    /// Listed in the expectations file and it ended as listed (fail, unsupported or error).
    KnownFailure {
        reason: String,
        /// The host's issue link, when the entry gives one.
        #[serde(skip_serializing_if = "Option::is_none")]
        issue: Option<String>,
        /// What the entry expected: `fail`, `unsupported` or `error`.
        expected: String,
        /// A MUST-tier known failure or error is a known security violation, shown as such.
        security: bool,
    },
    /// Listed as a known failure but it passed: the expectations file is out of date.
    Stale {
        reason: String,
    },
    /// The host crashed, timed out or broke the protocol.
    Error {
        message: String,
        stderr_tail: String,
    },
    /// The harness itself failed (its observers, its store directory, its
    /// descriptors or processes): nothing is concluded about the host, and
    /// the run exits 2, never 1, for it.
    HarnessError {
        message: String,
    },
}

impl Verdict {
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Inconclusive { .. } => "inconclusive",
            Verdict::Unsupported { .. } => "unsupported",
            Verdict::Unverified { .. } => "unverified",
            // A capability the host says it lacks is not a failure, even a listed one.
            Verdict::KnownFailure { expected, .. } if expected == "unsupported" => {
                "known-unsupported"
            }
            Verdict::KnownFailure { expected, .. } if expected == "unverified" => {
                "known-unverified"
            }
            Verdict::KnownFailure { expected, .. } if expected == "inconclusive" => {
                "known-inconclusive"
            }
            Verdict::KnownFailure { .. } => "known-failure",
            Verdict::Stale { .. } => "stale",
            Verdict::Error { .. } => "error",
            Verdict::HarnessError { .. } => "harness-error",
        }
    }

    /// How every reporter words a known failure: the security label first,
    /// so a MUST-tier one cannot be mistaken for a harmless skip.
    pub fn known_failure_text(&self) -> Option<String> {
        let Verdict::KnownFailure {
            reason,
            issue,
            expected,
            security,
        } = self
        else {
            return None;
        };
        Some(format!(
            "{}known {expected}: {reason}{}",
            if *security {
                "KNOWN SECURITY VIOLATION (MUST): "
            } else {
                ""
            },
            issue
                .as_ref()
                .map(|i| format!(" ({i})"))
                .unwrap_or_default()
        ))
    }

    /// Whether this verdict makes the run fail (exit code 1).
    pub fn fails_run(&self) -> bool {
        matches!(
            self,
            Verdict::Fail | Verdict::Stale { .. } | Verdict::Error { .. }
        )
    }
}

/// What kind of check failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// A step's `expect` did not hold.
    Expectation,
    /// An invariant checker found a violation in the history.
    Invariant,
}

/// One failed check, with everything a host maintainer needs to act on it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Failure {
    pub kind: FailureKind,
    /// The invariant(s) this failure is evidence against: the violated id, or
    /// for an expectation the ids the scenario checks.
    pub invariants: Vec<InvariantId>,
    /// Step index, from 0.
    pub step: usize,
    /// Where in the scenario file: `steps[3].expect.delta.instances`, or the invariant id.
    pub at: String,
    pub expected: Value,
    pub observed: Value,
    pub message: String,
    /// What the harness's observers saw during the step, the host's reply and its stderr tail.
    pub evidence: Value,
    /// The values behind this failure that the adapter declared inferred; a
    /// failure with any rests on the adapter's word, not on an observation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inferred: Vec<ReportedValue>,
}

/// The result of one scenario, as reporters receive it.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioResult {
    pub id: String,
    pub area: String,
    pub title: String,
    pub tier: Tier,
    pub checks: Vec<InvariantId>,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// What the verdict would have been without the expectations file or the control.
    pub raw_verdict: String,
    pub failures: Vec<Failure>,
    pub steps_run: usize,
    pub steps_total: usize,
    #[serde(with = "millis")]
    pub duration: Duration,
    /// The normalised transcript (aliases for ids), for snapshots and the JSON report.
    pub transcript: Value,
    /// How the transcript compared with its committed snapshot, when the
    /// run checks snapshots (`--snapshots DIR`): a change is a violation of
    /// its own, whatever the verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotCheck>,
}

/// A transcript against its committed snapshot.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum SnapshotCheck {
    Unchanged,
    /// None was committed and insta recorded this one (`INSTA_UPDATE=always`).
    Recorded,
    /// Different from the committed snapshot, or none committed yet.
    Changed {
        /// What changed and what to do about it, bounded (the whole new
        /// snapshot is in `<name>.snap.new` when insta wrote one).
        message: String,
    },
}

/// What a secret is replaced with in every report.
pub const REDACTED: &str = "<secret>";

impl ScenarioResult {
    /// Replaces every occurrence of each secret (capability secrets, the
    /// canaries the harness planted) in everything a reporter renders: the
    /// verdict's messages and the host's stderr tail, each failure, the
    /// transcript. A report may be published; a secret never is.
    pub fn redact(&mut self, secrets: &[String]) {
        let secrets: Vec<&str> = secrets
            .iter()
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .collect();
        if secrets.is_empty() {
            return;
        }
        let holds_one = |t: &str| secrets.iter().any(|secret| t.contains(secret));
        let text = |t: &mut String| {
            for secret in &secrets {
                if t.contains(secret) {
                    *t = t.replace(secret, REDACTED);
                }
            }
        };
        match &mut self.verdict {
            Verdict::Error {
                message,
                stderr_tail,
            } => {
                text(message);
                text(stderr_tail);
            }
            Verdict::HarnessError { message } => text(message),
            Verdict::Stale { reason } => text(reason),
            Verdict::KnownFailure { reason, .. } => text(reason),
            Verdict::Unverified { rests_on } => rests_on.iter_mut().for_each(text),
            Verdict::Unsupported { missing } => missing.iter_mut().for_each(text),
            Verdict::Inconclusive { .. } | Verdict::Pass | Verdict::Fail => {}
        }
        for f in &mut self.failures {
            text(&mut f.at);
            text(&mut f.message);
            for v in [&mut f.expected, &mut f.observed, &mut f.evidence] {
                redact_value(v, &text, &holds_one);
            }
        }
        redact_value(&mut self.transcript, &text, &holds_one);
    }
}

/// Redacts every string in `value` with `text`; `holds_one` says whether a
/// key needs it, so that the keys without a secret (nearly all) are not copied.
fn redact_value(value: &mut Value, text: &impl Fn(&mut String), holds_one: &impl Fn(&str) -> bool) {
    match value {
        Value::String(s) => text(s),
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| redact_value(v, text, holds_one)),
        Value::Object(map) => {
            // Keys too: a host may name something after a secret. Only
            // those are moved; a transcript has many keys and few secrets.
            let renamed: Vec<(String, String)> = map
                .keys()
                .filter(|key| holds_one(key))
                .filter_map(|key| {
                    let mut redacted = key.clone();
                    text(&mut redacted);
                    (redacted != *key).then(|| (key.clone(), redacted))
                })
                .collect();
            for (key, redacted) in renamed {
                if let Some(v) = map.remove(&key) {
                    map.insert(redacted, v);
                }
            }
            map.values_mut()
                .for_each(|v| redact_value(v, text, holds_one));
        }
        _ => {}
    }
}

mod millis {
    use std::time::Duration;

    use serde::Serializer;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

/// Totals of a run, by verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub total: usize,
    pub pass: usize,
    pub fail: usize,
    pub inconclusive: usize,
    pub unsupported: usize,
    /// Checks that rest on the adapter's inference alone (neither pass nor fail).
    pub unverified: usize,
    /// Listed `unverified` entries that ended as listed.
    pub known_unverified: usize,
    /// Listed `inconclusive` entries that ended as listed.
    pub known_inconclusive: usize,
    /// Listed `fail` or `error` entries that ended as listed.
    pub known_failure: usize,
    /// Listed `unsupported` entries that ended as listed: capabilities the
    /// host says it lacks, counted apart so they never read as violations.
    pub known_unsupported: usize,
    /// MUST-tier known failures: known security violations.
    pub known_security_violations: usize,
    pub stale: usize,
    pub error: usize,
    /// Scenarios the harness itself could not judge (its own failure, not the host's).
    pub harness_error: usize,
    /// Scenarios selected but not run because the run was interrupted.
    pub not_run: usize,
    /// Scenarios that really ran against the host: every result but
    /// `unsupported` and known-unsupported ones.
    pub ran: usize,
    /// Transcripts that differ from their committed snapshots.
    pub snapshot_changed: usize,
}

impl Summary {
    pub fn from_results<'a>(results: impl IntoIterator<Item = &'a ScenarioResult>) -> Summary {
        let mut s = Summary::default();
        for r in results {
            s.total += 1;
            match &r.verdict {
                Verdict::Pass => s.pass += 1,
                Verdict::Fail => s.fail += 1,
                Verdict::Inconclusive { .. } => s.inconclusive += 1,
                Verdict::Unsupported { .. } => s.unsupported += 1,
                Verdict::Unverified { .. } => s.unverified += 1,
                Verdict::KnownFailure {
                    security, expected, ..
                } => {
                    if expected == "unsupported" {
                        s.known_unsupported += 1;
                    } else if expected == "unverified" {
                        s.known_unverified += 1;
                    } else if expected == "inconclusive" {
                        s.known_inconclusive += 1;
                    } else {
                        s.known_failure += 1;
                    }
                    s.known_security_violations += *security as usize;
                }
                Verdict::Stale { .. } => s.stale += 1,
                Verdict::Error { .. } => s.error += 1,
                Verdict::HarnessError { .. } => s.harness_error += 1,
            }
            s.snapshot_changed +=
                matches!(r.snapshot, Some(SnapshotCheck::Changed { .. })) as usize;
        }
        s.ran = s.total - s.unsupported - s.known_unsupported;
        s
    }

    /// One summary per area (the scenario id's prefix, `zc`, `tr`, ...), in area order.
    pub fn by_area<'a>(
        results: impl IntoIterator<Item = &'a ScenarioResult>,
    ) -> std::collections::BTreeMap<String, Summary> {
        let mut areas: std::collections::BTreeMap<String, Vec<&ScenarioResult>> =
            Default::default();
        for r in results {
            areas.entry(r.area.clone()).or_default().push(r);
        }
        areas
            .into_iter()
            .map(|(area, rs)| (area, Summary::from_results(rs)))
            .collect()
    }

    pub fn failed(&self) -> bool {
        self.fail + self.stale + self.error + self.snapshot_changed > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(verdict: Verdict, failures: Vec<Failure>) -> ScenarioResult {
        ScenarioResult {
            id: "tc/000-x".into(),
            area: "tc".into(),
            title: "t".into(),
            tier: Tier::Must,
            checks: vec![],
            verdict,
            raw_verdict: "error".into(),
            failures,
            steps_run: 0,
            steps_total: 0,
            duration: Duration::ZERO,
            transcript: json!([{"reply": {"detail": "echoed CANARY-1 back"}}]),
            snapshot: None,
        }
    }

    #[test]
    fn every_rendered_string_is_redacted_and_nothing_else_changes() {
        let secrets = vec!["CANARY-1".to_string(), String::new()];
        let failure = Failure {
            kind: FailureKind::Invariant,
            invariants: vec![],
            step: 1,
            at: "TC4".into(),
            expected: json!("never CANARY-1"),
            observed: json!({"CANARY-1": ["x CANARY-1 y"]}),
            message: "saw CANARY-1".into(),
            evidence: json!({"stderr_tail": "line 1\nsecret CANARY-1\nline 3"}),
            inferred: vec![],
        };
        let mut r = result(
            Verdict::Error {
                message: "crashed holding CANARY-1".into(),
                stderr_tail: "log: CANARY-1\n".into(),
            },
            vec![failure],
        );
        r.redact(&secrets);
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("CANARY-1"), "{text}");
        // Only the secret goes: the text around it stays readable.
        assert_eq!(
            r.verdict,
            Verdict::Error {
                message: "crashed holding <secret>".into(),
                stderr_tail: "log: <secret>\n".into(),
            }
        );
        assert_eq!(
            r.failures[0].evidence["stderr_tail"],
            "line 1\nsecret <secret>\nline 3"
        );
        assert_eq!(
            r.failures[0].observed,
            json!({"<secret>": ["x <secret> y"]})
        );

        // Positive control: with no secret given, nothing is touched.
        let mut untouched = result(Verdict::Pass, vec![]);
        untouched.redact(&[]);
        assert!(
            serde_json::to_string(&untouched)
                .unwrap()
                .contains("CANARY-1")
        );
    }
}
