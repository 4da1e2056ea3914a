//! `delegation-harness report --html DIR REPORT.json...`: the side-by-side conformance page and one badge per host, from JSON reports.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use delegation_runner::exit_code;
use delegation_runner::report::matrix::{self, HostReport};

#[derive(Args)]
pub struct ReportArgs {
    /// Write the page as DIR/index.html and a badge per host as DIR/badges/NAME.svg.
    #[arg(long, value_name = "DIR")]
    html: PathBuf,
    /// JSON reports (`run --report json=FILE`), one column each, as FILE
    /// (the column is named after the file: `codex-0.171.0.json` is
    /// `codex-0.171.0`) or NAME=FILE.
    #[arg(value_name = "[NAME=]REPORT.json", required = true)]
    reports: Vec<String>,
}

/// Column name and file of one argument.
fn label_and_file(arg: &str) -> (String, PathBuf) {
    match arg.split_once('=') {
        Some((name, file)) if !name.is_empty() && !name.contains('/') => {
            (name.to_string(), PathBuf::from(file))
        }
        _ => {
            let file = PathBuf::from(arg);
            let label = file
                .file_stem()
                .map_or_else(|| arg.to_string(), |s| s.to_string_lossy().into_owned());
            (label, file)
        }
    }
}

fn read_report(label: &str, file: &Path) -> anyhow::Result<HostReport> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read the report {}", file.display()))?;
    HostReport::parse(label, &text).with_context(|| {
        format!(
            "{} is not a JSON report of `delegation-harness run --report json=FILE`",
            file.display()
        )
    })
}

pub fn report(args: ReportArgs) -> anyhow::Result<i32> {
    let mut reports = Vec::new();
    for arg in &args.reports {
        let (label, file) = label_and_file(arg);
        if reports.iter().any(|r: &HostReport| r.label == label) {
            bail!(
                "two reports are named `{label}`: name one with NAME={}",
                file.display()
            );
        }
        reports.push(read_report(&label, &file)?);
    }
    let badges = args.html.join("badges");
    std::fs::create_dir_all(&badges)
        .with_context(|| format!("cannot create {}", badges.display()))?;
    let page = args.html.join("index.html");
    std::fs::write(&page, matrix::render(&reports))
        .with_context(|| format!("cannot write {}", page.display()))?;
    for report in &reports {
        let badge = badges.join(format!("{}.svg", report.label));
        std::fs::write(&badge, matrix::badge_svg(&report.label, &report.tally()))
            .with_context(|| format!("cannot write {}", badge.display()))?;
    }
    anstream::println!(
        "wrote {} ({} hosts) and {} badges in {}",
        page.display(),
        reports.len(),
        reports.len(),
        badges.display()
    );
    Ok(exit_code::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_is_named_after_its_file_unless_named() {
        assert_eq!(
            label_and_file("a/b/codex-0.171.0.json"),
            (
                "codex-0.171.0".into(),
                PathBuf::from("a/b/codex-0.171.0.json")
            )
        );
        assert_eq!(
            label_and_file("reference=target/r.json"),
            ("reference".into(), PathBuf::from("target/r.json"))
        );
        // A path with `=` in a folder name is a path, not NAME=FILE.
        assert_eq!(label_and_file("x/a=b/r.json").0, "r");
    }
}
