//! A host's expectations file: the failures its maintainers know about, each
//! with its reason (and issue) as data, the way rustls' bogo shim config and
//! the MCP conformance baseline list disabled tests; plus the host's own
//! names for the harness's deny reasons.
//!
//! ```json
//! { "known": [
//!     { "scenario": "ea/*", "expect": "unsupported", "reason": "no external authorizer yet" },
//!     { "scenario": "pg/002-*", "expect": "fail", "reason": "allow sent before commit",
//!       "issue": "https://example.org/host/issues/12" },
//!     { "scenario": "rs/001-*", "expect": "error", "reason": "crash recovery not wired" }
//!   ],
//!   "deny_reasons": { "quota_exceeded": "policy_denied" } }
//! ```
//!
//! A listed scenario that passes is `stale` and fails the run, so the file
//! cannot silently outlive the bug. A MUST-tier known failure (or known
//! error) stays visible as a known security violation in every report and
//! never counts as a pass. The README's "Expectations file" section is the
//! reference for hosts' maintainers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use delegation_model::DenyReason;
use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a listed scenario is known to end as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expected {
    Fail,
    Unsupported,
    /// The host crashes, times out or breaks the protocol on it.
    Error,
    /// Its checks rest on values the adapter can only infer on this host.
    Unverified,
    /// A negative that passes its own checks, but whose control does not
    /// pass on this host (it is itself a known failure, unverified or
    /// unsupported there), so its pass proves nothing.
    Inconclusive,
}

impl Expected {
    pub fn name(self) -> &'static str {
        match self {
            Expected::Fail => "fail",
            Expected::Unsupported => "unsupported",
            Expected::Error => "error",
            Expected::Unverified => "unverified",
            Expected::Inconclusive => "inconclusive",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    /// A scenario id or a glob over ids.
    scenario: String,
    expect: Expected,
    reason: String,
    #[serde(default)]
    issue: Option<String>,
    /// For `fail`: the checks it is known to fail, each failure's `at`
    /// (`steps[1].expect.delta.handler_calls`, or an invariant id). When
    /// given, a failure at other checks is a change, not this known failure.
    #[serde(default)]
    failed: Option<Vec<String>>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectationsFile {
    #[serde(default)]
    known: Vec<EntryFile>,
    /// The host's own reason name to the harness's vocabulary.
    #[serde(default)]
    deny_reasons: BTreeMap<String, DenyReason>,
}

/// One `known` entry.
#[derive(Clone, Debug)]
pub struct Entry {
    pub pattern: String,
    matcher: GlobMatcher,
    pub expect: Expected,
    pub reason: String,
    /// A link to the host's issue, shown beside the reason in every report.
    pub issue: Option<String>,
    /// The checks a `fail` entry is known to fail at (see the file format).
    pub failed: Option<Vec<String>>,
}

impl Entry {
    /// For a listed failure that now fails at other checks than the entry
    /// lists: what changed, as a maintainer should read it. `None` when the
    /// entry lists no checks or the same ones.
    pub fn change(&self, now: &std::collections::BTreeSet<String>) -> Option<String> {
        let listed: std::collections::BTreeSet<String> =
            self.failed.as_ref()?.iter().cloned().collect();
        if &listed == now {
            return None;
        }
        let gone: Vec<&String> = listed.difference(now).collect();
        let new: Vec<&String> = now.difference(&listed).collect();
        Some(format!(
            "listed by `{}` as a known failure ({}) at {:?}, but it now fails differently: no longer at {:?}, newly at {:?}; review the new failure, then update the entry's `failed`",
            self.pattern,
            self.reason_text(),
            listed,
            gone,
            new
        ))
    }

    /// The reason with its issue link, as reports print it.
    pub fn reason_text(&self) -> String {
        match &self.issue {
            Some(issue) => format!("{} ({issue})", self.reason),
            None => self.reason.clone(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct HostExpectations {
    pub entries: Vec<Entry>,
    /// The host's own reason names mapped to the harness's vocabulary.
    pub deny_reasons: BTreeMap<String, DenyReason>,
}

#[derive(Debug, thiserror::Error)]
pub enum HostExpectationsError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: at `{path}`: {message}")]
    Parse {
        file: PathBuf,
        path: String,
        message: String,
    },
}

/// A reason name a host sent that is neither the harness's nor mapped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the host answered deny reason `{name}` at `{at}`, which is not in the harness vocabulary ({vocabulary}); if it is this host's own name for one of them, map it in the expectations file, e.g. \"deny_reasons\": {{\"{name}\": \"policy_denied\"}}"
)]
pub struct UnmappedReason {
    pub name: String,
    /// JSON path in the host's reply, e.g. `tool_call.reason`.
    pub at: String,
    pub vocabulary: String,
}

const FORMAT_HINT: &str = "expected {\"known\": [{\"scenario\": ID-OR-GLOB, \"expect\": \"fail\"|\"unsupported\"|\"error\"|\"unverified\", \"reason\": TEXT, \"issue\": URL (optional), \"failed\": [CHECK, ...] (optional, with fail)}], \"deny_reasons\": {HOST-NAME: HARNESS-REASON} (optional)}";

impl HostExpectations {
    pub fn load(file: &Path) -> Result<HostExpectations, HostExpectationsError> {
        let text = std::fs::read_to_string(file).map_err(|source| HostExpectationsError::Read {
            file: file.to_path_buf(),
            source,
        })?;
        HostExpectations::parse(&text, file)
    }

    pub fn parse(text: &str, file: &Path) -> Result<HostExpectations, HostExpectationsError> {
        let parse_error = |path: String, message: String| HostExpectationsError::Parse {
            file: file.to_path_buf(),
            path,
            message,
        };
        let mut de = serde_json::Deserializer::from_str(text);
        let parsed: ExpectationsFile = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            parse_error(
                e.path().to_string(),
                format!("{}; {FORMAT_HINT}", e.inner()),
            )
        })?;
        let entries = parsed
            .known
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                if e.reason.trim().is_empty() {
                    return Err(parse_error(
                        format!("known[{i}].reason"),
                        "every known failure says why, as data: give a reason (and an `issue` link if there is one)".into(),
                    ));
                }
                if e.failed.is_some() && e.expect != Expected::Fail {
                    return Err(parse_error(
                        format!("known[{i}].failed"),
                        format!("`failed` lists the checks a `fail` entry fails at; this entry expects `{}`", e.expect.name()),
                    ));
                }
                let matcher = Glob::new(&e.scenario)
                    .map_err(|g| {
                        parse_error(
                            format!("known[{i}].scenario"),
                            format!("`{}` is not a valid glob: {}", e.scenario, g.kind()),
                        )
                    })?
                    .compile_matcher();
                Ok(Entry {
                    pattern: e.scenario,
                    matcher,
                    expect: e.expect,
                    reason: e.reason,
                    issue: e.issue,
                    failed: e.failed,
                })
            })
            .collect::<Result<_, _>>()?;
        for name in parsed.deny_reasons.keys() {
            if harness_reason(name).is_some() {
                return Err(parse_error(
                    format!("deny_reasons.{name}"),
                    format!(
                        "`{name}` is already a harness deny reason and always means itself; map only this host's own names"
                    ),
                ));
            }
        }
        Ok(HostExpectations {
            entries,
            deny_reasons: parsed.deny_reasons,
        })
    }

    /// The first entry listing this scenario id.
    pub fn lookup(&self, id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.matcher.is_match(id))
    }

    /// A reason name as a host sent it: a harness name means itself, a
    /// mapped name means what the map says, anything else is refused.
    pub fn deny_reason(&self, name: &str, at: &str) -> Result<DenyReason, UnmappedReason> {
        harness_reason(name)
            .or_else(|| self.deny_reasons.get(name).copied())
            .ok_or_else(|| UnmappedReason {
                name: name.to_string(),
                at: at.to_string(),
                vocabulary: vocabulary(),
            })
    }

    /// Rewrites every deny reason in a host's raw reply (`reason`,
    /// `tool_call.reason`, `turn.spawn.reason`, `observed.records[i].deny_reasons[j]`)
    /// into the harness's vocabulary, before the reply is decoded as an
    /// `ActionResult`: the one place a host's own names are accepted.
    /// Returns the first name that is neither the harness's nor mapped.
    pub fn translate_reply(&self, reply: &mut Value) -> Result<(), UnmappedReason> {
        let mut slots: Vec<(String, &mut Value)> = Vec::new();
        let Value::Object(top) = reply else {
            return Ok(());
        };
        for (key, value) in top.iter_mut() {
            match key.as_str() {
                "reason" => slots.push(("reason".into(), value)),
                "tool_call" => {
                    if let Some(v) = value.get_mut("reason") {
                        slots.push(("tool_call.reason".into(), v));
                    }
                }
                "turn" => {
                    if let Some(v) = value.get_mut("spawn").and_then(|s| s.get_mut("reason")) {
                        slots.push(("turn.spawn.reason".into(), v));
                    }
                }
                "observed" => {
                    if let Some(Value::Array(records)) = value.get_mut("records") {
                        for (i, record) in records.iter_mut().enumerate() {
                            if let Some(Value::Array(reasons)) = record.get_mut("deny_reasons") {
                                for (j, r) in reasons.iter_mut().enumerate() {
                                    slots.push((
                                        format!("observed.records[{i}].deny_reasons[{j}]"),
                                        r,
                                    ));
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        for (at, slot) in slots {
            if let Value::String(name) = slot {
                let reason = self.deny_reason(name, &at)?;
                *slot = serde_json::to_value(reason).unwrap_or(Value::Null);
            }
        }
        Ok(())
    }

    /// The host's own reason name inside a decoding error a host layer
    /// reported, when NAME is not a harness reason: the runner then says which
    /// name and how to map it.
    ///
    /// An error is about a deny reason when it lists every harness reason name
    /// (a decoder refusing a name lists the ones it knows; the names come from
    /// the enum itself, [`DenyReason::names`]); the host's name is the quoted
    /// name just before that list, when it is not a harness reason.
    pub fn unmapped_in_error(&self, message: &str) -> Option<UnmappedReason> {
        let quoted: Vec<&str> = message.split('`').skip(1).step_by(2).collect();
        let harness = DenyReason::names();
        if !harness.iter().all(|name| quoted.contains(name)) {
            return None;
        }
        let list_starts = quoted.iter().position(|name| harness.contains(name))?;
        let name = *quoted.get(list_starts.checked_sub(1)?)?;
        Some(UnmappedReason {
            name: name.to_string(),
            at: "reply".into(),
            vocabulary: vocabulary(),
        })
    }
}

fn harness_reason(name: &str) -> Option<DenyReason> {
    name.parse().ok()
}

fn vocabulary() -> String {
    DenyReason::names().join(", ")
}
