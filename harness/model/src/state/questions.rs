//! Clarification questions: an instance asks a person, the person answers; no approval, and no policy decides it (PG4).

use super::*;

impl HostState {
    /// A question from a live instance, committed as pending before it is
    /// shown. Its ceiling's approval policy plays no part: under `never` or
    /// a bounded ceiling approval requests are denied, questions still pass (PG4).
    pub fn ask(&mut self, journal: &mut dyn Journal, instance: &str, text: &str) -> ActionResult {
        let policy = match self.live_instance(instance) {
            Ok(i) => i.ceiling.approval_policy.clone(),
            Err(d) => return d.into(),
        };
        if let Some(d) = self.decisions.refuses_question(&policy) {
            return d.into();
        }
        let next_id = self.next_id;
        let id = self.fresh_id("question");
        let question = ObservedQuestion {
            id: id.clone(),
            instance: instance.into(),
            text: text.into(),
            state: QuestionState::Pending,
            answer: None,
        };
        if let Err(d) = self.commit(journal, vec![Self::question_write(&question)]) {
            self.next_id = next_id;
            return d.into();
        }
        self.questions.insert(id.clone(), question);
        let mut r = ActionResult::ok();
        r.instance = Some(instance.into());
        r.question = Some(id);
        r
    }

    /// A person's answer: once per question, while its instance is live.
    pub fn answer_question(
        &mut self,
        journal: &mut dyn Journal,
        id: &str,
        answer: &str,
    ) -> ActionResult {
        let Some(mut question) = self.questions.get(id).cloned() else {
            return Denial::new(DenyReason::InstanceUnknown, format!("no question `{id}`")).into();
        };
        if question.state != QuestionState::Pending {
            return Denial::new(
                DenyReason::EventReplayed,
                format!("question `{id}` was already answered"),
            )
            .into();
        }
        if let Err(d) = self.live_instance(&question.instance) {
            return d.into();
        }
        question.state = QuestionState::Answered;
        question.answer = Some(answer.into());
        if let Err(d) = self.commit(journal, vec![Self::question_write(&question)]) {
            return d.into();
        }
        let mut r = ActionResult::ok();
        r.instance = Some(question.instance.clone());
        r.question = Some(id.into());
        self.questions.insert(id.into(), question);
        r
    }

    fn question_write(question: &ObservedQuestion) -> Write {
        Write {
            table: Table::Questions,
            key: question.id.clone(),
            value: RowValue::new(question.clone()),
        }
    }
}
