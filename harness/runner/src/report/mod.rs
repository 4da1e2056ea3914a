//! Reporters: each consumes the runner's events and renders them one way.
//! Human output for a terminal or a CI log; JSON, JUnit and Markdown files
//! written when the run ends, also when it was interrupted.

use std::io;
use std::path::PathBuf;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::events::RunEvent;

pub mod human;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod matrix;

/// Something that renders run events.
pub trait Reporter: Send {
    fn event(&mut self, event: &RunEvent) -> io::Result<()>;
}

/// A file format for `--report FORMAT=FILE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
    Junit,
    Markdown,
}

impl Format {
    /// Whether a report of this format holds each scenario's transcript
    /// (a run records transcripts only where something reads them).
    pub fn reads_transcripts(self) -> bool {
        matches!(self, Format::Json)
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "human" => Ok(Format::Human),
            "json" => Ok(Format::Json),
            "junit" => Ok(Format::Junit),
            "markdown" | "md" => Ok(Format::Markdown),
            other => Err(format!(
                "`{other}` is not a report format; expected json, junit, markdown or human"
            )),
        }
    }
}

/// The reporter writing `format` to `file` when the run ends.
pub fn file_reporter(format: Format, file: PathBuf) -> Box<dyn Reporter> {
    match format {
        Format::Human => Box::new(human::HumanReporter::to_file(file)),
        Format::Json => Box::new(json::JsonReporter::new(file)),
        Format::Junit => Box::new(junit::JunitReporter::new(file)),
        Format::Markdown => Box::new(markdown::MarkdownReporter::new(file)),
    }
}

/// Feeds every event to every reporter until the runner drops its sender.
/// Returns the first reporter error (after still feeding the others), so a
/// full disk is a harness error, not a silently missing report.
pub async fn drain(
    mut events: UnboundedReceiver<RunEvent>,
    mut reporters: Vec<Box<dyn Reporter>>,
) -> io::Result<()> {
    let mut first_error = None;
    // Lets a partial report that is due be written while every scenario
    // still runs (a host that hangs sends no event for a long time).
    let mut ticks = tokio::time::interval(PARTIAL_EVERY / 4);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let event = tokio::select! {
            event = events.recv() => match event {
                Some(event) => event,
                None => break,
            },
            _ = ticks.tick() => RunEvent::Tick,
        };
        for r in reporters.iter_mut() {
            if let Err(e) = r.event(&event)
                && first_error.is_none()
            {
                first_error = Some(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// How often a file report is rewritten while the run goes on. Each
/// rewrite is a partial report marked interrupted, so a harness killed
/// outright (SIGKILL, a lost machine) still leaves what it had finished.
const PARTIAL_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Partial reports take at most about this share of a run's time: each one
/// rewrites the whole report so far, so a report that grows (transcripts in
/// a JSON report, a long run) is rewritten less often as it costs more,
/// instead of once a second whatever it costs.
const PARTIAL_SHARE: u32 = 10;

/// The time to wait after a report that took `cost` to build and write
/// before the next partial one: [`PARTIAL_EVERY`], or [`PARTIAL_SHARE`]
/// times as long as the last one took.
fn partial_interval(cost: std::time::Duration) -> std::time::Duration {
    PARTIAL_EVERY.max(cost * PARTIAL_SHARE)
}

/// Collects finished results until the run ends, then calls `write`.
pub(crate) struct Collector {
    pub results: Vec<std::sync::Arc<crate::verdict::ScenarioResult>>,
    pub host: String,
    pub seed: u64,
    pub rerun: Rerun,
    total: usize,
    last_written: Option<std::time::Instant>,
    /// How long the last partial report took from `absorb` asking for it
    /// to its file written ([`Collector::write`]).
    last_cost: std::time::Duration,
    /// A result arrived since the last partial report.
    dirty: bool,
}

impl Collector {
    pub fn new() -> Collector {
        Collector {
            results: Vec::new(),
            host: String::new(),
            seed: 0,
            rerun: Rerun::default(),
            total: 0,
            last_written: None,
            last_cost: std::time::Duration::ZERO,
            dirty: false,
        }
    }

    /// Writes the report `absorb` asked for (whole or not at all, see
    /// [`write_atomically`]) and notes what building and writing it cost.
    pub fn write(&mut self, file: &std::path::Path, contents: &[u8]) -> io::Result<()> {
        let written = write_atomically(file, contents);
        if let Some(asked) = self.last_written {
            self.last_cost = asked.elapsed();
        }
        written
    }

    /// Returns `Some((summary, interrupted))` when the run ended, and also
    /// while it runs, at most every [`PARTIAL_EVERY`] after a scenario
    /// finished: a partial report, marked interrupted until the final one.
    pub fn absorb(&mut self, event: &RunEvent) -> Option<(crate::verdict::Summary, bool)> {
        match event {
            RunEvent::RunStarted {
                host,
                seed,
                total,
                rerun,
                ..
            } => {
                self.host = host.clone();
                self.seed = *seed;
                self.rerun = rerun.clone();
                self.total = *total;
                // At once: from here on a killed run leaves a readable report.
                self.dirty = true;
                self.last_written = None;
                self.partial_if_due()
            }
            RunEvent::ScenarioFinished(result) => {
                self.results.push(std::sync::Arc::clone(result));
                self.dirty = true;
                self.partial_if_due()
            }
            RunEvent::Tick => self.partial_if_due(),
            // The last report: what it costs paces no partial one.
            RunEvent::RunFinished { summary } => {
                self.last_written = None;
                Some((summary.clone(), false))
            }
            RunEvent::RunInterrupted { summary } => {
                self.last_written = None;
                Some((summary.clone(), true))
            }
            _ => None,
        }
    }

    /// A partial report (marked interrupted) when results arrived since the
    /// last one and the last one is at least [`partial_interval`] old.
    fn partial_if_due(&mut self) -> Option<(crate::verdict::Summary, bool)> {
        let interval = partial_interval(self.last_cost);
        let due = self.last_written.is_none_or(|t| t.elapsed() >= interval);
        if !(self.dirty && due) {
            return None;
        }
        self.dirty = false;
        self.last_written = Some(std::time::Instant::now());
        let mut summary = crate::verdict::Summary::from_results(self.results.iter().map(|r| &**r));
        summary.not_run = self.total.saturating_sub(self.results.len());
        Some((summary, true))
    }

    /// Results sorted by id, so report files do not depend on `--jobs` timing.
    pub fn sorted(&self) -> Vec<&crate::verdict::ScenarioResult> {
        let mut r: Vec<_> = self.results.iter().map(|r| &**r).collect();
        r.sort_by(|a, b| a.id.cmp(&b.id));
        r
    }
}

/// Writes a report file whole or not at all (a temporary file renamed over
/// it), so a harness killed while writing never leaves half a report.
pub(crate) fn write_atomically(file: &std::path::Path, contents: &[u8]) -> io::Result<()> {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    let temporary = file.with_file_name(name);
    std::fs::write(&temporary, contents)
        .and_then(|()| std::fs::rename(&temporary, file))
        .map_err(|e| io::Error::new(e.kind(), format!("report `{}`: {e}", file.display())))
}

/// Checks before a run that a report can be written where it is asked for
/// (its folder exists and takes a new file), so a typo in a path is found
/// in a second rather than after the whole catalogue.
pub fn check_writable(file: &std::path::Path) -> io::Result<()> {
    let folder = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if file.is_dir() {
        return Err(io::Error::other(format!(
            "report `{}` is a directory; name a file in it",
            file.display()
        )));
    }
    tempfile::Builder::new()
        .prefix(".delegation-harness-write-check")
        .tempfile_in(folder)
        .map(drop)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "report `{}` cannot be written: its folder `{}`: {e}",
                    file.display(),
                    folder.display()
                ),
            )
        })
}

/// One line per failure, shared by the human, JUnit and Markdown reporters.
pub fn failure_line(f: &crate::verdict::Failure) -> String {
    let ids: Vec<String> = f.invariants.iter().map(|i| i.to_string()).collect();
    format!(
        "[{}] step {} at {}: expected {}, observed {}",
        ids.join(","),
        f.step,
        f.at,
        f.expected,
        f.observed
    )
}

/// What the command that reruns one scenario alone must repeat of the run it
/// came from: the host as `--host` took it, the seed, the expectations file
/// and the snapshot folder. Carried by [`crate::RunEvent::RunStarted`] and
/// the JSON report, so every reporter and the matrix print the same command,
/// and a rerun judges the scenario as its run did (a known failure stays
/// known; a changed snapshot is compared again).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rerun {
    /// `--host`'s value; `None` for the embedded reference host.
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub expectations: Option<std::path::PathBuf>,
    #[serde(default)]
    pub snapshots: Option<std::path::PathBuf>,
}

impl Rerun {
    /// The command that reruns scenario `id` alone: what a maintainer copies
    /// from a failure.
    pub fn command(&self, id: &str) -> String {
        let mut words = vec!["delegation-harness".to_string(), "run".to_string()];
        if let Some(host) = &self.host {
            words.extend(["--host".to_string(), host.clone()]);
        }
        words.extend(["--filter".to_string(), id.to_string()]);
        if let Some(seed) = self.seed {
            words.extend(["--seed".to_string(), seed.to_string()]);
        }
        if let Some(file) = &self.expectations {
            words.extend(["--expectations".to_string(), file.display().to_string()]);
        }
        if let Some(dir) = &self.snapshots {
            words.extend(["--snapshots".to_string(), dir.display().to_string()]);
        }
        shell_words::join(words)
    }

    /// For a report written before reports carried their rerun: the host
    /// as the run described it (the embedded reference host needs no `--host`).
    pub fn from_description(host: &str, seed: Option<u64>) -> Rerun {
        Rerun {
            host: (!host.ends_with("(in-process)")).then(|| host.to_string()),
            seed,
            ..Rerun::default()
        }
    }
}

/// Text a host wrote, made safe to show: control characters (terminal
/// escapes, NUL, form feeds) are written as `\u{..}`; new lines and tabs stay.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether a result needs a maintainer's look: every report lists these
/// first or again at the end, with the command that reruns each alone.
/// A changed snapshot needs one whatever the verdict.
pub fn needs_a_look(result: &crate::verdict::ScenarioResult) -> bool {
    use crate::verdict::Verdict;
    matches!(
        result.verdict,
        Verdict::Fail
            | Verdict::Error { .. }
            | Verdict::Stale { .. }
            | Verdict::Inconclusive { .. }
            | Verdict::Unverified { .. }
            | Verdict::HarnessError { .. }
    ) || snapshot_change(result).is_some()
}

/// What changed in a result's snapshot, when it changed.
pub fn snapshot_change(result: &crate::verdict::ScenarioResult) -> Option<&str> {
    match &result.snapshot {
        Some(crate::verdict::SnapshotCheck::Changed { message }) => Some(message),
        _ => None,
    }
}

/// How the closing lists name what a result needs a look for: its verdict,
/// or the snapshot when that is all that changed.
pub fn look_label(result: &crate::verdict::ScenarioResult) -> &'static str {
    use crate::verdict::Verdict;
    match result.verdict {
        Verdict::Pass | Verdict::KnownFailure { .. } | Verdict::Unsupported { .. }
            if snapshot_change(result).is_some() =>
        {
            "snapshot"
        }
        _ => result.verdict.name(),
    }
}

/// The failed checks of one step, and what was observed in it (the
/// observers' counts and the host's reply, as JSON), shared by the checks.
pub struct FailedStep<'a> {
    pub failures: Vec<&'a crate::verdict::Failure>,
    pub observers: Option<String>,
    pub host_reply: Option<String>,
}

/// A result's failures grouped by step, each step's evidence once.
pub fn failed_steps(result: &crate::verdict::ScenarioResult) -> Vec<FailedStep<'_>> {
    let mut steps: Vec<usize> = result.failures.iter().map(|f| f.step).collect();
    steps.dedup();
    steps
        .into_iter()
        .map(|step| {
            let failures: Vec<_> = result.failures.iter().filter(|f| f.step == step).collect();
            let evidence = failures.iter().map(|f| &f.evidence).find(|e| !e.is_null());
            let json = |key: &str| {
                evidence
                    .map(|e| &e[key])
                    .filter(|v| !v.is_null())
                    .map(|v| serde_json::to_string(v).unwrap_or_default())
            };
            FailedStep {
                observers: json("observers"),
                host_reply: json("host_reply"),
                failures,
            }
        })
        .collect()
}

/// [`failed_steps`] as plain text, for JUnit and the Markdown report.
pub fn failures_with_evidence(result: &crate::verdict::ScenarioResult) -> String {
    let mut out = Vec::new();
    for step in failed_steps(result) {
        out.extend(step.failures.iter().map(|f| failure_line(f)));
        out.extend(step.observers.map(|o| format!("  evidence: {o}")));
        out.extend(step.host_reply.map(|r| format!("  host reply: {r}")));
    }
    printable(&out.join("\n"))
}

/// At most `max` characters of `text`, saying where the rest is.
pub fn bounded(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}… (cut; the JSON report has all of it)")
}

#[cfg(test)]
mod partial_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_costly_partial_report_is_rewritten_less_often() {
        assert_eq!(partial_interval(Duration::ZERO), PARTIAL_EVERY);
        assert_eq!(partial_interval(Duration::from_millis(50)), PARTIAL_EVERY);
        assert_eq!(
            partial_interval(Duration::from_millis(300)),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn writing_a_report_notes_what_it_cost() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.json");
        let mut collector = Collector::new();
        let started = RunEvent::RunStarted {
            host: "h".into(),
            total: 1,
            seed: 1,
            jobs: 1,
            model_checkers: true,
            rerun: Rerun::default(),
        };
        assert!(collector.absorb(&started).is_some(), "a report at once");
        std::thread::sleep(Duration::from_millis(20));
        collector.write(&file, b"{}").unwrap();
        assert!(collector.last_cost >= Duration::from_millis(20));
        assert_eq!(std::fs::read(&file).unwrap(), b"{}");
    }
}

#[cfg(test)]
mod rerun_tests {
    use super::Rerun;

    #[test]
    fn a_rerun_repeats_host_seed_expectations_and_snapshots() {
        let rerun = Rerun {
            host: Some("codex".into()),
            seed: Some(7),
            expectations: Some("my dir/expectations.json".into()),
            snapshots: Some("snapshots".into()),
        };
        assert_eq!(
            rerun.command("zc/001-x"),
            "delegation-harness run --host codex --filter zc/001-x --seed 7 \
             --expectations 'my dir/expectations.json' --snapshots snapshots"
        );
    }

    #[test]
    fn the_embedded_reference_host_needs_no_host_argument_while_a_command_does() {
        let reference = Rerun::from_description("reference host (in-process)", Some(1));
        assert_eq!(
            reference.command("a/1"),
            "delegation-harness run --filter a/1 --seed 1"
        );
        let command = Rerun::from_description("python3 adapter.py", None);
        assert_eq!(
            command.command("a/1"),
            "delegation-harness run --host 'python3 adapter.py' --filter a/1"
        );
    }
}
