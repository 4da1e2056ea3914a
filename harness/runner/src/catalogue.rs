//! The scenario catalogue: a directory of `<area>/<NNN-name>.json` files,
//! loaded, checked as a whole, filtered and put in run order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use delegation_model::InvariantId;
use globset::{Glob, GlobMatcher};

use crate::scenario::{Scenario, ScenarioError, ScenarioKind};

#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    #[error("{dir}: cannot read the scenario catalogue: {source}")]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// Every broken file, not just the first: a catalogue is fixed in one pass.
    #[error("{} scenario file(s) are invalid:\n{}", .0.len(), .0.iter().map(|e| format!("  {e}")).collect::<Vec<_>>().join("\n"))]
    Files(Vec<ScenarioError>),
    #[error("`{pattern}` is not a valid --filter glob: {message}")]
    Filter { pattern: String, message: String },
}

/// All scenarios of a catalogue directory, sorted by id.
#[derive(Clone, Debug, Default)]
pub struct Catalogue {
    pub root: PathBuf,
    pub scenarios: Vec<Scenario>,
}

impl Catalogue {
    /// Loads every `*.json` below `root/<area>/`, skipping the `schema` directory.
    pub fn load(root: &Path) -> Result<Catalogue, CatalogueError> {
        let dir_err = |source| CatalogueError::Dir {
            dir: root.to_path_buf(),
            source,
        };
        let mut files = Vec::new();
        for area in std::fs::read_dir(root).map_err(dir_err)? {
            let area = area.map_err(dir_err)?.path();
            if !area.is_dir() || area.file_name().is_some_and(|n| n == "schema") {
                continue;
            }
            for entry in std::fs::read_dir(&area).map_err(dir_err)? {
                let path = entry.map_err(dir_err)?.path();
                if path.extension().is_some_and(|e| e == "json") {
                    files.push(path);
                }
            }
        }
        files.sort();
        let mut scenarios = Vec::new();
        let mut errors = Vec::new();
        for file in &files {
            match Scenario::load(root, file) {
                Ok(s) => scenarios.push((file.clone(), s)),
                Err(e) => errors.push(e),
            }
        }
        errors.extend(check_controls(&scenarios));
        errors.extend(check_twins(&scenarios));
        if !errors.is_empty() {
            return Err(CatalogueError::Files(errors));
        }
        let mut scenarios: Vec<Scenario> = scenarios.into_iter().map(|(_, s)| s).collect();
        scenarios.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(Catalogue {
            root: root.to_path_buf(),
            scenarios,
        })
    }

    pub fn get(&self, id: &str) -> Option<&Scenario> {
        self.scenarios.iter().find(|s| s.id == id)
    }

    /// Scenarios that check `id`.
    pub fn checking(&self, id: InvariantId) -> impl Iterator<Item = &Scenario> {
        self.scenarios
            .iter()
            .filter(move |s| s.checks.contains(&id))
    }

    /// The selection for a run: scenarios matching every given filter, plus
    /// the control of each selected negative (a negative cannot be judged without it).
    pub fn select(&self, filter: &Filter) -> Vec<&Scenario> {
        let mut ids: BTreeSet<&str> = self
            .scenarios
            .iter()
            .filter(|s| filter.matches(s))
            .map(|s| s.id.as_str())
            .collect();
        let controls: Vec<&str> = ids
            .iter()
            .filter_map(|id| self.get(id).and_then(|s| s.control.as_deref()))
            .collect();
        ids.extend(controls);
        self.scenarios
            .iter()
            .filter(|s| ids.contains(s.id.as_str()))
            .collect()
    }
}

/// Catalogue-wide checks: unique ids, controls that exist and are controls.
fn check_controls(scenarios: &[(PathBuf, Scenario)]) -> Vec<ScenarioError> {
    let mut errors = Vec::new();
    let mut by_id: BTreeMap<&str, &Scenario> = BTreeMap::new();
    for (file, s) in scenarios {
        if by_id.insert(&s.id, s).is_some() {
            errors.push(ScenarioError::Invalid {
                file: file.clone(),
                path: "id".into(),
                message: format!("duplicate scenario id `{}`", s.id),
            });
        }
    }
    for (file, s) in scenarios {
        let Some(control) = &s.control else { continue };
        match by_id.get(control.as_str()) {
            None => errors.push(ScenarioError::Invalid {
                file: file.clone(),
                path: "control".into(),
                message: format!(
                    "control `{control}` is not a scenario in this catalogue; expected the id of a scenario with \"kind\": \"control\""
                ),
            }),
            Some(c) if c.kind != ScenarioKind::Control => errors.push(ScenarioError::Invalid {
                file: file.clone(),
                path: "control".into(),
                message: format!(
                    "`{control}` is not marked \"kind\": \"control\"; a positive control must say so"
                ),
            }),
            Some(_) => {}
        }
    }
    errors
}

/// Catalogue-wide checks of spawn-based twins: the original exists and is
/// no twin itself, the twin asks the same question (same checks, tier and
/// kind), and a negative twin is judged beside the twin of its original's
/// control, so that the control shows the host can do the thing by the same
/// path (a spawn in a parent's turn) the negative refuses.
fn check_twins(scenarios: &[(PathBuf, Scenario)]) -> Vec<ScenarioError> {
    let by_id: BTreeMap<&str, &Scenario> =
        scenarios.iter().map(|(_, s)| (s.id.as_str(), s)).collect();
    let mut errors = Vec::new();
    for (file, twin) in scenarios {
        let Some(original_id) = &twin.twin_of else {
            continue;
        };
        let invalid = |path: &str, message: String| ScenarioError::Invalid {
            file: file.clone(),
            path: path.into(),
            message,
        };
        let Some(original) = by_id.get(original_id.as_str()) else {
            errors.push(invalid(
                "twin_of",
                format!("`{original_id}` is not a scenario in this catalogue; expected the id of the scenario this one is the spawn-based twin of"),
            ));
            continue;
        };
        if original.twin_of.is_some() || original.id == twin.id {
            errors.push(invalid(
                "twin_of",
                format!("`{original_id}` is itself a twin: name the scenario that uses `delegate`"),
            ));
            continue;
        }
        let checks = |s: &Scenario| s.checks.iter().copied().collect::<BTreeSet<InvariantId>>();
        if checks(twin) != checks(original) {
            errors.push(invalid(
                "checks",
                format!(
                    "a twin checks exactly what its original `{original_id}` checks: expected {:?}",
                    original.checks
                ),
            ));
        }
        if twin.tier != original.tier {
            errors.push(invalid(
                "tier",
                format!("a twin has its original's tier: expected {}", original.tier),
            ));
        }
        if twin.kind != original.kind {
            errors.push(invalid(
                "kind",
                format!(
                    "a twin has its original's kind: expected \"{}\"",
                    format!("{:?}", original.kind).to_lowercase()
                ),
            ));
        }
        if let Some(original_control) = &original.control {
            let twin_control = twin.control.as_deref().and_then(|c| by_id.get(c));
            if twin_control.and_then(|c| c.twin_of.as_deref()) != Some(original_control.as_str()) {
                errors.push(invalid(
                    "control",
                    format!(
                        "the original's control is `{original_control}`: a twin's control is the twin of it (a scenario with \"twin_of\": \"{original_control}\")"
                    ),
                ));
            }
        }
    }
    errors
}

/// `--filter` and `--invariant`: a scenario is selected when it matches any
/// id pattern (or none are given) and checks any given invariant (or none are given).
#[derive(Clone, Debug, Default)]
pub struct Filter {
    patterns: Vec<Pattern>,
    invariants: Vec<InvariantId>,
}

#[derive(Clone, Debug)]
enum Pattern {
    Substring(String),
    Glob(GlobMatcher),
}

impl Filter {
    /// A pattern with `*`, `?`, `[` or `{` is a glob over the whole id; anything else is a substring.
    pub fn new(patterns: &[String], invariants: &[InvariantId]) -> Result<Filter, CatalogueError> {
        let patterns = patterns
            .iter()
            .map(|p| {
                if p.contains(['*', '?', '[', '{']) {
                    Glob::new(p)
                        .map(|g| Pattern::Glob(g.compile_matcher()))
                        .map_err(|e| CatalogueError::Filter {
                            pattern: p.clone(),
                            message: e.kind().to_string(),
                        })
                } else {
                    Ok(Pattern::Substring(p.clone()))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Filter {
            patterns,
            invariants: invariants.to_vec(),
        })
    }

    pub fn matches(&self, s: &Scenario) -> bool {
        let id_ok = self.patterns.is_empty()
            || self.patterns.iter().any(|p| match p {
                Pattern::Substring(sub) => s.id.contains(sub.as_str()),
                Pattern::Glob(g) => g.is_match(&s.id),
            });
        let inv_ok =
            self.invariants.is_empty() || self.invariants.iter().any(|i| s.checks.contains(i));
        id_ok && inv_ok
    }
}

/// Run order: a seeded shuffle (so hidden order dependencies show up, and
/// repeat with the same seed), then each control moved before its negatives.
pub fn order<'a>(selected: &[&'a Scenario], seed: u64) -> Vec<&'a Scenario> {
    let mut shuffled: Vec<&Scenario> = selected.to_vec();
    fastrand::Rng::with_seed(seed).shuffle(&mut shuffled);
    let mut out: Vec<&Scenario> = Vec::with_capacity(shuffled.len());
    let mut placed: BTreeSet<&str> = BTreeSet::new();
    for s in &shuffled {
        if let Some(control) = s.control.as_deref()
            && !placed.contains(control)
            && let Some(c) = shuffled.iter().find(|c| c.id == control)
        {
            placed.insert(&c.id);
            out.push(c);
        }
        if placed.insert(&s.id) {
            out.push(s);
        }
    }
    out
}
