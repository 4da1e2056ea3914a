//! A fuzz run's summary as JSON (`fuzz --summary FILE`), and several runs' summaries merged into one report (`fuzz --merge`).
//!
//! A CI matrix splits host fuzzing by seed: each job fuzzes its own seed
//! and uploads its summary; one last job merges them, so the findings and
//! the generator's reach read as one run's.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::reach::Reach;

/// One run of `delegation-harness fuzz`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FuzzSummary {
    /// What was fuzzed, as `fuzz` describes it.
    pub host: String,
    pub seeds: Vec<u64>,
    pub cases: u64,
    pub operations: u64,
    pub steps: u64,
    pub unsupported: u64,
    pub shortened: u64,
    pub seconds: f64,
    /// Stopped by a signal before the cases asked for had run.
    pub interrupted: bool,
    pub reach: Reach,
    pub findings: Vec<FuzzFinding>,
}

/// One finding of a run, as written to disk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FuzzFinding {
    pub seed: u64,
    /// The scenario file it was written to.
    pub file: String,
    pub message: String,
    /// Operations when found, and after shrinking (`None`: not shrunk).
    pub operations: usize,
    pub shrunk_operations: Option<usize>,
}

impl FuzzSummary {
    /// Reads a summary; the error names the file and what was expected.
    pub fn load(file: &Path) -> Result<FuzzSummary, String> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read the fuzz summary {}: {e}", file.display()))?;
        serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not a fuzz summary as `delegation-harness fuzz --summary FILE` writes one: {e}",
                file.display()
            )
        })
    }

    /// Adds another run's counts, seeds, reach and findings.
    pub fn merge(&mut self, other: &FuzzSummary) {
        if self.host.is_empty() {
            self.host = other.host.clone();
        } else if self.host != other.host {
            self.host = format!("{}; {}", self.host, other.host);
        }
        self.seeds.extend(&other.seeds);
        self.cases += other.cases;
        self.operations += other.operations;
        self.steps += other.steps;
        self.unsupported += other.unsupported;
        self.shortened += other.shortened;
        // The runs are parallel: the slowest bounds the wall time.
        self.seconds = self.seconds.max(other.seconds);
        self.interrupted |= other.interrupted;
        self.reach.merge(&other.reach);
        self.findings.extend(other.findings.iter().cloned());
    }

    /// The report in markdown: totals, reach, findings.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "## Fuzzing {}\n\n{} run(s), seeds {}: {} cases, {} operations ({} steps), {} unsupported, {} shortened{}.\n\n{}.\n\n",
            self.host,
            self.seeds.len(),
            self.seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            self.cases,
            self.operations,
            self.steps,
            self.unsupported,
            self.shortened,
            if self.interrupted {
                "; interrupted"
            } else {
                ""
            },
            self.reach.summary()
        );
        if self.findings.is_empty() {
            out.push_str("No finding.\n");
        } else {
            out.push_str(&format!(
                "{} finding(s):\n\n| seed | file | operations (found -> shrunk) | divergence |\n|---|---|---|---|\n",
                self.findings.len()
            ));
            for f in &self.findings {
                out.push_str(&format!(
                    "| {} | `{}` | {} -> {} | {} |\n",
                    f.seed,
                    f.file,
                    f.operations,
                    f.shrunk_operations
                        .map_or("not shrunk".to_string(), |n| n.to_string()),
                    f.message
                        .chars()
                        .take(160)
                        .collect::<String>()
                        .replace('|', "\\|")
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_summaries_add_up_and_keep_every_finding() {
        let mut a = FuzzSummary {
            host: "the reference host".into(),
            seeds: vec![1],
            cases: 10,
            operations: 100,
            seconds: 3.0,
            ..FuzzSummary::default()
        };
        a.reach.operations.insert("start".into(), 4);
        let mut b = FuzzSummary {
            seeds: vec![2],
            cases: 5,
            seconds: 5.0,
            ..a.clone()
        };
        b.findings.push(FuzzFinding {
            seed: 2,
            file: "fuzz-findings/fuzz/001-x.json".into(),
            message: "steps[1]: expected denied".into(),
            operations: 9,
            shrunk_operations: Some(2),
        });
        let text = serde_json::to_string(&b).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.json");
        std::fs::write(&file, text).unwrap();
        let b = FuzzSummary::load(&file).unwrap();
        a.merge(&b);
        assert_eq!(a.seeds, [1, 2]);
        assert_eq!(a.cases, 15);
        assert_eq!(a.seconds, 5.0);
        assert_eq!(a.reach.operations["start"], 8);
        assert_eq!(a.findings.len(), 1);
        let md = a.markdown();
        assert!(md.contains("seeds 1, 2: 15 cases"), "{md}");
        assert!(
            md.contains("| 2 | `fuzz-findings/fuzz/001-x.json` | 9 -> 2 |"),
            "{md}"
        );

        std::fs::write(&file, "{\"cases\": 1}").unwrap();
        let error = FuzzSummary::load(&file).unwrap_err();
        assert!(
            error.contains("b.json") && error.contains("--summary"),
            "{error}"
        );
    }
}
