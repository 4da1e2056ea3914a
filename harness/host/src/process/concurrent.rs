//! Requests in flight at once over one adapter's stdio: written together, answered by id in any order.
//!
//! Only for an adapter that declared `concurrent-requests`. Each request
//! keeps its own deadline. An answer naming an id that is not in flight, or
//! one already answered, is a protocol violation that breaks the stream for
//! every request still waiting: after it, no answer can be attributed with
//! confidence.

use std::collections::BTreeMap;

use delegation_protocol::{DecodeError, HostMessage};
use serde_json::value::RawValue;
use tokio::io::AsyncWriteExt;
use tokio::time::{Instant, timeout_at};

use super::{ProcessHost, Stop, is_fatal};
use crate::HostError;

/// One request of a batch: its method (for verdicts), its id and its encoded line.
pub(super) struct InFlight {
    pub method: &'static str,
    pub id: u64,
    pub line: Vec<u8>,
}

impl ProcessHost {
    /// Writes every request before reading any answer, then collects the
    /// answers by id, each under its own deadline. Answers come back in the
    /// order of `requests`; `noted` is called with a request's index as
    /// soon as its answer has been read.
    pub(super) async fn request_all(
        &mut self,
        requests: &[InFlight],
        noted: &(dyn Fn(usize) + Send + Sync),
    ) -> Vec<Result<Box<RawValue>, HostError>> {
        if let Some(verdict) = &self.broken {
            return requests.iter().map(|_| Err(verdict.clone())).collect();
        }
        let mut answers: Vec<Option<Result<Box<RawValue>, HostError>>> =
            requests.iter().map(|_| None).collect();
        // Waiting requests by id: their index and deadline.
        let mut waiting: BTreeMap<u64, (usize, Instant)> = BTreeMap::new();
        let mut answered: BTreeMap<u64, &'static str> = BTreeMap::new();
        let mut gone = false;
        for (index, request) in requests.iter().enumerate() {
            let written = match self.stdin.as_mut() {
                Some(stdin) => {
                    stdin.write_all(&request.line).await.is_ok() && stdin.flush().await.is_ok()
                }
                None => false,
            };
            if !written {
                gone = true;
                break;
            }
            let deadline = Instant::now() + self.options.request_timeout;
            waiting.insert(request.id, (index, deadline));
        }
        let mut fatal: Option<HostError> = None;
        while !gone && fatal.is_none() && !waiting.is_empty() {
            let Some(next_deadline) = waiting.values().map(|(_, d)| *d).min() else {
                break;
            };
            let line = match timeout_at(next_deadline, self.next_line()).await {
                Err(_) => {
                    let now = Instant::now();
                    let late: Vec<u64> = waiting
                        .iter()
                        .filter(|(_, (_, d))| *d <= now)
                        .map(|(id, _)| *id)
                        .collect();
                    for (index, _) in late.iter().filter_map(|id| waiting.remove(id)) {
                        let verdict = self.deadline_verdict(requests[index].method);
                        answers[index] = Some(Err(verdict));
                    }
                    continue;
                }
                Ok(None) => {
                    gone = true;
                    break;
                }
                Ok(Some(Err(too_long))) => {
                    fatal = Some(self.batch_violation(requests, too_long.to_string()));
                    break;
                }
                Ok(Some(Ok(line))) => line,
            };
            let response = match delegation_protocol::decode_message(&line) {
                Err(DecodeError::Blank) => continue,
                Err(e) => {
                    fatal = Some(self.batch_violation(requests, e.to_string()));
                    break;
                }
                Ok(HostMessage::Log(log)) => {
                    self.record_log(log);
                    continue;
                }
                Ok(HostMessage::Notification(_)) => {
                    self.notifications += 1;
                    continue;
                }
                Ok(HostMessage::Response(response)) => response,
            };
            let Some(got) = response.id else {
                fatal = Some(
                    self.batch_violation(
                        requests,
                        "an error response has id null while several requests were in flight: \
                     it cannot be attributed to one of them"
                            .into(),
                    ),
                );
                break;
            };
            let Some((index, _)) = waiting.remove(&got) else {
                let detail = match answered.get(&got) {
                    Some(method) => format!(
                        "a second answer to id {got} (`{method}`), which was already answered; \
                         answer each request exactly once"
                    ),
                    None => format!(
                        "an answer with id {got}, which is none of the requests in flight (ids {}); \
                         answer each request with its own id",
                        ids(requests)
                    ),
                };
                fatal = Some(self.batch_violation(requests, detail));
                break;
            };
            answered.insert(got, requests[index].method);
            let method = requests[index].method;
            answers[index] = Some(match self.answer(method, got, response) {
                Ok(result) => Ok(result),
                Err(Stop::Verdict(verdict)) => Err(verdict),
                Err(Stop::Gone) => Err(self.exited(method).await),
            });
            noted(index);
        }
        if gone {
            let method = requests
                .iter()
                .find(|r| waiting.contains_key(&r.id))
                .map_or("(requests in flight)", |r| r.method);
            fatal = Some(self.exited(method).await);
        }
        let fatal = fatal.or_else(|| {
            answers
                .iter()
                .flatten()
                .find_map(|a| a.as_ref().err().filter(|e| is_fatal(e)).cloned())
        });
        if let Some(verdict) = &fatal {
            self.broken = Some(verdict.clone());
        }
        answers
            .into_iter()
            .map(|answer| match (answer, &fatal) {
                (Some(answer), _) => answer,
                (None, Some(verdict)) => Err(verdict.clone()),
                (None, None) => Err(HostError::Protocol {
                    method: "(requests in flight)".into(),
                    detail: "a request was neither answered nor timed out".into(),
                }),
            })
            .collect()
    }

    /// The verdict for a request whose own deadline passed unanswered.
    fn deadline_verdict(&self, method: &str) -> HostError {
        let after_ms = self.options.request_timeout.as_millis() as u64;
        if self.stdout_bytes == 0 {
            HostError::Silent {
                method: method.to_string(),
                after_ms,
            }
        } else {
            HostError::Timeout {
                method: method.to_string(),
                after_ms,
            }
        }
    }

    /// A protocol violation during a batch, named after the batch's methods.
    fn batch_violation(&self, requests: &[InFlight], detail: String) -> HostError {
        let methods: Vec<&str> = requests.iter().map(|r| r.method).collect();
        HostError::Protocol {
            method: methods.join(", "),
            detail: format!(
                "{detail} (while {} requests were in flight, ids {})",
                requests.len(),
                ids(requests)
            ),
        }
    }
}

fn ids(requests: &[InFlight]) -> String {
    requests
        .iter()
        .map(|r| r.id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
