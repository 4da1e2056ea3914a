//! The Markdown report, for a CI job summary (`$GITHUB_STEP_SUMMARY` and the like).

use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;

use super::{Collector, Reporter, failure_line};
use crate::events::RunEvent;
use crate::verdict::Verdict;

pub struct MarkdownReporter {
    file: PathBuf,
    collector: Collector,
}

impl MarkdownReporter {
    pub fn new(file: PathBuf) -> MarkdownReporter {
        MarkdownReporter {
            file,
            collector: Collector::new(),
        }
    }
}

/// A table cell: a host's text with control characters and HTML made
/// inert (a job summary renders HTML), table syntax escaped, bounded.
fn cell(text: &str) -> String {
    super::bounded(&super::printable(text), CELL_MAX)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace('\n', "<br>")
}

/// Longest table cell, in characters.
const CELL_MAX: usize = 1_500;
/// Past this size the all-scenarios table stops (GitHub refuses a job
/// summary over 1 MiB); the JSON report always has everything.
const REPORT_BUDGET: usize = 700_000;
/// Past this size the scenarios needing a look are listed a line each,
/// without their evidence: every one stays named, with its rerun command,
/// and the whole report under GitHub's limit however many failed.
const LOOK_DETAIL_BUDGET: usize = 550_000;

/// The detail column of a result: its failed checks, or what its verdict says.
fn detail(r: &crate::verdict::ScenarioResult) -> String {
    match &r.verdict {
        Verdict::Fail => r
            .failures
            .iter()
            .map(failure_line)
            .collect::<Vec<_>>()
            .join("\n"),
        Verdict::Error { message, .. } => message.clone(),
        Verdict::HarnessError { message } => {
            format!("the harness failed, not the host: {message}")
        }
        Verdict::Stale { reason } => reason.clone(),
        Verdict::KnownFailure { security: true, .. } => {
            format!("**{}**", r.verdict.known_failure_text().unwrap_or_default())
        }
        Verdict::KnownFailure { .. } => r.verdict.known_failure_text().unwrap_or_default(),
        Verdict::Unsupported { missing } => format!("needs {}", missing.join(", ")),
        Verdict::Unverified { rests_on } => format!(
            "rests only on the adapter's inference: {}",
            rests_on.join("; ")
        ),
        Verdict::Inconclusive {
            control,
            control_verdict,
        } => format!("control `{control}`: {control_verdict}"),
        Verdict::Pass => String::new(),
    }
}

impl Reporter for MarkdownReporter {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        let Some((s, interrupted)) = self.collector.absorb(event) else {
            return Ok(());
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## delegation-harness: `{}`\n",
            cell(&self.collector.host)
        );
        if interrupted {
            let _ = writeln!(
                out,
                "> **Interrupted**: {} scenario(s) did not run.\n",
                s.not_run
            );
        }
        if s.snapshot_changed > 0 {
            let _ = writeln!(
                out,
                "> **{} snapshot(s) changed**: see each under Needs a look.\n",
                s.snapshot_changed
            );
        }
        let _ = writeln!(
            out,
            "| pass | fail | error | stale | inconclusive (known) | unsupported | known failures (security) | known unsupported | unverified (known) | harness errors |\n|---|---|---|---|---|---|---|---|---|---|\n| {} | {} | {} | {} | {} ({}) | {} | {} ({}) | {} | {} ({}) | {} |\n",
            s.pass,
            s.fail,
            s.error,
            s.stale,
            s.inconclusive,
            s.known_inconclusive,
            s.unsupported,
            s.known_failure,
            s.known_security_violations,
            s.known_unsupported,
            s.unverified,
            s.known_unverified,
            s.harness_error
        );
        // Per area: where a host really runs the catalogue, and where not.
        let _ = writeln!(
            out,
            "| area | ran | pass | fail | known failures | unverified (known) | unsupported (known) | error | stale |\n|---|---|---|---|---|---|---|---|---|"
        );
        for (area, a) in crate::verdict::Summary::by_area(self.collector.sorted()) {
            let _ = writeln!(
                out,
                "| {area} | {} | {} | {} | {} | {} ({}) | {} ({}) | {} | {} |",
                a.ran,
                a.pass,
                a.fail,
                a.known_failure,
                a.unverified,
                a.known_unverified,
                a.unsupported,
                a.known_unsupported,
                a.error,
                a.stale
            );
        }
        let _ = writeln!(out);
        let look: Vec<_> = self
            .collector
            .sorted()
            .into_iter()
            .filter(|r| super::needs_a_look(r))
            .collect();
        if !look.is_empty() {
            let _ = writeln!(out, "### Needs a look ({})\n", look.len());
            for (shown, r) in look.iter().enumerate() {
                if out.len() > LOOK_DETAIL_BUDGET {
                    let _ = writeln!(
                        out,
                        "> {} more without their evidence here (this report stays under GitHub's job-summary limit); the JSON report has it.\n",
                        look.len() - shown
                    );
                    for r in &look[shown..] {
                        let _ = writeln!(
                            out,
                            "- `{}` [{}]: **{}**, rerun: <code>{}</code>",
                            r.id,
                            r.tier,
                            super::look_label(r),
                            cell(&self.collector.rerun.command(&r.id))
                        );
                    }
                    let _ = writeln!(out);
                    break;
                }
                let mut what = match &r.verdict {
                    Verdict::Fail | Verdict::Inconclusive { .. } => {
                        super::failures_with_evidence(r)
                    }
                    _ => super::printable(&detail(r)),
                };
                if let Some(change) = super::snapshot_change(r) {
                    what.push_str(&format!("\nsnapshot changed: {}", super::printable(change)));
                }
                let _ = writeln!(
                    out,
                    "<details><summary><code>{}</code> [{}]: <b>{}</b></summary>\n\n```text\n{}\n```\n\nrerun: <code>{}</code>\n</details>\n",
                    r.id,
                    r.tier,
                    super::look_label(r),
                    super::bounded(&what, 4_000).replace("```", "ʼʼʼ"),
                    cell(&self.collector.rerun.command(&r.id))
                );
            }
        }
        let _ = writeln!(out, "### All scenarios\n");
        let _ = writeln!(
            out,
            "| scenario | tier | checks | verdict | detail |\n|---|---|---|---|---|"
        );
        let sorted = self.collector.sorted();
        let total = sorted.len();
        for (shown, r) in sorted.into_iter().enumerate() {
            if out.len() > REPORT_BUDGET {
                let _ = writeln!(
                    out,
                    "\n> {} more scenarios not shown here (this report stays under GitHub's job-summary limit); the JSON report has all of them.",
                    total - shown
                );
                break;
            }
            let checks: Vec<String> = r.checks.iter().map(|c| c.to_string()).collect();
            let detail = detail(r);
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                r.id,
                r.tier,
                checks.join(" "),
                r.verdict.name(),
                cell(&detail)
            );
        }
        self.collector.write(&self.file, out.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::{Failure, FailureKind, ScenarioResult, Summary};
    use delegation_model::{InvariantId, Tier};

    /// A failing result whose evidence alone is about `evidence_bytes` long.
    fn failing(id: &str, evidence_bytes: usize) -> ScenarioResult {
        ScenarioResult {
            id: id.into(),
            area: "zc".into(),
            title: id.into(),
            tier: Tier::Must,
            checks: vec![InvariantId::ZC1],
            verdict: Verdict::Fail,
            raw_verdict: "fail".into(),
            failures: vec![Failure {
                kind: FailureKind::Invariant,
                invariants: vec![InvariantId::ZC1],
                step: 1,
                at: "ZC1".into(),
                expected: serde_json::json!("no instance"),
                observed: serde_json::json!("one instance"),
                message: "a child appeared".into(),
                evidence: serde_json::json!({
                    "observers": { "model_requests": { "inst-3": 1 } },
                    "host_reply": { "detail": "e".repeat(evidence_bytes) },
                }),
                inferred: vec![],
            }],
            steps_run: 2,
            steps_total: 2,
            duration: std::time::Duration::from_millis(3),
            transcript: serde_json::Value::Null,
            snapshot: None,
        }
    }

    fn report_of(failed: usize) -> String {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.md");
        let mut reporter = MarkdownReporter::new(file.clone());
        reporter
            .event(&RunEvent::RunStarted {
                host: "a host that fails".into(),
                total: failed,
                seed: 1,
                jobs: 1,
                model_checkers: true,
                rerun: Default::default(),
            })
            .unwrap();
        for i in 0..failed {
            let result = failing(&format!("zc/{i:03}-fails"), 8_000);
            reporter
                .event(&RunEvent::ScenarioFinished(std::sync::Arc::new(result)))
                .unwrap();
        }
        let summary = Summary {
            total: failed,
            fail: failed,
            ..Summary::default()
        };
        reporter.event(&RunEvent::RunFinished { summary }).unwrap();
        std::fs::read_to_string(file).unwrap()
    }

    #[test]
    fn a_host_failing_everything_gets_a_report_under_the_job_summary_limit_naming_every_failure() {
        let md = report_of(400);
        assert!(md.len() < 1_000_000, "{} bytes", md.len());
        let look = md.split("### All scenarios").next().unwrap();
        for i in 0..400 {
            let id = format!("`zc/{i:03}-fails`");
            let rerun = format!("--filter zc/{i:03}-fails");
            assert!(
                look.contains(&id) || look.contains(&format!("<code>zc/{i:03}-fails</code>")),
                "{id} missing"
            );
            assert!(look.contains(&rerun), "{rerun} missing");
        }
        assert!(
            look.contains("more without their evidence here"),
            "the overflow is said"
        );
        // The first failures keep their evidence.
        assert!(look.contains("<code>zc/000-fails</code>") && look.contains("evidence: "));
    }

    #[test]
    fn a_few_failures_all_keep_their_evidence() {
        let md = report_of(10);
        assert!(!md.contains("more without their evidence"), "{md}");
        assert_eq!(md.matches("  evidence: ").count(), 10);
    }
}
