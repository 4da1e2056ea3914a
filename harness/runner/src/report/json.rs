//! The JSON report: every result with its failures, evidence and transcript; for tools.

use std::io;
use std::path::PathBuf;

use serde_json::json;

use super::{Collector, Reporter};
use crate::events::RunEvent;

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

impl Reporter for JsonReporter {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        let Some((summary, interrupted)) = self.collector.absorb(event) else {
            return Ok(());
        };
        let report = json!({
            "host": self.collector.host,
            "seed": self.collector.seed,
            "rerun": self.collector.rerun,
            "interrupted": interrupted,
            "model_checkers": crate::checks::MODEL_CHECKERS_WIRED,
            "summary": summary,
            "by_area": crate::verdict::Summary::by_area(self.collector.sorted()),
            "scenarios": self.collector.sorted(),
        });
        let text = serde_json::to_string_pretty(&report).map_err(io::Error::other)?;
        super::write_atomically(&self.file, (text + "\n").as_bytes())
    }
}
