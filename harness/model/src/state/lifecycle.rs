//! The instance lifecycle: transitions, turns, resume, lifecycle calls of a parent's model, fork, wait and events (TR, LW).

use super::*;

impl HostState {
    /// Moves an instance along its lifecycle; refuses transitions the model does not allow (LW2).
    pub fn transition(
        &mut self,
        journal: &mut dyn Journal,
        id: &str,
        next: LifecycleState,
    ) -> Decided<()> {
        let inst = self.instances.get(id).ok_or_else(|| {
            Denial::new(DenyReason::InstanceUnknown, format!("no instance `{id}`"))
        })?;
        if !inst.state.may_become(next) {
            return Err(Denial::new(
                DenyReason::InstanceTerminal,
                format!(
                    "instance `{id}` is {:?} and cannot become {next:?}",
                    inst.state
                ),
            ));
        }
        if inst.state == next {
            return Ok(());
        }
        let mut updated = inst.clone();
        updated.state = next;
        let mut writes = vec![Self::instance_write(&updated)];
        let seq = self.seq;
        let mut rec = None;
        if next.is_terminal() {
            let mut r = self.new_record(match next {
                LifecycleState::Closed => "close",
                LifecycleState::Cancelled => "cancel",
                _ => "fail",
            });
            r.child = Some(id.into());
            r.allowed = true;
            writes.push(Self::record_write(&r));
            rec = Some(r);
            if !self.decisions.persists_terminal_state() {
                writes.remove(0);
            }
        }
        if let Err(d) = self.commit(journal, writes) {
            self.seq = seq;
            return Err(d);
        }
        self.instances.insert(id.into(), updated);
        if let Some(r) = rec {
            self.records.push(Arc::new(r));
        }
        if (next.is_terminal() || next == LifecycleState::Completed)
            && self.decisions.ends_grants_with_run()
        {
            // Exact-call grants last for the run they were given in: completion,
            // cancellation and failure end them (PG6), as a restart does.
            self.grants.retain(|_, g| g.grant.instance != id);
        }
        Ok(())
    }

    /// Close, cancel or fail: terminal, and answered only once (TR1).
    pub fn end(
        &mut self,
        journal: &mut dyn Journal,
        id: &str,
        next: LifecycleState,
    ) -> ActionResult {
        if let Err(d) = self.live_instance(id) {
            return d.into();
        }
        match self.transition(journal, id, next) {
            Ok(()) => {
                let mut r = ActionResult::ok();
                r.instance = Some(id.into());
                r
            }
            Err(d) => d.into(),
        }
    }

    /// Turn admission: the instance is live, and the model may be called.
    /// Nothing has been sent to the model when this returns an error (TR1).
    pub fn begin_turn(&mut self, journal: &mut dyn Journal, id: &str) -> Decided<()> {
        let terminal = self
            .instances
            .get(id)
            .is_some_and(|i| i.state.is_terminal());
        if terminal && !self.decisions.refuses_turn_on_terminal() {
            return Ok(());
        }
        self.live_instance(id)?;
        if self.take_fault(FaultPoint::ModelCall) {
            self.transition(journal, id, LifecycleState::Failed)?;
            return Err(Denial::new(
                DenyReason::StoreWriteFailed,
                "model call failed (fault armed); instance failed",
            ));
        }
        self.transition(journal, id, LifecycleState::Running)
    }

    /// The model endpoint failed during a turn: the instance fails and the
    /// turn ends there. If `failed` cannot be committed, the instance stays as
    /// the store has it and the turn is refused as `store_write_failed`, so no
    /// reply claims a failure that a restart would not show.
    pub fn model_failed(
        &mut self,
        journal: &mut dyn Journal,
        id: &str,
        detail: String,
    ) -> ActionResult {
        match self.transition(journal, id, LifecycleState::Failed) {
            Ok(()) => {
                let mut r = ActionResult::ok();
                r.instance = Some(id.into());
                r.turn = Some(TurnReport::ModelFailed { detail });
                r
            }
            Err(d) => {
                let mut r: ActionResult = Denial::new(
                    d.reason,
                    format!(
                        "the model failed ({detail}) and the failure could not be recorded: {}",
                        d.detail
                    ),
                )
                .into();
                r.instance = Some(id.into());
                r
            }
        }
    }

    /// The turn ended normally: the instance is idle and resumable.
    pub fn finish_turn(&mut self, journal: &mut dyn Journal, id: &str) -> Decided<()> {
        if self
            .instances
            .get(id)
            .is_some_and(|i| i.state == LifecycleState::Running)
        {
            self.transition(journal, id, LifecycleState::Completed)?;
        }
        Ok(())
    }

    pub fn resume(&mut self, journal: &mut dyn Journal, id: &str) -> ActionResult {
        if let Err(d) = self.live_instance(id) {
            return d.into();
        }
        let inst = &self.instances[id];
        let parent = inst.parent.as_ref().and_then(|p| self.instances.get(p));
        if let Some(ceiling) = self.decisions.resumed_ceiling(inst, parent) {
            self.instances.get_mut(id).expect("live").ceiling = ceiling;
        }
        match self.transition(journal, id, LifecycleState::Running) {
            Ok(()) => {
                let mut r = ActionResult::ok();
                r.instance = Some(id.into());
                // The sealed ceiling, never one derived again from the parent (TR2, RS2).
                r.effective = Some(self.instances[id].ceiling.clone());
                r
            }
            Err(d) => d.into(),
        }
    }

    /// A lifecycle tool call of a parent's model on `call.target`. Every op
    /// on a terminal target is refused (`instance_terminal`) before anything
    /// reaches the model (TR1); `send_input` and a `resume` with a message
    /// run the target's turn, `close` closes it, `wait` polls with the
    /// deadline now. The harness's `instance/*` methods and the model's tools
    /// are one lifecycle: a close by either is terminal for both.
    pub fn plan_lifecycle(
        &mut self,
        journal: &mut dyn Journal,
        call: &LifecycleCall,
    ) -> LifecyclePlan {
        let target = call.target.as_str();
        let input = call.message.clone().unwrap_or_default();
        match call.op {
            LifecycleOp::SendInput => LifecyclePlan::Turn { input },
            LifecycleOp::Resume => {
                let decisions = self.decisions.clone();
                let resumed = decisions
                    .lifecycle_resume(self, journal, target)
                    .unwrap_or_else(|| self.resume(journal, target));
                match &call.message {
                    Some(_) if resumed.is_ok() => LifecyclePlan::Turn { input },
                    _ => LifecyclePlan::Done(resumed),
                }
            }
            LifecycleOp::Close => {
                LifecyclePlan::Done(self.end(journal, target, LifecycleState::Closed))
            }
            LifecycleOp::Wait if self.decisions.model_wait_runs_turn() => {
                LifecyclePlan::Turn { input }
            }
            LifecycleOp::Wait => LifecyclePlan::Done(self.wait(target, self.now)),
        }
    }

    pub fn fork(&mut self, journal: &mut dyn Journal, id: &str) -> ActionResult {
        let source = match self.live_instance(id) {
            Ok(i) => i.clone(),
            Err(d) => return d.into(),
        };
        let (next_id, seq) = (self.next_id, self.seq);
        let new_id = self.fresh_id("inst");
        let mut fork = InstanceRecord {
            id: new_id.clone(),
            state: LifecycleState::Running,
            ..source.clone()
        };
        let source_parent = source.parent.as_ref().and_then(|p| self.instances.get(p));
        self.decisions.forked(&mut fork, source_parent);
        let mut rec = self.new_record("fork");
        rec.parent = source.parent.clone();
        rec.child = Some(new_id.clone());
        rec.effective = Some(fork.ceiling.clone());
        rec.allowed = true;
        rec.created_instances_delta = 1;
        if let Err(d) = self.commit(
            journal,
            vec![Self::instance_write(&fork), Self::record_write(&rec)],
        ) {
            self.next_id = next_id;
            self.seq = seq;
            return d.into();
        }
        let effective = fork.ceiling.clone();
        self.instances.insert(new_id.clone(), fork);
        self.records.push(Arc::new(rec));
        let mut r = ActionResult::ok();
        r.instance = Some(new_id);
        r.effective = Some(effective);
        r
    }

    /// A wait never calls the model. Turns run to completion inside their
    /// action, so an instance that is not running has already produced its
    /// event. A running one has nothing pending: it wakes at its deadline
    /// once the harness's clock has reached it, and before that the wait
    /// returns with no wake, since only the harness can move time.
    pub fn wait(&self, id: &str, deadline: Millis) -> ActionResult {
        let Some(inst) = self.instances.get(id) else {
            return Denial::new(DenyReason::InstanceUnknown, format!("no instance `{id}`")).into();
        };
        let mut r = ActionResult::ok();
        r.instance = Some(id.into());
        if inst.state != LifecycleState::Running {
            r.woke = Some(WakeReason::Event);
        } else if self.decisions.wait_reached_deadline(self.now, deadline) {
            r.woke = Some(WakeReason::Deadline);
        } else {
            r.detail = Some(format!(
                "nothing pending and the clock ({}) is before the deadline ({deadline})",
                self.now
            ));
        }
        r
    }

    pub fn deliver_event(
        &mut self,
        journal: &mut dyn Journal,
        event: &str,
        instance: &str,
        kind: &str,
    ) -> ActionResult {
        if self.delivered_events.contains(event) && self.decisions.deduplicates_events() {
            return Denial::new(
                DenyReason::EventReplayed,
                format!("event `{event}` was already delivered"),
            )
            .into();
        }
        let next = match kind {
            "completed" => LifecycleState::Completed,
            "failed" => LifecycleState::Failed,
            "cancelled" => LifecycleState::Cancelled,
            "closed" => LifecycleState::Closed,
            other => {
                return Denial::new(DenyReason::PolicyDenied, format!("unknown event kind `{other}`; expected completed, failed, cancelled or closed")).into();
            }
        };
        if self.take_fault(FaultPoint::EventDeliver) {
            return Denial::new(
                DenyReason::StoreWriteFailed,
                "event delivery failed (fault armed)",
            )
            .into();
        }
        let write = Write {
            table: Table::Events,
            key: event.into(),
            value: RowValue::new(json!({"instance": instance, "kind": kind})),
        };
        if let Err(d) = self.commit(journal, vec![write]) {
            return d.into();
        }
        self.delivered_events.insert(event.into());
        match self.transition(journal, instance, next) {
            Ok(()) => {
                let mut r = ActionResult::ok();
                r.instance = Some(instance.into());
                r
            }
            Err(d) => d.into(),
        }
    }
}
