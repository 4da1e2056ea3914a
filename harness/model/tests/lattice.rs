//! Exhaustive lattice laws of the authority order over finite sets covering every axis, and `admit` never clamping.

use std::collections::{BTreeMap, BTreeSet};

use delegation_model::*;

fn path(p: &str) -> NormalPath {
    NormalPath::parse(p).unwrap()
}

fn ww(roots: &[&str], network: bool) -> Sandbox {
    Sandbox::WorkspaceWrite {
        writable_roots: roots.iter().map(|r| path(r)).collect(),
        network,
    }
}

fn sandboxes() -> Vec<Sandbox> {
    vec![
        Sandbox::ReadOnly,
        ww(&[], false),
        ww(&["/w/repo"], false),
        ww(&["/w/repo"], true),
        ww(&["/w/repo/src"], false),
        ww(&["/w/repo/src"], true),
        // Equal in permission to /w/repo alone: antisymmetry must hold after canonicalisation.
        ww(&["/w/repo", "/w/repo/src"], false),
        ww(&["/w/repo", "/w/other"], false),
        ww(&["/w/repo-other"], true),
        Sandbox::FullAccess,
        Sandbox::External {
            name: "vm-a".into(),
        },
        Sandbox::External {
            name: "vm-b".into(),
        },
    ]
}

fn classes(list: &[ActionClass]) -> BTreeSet<ActionClass> {
    list.iter().copied().collect()
}

fn policies() -> Vec<ApprovalPolicy> {
    use ActionClass::*;
    vec![
        ApprovalPolicy::Never,
        ApprovalPolicy::Untrusted,
        ApprovalPolicy::OnRequest,
        ApprovalPolicy::Granular {
            ask: classes(&[Mcp]),
            deny: classes(&[]),
        },
        ApprovalPolicy::Granular {
            ask: classes(&[]),
            deny: classes(&[Shell]),
        },
        ApprovalPolicy::Granular {
            ask: classes(&[Shell, Mcp]),
            deny: classes(&[Network]),
        },
        // The same sets as `untrusted`, spelled granularly.
        ApprovalPolicy::Granular {
            ask: classes(&[FileWrite, Shell, Network, Mcp, Generic, Delegation]),
            deny: classes(&[]),
        },
    ]
}

fn tool_seals() -> Vec<BTreeMap<String, String>> {
    let seal = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(n, d)| (n.to_string(), d.to_string()))
            .collect()
    };
    vec![
        seal(&[]),
        seal(&[("fs.write", "sha256:1")]),
        // Same name, other digest: a different tool.
        seal(&[("fs.write", "sha256:2")]),
        seal(&[("fs.write", "sha256:1"), ("fs.read", "sha256:3")]),
    ]
}

fn cwds() -> Vec<NormalPath> {
    ["/w", "/w/repo", "/w/repo/src", "/w/repo-other"]
        .iter()
        .map(|p| path(p))
        .collect()
}

fn authority(
    sandbox: &Sandbox,
    policy: &ApprovalPolicy,
    tools: &BTreeMap<String, String>,
    cwd: &NormalPath,
    provider: &str,
    depth: u32,
) -> Authority {
    Authority {
        sandbox: sandbox.clone(),
        approval_policy: policy.clone(),
        tools: tools.clone().into(),
        cwd: cwd.clone(),
        provider: provider.into(),
        delegation_depth: depth,
    }
}

/// A product over every axis, thinned so triples stay affordable.
fn authorities(
    sandboxes: &[Sandbox],
    policies: &[ApprovalPolicy],
    cwds: &[NormalPath],
) -> Vec<Authority> {
    let seals = tool_seals();
    let mut all = Vec::new();
    for s in sandboxes {
        for p in policies {
            for t in [&seals[1], &seals[2]] {
                for c in cwds {
                    for provider in ["harness", "other"] {
                        for depth in [0, 2] {
                            all.push(authority(s, p, t, c, provider, depth));
                        }
                    }
                }
            }
        }
    }
    all
}

/// Equal permissions get one representation: named policies, minimal roots.
fn canonical(a: &Authority) -> Authority {
    let sandbox = match &a.sandbox {
        Sandbox::WorkspaceWrite {
            writable_roots,
            network,
        } => Sandbox::WorkspaceWrite {
            writable_roots: writable_roots
                .iter()
                .filter(|r| !writable_roots.iter().any(|s| s != *r && r.is_within(s)))
                .cloned()
                .collect(),
            network: *network,
        },
        other => other.clone(),
    };
    Authority {
        sandbox,
        approval_policy: a.approval_policy.clone().canonical(),
        ..a.clone()
    }
}

#[test]
fn sandbox_axis_is_a_partial_order_with_meet_as_greatest_lower_bound() {
    let all = sandboxes();
    for a in &all {
        assert!(a.leq(a), "not reflexive: {a:?}");
        for b in &all {
            if a.leq(b) && b.leq(a) {
                let (ca, cb) = (
                    canonical(&authority(
                        a,
                        &ApprovalPolicy::Never,
                        &BTreeMap::new(),
                        &path("/"),
                        "p",
                        0,
                    )),
                    canonical(&authority(
                        b,
                        &ApprovalPolicy::Never,
                        &BTreeMap::new(),
                        &path("/"),
                        "p",
                        0,
                    )),
                );
                assert_eq!(ca.sandbox, cb.sandbox, "antisymmetry: {a:?} and {b:?}");
            }
            for c in &all {
                if a.leq(b) && b.leq(c) {
                    assert!(a.leq(c), "transitivity: {a:?} <= {b:?} <= {c:?}");
                }
            }
            let lower: Vec<&Sandbox> = all.iter().filter(|c| c.leq(a) && c.leq(b)).collect();
            match a.meet(b) {
                Some(m) => {
                    assert!(
                        m.leq(a) && m.leq(b),
                        "meet {m:?} of {a:?} and {b:?} is not below both"
                    );
                    for c in lower {
                        assert!(
                            c.leq(&m),
                            "{c:?} is below {a:?} and {b:?} but not below their meet {m:?}"
                        );
                    }
                }
                None => assert!(
                    lower.is_empty(),
                    "no meet for {a:?}, {b:?}, yet {lower:?} lie below both"
                ),
            }
        }
    }
}

#[test]
fn approval_policy_axis_is_a_partial_order_with_meet_as_greatest_lower_bound() {
    let all = policies();
    for a in &all {
        assert!(a.leq(a));
        for b in &all {
            if a.leq(b) && b.leq(a) {
                assert_eq!(
                    a.clone().canonical(),
                    b.clone().canonical(),
                    "antisymmetry: {a:?} and {b:?}"
                );
            }
            let m = a.meet(b);
            assert!(
                m.leq(a) && m.leq(b),
                "meet {m:?} of {a:?} and {b:?} is not below both"
            );
            for c in &all {
                if a.leq(b) && b.leq(c) {
                    assert!(a.leq(c), "transitivity: {a:?} <= {b:?} <= {c:?}");
                }
                if c.leq(a) && c.leq(b) {
                    assert!(
                        c.leq(&m),
                        "{c:?} is below {a:?} and {b:?} but not below their meet {m:?}"
                    );
                }
            }
        }
    }
    // A child's set needing approval is a superset of its parent's: untrusted asks for more than on-request.
    assert!(ApprovalPolicy::Untrusted.leq(&ApprovalPolicy::OnRequest));
    assert!(!ApprovalPolicy::OnRequest.leq(&ApprovalPolicy::Untrusted));
    assert!(ApprovalPolicy::Never.is_bounded());
    assert!(!ApprovalPolicy::OnRequest.is_bounded());
}

/// The named policies pinned class by class (`never` denies every escalation,
/// `on-request` also runs file writes unasked); a granular
/// policy denies what it both asks for and denies; `sets` says the same.
#[test]
fn each_policy_decides_each_class_as_defined() {
    use ActionClass::*;
    use PolicyVerdict::*;
    let expected = [
        (
            ApprovalPolicy::Never,
            [Run, Deny, Deny, Deny, Deny, Deny, Deny],
        ),
        (
            ApprovalPolicy::Untrusted,
            [Run, Ask, Ask, Ask, Ask, Ask, Ask],
        ),
        (
            ApprovalPolicy::OnRequest,
            [Run, Run, Ask, Ask, Ask, Ask, Ask],
        ),
        (
            ApprovalPolicy::Granular {
                ask: [Shell, Network].into(),
                deny: [Network, Delegation].into(),
            },
            [Run, Run, Ask, Deny, Run, Run, Deny],
        ),
    ];
    for (policy, verdicts) in expected {
        let (ask, deny) = policy.sets();
        for (class, verdict) in ActionClass::ALL.into_iter().zip(verdicts) {
            assert_eq!(policy.verdict(class), verdict, "{policy:?} on {class:?}");
            assert_eq!(
                ask.contains(&class),
                verdict == Ask,
                "{policy:?} asks {class:?}"
            );
            assert_eq!(
                deny.contains(&class),
                verdict == Deny,
                "{policy:?} denies {class:?}"
            );
        }
        // The canonical form decides alike (a granular one drops from `ask` what it denies).
        let canonical = policy.clone().canonical();
        for class in ActionClass::ALL {
            assert_eq!(
                canonical.verdict(class),
                policy.verdict(class),
                "{canonical:?}"
            );
        }
    }
    let never_spelled_out = ApprovalPolicy::Granular {
        ask: [Shell].into(),
        deny: ActionClass::ALL
            .into_iter()
            .filter(|c| *c != Read)
            .collect(),
    };
    assert_eq!(never_spelled_out.canonical(), ApprovalPolicy::Never);
}

#[test]
fn product_order_is_reflexive_antisymmetric_and_transitive_with_greatest_lower_bounds() {
    let s = sandboxes();
    let p = policies();
    let c = cwds();
    // Thinned so that the triple loops stay in seconds in a debug build.
    let all = authorities(
        &[
            s[0].clone(),
            s[2].clone(),
            s[6].clone(),
            s[9].clone(),
            s[10].clone(),
        ],
        &[p[0].clone(), p[2].clone(), p[4].clone()],
        &[c[1].clone(), c[2].clone(), c[3].clone()],
    );
    let leq: Vec<Vec<bool>> = all
        .iter()
        .map(|a| all.iter().map(|b| a.leq(b)).collect())
        .collect();
    for (i, a) in all.iter().enumerate() {
        assert!(leq[i][i], "not reflexive: {a:?}");
        for (j, b) in all.iter().enumerate() {
            if leq[i][j] && leq[j][i] {
                assert_eq!(canonical(a), canonical(b), "antisymmetry");
            }
            if !leq[i][j] {
                assert!(
                    !a.axes_exceeding(b).is_empty(),
                    "not below, yet no axis named: {a:?} vs {b:?}"
                );
                continue;
            }
            for (k, c) in all.iter().enumerate() {
                if leq[j][k] {
                    assert!(leq[i][k], "transitivity: {a:?} <= {b:?} <= {c:?}");
                }
            }
        }
    }
    // The meet, over a smaller slice (every pair against every candidate).
    let small: Vec<&Authority> = all.iter().step_by(7).collect();
    for a in &small {
        for b in &small {
            let lower: Vec<&&Authority> = small.iter().filter(|c| c.leq(a) && c.leq(b)).collect();
            match a.meet(b) {
                Ok(m) => {
                    assert!(m.leq(a) && m.leq(b), "meet not below both");
                    for c in lower {
                        assert!(c.leq(&m), "{c:?} below both but not below the meet {m:?}");
                    }
                }
                Err(axis) => assert!(
                    lower.is_empty(),
                    "meet undefined on {axis:?}, yet {} authorities lie below both",
                    lower.len()
                ),
            }
        }
    }
}

fn parent() -> Authority {
    Authority {
        sandbox: ww(&["/w/repo"], false),
        approval_policy: ApprovalPolicy::OnRequest,
        tools: [("fs.write".to_string(), "sha256:1".to_string())].into(),
        cwd: path("/w/repo"),
        provider: "harness".into(),
        delegation_depth: 2,
    }
}

#[test]
fn admit_rejects_every_sandbox_or_policy_above_the_ceiling_naming_the_axis_and_never_clamps() {
    let cap = parent().child_ceiling();
    for sandbox in sandboxes() {
        let request = AuthorityRequest {
            sandbox: Some(sandbox.clone().into()),
            ..AuthorityRequest::default()
        };
        match admit(&parent(), None, &request) {
            Ok(effective) => {
                assert!(
                    sandbox.leq(&cap.sandbox),
                    "{sandbox:?} admitted above {:?}",
                    cap.sandbox
                );
                // Equal permission, possibly another spelling (redundant nested roots).
                assert!(
                    effective.sandbox.leq(&sandbox) && sandbox.leq(&effective.sandbox),
                    "admitted {:?} for a request of {sandbox:?}: a silent clamp",
                    effective.sandbox
                );
            }
            Err(AdmissionError::CeilingExceeded(axes)) => {
                assert!(
                    !sandbox.leq(&cap.sandbox),
                    "{sandbox:?} is within the ceiling but was refused"
                );
                assert_eq!(axes, vec![Axis::Sandbox]);
            }
            Err(other) => panic!("{sandbox:?}: unexpected {other:?}"),
        }
    }
    for policy in policies() {
        let request = AuthorityRequest {
            approval_policy: Some(policy.clone()),
            ..AuthorityRequest::default()
        };
        match admit(&parent(), None, &request) {
            Ok(effective) => {
                assert!(policy.leq(&cap.approval_policy));
                assert!(
                    effective.approval_policy.leq(&policy)
                        && policy.leq(&effective.approval_policy)
                );
            }
            Err(AdmissionError::CeilingExceeded(axes)) => {
                assert!(!policy.leq(&cap.approval_policy));
                assert_eq!(axes, vec![Axis::ApprovalPolicy]);
            }
            Err(other) => panic!("{policy:?}: unexpected {other:?}"),
        }
    }
}

#[test]
fn admit_names_cwd_depth_tool_and_provider_refusals() {
    let refused = |request: AuthorityRequest| admit(&parent(), None, &request).unwrap_err();
    assert_eq!(
        refused(AuthorityRequest {
            cwd: Some("/w/repo-other".into()),
            ..Default::default()
        }),
        AdmissionError::CeilingExceeded(vec![Axis::Cwd])
    );
    assert!(matches!(
        refused(AuthorityRequest {
            cwd: Some("/w/repo/../../..".into()),
            ..Default::default()
        }),
        AdmissionError::BadPath(_, PathError::Escapes)
    ));
    // The child's cap is one level less than the parent's depth.
    assert_eq!(
        refused(AuthorityRequest {
            delegation_depth: Some(2),
            ..Default::default()
        }),
        AdmissionError::CeilingExceeded(vec![Axis::Delegation])
    );
    assert_eq!(
        refused(AuthorityRequest {
            tools: Some(vec!["fs.delete".into()]),
            ..Default::default()
        }),
        AdmissionError::ProjectionMissing("fs.delete".into())
    );
    assert_eq!(
        refused(AuthorityRequest {
            provider: Some("other".into()),
            ..Default::default()
        }),
        AdmissionError::UnsupportedProvider("other".into())
    );
    let exhausted = Authority {
        delegation_depth: 0,
        ..parent()
    };
    assert_eq!(
        admit(&exhausted, None, &AuthorityRequest::default()),
        Err(AdmissionError::DelegationExhausted)
    );
    let nested = admit(
        &parent(),
        None,
        &AuthorityRequest {
            cwd: Some("/w/repo/./src".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(nested.cwd, path("/w/repo/src"));
}

#[test]
fn a_narrower_role_default_wins_and_a_wider_one_is_capped() {
    let narrow = AuthorityRequest {
        sandbox: Some(Sandbox::ReadOnly.into()),
        ..AuthorityRequest::default()
    };
    let effective = admit(&parent(), Some(&narrow), &AuthorityRequest::default()).unwrap();
    assert_eq!(effective.sandbox, Sandbox::ReadOnly);
    let wide = AuthorityRequest {
        sandbox: Some(Sandbox::FullAccess.into()),
        ..AuthorityRequest::default()
    };
    let effective = admit(&parent(), Some(&wide), &AuthorityRequest::default()).unwrap();
    assert_eq!(effective.sandbox, parent().sandbox);
    assert!(effective.leq(&parent()));
}

/// The scripted authorizer's widening constraint widens every admission, a
/// full-access parent's included: checked the way the host checks a
/// constraint, against the admitted child as the ceiling (fuzzing found a
/// full-access-only constraint narrowing nothing under a full-access parent).
#[test]
fn the_widening_constraint_exceeds_every_admitted_child() {
    for sandbox in sandboxes() {
        for depth in [1, 2, 7] {
            let parent = Authority {
                sandbox: sandbox.clone(),
                delegation_depth: depth,
                ..parent()
            };
            for request in [
                AuthorityRequest::default(),
                AuthorityRequest {
                    sandbox: Some(Sandbox::ReadOnly.into()),
                    delegation_depth: Some(0),
                    ..AuthorityRequest::default()
                },
            ] {
                let Ok(child) = admit(&parent, None, &request) else {
                    continue;
                };
                let as_ceiling = Authority {
                    delegation_depth: child.delegation_depth + 1,
                    ..child.clone()
                };
                let widening = delegation_model::authority::widening_constraint(&request);
                assert!(
                    matches!(
                        admit(&as_ceiling, None, &widening),
                        Err(AdmissionError::CeilingExceeded(_))
                    ),
                    "{widening:?} did not widen {child:?}"
                );
            }
        }
    }
}
