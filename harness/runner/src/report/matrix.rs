//! The conformance matrix: several hosts' JSON reports side by side on one static HTML page (invariant by host, drill-down to each scenario's evidence and the command that reruns it), and a badge per host.
//!
//! It reads the JSON report (`--report json=FILE`) rather than running
//! anything, so the page can be rebuilt from committed reports of hosts
//! that are not installed where it is built. What a host did is its
//! `raw_verdict`; whether that was listed in its expectations file is shown
//! beside it, never instead of it: a known failure is still a failure.

use std::collections::{BTreeMap, BTreeSet};

use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde::Deserialize;

use delegation_model::InvariantId;

/// One host's JSON report, as much of it as the matrix shows.
#[derive(Clone, Debug, Deserialize)]
pub struct HostReport {
    /// The column's name (set by the caller, e.g. from the file name).
    #[serde(skip)]
    pub label: String,
    /// The host as the run named it: a command line, or the embedded reference host.
    pub host: String,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub interrupted: bool,
    /// What the rerun command repeats; absent from reports written before it was.
    #[serde(default)]
    pub rerun: Option<super::Rerun>,
    pub scenarios: Vec<ScenarioRow>,
}

/// One scenario's result in a host's report.
#[derive(Clone, Debug, Deserialize)]
pub struct ScenarioRow {
    pub id: String,
    pub area: String,
    pub title: String,
    pub tier: String,
    #[serde(default)]
    pub checks: Vec<String>,
    /// After the expectations file: `known_failure`, `stale`, ...
    pub verdict: String,
    /// What the host did: `pass`, `fail`, `unsupported`, `unverified`, `inconclusive`, `error`, `not_run`.
    pub raw_verdict: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub security: bool,
    #[serde(default)]
    pub failures: Vec<FailureRow>,
}

/// One failed check of a scenario.
#[derive(Clone, Debug, Deserialize)]
pub struct FailureRow {
    pub at: String,
    pub message: String,
    #[serde(default)]
    pub inferred: Vec<serde_json::Value>,
}

impl HostReport {
    /// Parses a JSON report; `label` names the host's column.
    pub fn parse(label: &str, text: &str) -> Result<HostReport, serde_json::Error> {
        let mut report: HostReport = serde_json::from_str(text)?;
        report.label = label.to_string();
        Ok(report)
    }

    fn by_id(&self) -> BTreeMap<&str, &ScenarioRow> {
        self.scenarios.iter().map(|s| (s.id.as_str(), s)).collect()
    }

    /// Counts over what the host did, the same classes the page colours.
    pub fn tally(&self) -> Tally {
        Tally::of(self.scenarios.iter())
    }

    /// The command that reruns one scenario against this host, as the run did it.
    fn rerun(&self, id: &str) -> String {
        match &self.rerun {
            Some(rerun) => rerun.command(id),
            None => super::Rerun::from_description(&self.host, self.seed).command(id),
        }
    }
}

/// What a set of scenario results comes to, by what the host did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub total: usize,
    /// Pass, fail, unverified, inconclusive or error: the scenario ran on the host.
    pub ran: usize,
    pub pass: usize,
    pub fail: usize,
    /// Of the failures, those of MUST-tier scenarios.
    pub must_fail: usize,
    /// Unverified, inconclusive or a harness or host error: ran, decided nothing.
    pub undecided: usize,
    pub unsupported: usize,
}

impl Tally {
    fn of<'a>(rows: impl Iterator<Item = &'a ScenarioRow>) -> Tally {
        let mut t = Tally::default();
        for row in rows {
            t.total += 1;
            match Class::of(row) {
                Class::Pass => t.pass += 1,
                Class::Fail => {
                    t.fail += 1;
                    if row.tier == "MUST" {
                        t.must_fail += 1;
                    }
                }
                Class::Undecided => t.undecided += 1,
                Class::Unsupported => t.unsupported += 1,
            }
        }
        t.ran = t.pass + t.fail + t.undecided;
        t
    }

    fn class(&self) -> &'static str {
        if self.fail > 0 {
            "fail"
        } else if self.undecided > 0 {
            "undecided"
        } else if self.pass > 0 {
            "pass"
        } else {
            "unsupported"
        }
    }
}

/// The four colours of the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Pass,
    Fail,
    Undecided,
    Unsupported,
}

impl Class {
    fn of(row: &ScenarioRow) -> Class {
        // A negative whose positive control failed proves nothing, whatever
        // the negative itself did.
        if row.verdict == "inconclusive" {
            return Class::Undecided;
        }
        match row.raw_verdict.as_str() {
            "pass" => Class::Pass,
            "fail" => Class::Fail,
            "unsupported" | "not_run" => Class::Unsupported,
            _ => Class::Undecided,
        }
    }

    fn css(self) -> &'static str {
        match self {
            Class::Pass => "pass",
            Class::Fail => "fail",
            Class::Undecided => "undecided",
            Class::Unsupported => "unsupported",
        }
    }
}

/// The whole page. Scenarios are the union over the reports, in id order; a
/// scenario a report does not hold shows as absent for that host.
pub fn render(reports: &[HostReport]) -> String {
    let ids: BTreeSet<&str> = reports
        .iter()
        .flat_map(|r| r.scenarios.iter().map(|s| s.id.as_str()))
        .collect();
    let indexed: Vec<BTreeMap<&str, &ScenarioRow>> =
        reports.iter().map(HostReport::by_id).collect();
    // Title and checks from the first report that has the scenario.
    let first = |id: &str| indexed.iter().find_map(|m| m.get(id).copied());
    let mut areas: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for id in &ids {
        if let Some(row) = first(id) {
            areas.entry(row.area.as_str()).or_default().push(id);
        }
    }
    let invariants: Vec<InvariantId> = InvariantId::ALL
        .iter()
        .copied()
        .filter(|inv| {
            ids.iter()
                .any(|id| first(id).is_some_and(|r| r.checks.iter().any(|c| c == inv.as_str())))
        })
        .collect();

    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Delegation conformance: " (reports.iter().map(|r| r.label.as_str()).collect::<Vec<_>>().join(", ")) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "Delegation conformance" }
                p.lead {
                    "Each column is one host's run of the scenario catalogue, read from its JSON report. "
                    "A cell shows what the host did (pass, FAIL, undecided: unverified, inconclusive or error; or not run: unsupported). "
                    "\"known\" marks a result its maintainers listed in the host's expectations file: a known failure is still a failure."
                }
                h2 { "Hosts" }
                table.summary {
                    thead { tr { th { "host" } th { "badge" } th { "ran" } th { "pass" } th { "fail" } th { "MUST failed" } th { "undecided" } th { "not run" } th { "run" } } }
                    tbody {
                        @for report in reports {
                            @let t = report.tally();
                            tr {
                                th { (report.label) }
                                td { (PreEscaped(badge_svg(&report.label, &t))) }
                                td.num { (t.ran) " of " (t.total) }
                                td.num.pass { (t.pass) }
                                td.num.fail { (t.fail) }
                                td.num.fail { (t.must_fail) }
                                td.num.undecided { (t.undecided) }
                                td.num.unsupported { (t.unsupported) }
                                td { code { (report.host) } " seed " (report.seed.map_or("?".to_string(), |s| s.to_string()))
                                     @if report.interrupted { strong { " (interrupted: partial)" } } }
                            }
                        }
                    }
                }
                h2 { "Invariants" }
                p { "Per invariant and host: the scenarios that check it and ran, passed / failed / undecided. A failed scenario fails every invariant it checks here; its evidence below says which check failed." }
                table.matrix {
                    thead { tr { th { "invariant" } th { "what must hold" }
                        @for report in reports { th { (report.label) } } } }
                    tbody {
                        @for inv in &invariants {
                            tr {
                                th title=(inv.family()) { (inv.as_str()) br; small { (inv.tier().to_string()) } }
                                td.meaning { (inv.meaning()) }
                                @for map in &indexed {
                                    @let t = Tally::of(map.values().copied().filter(|r| r.checks.iter().any(|c| c == inv.as_str())));
                                    td class=(format!("cell {}", t.class())) {
                                        @if t.ran == 0 { "not run (" (t.total) ")" }
                                        @else { (t.pass) " / " (t.fail) " / " (t.undecided) br; small { "of " (t.ran) " ran" } }
                                    }
                                }
                            }
                        }
                    }
                }
                h2 { "Scenarios" }
                @for (area, area_ids) in &areas {
                    h3 id=(format!("area-{area}")) { (area) " (" (area_ids.len()) ")" }
                    table.scenarios {
                        thead { tr { th { "scenario" } @for report in reports { th { (report.label) } } } }
                        tbody {
                            @for id in area_ids {
                                @let row = first(id);
                                tr id=(anchor(id)) {
                                    th {
                                        a href=(format!("#{}", anchor(id))) { code { (id) } }
                                        @if let Some(row) = row { br; small { "[" (row.tier) "] " (row.checks.join(", ")) " — " (row.title) } }
                                    }
                                    @for (report, map) in reports.iter().zip(&indexed) {
                                        @match map.get(id) {
                                            None => td.cell.unsupported { "absent" },
                                            Some(result) => (scenario_cell(report, result)),
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    page.into_string()
}

fn anchor(id: &str) -> String {
    format!("s-{}", id.replace('/', "-"))
}

fn scenario_cell(report: &HostReport, row: &ScenarioRow) -> Markup {
    let class = Class::of(row);
    let known = row.verdict.starts_with("known_");
    let word = match class {
        Class::Pass => "pass".to_string(),
        Class::Fail => "FAIL".to_string(),
        Class::Undecided if row.verdict == "inconclusive" => "inconclusive".to_string(),
        Class::Undecided => row.raw_verdict.clone(),
        Class::Unsupported => "not run".to_string(),
    };
    html! {
        td class=(format!("cell {}", class.css())) {
            strong { (word) }
            @if known { " " span.known { "known" } }
            @if row.verdict == "stale" { " " span.known { "stale expectation" } }
            @if row.security { " " span.security { "security" } }
            @if class != Class::Pass {
                details {
                    summary { "evidence" }
                    @if let Some(reason) = &row.reason { p { (reason) } }
                    @if !row.failures.is_empty() {
                        ul {
                            @for failure in &row.failures {
                                li { code { (failure.at) } ": " (failure.message)
                                     @if !failure.inferred.is_empty() { " " em { "(rests on inferred values)" } } }
                            }
                        }
                    }
                    @if class != Class::Unsupported { p { "rerun: " code.rerun { (report.rerun(&row.id)) } } }
                }
            }
        }
    }
}

/// A flat badge (the shields.io layout): "delegation | N/M pass", red with
/// any MUST failure, amber with other failures or undecided results, green
/// otherwise. Widths are estimated from the character count, enough for
/// the short labels a badge carries.
pub fn badge_svg(label: &str, tally: &Tally) -> String {
    let left = "delegation";
    let right = format!(
        "{} pass, {} fail of {} ran",
        tally.pass, tally.fail, tally.ran
    );
    let colour = if tally.must_fail > 0 {
        "#e05d44"
    } else if tally.fail > 0 || tally.undecided > 0 || tally.ran == 0 {
        "#dfb317"
    } else {
        "#4c1"
    };
    let width = |text: &str| 10 + 7 * text.chars().count();
    let (lw, rw) = (width(left), width(&right));
    html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(lw + rw) height="20" role="img"
            aria-label=(format!("{label}: {left}: {right}")) {
            title { (label) ": " (right) }
            rect width=(lw) height="20" fill="#555" {}
            rect x=(lw) width=(rw) height="20" fill=(colour) {}
            g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11" {
                text x=(lw / 2) y="14" { (left) }
                text x=(lw + rw / 2) y="14" { (right) }
            }
        }
    }
    .into_string()
}

const STYLE: &str = r#"
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; vertical-align: top; text-align: left; }
thead th { background: #f3f3f3; position: sticky; top: 0; }
td.num { text-align: right; }
td.meaning { max-width: 32rem; font-size: 0.9em; }
.pass { background: #e3f6e3; }
.fail { background: #fbe0dc; }
.undecided { background: #fdf3d0; }
.unsupported { background: #f2f2f2; color: #777; }
span.known { font-size: 0.8em; border: 1px solid #999; border-radius: 3px; padding: 0 0.2rem; }
span.security { font-size: 0.8em; color: #fff; background: #b00; border-radius: 3px; padding: 0 0.2rem; }
details { font-size: 0.85em; max-width: 40rem; }
code.rerun { user-select: all; }
p.lead { max-width: 60rem; }
table.scenarios th:first-child { min-width: 18rem; max-width: 28rem; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, raw: &str, verdict: &str, checks: &[&str]) -> ScenarioRow {
        ScenarioRow {
            id: id.into(),
            area: id.split('/').next().unwrap().into(),
            title: format!("title of {id}"),
            tier: "MUST".into(),
            checks: checks.iter().map(|c| c.to_string()).collect(),
            verdict: verdict.into(),
            raw_verdict: raw.into(),
            reason: None,
            security: raw == "fail",
            failures: if raw == "fail" {
                vec![FailureRow {
                    at: "steps[1].expect.delta.instances".into(),
                    message: "expected 0, observed <1>".into(),
                    inferred: vec![],
                }]
            } else {
                vec![]
            },
        }
    }

    fn host(label: &str, rows: Vec<ScenarioRow>) -> HostReport {
        HostReport {
            label: label.into(),
            host: format!("node {label}/adapter.mjs"),
            seed: Some(1),
            interrupted: false,
            rerun: None,
            scenarios: rows,
        }
    }

    #[test]
    fn a_tally_counts_what_the_host_did_not_what_was_expected() {
        let t = host(
            "h",
            vec![
                row("zc/001-a", "pass", "pass", &["ZC1"]),
                row("zc/002-b", "fail", "known_failure", &["ZC1"]),
                row("zc/003-c", "unsupported", "known_unsupported", &["ZC2"]),
                row("tr/001-d", "unverified", "unverified", &["TR1"]),
                row("tr/002-e", "pass", "inconclusive", &["TR1"]),
            ],
        )
        .tally();
        assert_eq!(
            t,
            Tally {
                total: 5,
                ran: 4,
                pass: 1,
                fail: 1,
                must_fail: 1,
                undecided: 2,
                unsupported: 1
            }
        );
    }

    #[test]
    fn the_page_shows_each_host_each_invariant_and_escapes_what_a_host_wrote() {
        let mut failing = row("zc/002-b", "fail", "known_failure", &["ZC1", "ZC2"]);
        failing.failures[0].message = "observed <script>alert(1)</script>".into();
        let a = host(
            "alpha",
            vec![row("zc/001-a", "pass", "pass", &["ZC1"]), failing],
        );
        let b = host(
            "beta",
            vec![row("zc/001-a", "unsupported", "unsupported", &["ZC1"])],
        );
        let page = render(&[a, b]);
        assert!(
            page.contains("<th>alpha</th>") && page.contains("<th>beta</th>"),
            "{page}"
        );
        assert!(page.contains(">ZC1<") && page.contains(">ZC2<"));
        assert!(
            !page.contains(">TR1<"),
            "an invariant no scenario checks is left out"
        );
        assert!(!page.contains("<script>"), "a host's text is escaped");
        assert!(page.contains("&lt;script&gt;"));
        assert!(page.contains("FAIL") && page.contains("known"));
        // beta's report lacks zc/002-b: absent, not a pass.
        assert!(page.contains("absent"));
        assert!(
            page.contains(
                "delegation-harness run --host 'node alpha/adapter.mjs' --filter zc/002-b --seed 1"
            ),
            "{page}"
        );
    }

    #[test]
    fn a_badge_is_red_only_with_a_must_failure() {
        let clean = host("h", vec![row("zc/001-a", "pass", "pass", &["ZC1"])]).tally();
        let failing = host("h", vec![row("zc/001-a", "fail", "fail", &["ZC1"])]).tally();
        assert!(badge_svg("h", &clean).contains("#4c1"));
        assert!(badge_svg("h", &failing).contains("#e05d44"));
        assert!(badge_svg("h", &failing).contains("0 pass, 1 fail of 1 ran"));
    }

    #[test]
    fn a_committed_report_parses() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../adapters/codex/conformance/codex-0.171.0.json"),
        )
        .unwrap();
        let report = HostReport::parse("codex", &text).unwrap();
        let t = report.tally();
        assert_eq!(t.total, report.scenarios.len());
        assert!(t.ran > 0 && t.unsupported > 0, "{t:?}");
    }
}
