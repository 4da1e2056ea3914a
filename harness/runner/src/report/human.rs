//! The human reporter: one line per scenario, the failures with their
//! evidence, and a summary. Colour through anstream (so `NO_COLOR` and
//! non-terminals get plain text); a progress bar only on a terminal.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};

use super::{Collector, Reporter, failure_line};
use crate::events::RunEvent;
use crate::verdict::{ScenarioResult, Summary, Verdict};

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

pub struct HumanReporter {
    out: Box<dyn Write + Send>,
    /// Strip colour before writing (for `plain`); stdout decides through anstream instead.
    strip: bool,
    bar: Option<ProgressBar>,
    /// Also write a plain copy of the final report, for `--report human=FILE`.
    file: Option<(PathBuf, Collector)>,
    /// How the run reruns one scenario, for the commands at the end.
    run: Option<super::Rerun>,
    /// The scenarios that need a look, in the order they finished.
    needs_a_look: Vec<(String, &'static str)>,
}

impl HumanReporter {
    /// Writes to standard output: a progress bar when it is a terminal, plain lines otherwise.
    pub fn stdout() -> HumanReporter {
        HumanReporter {
            out: Box::new(anstream::AutoStream::auto(io::stdout())),
            strip: false,
            bar: None,
            file: None,
            run: None,
            needs_a_look: Vec::new(),
        }
    }

    /// Writes the whole report to `w` with colour stripped; for tests and files.
    pub fn plain(w: impl Write + Send + 'static) -> HumanReporter {
        HumanReporter {
            out: Box::new(w),
            strip: true,
            bar: None,
            file: None,
            run: None,
            needs_a_look: Vec::new(),
        }
    }

    pub fn to_file(file: PathBuf) -> HumanReporter {
        HumanReporter {
            out: Box::new(io::sink()),
            strip: true,
            bar: None,
            file: Some((file, Collector::new())),
            run: None,
            needs_a_look: Vec::new(),
        }
    }

    fn line(&mut self, text: &str) -> io::Result<()> {
        match &self.bar {
            // indicatif keeps the bar below printed lines; it only runs on a
            // terminal, so colour follows anstream's choice for stdout.
            Some(bar) => {
                let colour =
                    anstream::AutoStream::choice(&io::stdout()) != anstream::ColorChoice::Never;
                if colour {
                    bar.println(text);
                } else {
                    bar.println(anstream::adapter::strip_str(text).to_string());
                }
                Ok(())
            }
            None if self.strip => writeln!(self.out, "{}", anstream::adapter::strip_str(text)),
            None => writeln!(self.out, "{text}"),
        }
    }
}

fn colour(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => GREEN,
        Verdict::Fail | Verdict::Error { .. } | Verdict::Stale { .. } => RED,
        Verdict::KnownFailure { security: true, .. } => RED,
        _ => YELLOW,
    }
}

/// The lines for one finished scenario.
pub fn render_result(r: &ScenarioResult) -> Vec<String> {
    let mut lines = vec![format!(
        "{}{:>13}{RESET} {} [{}] ({}/{} steps, {} ms)",
        colour(&r.verdict),
        r.verdict.name().to_uppercase(),
        r.id,
        r.tier,
        r.steps_run,
        r.steps_total,
        r.duration.as_millis()
    )];
    match &r.verdict {
        Verdict::Error { message, stderr_tail } => {
            lines.push(format!("              {message}"));
            for l in stderr_tail.lines() {
                lines.push(format!("              stderr| {l}"));
            }
        }
        Verdict::HarnessError { message } => {
            lines.push(format!("              not the host's failure: {message}"))
        }
        Verdict::Stale { reason } => lines.push(format!("              {reason}")),
        Verdict::Unsupported { missing } => {
            lines.push(format!("              host lacks: {}", missing.join(", ")))
        }
        Verdict::Unverified { rests_on } => {
            lines.push(
                "              not a pass: these checks rest only on what the adapter inferred, not on an observation:"
                    .to_string(),
            );
            for check in rests_on {
                lines.push(format!("                {check}"));
            }
        }
        Verdict::Inconclusive { control, control_verdict } => lines.push(format!(
            "              its positive control {control} ended {control_verdict}: this negative proves nothing"
        )),
        Verdict::KnownFailure { .. } => lines.push(format!(
            "              {}",
            r.verdict.known_failure_text().unwrap_or_default()
        )),
        Verdict::Pass => {}
        Verdict::Fail => {}
    }
    if matches!(
        r.verdict,
        Verdict::Fail | Verdict::KnownFailure { .. } | Verdict::Inconclusive { .. }
    ) {
        // The failed checks of one step share what was observed in it: the
        // evidence is printed once per step, after its failures.
        for step in super::failed_steps(r) {
            for f in &step.failures {
                lines.push(format!("              {BOLD}{}{RESET}", failure_line(f)));
            }
            lines.extend(
                step.observers
                    .map(|o| format!("                evidence: {o}")),
            );
            lines.extend(
                step.host_reply
                    .map(|h| format!("                host reply: {h}")),
            );
        }
    }
    if let Some(change) = super::snapshot_change(r) {
        lines.push(format!("              {RED}snapshot changed{RESET}:"));
        for l in super::printable(change).lines() {
            lines.push(format!("              {l}"));
        }
    }
    lines
}

/// The closing list: each scenario that needs a look and how to rerun it alone.
pub fn render_rerun_list(rerun: &super::Rerun, ids: &[(String, &'static str)]) -> Vec<String> {
    let mut lines = Vec::new();
    if ids.is_empty() {
        return lines;
    }
    lines.push(format!(
        "{BOLD}{} scenario(s) to look at{RESET}, each rerun alone by:",
        ids.len()
    ));
    for (id, verdict) in ids {
        lines.push(format!(
            "  {:>14} {}",
            format!("{verdict}:"),
            rerun.command(id)
        ));
    }
    lines
}

pub fn render_summary(s: &Summary, interrupted: bool) -> String {
    let head = if interrupted {
        format!("{RED}INTERRUPTED{RESET} ({} not run)", s.not_run)
    } else if s.failed() {
        format!("{RED}FAILED{RESET}")
    } else if s.harness_error > 0 {
        // Not the host's failure, and no pass either.
        format!("{RED}HARNESS ERROR{RESET}")
    } else {
        format!("{GREEN}PASSED{RESET}")
    };
    format!(
        "{head}: {} scenarios: {} passed, {} failed, {} errors, {} stale, {} inconclusive ({} known), {} unsupported, {} known failures ({} known security violations), {} known unsupported, {} unverified, {} known unverified, {} harness errors{}; {} really ran",
        s.total,
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
        s.harness_error,
        if s.snapshot_changed > 0 {
            format!(", {} snapshots changed", s.snapshot_changed)
        } else {
            String::new()
        },
        s.ran
    )
}

impl Reporter for HumanReporter {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        if let Some((file, collector)) = &mut self.file {
            if let Some((summary, interrupted)) = collector.absorb(event) {
                let mut text = String::new();
                for r in collector.sorted() {
                    for l in render_result(r) {
                        text.push_str(&l);
                        text.push('\n');
                    }
                }
                let look: Vec<(String, &'static str)> = collector
                    .sorted()
                    .into_iter()
                    .filter(|r| super::needs_a_look(r))
                    .map(|r| (r.id.clone(), super::look_label(r)))
                    .collect();
                for l in render_rerun_list(&collector.rerun, &look) {
                    text.push_str(&l);
                    text.push('\n');
                }
                text.push_str(&render_summary(&summary, interrupted));
                text.push('\n');
                let plain = anstream::adapter::strip_str(&text).to_string();
                collector.write(file, plain.as_bytes())?;
            }
            return Ok(());
        }
        match event {
            RunEvent::RunStarted {
                host,
                total,
                seed,
                jobs,
                model_checkers,
                rerun,
            } => {
                self.run = Some(rerun.clone());
                self.line(&format!(
                    "{BOLD}delegation-harness{RESET}: {total} scenarios against {host} (seed {seed}, {jobs} {})",
                    if *jobs == 1 { "job" } else { "jobs" }
                ))?;
                if !model_checkers {
                    self.line(&format!(
                        "{YELLOW}note{RESET}: the model's invariant checkers are not wired in yet; only expectations and the canary search are checked"
                    ))?;
                }
                if io::stdout().is_terminal() {
                    let bar = ProgressBar::new(*total as u64);
                    bar.set_style(
                        ProgressStyle::with_template("{bar:30} {pos}/{len} {wide_msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    self.bar = Some(bar);
                }
            }
            RunEvent::ScenarioStarted { id } => {
                if let Some(bar) = &self.bar {
                    bar.set_message(id.clone());
                }
            }
            RunEvent::StepFinished(_) | RunEvent::Tick => {}
            RunEvent::ScenarioFinished(result) => {
                for l in render_result(result) {
                    self.line(&l)?;
                }
                if super::needs_a_look(result) {
                    self.needs_a_look
                        .push((result.id.clone(), super::look_label(result)));
                }
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                }
            }
            RunEvent::RunFinished { summary } | RunEvent::RunInterrupted { summary } => {
                if let Some(bar) = self.bar.take() {
                    bar.finish_and_clear();
                }
                let interrupted = matches!(event, RunEvent::RunInterrupted { .. });
                if let Some(rerun) = self.run.clone() {
                    let ids = std::mem::take(&mut self.needs_a_look);
                    for l in render_rerun_list(&rerun, &ids) {
                        self.line(&l)?;
                    }
                }
                self.line(&render_summary(summary, interrupted))?;
                self.out.flush()?;
            }
        }
        Ok(())
    }
}
