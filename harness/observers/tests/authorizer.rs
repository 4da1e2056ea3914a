//! The scripted authorizer over real HTTP: every mode produces the reply its documentation promises, and every call is recorded.

use std::time::{Duration, Instant};

use delegation_model::{AuthorityRequest, RequestedSandbox, Sandbox};
use delegation_observers::authorizer::{AUTHORIZER_VERSION, RECEIPT_TTL_MS};
use delegation_observers::{AuthorizationDecision, AuthorizationReply, Authorizer, AuthorizerMode};
use serde_json::{Value, json};

const NOW: u64 = 10_000;
const DEADLINE: u64 = NOW + 2_000;
const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn request_body() -> Value {
    json!({
        "version": "1", "parent": "root",
        "request": { "role": "worker", "task": "T",
                     "authority": { "sandbox": "read-only" } },
        "request_digest": DIGEST, "now": NOW, "deadline": DEADLINE,
    })
}

async fn call(authorizer: &Authorizer, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/authorize", authorizer.url()))
        .json(body)
        .send()
        .await
        .expect("the authorizer answers")
}

async fn reply(authorizer: &Authorizer) -> AuthorizationReply {
    let response = call(authorizer, &request_body()).await;
    assert_eq!(response.status(), 200);
    response
        .json::<AuthorizationReply>()
        .await
        .expect("a documented reply")
}

fn allow() -> AuthorizerMode {
    AuthorizerMode::Allow { constraints: None }
}

#[tokio::test]
async fn allow_binds_the_receipt_to_the_request_and_records_the_call() {
    let authorizer = Authorizer::start(allow()).await.unwrap();
    let first = reply(&authorizer).await;
    assert_eq!(first.version, AUTHORIZER_VERSION);
    assert_eq!(first.decision, AuthorizationDecision::Allow);
    assert_eq!(first.decided_at, Some(NOW));
    let receipt = first.receipt.expect("an allow carries a receipt");
    assert_eq!(receipt.binding, DIGEST);
    assert_eq!(receipt.expires_at, NOW + RECEIPT_TTL_MS);

    let second = reply(&authorizer).await.receipt.unwrap();
    assert_ne!(
        second.id, receipt.id,
        "fresh allows never reuse a receipt id"
    );

    let calls = authorizer.calls();
    assert_eq!(authorizer.call_count(), 2);
    assert_eq!(calls[0].request.as_ref().unwrap().parent, "root");
    assert_eq!(calls[0].mode, allow());
}

#[tokio::test]
async fn allow_with_constraints_passes_them_through_and_deny_carries_its_reason() {
    let narrowing = AuthorityRequest {
        sandbox: Some(RequestedSandbox::ReadOnly),
        ..AuthorityRequest::default()
    };
    let authorizer = Authorizer::start(AuthorizerMode::Allow {
        constraints: Some(narrowing.clone()),
    })
    .await
    .unwrap();
    assert_eq!(reply(&authorizer).await.constraints, Some(narrowing));

    authorizer.set_mode(AuthorizerMode::Deny {
        reason: "operator policy".to_string(),
    });
    let denied = reply(&authorizer).await;
    assert_eq!(denied.decision, AuthorizationDecision::Deny);
    assert_eq!(denied.reason.as_deref(), Some("operator policy"));
    assert!(denied.receipt.is_none());
}

#[tokio::test]
async fn timeout_outlasts_the_client_deadline_and_does_not_block_shutdown() {
    let authorizer = Authorizer::start(AuthorizerMode::Timeout).await.unwrap();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let outcome = client
        .post(format!("{}/authorize", authorizer.url()))
        .json(&request_body())
        .send()
        .await;
    assert!(outcome.unwrap_err().is_timeout());
    assert_eq!(
        authorizer.call_count(),
        1,
        "the call is recorded before the hold"
    );

    let dropping = Instant::now();
    drop(authorizer);
    assert!(dropping.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn unavailable_malformed_and_unsupported_version_fail_in_their_documented_ways() {
    let authorizer = Authorizer::start(AuthorizerMode::Unavailable)
        .await
        .unwrap();
    assert_eq!(call(&authorizer, &request_body()).await.status(), 503);

    authorizer.set_mode(AuthorizerMode::Malformed);
    let malformed = call(&authorizer, &request_body()).await;
    assert_eq!(malformed.status(), 200);
    let text = malformed.text().await.unwrap();
    assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");

    authorizer.set_mode(AuthorizerMode::UnsupportedVersion);
    let reply = reply(&authorizer).await;
    assert_ne!(reply.version, AUTHORIZER_VERSION);
    assert_eq!(reply.version, "99");

    let statuses: Vec<u16> = authorizer.calls().iter().map(|c| c.status).collect();
    assert_eq!(statuses, [503, 200, 200]);
}

#[tokio::test]
async fn replay_repeats_the_previous_allows_receipt_id() {
    let authorizer = Authorizer::start(allow()).await.unwrap();
    let original = reply(&authorizer).await.receipt.unwrap().id;
    authorizer.set_mode(AuthorizerMode::Replay);
    let replayed = reply(&authorizer).await;
    assert_eq!(replayed.decision, AuthorizationDecision::Allow);
    assert_eq!(replayed.receipt.unwrap().id, original);
    // Every later replay too, as the model's authorizer does (fuzzing found
    // the second one carrying a fresh id the host rightly accepted).
    let again = reply(&authorizer).await;
    assert_eq!(again.receipt.unwrap().id, original);
}

#[tokio::test]
async fn late_expired_mismatched_and_widening_allows_each_break_exactly_one_rule() {
    let authorizer = Authorizer::start(AuthorizerMode::LateAllow).await.unwrap();
    let late = reply(&authorizer).await;
    assert!(late.decided_at >= Some(DEADLINE));
    assert_eq!(late.receipt.as_ref().unwrap().binding, DIGEST);

    authorizer.set_mode(AuthorizerMode::Expired);
    let expired = reply(&authorizer).await;
    assert!(expired.receipt.as_ref().unwrap().expires_at <= NOW);
    assert_eq!(expired.decided_at, Some(NOW));

    authorizer.set_mode(AuthorizerMode::Mismatched);
    let mismatched = reply(&authorizer).await.receipt.unwrap();
    assert_ne!(mismatched.binding, DIGEST);
    assert!(mismatched.binding.starts_with("sha256:"));
    assert!(mismatched.expires_at > NOW);

    authorizer.set_mode(AuthorizerMode::Widening);
    let widening = reply(&authorizer).await;
    let constraints = widening.constraints.expect("widening constraints");
    assert_eq!(constraints.sandbox, Some(RequestedSandbox::FullAccess));
    assert_eq!(constraints.delegation_depth, Some(u32::MAX));
    assert_eq!(widening.receipt.unwrap().binding, DIGEST);
}

#[tokio::test]
async fn unreadable_requests_get_400_naming_the_problem_and_marks_separate_steps() {
    let authorizer = Authorizer::start(allow()).await.unwrap();
    let mark = authorizer.mark();
    let mut missing_deadline = request_body();
    missing_deadline.as_object_mut().unwrap().remove("deadline");
    let response = call(&authorizer, &missing_deadline).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("deadline"),
        "{error}"
    );

    let mut old_version = request_body();
    old_version["version"] = json!("0");
    let response = call(&authorizer, &old_version).await;
    assert_eq!(response.status(), 400);

    assert_eq!(authorizer.count_since(mark), 2);
    let calls = authorizer.calls_since(mark);
    assert!(
        calls
            .iter()
            .all(|c| c.request.is_none() && c.error.is_some())
    );
    let later = authorizer.mark();
    reply(&authorizer).await;
    assert_eq!(authorizer.count_since(later), 1);
}

#[test]
fn modes_read_naturally_in_scenario_json() {
    let modes: Vec<AuthorizerMode> = serde_json::from_value(json!([
        "timeout", "replay", { "deny": { "reason": "no" } }, { "allow": {} },
        { "allow": { "constraints": { "sandbox": "read-only" } } }
    ]))
    .unwrap();
    assert_eq!(modes[0], AuthorizerMode::Timeout);
    assert_eq!(modes[3], allow());
    assert!(
        matches!(&modes[4], AuthorizerMode::Allow { constraints: Some(c) } if c.sandbox == Some(RequestedSandbox::ReadOnly))
    );
}

/// Each faulty mode must be refusable for the reason MODEL.md gives it: fed
/// through the reference model's own reader, every faulty allow is refused
/// and the honest allow admits the child (the positive control).
mod against_the_reference_model {
    use super::*;
    use delegation_model::state::{AuthorizerAnswer, HostState, LiveTools, MemoryJournal};
    use delegation_model::{ApprovalPolicy, DenyReason, NormalPath, SpawnRequest, StartRequest};

    struct Host {
        state: HostState,
        journal: MemoryJournal,
        root: String,
    }

    fn root_host() -> Host {
        let mut state = HostState::new("test-seal-key".to_string());
        let mut journal = MemoryJournal::default();
        let start = StartRequest {
            role: "lead".to_string(),
            model: delegation_model::default_model(),
            sandbox: Sandbox::WorkspaceWrite {
                writable_roots: [NormalPath::parse("/w/repo").unwrap()].into(),
                network: false,
            }
            .into(),
            approval_policy: ApprovalPolicy::Never,
            tools: vec![],
            cwd: "/w/repo".to_string(),
            provider: delegation_model::default_provider(),
            delegation_depth: 2,
        };
        let started = state.start(&mut journal, &start, &LiveTools::new());
        let root = started.instance.expect("the root starts");
        Host {
            state,
            journal,
            root,
        }
    }

    /// Asks the authorizer about one delegation and lets the model judge its
    /// answer; on allow the child is committed, as a host would.
    async fn delegate(host: &mut Host, authorizer: &Authorizer) -> Result<(), DenyReason> {
        let request = SpawnRequest {
            role: "worker".to_string(),
            task: "T".to_string(),
            authority: AuthorityRequest::default(),
            model: None,
            target: None,
            worktree: false,
        };
        let admission = host
            .state
            .admit_delegation(&host.root, &request, &LiveTools::new())
            .expect("the delegation is admissible locally");
        // The model's typed request, as the reference host sends it.
        let body = serde_json::to_value(host.state.authorizer_request(&admission)).unwrap();
        let text = call(authorizer, &body).await.text().await.unwrap();
        let (admission, receipt) = host
            .state
            .apply_authorizer(admission, &AuthorizerAnswer::Body(text))
            .map_err(|denial| denial.reason)?;
        host.state
            .commit_child(&mut host.journal, admission, Some(receipt))
            .map_err(|denial| denial.reason)?;
        Ok(())
    }

    #[tokio::test]
    async fn every_faulty_allow_is_refused_and_the_honest_allow_admits() {
        let mut host = root_host();
        let authorizer = Authorizer::start(allow()).await.unwrap();
        assert_eq!(delegate(&mut host, &authorizer).await, Ok(()));

        let expectations = [
            (AuthorizerMode::Replay, DenyReason::AuthorizerReplay),
            (AuthorizerMode::Expired, DenyReason::AuthorizerReplay),
            (AuthorizerMode::Mismatched, DenyReason::BindingMismatch),
            (AuthorizerMode::LateAllow, DenyReason::AuthorizerUnavailable),
            (AuthorizerMode::Malformed, DenyReason::AuthorizerMalformed),
            (
                AuthorizerMode::UnsupportedVersion,
                DenyReason::AuthorizerMalformed,
            ),
            (AuthorizerMode::Widening, DenyReason::AuthorizerMalformed),
            (
                AuthorizerMode::Deny {
                    reason: "no".to_string(),
                },
                DenyReason::AuthorizerDenied,
            ),
        ];
        for (mode, reason) in expectations {
            authorizer.set_mode(mode.clone());
            assert_eq!(
                delegate(&mut host, &authorizer).await,
                Err(reason),
                "mode {mode:?}"
            );
        }

        authorizer.set_mode(allow());
        assert_eq!(delegate(&mut host, &authorizer).await, Ok(()));
        let readable = authorizer.calls().iter().all(|c| c.request.is_some());
        assert!(
            readable,
            "the reference model's requests follow the documented format"
        );
    }
}
