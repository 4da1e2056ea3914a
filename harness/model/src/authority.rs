//! Authority: what an instance may do, its partial order and its meet (MODEL.md section 2).
//!
//! `a.leq(&b)` holds when everything `a` permits `b` permits too. The meet is
//! partial: an `external` sandbox, two unrelated working directories or two
//! providers have no common lower bound, and a delegation that would need one
//! is denied rather than mapped to something broader.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::path::{NormalPath, PathError};

/// The sandbox axis: `read-only` < `workspace-write` < `full-access`; `external`
/// is comparable only to itself.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Sandbox {
    ReadOnly,
    WorkspaceWrite {
        writable_roots: BTreeSet<NormalPath>,
        network: bool,
    },
    FullAccess,
    /// A sandbox the host cannot see inside, named by its operator.
    External {
        name: String,
    },
}

impl Sandbox {
    pub fn leq(&self, other: &Sandbox) -> bool {
        use Sandbox::*;
        match (self, other) {
            (External { name: a }, External { name: b }) => a == b,
            (External { .. }, _) | (_, External { .. }) => false,
            (ReadOnly, _) => true,
            (_, FullAccess) => true,
            (FullAccess, _) => false,
            (WorkspaceWrite { .. }, ReadOnly) => false,
            (
                WorkspaceWrite {
                    writable_roots: ra,
                    network: na,
                },
                WorkspaceWrite {
                    writable_roots: rb,
                    network: nb,
                },
            ) => (!na || *nb) && ra.iter().all(|r| rb.iter().any(|s| r.is_within(s))),
        }
    }

    /// The greatest lower bound, or `None` where no sandbox lies below both.
    pub fn meet(&self, other: &Sandbox) -> Option<Sandbox> {
        use Sandbox::*;
        match (self, other) {
            (External { name: a }, External { name: b }) if a == b => Some(self.clone()),
            (External { .. }, _) | (_, External { .. }) => None,
            (ReadOnly, _) | (_, ReadOnly) => Some(ReadOnly),
            (FullAccess, x) | (x, FullAccess) => Some(x.clone()),
            (
                WorkspaceWrite {
                    writable_roots: ra,
                    network: na,
                },
                WorkspaceWrite {
                    writable_roots: rb,
                    network: nb,
                },
            ) => {
                let mut roots = BTreeSet::new();
                for r in ra {
                    for s in rb {
                        if r.is_within(s) {
                            roots.insert(r.clone());
                        } else if s.is_within(r) {
                            roots.insert(s.clone());
                        }
                    }
                }
                Some(WorkspaceWrite {
                    writable_roots: minimal_roots(roots),
                    network: *na && *nb,
                })
            }
        }
    }

    pub fn is_full_access(&self) -> bool {
        matches!(self, Sandbox::FullAccess)
    }
}

/// A sandbox as a request writes it: the same shape as [`Sandbox`], with
/// each writable root exactly as written, in the order written. The wire
/// carries what the scenario says; normalising (`.` and `..`, duplicate and
/// trailing separators, MODEL.md section 4) and every comparison are the
/// host's work, on [`RequestedSandbox::normalise`]'s result.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum RequestedSandbox {
    ReadOnly,
    WorkspaceWrite {
        /// Absolute paths as written; the host normalises them.
        writable_roots: Vec<String>,
        network: bool,
    },
    FullAccess,
    External {
        name: String,
    },
}

impl RequestedSandbox {
    /// The sandbox these words ask for, every root normalised; a root that
    /// is not absolute or climbs above `/` is [`AdmissionError::BadPath`].
    pub fn normalise(&self) -> Result<Sandbox, AdmissionError> {
        Ok(match self {
            RequestedSandbox::ReadOnly => Sandbox::ReadOnly,
            RequestedSandbox::FullAccess => Sandbox::FullAccess,
            RequestedSandbox::External { name } => Sandbox::External { name: name.clone() },
            RequestedSandbox::WorkspaceWrite {
                writable_roots,
                network,
            } => Sandbox::WorkspaceWrite {
                writable_roots: writable_roots
                    .iter()
                    .map(|raw| {
                        NormalPath::parse(raw).map_err(|e| AdmissionError::BadPath(raw.clone(), e))
                    })
                    .collect::<Result<_, _>>()?,
                network: *network,
            },
        })
    }
}

/// A normalised sandbox written as a request (its roots in normal form).
impl From<Sandbox> for RequestedSandbox {
    fn from(sandbox: Sandbox) -> RequestedSandbox {
        match sandbox {
            Sandbox::ReadOnly => RequestedSandbox::ReadOnly,
            Sandbox::FullAccess => RequestedSandbox::FullAccess,
            Sandbox::External { name } => RequestedSandbox::External { name },
            Sandbox::WorkspaceWrite {
                writable_roots,
                network,
            } => RequestedSandbox::WorkspaceWrite {
                writable_roots: writable_roots.iter().map(ToString::to_string).collect(),
                network,
            },
        }
    }
}

/// Drops roots that lie inside another root of the same set, so that equal
/// permissions have one representation and antisymmetry holds structurally.
fn minimal_roots(roots: BTreeSet<NormalPath>) -> BTreeSet<NormalPath> {
    roots
        .iter()
        .filter(|r| !roots.iter().any(|s| s != *r && r.is_within(s)))
        .cloned()
        .collect()
}

/// Action classes an approval policy speaks about.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ActionClass {
    Read,
    FileWrite,
    Shell,
    Network,
    Mcp,
    Generic,
    Delegation,
}

impl ActionClass {
    pub const ALL: [ActionClass; 7] = [
        ActionClass::Read,
        ActionClass::FileWrite,
        ActionClass::Shell,
        ActionClass::Network,
        ActionClass::Mcp,
        ActionClass::Generic,
        ActionClass::Delegation,
    ];
}

/// An approval policy as written on the wire.
///
/// `on-failure` is deprecated upstream and is refused when parsed rather than
/// mapped to anything else, since a silent mapping is how authority widens.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum ApprovalPolicy {
    /// No one is asked; escalations are denied. Bounded subtrees run with it.
    Never,
    /// Everything but reads needs a person's approval.
    Untrusted,
    /// Reads and sandboxed file writes run; everything else is asked for.
    OnRequest,
    /// Classes listed in `ask` need approval, classes in `deny` are refused,
    /// the rest run without asking.
    Granular {
        #[serde(default)]
        ask: BTreeSet<ActionClass>,
        #[serde(default)]
        deny: BTreeSet<ActionClass>,
    },
}

/// What a policy lets each action class do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyVerdict {
    /// Runs without asking anyone.
    Run,
    /// Runs only after an approval.
    Ask,
    /// Never runs.
    Deny,
}

impl ApprovalPolicy {
    /// The `(ask, deny)` sets the policy stands for; the order and meet work on these.
    pub fn sets(&self) -> (BTreeSet<ActionClass>, BTreeSet<ActionClass>) {
        let with = |verdict: PolicyVerdict| -> BTreeSet<ActionClass> {
            ActionClass::ALL
                .iter()
                .copied()
                .filter(|c| self.verdict(*c) == verdict)
                .collect()
        };
        (with(PolicyVerdict::Ask), with(PolicyVerdict::Deny))
    }

    /// What the policy does with an action of `class`: the one definition of
    /// each named policy. Allocation-free, as the admission path calls it
    /// for every class of every delegation.
    pub fn verdict(&self, class: ActionClass) -> PolicyVerdict {
        use ActionClass::{FileWrite, Read};
        match self {
            ApprovalPolicy::Never if class == Read => PolicyVerdict::Run,
            ApprovalPolicy::Never => PolicyVerdict::Deny,
            ApprovalPolicy::Untrusted if class == Read => PolicyVerdict::Run,
            ApprovalPolicy::Untrusted => PolicyVerdict::Ask,
            ApprovalPolicy::OnRequest if matches!(class, Read | FileWrite) => PolicyVerdict::Run,
            ApprovalPolicy::OnRequest => PolicyVerdict::Ask,
            ApprovalPolicy::Granular { deny, .. } if deny.contains(&class) => PolicyVerdict::Deny,
            ApprovalPolicy::Granular { ask, .. } if ask.contains(&class) => PolicyVerdict::Ask,
            ApprovalPolicy::Granular { .. } => PolicyVerdict::Run,
        }
    }

    /// Whether no one is ever asked: `never`, or a granular policy with nothing to ask.
    pub fn is_bounded(&self) -> bool {
        let verdicts = || ActionClass::ALL.iter().map(|c| self.verdict(*c));
        verdicts().all(|v| v != PolicyVerdict::Ask) && verdicts().any(|v| v == PolicyVerdict::Deny)
    }

    /// `a <= b`: every class `a` runs unasked `b` runs unasked, and every class
    /// `a` allows at all `b` allows too. So a child's set of classes needing
    /// approval (or refused) is a superset of its parent's.
    pub fn leq(&self, other: &ApprovalPolicy) -> bool {
        ActionClass::ALL
            .iter()
            .all(|c| rank(self.verdict(*c)) <= rank(other.verdict(*c)))
    }

    pub fn meet(&self, other: &ApprovalPolicy) -> ApprovalPolicy {
        let mut ask = BTreeSet::new();
        let mut deny = BTreeSet::new();
        for c in ActionClass::ALL {
            let v = if rank(self.verdict(c)) <= rank(other.verdict(c)) {
                self.verdict(c)
            } else {
                other.verdict(c)
            };
            match v {
                PolicyVerdict::Ask => {
                    ask.insert(c);
                }
                PolicyVerdict::Deny => {
                    deny.insert(c);
                }
                PolicyVerdict::Run => {}
            }
        }
        ApprovalPolicy::Granular { ask, deny }.canonical()
    }

    /// The named policy with the same sets, or the granular form.
    pub fn canonical(self) -> ApprovalPolicy {
        let same = |named: &ApprovalPolicy| {
            ActionClass::ALL
                .iter()
                .all(|c| named.verdict(*c) == self.verdict(*c))
        };
        match [
            ApprovalPolicy::Never,
            ApprovalPolicy::Untrusted,
            ApprovalPolicy::OnRequest,
        ]
        .into_iter()
        .find(same)
        {
            Some(named) => named,
            None => {
                let (ask, deny) = self.sets();
                ApprovalPolicy::Granular { ask, deny }
            }
        }
    }
}

fn rank(v: PolicyVerdict) -> u8 {
    match v {
        PolicyVerdict::Deny => 0,
        PolicyVerdict::Ask => 1,
        PolicyVerdict::Run => 2,
    }
}

/// The tools sealed into an authority: each name and the digest of its definition.
///
/// A map shared between clones and copied when one is changed: an authority
/// is cloned into every record, snapshot and answer, and its seal rarely
/// changes after admission. Reads and writes go through the map it derefs
/// to; its JSON, schema and debug form are the map's.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ToolSeal(Arc<BTreeMap<String, String>>);

impl ToolSeal {
    pub fn new() -> ToolSeal {
        ToolSeal::default()
    }
}

impl std::ops::Deref for ToolSeal {
    type Target = BTreeMap<String, String>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for ToolSeal {
    fn deref_mut(&mut self) -> &mut Self::Target {
        Arc::make_mut(&mut self.0)
    }
}

impl std::fmt::Debug for ToolSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<BTreeMap<String, String>> for ToolSeal {
    fn from(map: BTreeMap<String, String>) -> ToolSeal {
        ToolSeal(Arc::new(map))
    }
}

impl<const N: usize> From<[(String, String); N]> for ToolSeal {
    fn from(pairs: [(String, String); N]) -> ToolSeal {
        ToolSeal(Arc::new(pairs.into()))
    }
}

impl FromIterator<(String, String)> for ToolSeal {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> ToolSeal {
        ToolSeal(Arc::new(pairs.into_iter().collect()))
    }
}

impl<'a> IntoIterator for &'a ToolSeal {
    type Item = (&'a String, &'a String);
    type IntoIter = std::collections::btree_map::Iter<'a, String, String>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl JsonSchema for ToolSeal {
    fn inline_schema() -> bool {
        <BTreeMap<String, String>>::inline_schema()
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        <BTreeMap<String, String>>::schema_name()
    }
    fn schema_id() -> std::borrow::Cow<'static, str> {
        <BTreeMap<String, String>>::schema_id()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <BTreeMap<String, String>>::json_schema(generator)
    }
}

/// The whole authority of an instance. Every axis is compared; the order is the product order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Authority {
    pub sandbox: Sandbox,
    pub approval_policy: ApprovalPolicy,
    /// Sealed tools: name to digest. Bound by digest, never by name alone.
    #[serde(default)]
    pub tools: ToolSeal,
    /// Working directory; a child's lies inside its parent's.
    pub cwd: NormalPath,
    /// Provider instance; a child runs on the same one.
    pub provider: String,
    /// How many further levels of delegation are allowed below this instance (0: may not spawn).
    pub delegation_depth: u32,
}

impl Authority {
    pub fn leq(&self, other: &Authority) -> bool {
        self.axes_exceeding(other).is_empty()
    }

    /// The axes on which `self` is not below `other`; empty when `self <= other`.
    pub fn axes_exceeding(&self, other: &Authority) -> Vec<Axis> {
        let mut axes = Vec::new();
        if !self.sandbox.leq(&other.sandbox) {
            axes.push(Axis::Sandbox);
        }
        if !self.approval_policy.leq(&other.approval_policy) {
            axes.push(Axis::ApprovalPolicy);
        }
        if !self
            .tools
            .iter()
            .all(|(name, digest)| other.tools.get(name) == Some(digest))
        {
            axes.push(Axis::Tools);
        }
        if !self.cwd.is_within(&other.cwd) {
            axes.push(Axis::Cwd);
        }
        if self.provider != other.provider {
            axes.push(Axis::Provider);
        }
        if self.delegation_depth > other.delegation_depth {
            axes.push(Axis::Delegation);
        }
        axes
    }

    /// The greatest lower bound of two authorities, or the axis that has none.
    pub fn meet(&self, other: &Authority) -> Result<Authority, Axis> {
        let sandbox = self.sandbox.meet(&other.sandbox).ok_or(Axis::Sandbox)?;
        let cwd = if self.cwd.is_within(&other.cwd) {
            self.cwd.clone()
        } else if other.cwd.is_within(&self.cwd) {
            other.cwd.clone()
        } else {
            return Err(Axis::Cwd);
        };
        if self.provider != other.provider {
            return Err(Axis::Provider);
        }
        Ok(Authority {
            sandbox,
            approval_policy: self.approval_policy.meet(&other.approval_policy),
            tools: self
                .tools
                .iter()
                .filter(|(n, d)| other.tools.get(*n) == Some(*d))
                .map(|(n, d)| (n.clone(), d.clone()))
                .collect(),
            cwd,
            provider: self.provider.clone(),
            delegation_depth: self.delegation_depth.min(other.delegation_depth),
        })
    }

    /// The most a child of an instance with this ceiling may hold: the same,
    /// one level less of delegation.
    pub fn child_ceiling(&self) -> Authority {
        Authority {
            delegation_depth: self.delegation_depth.saturating_sub(1),
            ..self.clone()
        }
    }
}

/// One axis of an authority, named in ceiling rejections.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Axis {
    Sandbox,
    ApprovalPolicy,
    Tools,
    Cwd,
    Provider,
    Delegation,
}

/// What a delegation asks for: every axis optional; an absent axis takes the
/// role default, capped by the parent's ceiling.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthorityRequest {
    /// As written: the host normalises its roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<RequestedSandbox>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    /// Tool names to seal; each must be sealable exactly from the parent's ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_depth: Option<u32>,
}

/// Why a requested authority could not be admitted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    #[error("request exceeds the parent's ceiling on {0:?}")]
    CeilingExceeded(Vec<Axis>),
    #[error("tool `{0}` cannot be sealed exactly from the parent's ceiling")]
    ProjectionMissing(String),
    #[error("path `{0}` is not a path that stays inside the workspace: {1}")]
    BadPath(String, PathError),
    #[error("provider `{0}` differs from the parent's")]
    UnsupportedProvider(String),
    #[error("the parent may not delegate (delegation depth 0)")]
    DelegationExhausted,
}

/// The constraint the harness's scripted authorizer answers `widening` with:
/// wider than any child may hold, whatever its parent. Full access alone is
/// not enough (a child of a full-access parent already inherits it, and a
/// constraint equal to the admission narrows nothing), so it also asks for
/// unlimited delegation depth, which exceeds every ceiling.
pub fn widening_constraint(requested: &AuthorityRequest) -> AuthorityRequest {
    AuthorityRequest {
        sandbox: Some(RequestedSandbox::FullAccess),
        delegation_depth: Some(u32::MAX),
        ..requested.clone()
    }
}

/// Effective child authority = min(role default, request, parent ceiling).
///
/// A request above the ceiling on any axis is an error naming the axes, never
/// a silent clamp (MODEL.md: "no silent fallback"). The role default only
/// narrows: a role wider than the parent is capped by the parent, a role
/// narrower than the parent wins (CE3).
pub fn admit(
    parent_ceiling: &Authority,
    role_default: Option<&AuthorityRequest>,
    request: &AuthorityRequest,
) -> Result<Authority, AdmissionError> {
    if parent_ceiling.delegation_depth == 0 {
        return Err(AdmissionError::DelegationExhausted);
    }
    let cap = parent_ceiling.child_ceiling();
    if let Some(p) = &request.provider
        && *p != cap.provider
    {
        return Err(AdmissionError::UnsupportedProvider(p.clone()));
    }
    let requested = resolve(&cap, request)?;
    let exceeding = requested.axes_exceeding(&cap);
    if !exceeding.is_empty() {
        return Err(AdmissionError::CeilingExceeded(exceeding));
    }
    let role = match role_default {
        Some(role) => resolve(&cap, role)?,
        None => cap.clone(),
    };
    // The role never widens, so where it is wider the meet with the cap keeps the cap.
    let role = role
        .meet(&cap)
        .map_err(|axis| AdmissionError::CeilingExceeded(vec![axis]))?;
    requested
        .meet(&role)
        .map_err(|axis| AdmissionError::CeilingExceeded(vec![axis]))
}

/// Fills a request's absent axes from `base` and seals the named tools from it.
fn resolve(base: &Authority, request: &AuthorityRequest) -> Result<Authority, AdmissionError> {
    let tools = match &request.tools {
        None => base.tools.clone(),
        Some(names) => {
            let mut sealed = ToolSeal::new();
            for name in names {
                let digest = base
                    .tools
                    .get(name)
                    .ok_or_else(|| AdmissionError::ProjectionMissing(name.clone()))?;
                sealed.insert(name.clone(), digest.clone());
            }
            sealed
        }
    };
    let cwd = match &request.cwd {
        None => base.cwd.clone(),
        Some(raw) => NormalPath::parse(raw).map_err(|e| AdmissionError::BadPath(raw.clone(), e))?,
    };
    let sandbox = match &request.sandbox {
        None => base.sandbox.clone(),
        Some(requested) => requested.normalise()?,
    };
    Ok(Authority {
        sandbox,
        approval_policy: request
            .approval_policy
            .clone()
            .unwrap_or_else(|| base.approval_policy.clone()),
        tools,
        cwd,
        provider: request
            .provider
            .clone()
            .unwrap_or_else(|| base.provider.clone()),
        delegation_depth: request.delegation_depth.unwrap_or(base.delegation_depth),
    })
}
