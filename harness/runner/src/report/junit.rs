//! The JUnit report (quick-junit): one testsuite per area, one testcase per
//! scenario; a failure's message names the invariant ids so CI dashboards
//! group by what was violated.

use std::io;
use std::path::PathBuf;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::{Collector, Reporter};
use crate::events::RunEvent;
use crate::verdict::Verdict;

pub struct JunitReporter {
    file: PathBuf,
    collector: Collector,
}

impl JunitReporter {
    pub fn new(file: PathBuf) -> JunitReporter {
        JunitReporter {
            file,
            collector: Collector::new(),
        }
    }
}

impl Reporter for JunitReporter {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        let Some((_, interrupted)) = self.collector.absorb(event) else {
            return Ok(());
        };
        let mut report = Report::new("delegation-harness");
        let mut suites: Vec<TestSuite> = Vec::new();
        for result in self.collector.sorted() {
            if suites.last().is_none_or(|s| s.name.as_str() != result.area) {
                suites.push(TestSuite::new(result.area.clone()));
            }
            let status = match &result.verdict {
                // A changed snapshot fails its case whatever the verdict
                // (a known failure or an unsupported scenario changes too).
                _ if super::snapshot_change(result).is_some() => {
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    s.set_message(format!(
                        "snapshot changed (verdict {})",
                        result.verdict.name()
                    ));
                    s.set_type("snapshot-changed");
                    s.set_description(super::printable(
                        super::snapshot_change(result).unwrap_or_default(),
                    ));
                    s
                }
                Verdict::Pass => TestCaseStatus::success(),
                Verdict::Fail => {
                    let ids: Vec<String> = result
                        .failures
                        .iter()
                        .flat_map(|f| f.invariants.iter().map(|i| i.to_string()))
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    s.set_message(format!("violated {}", ids.join(", ")));
                    s.set_type("invariant-violation");
                    // Each failed check, and once per step what was observed:
                    // a CI view of the failure should not need the JSON report.
                    s.set_description(super::failures_with_evidence(result));
                    s
                }
                Verdict::Stale { reason } => {
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    s.set_message(format!("stale expectation: {reason}"));
                    s.set_type("stale");
                    s
                }
                Verdict::Error {
                    message,
                    stderr_tail,
                } => {
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
                    s.set_message(super::printable(message));
                    s.set_type("host-error");
                    s.set_description(super::printable(stderr_tail));
                    s
                }
                Verdict::HarnessError { message } => {
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
                    s.set_message(format!("the harness failed, not the host: {message}"));
                    s.set_type("harness-error");
                    s
                }
                Verdict::KnownFailure { security, .. } => {
                    let mut s = TestCaseStatus::skipped();
                    s.set_message(result.verdict.known_failure_text().unwrap_or_default());
                    if *security {
                        s.set_type("known-security-violation");
                    }
                    s
                }
                Verdict::Unsupported { missing } => {
                    let mut s = TestCaseStatus::skipped();
                    s.set_message(format!("unsupported: host lacks {}", missing.join(", ")));
                    s
                }
                Verdict::Unverified { rests_on } => {
                    let mut s = TestCaseStatus::skipped();
                    s.set_message(format!(
                        "unverified: rests only on the adapter's inference: {}",
                        rests_on.join("; ")
                    ));
                    s.set_type("unverified");
                    s
                }
                Verdict::Inconclusive {
                    control,
                    control_verdict,
                } => {
                    let mut s = TestCaseStatus::skipped();
                    s.set_message(format!(
                        "inconclusive: control {control} ended {control_verdict}"
                    ));
                    s
                }
            };
            let mut case = TestCase::new(result.id.clone(), status);
            case.set_classname(result.area.clone());
            case.set_time(result.duration);
            case.extra
                .insert("tier".into(), result.tier.to_string().into());
            let suite = suites.last_mut().expect("pushed above");
            if matches!(result.verdict, Verdict::KnownFailure { security: true, .. }) {
                // Skipped cases fold away in most CI views; a suite property does not.
                suite.add_property(quick_junit::Property::new(
                    "known-security-violation",
                    result.id.clone(),
                ));
            }
            suite.add_test_case(case);
        }
        if interrupted {
            // The run was cut short: say so on every suite, and keep one suite
            // even when nothing finished, so CI shows a report rather than none.
            if suites.is_empty() {
                suites.push(TestSuite::new("delegation-harness"));
            }
            for suite in &mut suites {
                suite.add_property(quick_junit::Property::new("interrupted", "true"));
            }
        }
        report.add_test_suites(suites);
        let xml = report.to_string().map_err(io::Error::other)?;
        self.collector.write(&self.file, xml.as_bytes())
    }
}
