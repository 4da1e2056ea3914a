//! Snapshots: one normalised transcript per scenario, written with insta to
//! `<dir>/<area>/<NNN-name>.snap`, so a change in a host's behaviour shows
//! as a reviewable diff (`cargo insta review`, or `INSTA_UPDATE=no` in CI).
//!
//! Normalisation makes transcripts comparable across runs and hosts: host
//! ids become their scenario aliases (`<root>`), ids without an alias become
//! stable placeholders in order of first appearance (`<id:3>`), times become
//! `<time>` and secrets `<secret>`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::execute::Transcript;
use crate::verdict::{ScenarioResult, SnapshotCheck};

/// Keys whose string values are host-chosen ids.
const ID_KEYS: &[&str] = &[
    "id",
    "instance",
    "parent",
    "child",
    "receipt",
    "request",
    "approval",
    "agent",
    "grant",
    "capability",
    "authorization",
    "receipt_ids",
];
/// Keys whose values are times on the harness clock or elsewhere.
const TIME_KEYS: &[&str] = &["now", "issued_at", "expires_at", "deadline"];
/// Keys whose values are secrets or host-specific seals.
const SECRET_KEYS: &[&str] = &["seal", "secret"];

/// The snapshot form of a transcript, its steps rewritten in place.
pub fn normalise(transcript: Transcript) -> Value {
    let Transcript {
        steps,
        aliases,
        secrets,
    } = transcript;
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for (id, alias) in &aliases {
        names
            .entry(id.clone())
            .or_insert_with(|| format!("<{alias}>"));
    }
    let mut next = 1usize;
    let mut steps = Value::Array(steps);
    // First pass: give every id-valued string a name in order of appearance.
    collect_ids(&steps, false, &mut names, &mut next);
    rewrite(&mut steps, &names, &secrets, None);
    steps
}

/// Replaces every secret (capability secrets, canaries, receipt seals) in
/// `value`; reports carry host replies as evidence and must not leak them (TC4).
pub fn redact_secrets(value: &mut Value, secrets: &[String]) {
    rewrite_secrets(value, secrets);
}

fn rewrite_secrets(value: &mut Value, secrets: &[String]) {
    match value {
        Value::String(s)
            if secrets
                .iter()
                .any(|x| !x.is_empty() && s.contains(x.as_str())) =>
        {
            *value = Value::String("<secret>".into());
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_secrets(v, secrets)),
        Value::Object(map) => map.values_mut().for_each(|v| rewrite_secrets(v, secrets)),
        _ => {}
    }
}

fn collect_ids(value: &Value, is_id: bool, names: &mut BTreeMap<String, String>, next: &mut usize) {
    match value {
        Value::String(s) if is_id => {
            if !names.contains_key(s) {
                names.insert(s.clone(), format!("<id:{next}>"));
                *next += 1;
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|v| collect_ids(v, is_id, names, next)),
        Value::Object(map) => {
            for (k, v) in map {
                collect_ids(v, ID_KEYS.contains(&k.as_str()), names, next);
            }
        }
        _ => {}
    }
}

fn rewrite(
    value: &mut Value,
    names: &BTreeMap<String, String>,
    secrets: &[String],
    key: Option<&str>,
) {
    match value {
        Value::Number(_) if key.is_some_and(|k| TIME_KEYS.contains(&k)) => {
            *value = Value::String("<time>".into());
        }
        Value::String(s) => {
            if key.is_some_and(|k| SECRET_KEYS.contains(&k))
                || secrets
                    .iter()
                    .any(|x| !x.is_empty() && s.contains(x.as_str()))
            {
                *value = Value::String("<secret>".into());
            } else if let Some(name) = names.get(s.as_str()) {
                *value = Value::String(name.clone());
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| rewrite(v, names, secrets, key)),
        // Most objects have no id among their keys: their values are
        // rewritten where they are, without building the object anew.
        Value::Object(map) if !map.keys().any(|k| names.contains_key(k)) => {
            for (k, v) in map.iter_mut() {
                rewrite(v, names, secrets, Some(k));
            }
        }
        Value::Object(map) => {
            // Ids also appear as map keys (model requests by instance).
            let renamed: serde_json::Map<String, Value> = std::mem::take(map)
                .into_iter()
                .map(|(k, mut v)| {
                    rewrite(&mut v, names, secrets, Some(&k));
                    (names.get(&k).cloned().unwrap_or(k), v)
                })
                .collect();
            *map = renamed;
        }
        _ => {}
    }
}

/// Compares (or records) one scenario's transcript under `dir` with insta.
///
/// insta decides what a mismatch does from `INSTA_UPDATE`: `no` (CI) fails
/// without writing, the default writes `<name>.snap.new` for review,
/// `always` accepts. The outcome is returned, never a panic, so a run
/// reports every snapshot as an event of its scenario, in every reporter;
/// what changed comes from the comparison itself (a bounded line diff), not
/// from insta's printout (the CLI turns that off with `INSTA_OUTPUT=none`).
pub fn check(dir: &Path, result: &ScenarioResult) -> SnapshotCheck {
    // insta reads a relative snapshot folder as relative to the source file
    // of its caller (this one), not to where the user ran the harness.
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let area_dir = dir.join(&result.area);
    let name = result
        .id
        .split_once('/')
        .map(|(_, n)| n)
        .unwrap_or(&result.id)
        .to_string();
    let file = area_dir.join(format!("{name}.snap"));
    let committed = file.exists();
    // Borrowed, not a copy of the transcript; the fields in the sorted
    // order the committed snapshots were first written in (a JSON object).
    #[derive(serde::Serialize)]
    struct Document<'a> {
        scenario: &'a str,
        steps: &'a Value,
        title: &'a str,
        verdict: &'a str,
    }
    let value = Document {
        scenario: &result.id,
        steps: &result.transcript,
        title: &result.title,
        verdict: result.verdict.name(),
    };
    let seen = Recording::default();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        with_settings(&area_dir, &result.id, || {
            let mut settings = insta::Settings::clone_current();
            settings.set_comparator(Box::new(seen.clone()));
            settings.bind(|| insta::assert_yaml_snapshot!(name.as_str(), value));
        })
    }));
    let pending = area_dir.join(format!("{name}.snap.new"));
    let review = if pending.exists() {
        format!(
            "the new transcript is in `{}`: review it with `cargo insta review` or accept it with INSTA_UPDATE=always",
            pending.display()
        )
    } else {
        "nothing was written (INSTA_UPDATE=no); rerun with INSTA_UPDATE=always to accept it"
            .to_string()
    };
    if !committed {
        return if outcome.is_ok() && file.exists() {
            SnapshotCheck::Recorded
        } else {
            SnapshotCheck::Changed {
                message: format!("no snapshot committed at `{}`; {review}", file.display()),
            }
        };
    }
    match seen.compared() {
        Some((old, new)) if old != new => SnapshotCheck::Changed {
            message: format!(
                "the transcript differs from `{}`:\n{}{review}",
                file.display(),
                bounded_diff(&old, &new)
            ),
        },
        Some(_) => SnapshotCheck::Unchanged,
        // insta compared nothing although a snapshot is committed: it could
        // not read or parse it, or looked elsewhere. Never a silent pass.
        None => SnapshotCheck::Changed {
            message: format!(
                "`{}` could not be compared (unreadable?); {review}",
                file.display()
            ),
        },
    }
}

/// At most this many changed lines of a snapshot diff go into a report; the
/// whole new snapshot is in its `.snap.new` file.
const DIFF_LINES: usize = 24;

/// The changed lines of two snapshot texts, `-` old and `+` new, each with
/// its line number in the new text, bounded to [`DIFF_LINES`].
fn bounded_diff(old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = String::new();
    let mut shown = 0;
    let mut hidden = 0;
    for change in diff.iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Equal => continue,
            similar::ChangeTag::Delete => '-',
            similar::ChangeTag::Insert => '+',
        };
        if shown == DIFF_LINES {
            hidden += 1;
            continue;
        }
        shown += 1;
        let line = change
            .new_index()
            .or(change.old_index())
            .map_or(0, |i| i + 1);
        out.push_str(&format!("  {sign}{line:>5} {}", change.value()));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if hidden > 0 {
        out.push_str(&format!("  ... and {hidden} more changed line(s)\n"));
    }
    out
}

/// insta's own comparison, recorded: what the committed snapshot and the
/// new transcript were, as insta normalises them.
#[derive(Clone, Default)]
struct Recording(std::sync::Arc<std::sync::Mutex<Option<(String, String)>>>);

impl Recording {
    fn compared(&self) -> Option<(String, String)> {
        self.0.lock().map(|g| g.clone()).unwrap_or(None)
    }
}

impl insta::Comparator for Recording {
    fn matches(&self, reference: &insta::Snapshot, test: &insta::Snapshot) -> bool {
        let text = |s: &insta::Snapshot| {
            s.contents()
                .as_text()
                .map(|t| t.to_string())
                .unwrap_or_default()
        };
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some((text(reference), text(test)));
        }
        insta::DefaultComparator.matches(reference, test)
    }

    fn dyn_clone(&self) -> Box<dyn insta::Comparator> {
        Box::new(self.clone())
    }
}

/// The one place snapshot settings are bound: path, no module prefix, no
/// source expression (it would name this file, not the scenario).
pub fn with_settings<R>(dir: &Path, scenario: &str, f: impl FnOnce() -> R) -> R {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(dir);
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.set_description(format!("scenario {scenario}"));
    settings.set_sort_maps(true);
    settings.bind(f)
}
