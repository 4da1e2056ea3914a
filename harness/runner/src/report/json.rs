//! The JSON report: every result with its failures, evidence and transcript; for tools.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;

use serde::Serialize;

use super::{Collector, Reporter, Rerun};
use crate::events::RunEvent;
use crate::verdict::{ScenarioResult, Summary};

pub struct JsonReporter {
    file: PathBuf,
    collector: Collector,
}

impl JsonReporter {
    pub fn new(file: PathBuf) -> JsonReporter {
        JsonReporter {
            file,
            collector: Collector::new(),
        }
    }
}

/// The report as written. Serialised straight from the results rather than
/// through a `serde_json::Value` of the whole run: a catalogue's report is
/// about 12 MB, and building that tree first (and again for each partial
/// report) cost about 0.2 s of a catalogue run that takes 1.4 s.
#[derive(Serialize)]
struct Report<'a> {
    host: &'a str,
    seed: u64,
    rerun: &'a Rerun,
    interrupted: bool,
    model_checkers: bool,
    summary: &'a Summary,
    by_area: BTreeMap<String, Summary>,
    scenarios: Vec<&'a ScenarioResult>,
}

impl Reporter for JsonReporter {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        let Some((summary, interrupted)) = self.collector.absorb(event) else {
            return Ok(());
        };
        let scenarios = self.collector.sorted();
        let report = Report {
            host: &self.collector.host,
            seed: self.collector.seed,
            rerun: &self.collector.rerun,
            interrupted,
            model_checkers: crate::checks::MODEL_CHECKERS_WIRED,
            summary: &summary,
            by_area: Summary::by_area(scenarios.iter().copied()),
            scenarios,
        };
        let mut text = Vec::with_capacity(1 << 16);
        serde_json::to_writer_pretty(&mut text, &report).map_err(io::Error::other)?;
        text.write_all(b"\n")?;
        self.collector.write(&self.file, &text)
    }
}
