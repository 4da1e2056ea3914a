//! Loading one scenario file: parsing with the path of a bad field, and every rule the schema cannot state (aliases, order, host exits), each error naming its file and field.

use super::*;

impl Scenario {
    /// The area: the part of the id before the slash (`zc` in `zc/004-...`).
    pub fn area(&self) -> &str {
        self.id.split_once('/').map(|(a, _)| a).unwrap_or(&self.id)
    }

    /// The file name part of the id (`004-network-above-ceiling`).
    pub fn name(&self) -> &str {
        self.id.split_once('/').map(|(_, n)| n).unwrap_or(&self.id)
    }

    /// Parses one scenario from text; `file` is only used in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Scenario, ScenarioError> {
        // Tracking the path costs more than the parse itself (a catalogue's
        // load is serial, before any scenario runs), and only an error reads
        // it: a file that does not parse is parsed again to say where.
        if let Ok(scenario) = serde_json::from_str(text) {
            return Ok(scenario);
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let result: Result<Scenario, _> = serde_path_to_error::deserialize(&mut de);
        let scenario = result.map_err(|e| ScenarioError::Parse {
            file: file.to_path_buf(),
            path: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
        de.end().map_err(|e| ScenarioError::Parse {
            file: file.to_path_buf(),
            path: ".".into(),
            message: format!("{e}: a scenario file holds exactly one JSON object"),
        })?;
        Ok(scenario)
    }

    /// Reads and parses one file, then checks that its id matches its
    /// path below `root` and that the scenario is consistent on its own.
    pub fn load(root: &Path, file: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(file).map_err(|source| ScenarioError::Read {
            file: file.to_path_buf(),
            source,
        })?;
        let scenario = Scenario::parse(&text, file)?;
        let expected_id = file
            .strip_prefix(root)
            .ok()
            .and_then(|rel| {
                let rel = rel.with_extension("");
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                (parts.len() == 2).then(|| parts.join("/"))
            })
            .ok_or_else(|| ScenarioError::Invalid {
                file: file.to_path_buf(),
                path: ".".into(),
                message: format!(
                    "scenario files live at <catalogue>/<area>/<NNN-name>.json, directly below an area directory of {}",
                    root.display()
                ),
            })?;
        if scenario.id != expected_id {
            return Err(ScenarioError::Invalid {
                file: file.to_path_buf(),
                path: "id".into(),
                message: format!(
                    "id `{}` does not match the file's path: expected `{expected_id}`",
                    scenario.id
                ),
            });
        }
        scenario.validate(file)?;
        Ok(scenario)
    }

    /// Checks what the types cannot: aliases bound before use, a control
    /// where one is needed, known capability names, at least one check.
    /// Catalogue-wide checks (control ids exist, ids unique) are in [`crate::catalogue`].
    pub fn validate(&self, file: &Path) -> Result<(), ScenarioError> {
        let invalid = |path: String, message: String| ScenarioError::Invalid {
            file: file.to_path_buf(),
            path,
            message,
        };
        if self.checks.is_empty() {
            return Err(invalid(
                "checks".into(),
                "a scenario checks at least one invariant id (e.g. [\"ZC1\"])".into(),
            ));
        }
        match (self.kind, &self.control) {
            (ScenarioKind::Negative, None) => {
                return Err(invalid(
                    "control".into(),
                    "a negative scenario names its positive control (the allowed twin), e.g. \"control\": \"zc/003-network-within-ceiling\"".into(),
                ));
            }
            (ScenarioKind::Control, Some(_)) => {
                return Err(invalid(
                    "control".into(),
                    "a control scenario has no control of its own: remove `control` or make the kind `negative`".into(),
                ));
            }
            _ => {}
        }
        if self.twin_of.is_some()
            && let Some(i) = self
                .steps
                .iter()
                .position(|s| matches!(s.action, StepAction::Delegate(_)))
        {
            return Err(invalid(
                format!("steps[{i}].delegate"),
                "a twin (`twin_of`) creates every child through the model's spawn: replace this `delegate` with a `turn` on its parent whose scripted reply is {\"spawn\": {\"role\", \"task\"}}".into(),
            ));
        }
        let named = self
            .needs
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("needs[{i}]"), n))
            .chain(
                self.unless
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (format!("unless[{i}]"), n)),
            );
        for (path, need) in named {
            if !delegation_protocol::capability::ALL.contains(&need.as_str()) {
                return Err(invalid(
                    path,
                    format!(
                        "`{need}` is not a capability name; expected one of: {}",
                        delegation_protocol::capability::ALL.join(", ")
                    ),
                ));
            }
        }
        if let Some(need) = self.needs.iter().find(|n| self.unless.contains(n)) {
            return Err(invalid(
                "unless".into(),
                format!("`{need}` is both needed and excluded: the scenario could never run"),
            ));
        }
        if let Some(i) = self.steps.iter().position(
            |s| matches!(&s.action, StepAction::Start(start) if !start.request.tools.is_empty()),
        ) && !self
            .needs
            .iter()
            .any(|n| n == delegation_protocol::capability::MCP)
        {
            return Err(invalid(
                format!("steps[{i}].start.tools"),
                "the instance seals tools served by the harness's MCP server: add \"mcp\" to `needs`".into(),
            ));
        }
        // A question needs a host that can put one to an instance's run.
        if let Some(i) = self
            .steps
            .iter()
            .position(|s| matches!(s.action, StepAction::Ask(_) | StepAction::AnswerQuestion(_)))
            && !self
                .needs
                .iter()
                .any(|n| n == delegation_protocol::capability::CLARIFICATION_QUESTIONS)
        {
            return Err(invalid(
                format!("steps[{i}].{}", self.steps[i].action.key()),
                "asking and answering clarification questions is a capability: add \"clarification-questions\" to `needs`".into(),
            ));
        }
        // A spawn refused for what it asked for says nothing about a host
        // whose delegation tool cannot carry the request.
        if let Some(i) = self
            .steps
            .iter()
            .position(Step::spawn_refused_for_its_request)
            && !self
                .needs
                .iter()
                .any(|n| n == delegation_protocol::capability::SPAWN_AUTHORITY)
        {
            return Err(invalid(
                format!("steps[{i}].expect.spawn.reason"),
                "a spawn refused for the authority it requested needs the request to reach the host: add \"spawn-authority\" to `needs`".into(),
            ));
        }
        if self.setup.authorizer.is_none()
            && let Some(i) = self
                .steps
                .iter()
                .position(|s| matches!(s.action, StepAction::Authorizer(_)))
        {
            return Err(invalid(
                format!("steps[{i}].authorizer"),
                "this step scripts the external authorizer, but `setup.authorizer` starts none: add e.g. \"authorizer\": {\"reply\": \"allow\"} to `setup`".into(),
            ));
        }
        if self.steps.is_empty() {
            return Err(invalid(
                "steps".into(),
                "a scenario has at least one step".into(),
            ));
        }
        let mut bound: BTreeMap<String, AliasKind> = BTreeMap::new();
        for (i, step) in self.steps.iter().enumerate() {
            let at = |field: &str| format!("steps[{i}].{}.{field}", step.action.key());
            if let StepAction::ConsumeReceipt(ConsumeReceiptStep {
                tamper: Some(tamper),
                ..
            }) = &step.action
            {
                match (tamper.op, &tamper.value) {
                    (TamperOp::Remove, Some(_)) => {
                        return Err(invalid(
                            at("tamper.value"),
                            "a `remove` tamper takes no value: it deletes the field at `pointer`"
                                .into(),
                        ));
                    }
                    (TamperOp::Replace | TamperOp::Add, None) => {
                        return Err(invalid(
                            at("tamper.value"),
                            format!(
                                "a `{}` tamper needs the `value` to write at `pointer`",
                                tamper.op.name()
                            ),
                        ));
                    }
                    _ => {}
                }
            }
            for (field, alias, kind) in step.action.uses() {
                if alias == UNKNOWN_ALIAS {
                    continue;
                }
                if alias.starts_with('@') {
                    return Err(invalid(
                        at(field),
                        format!(
                            "`{alias}`: aliases starting with `@` are reserved for the harness; the only one is `{UNKNOWN_ALIAS}` (an id the host never issued)"
                        ),
                    ));
                }
                match bound.get(alias) {
                    None => {
                        return Err(invalid(
                            at(field),
                            format!(
                                "alias `{alias}` is used before any earlier step binds it with `as`; bound so far: {}",
                                list_or_none(bound.keys())
                            ),
                        ));
                    }
                    Some(k) if *k != kind => {
                        return Err(invalid(
                            at(field),
                            format!("alias `{alias}` names a {k}, but a {kind} is expected here"),
                        ));
                    }
                    Some(_) => {}
                }
            }
            if let Some(expect) = &step.expect {
                if expect.host_exits {
                    self.validate_host_exits(i, expect, file)?;
                }
                let aliases = expect
                    .state
                    .keys()
                    .map(|a| ("state", a, AliasKind::Instance))
                    .chain(
                        expect
                            .receipts
                            .keys()
                            .map(|a| ("receipts", a, AliasKind::Receipt)),
                    )
                    .chain(expect.delta.iter().flat_map(|d| {
                        d.model_requests_for
                            .keys()
                            .map(|a| ("delta.model_requests_for", a, AliasKind::Instance))
                    }))
                    .chain(
                        expect
                            .effective_equals_ceiling_of
                            .iter()
                            .map(|a| ("effective_equals_ceiling_of", a, AliasKind::Instance)),
                    )
                    .chain(
                        expect
                            .model_saw
                            .keys()
                            .map(|a| ("model_saw", a, AliasKind::Instance)),
                    );
                // An expectation may name an alias this very step binds.
                let binds_here: Vec<(String, AliasKind)> = step.action.binds();
                for (field, alias, kind) in aliases {
                    if alias.starts_with('@') {
                        return Err(invalid(
                            format!("steps[{i}].expect.{field}"),
                            format!(
                                "`{alias}` is a reserved alias; an expectation names an alias an earlier step bound (an id the host never issued has no state to expect)"
                            ),
                        ));
                    }
                    let known = bound
                        .get(alias)
                        .copied()
                        .or_else(|| binds_here.iter().find(|(a, _)| a == alias).map(|(_, k)| *k));
                    match known {
                        Some(k) if k == kind => {}
                        Some(k) => {
                            return Err(invalid(
                                format!("steps[{i}].expect.{field}"),
                                format!(
                                    "alias `{alias}` names a {k}, but a {kind} is expected here"
                                ),
                            ));
                        }
                        None => {
                            return Err(invalid(
                                format!("steps[{i}].expect.{field}"),
                                format!(
                                    "alias `{alias}` is not bound by this or an earlier step; bound so far: {}",
                                    list_or_none(bound.keys())
                                ),
                            ));
                        }
                    }
                }
            }
            for (alias, kind) in step.action.binds() {
                if alias.starts_with('@') {
                    return Err(invalid(
                        format!("steps[{i}].{}", step.action.key()),
                        format!(
                            "`{alias}` cannot be bound: aliases starting with `@` are reserved for the harness; choose a plain name"
                        ),
                    ));
                }
                if let Some(previous) = bound.insert(alias.clone(), kind) {
                    return Err(invalid(
                        format!("steps[{i}].{}.as", step.action.key()),
                        format!(
                            "alias `{alias}` is already bound to a {previous}; choose a new alias (aliases are never rebound, like host ids)"
                        ),
                    ));
                }
            }
        }
        self.validate_concurrent(file)?;
        self.validate_lifecycle_replies(&bound, file)
    }

    /// Every scripted `lifecycle` reply: its target is an instance alias some
    /// step binds (the runner puts the host id there once it is bound), a
    /// `send_input` carries its input, and the scenario needs the capability
    /// for the tool, so a host without it is `unsupported` instead of passing
    /// on a call it never received.
    pub(super) fn validate_lifecycle_replies(
        &self,
        bound: &BTreeMap<String, AliasKind>,
        file: &Path,
    ) -> Result<(), ScenarioError> {
        use delegation_model::LifecycleOp;
        use delegation_protocol::capability::{MODEL_CLOSE_TOOLS, MODEL_LIFECYCLE_TOOLS};
        let invalid = |path: String, message: String| ScenarioError::Invalid {
            file: file.to_path_buf(),
            path,
            message,
        };
        let setup = self
            .setup
            .model
            .iter()
            .enumerate()
            .map(|(r, rule)| (format!("setup.model[{r}].reply.lifecycle"), rule));
        let steps = self.steps.iter().enumerate().flat_map(|(i, step)| {
            let rules = match &step.action {
                StepAction::ModelEndpoint(ModelEndpointStep::Rules(rules)) => rules.as_slice(),
                _ => &[],
            };
            rules.iter().enumerate().map(move |(r, rule)| {
                (
                    format!("steps[{i}].model_endpoint.rules[{r}].reply.lifecycle"),
                    rule,
                )
            })
        });
        for (path, rule) in setup.chain(steps) {
            let delegation_observers::ModelReply::Lifecycle(call) = &rule.reply else {
                continue;
            };
            match bound.get(&call.target) {
                Some(AliasKind::Instance) => {}
                // An id the host never issued: the runner puts its fresh unknown id there.
                None if call.target == UNKNOWN_ALIAS => {}
                _ => {
                    return Err(invalid(
                        format!("{path}.target"),
                        format!(
                            "`{}` is not an instance alias any step binds; a lifecycle call names a child by the alias its spawn or delegation bound",
                            call.target
                        ),
                    ));
                }
            }
            if call.op == LifecycleOp::SendInput && call.message.is_none() {
                return Err(invalid(
                    format!("{path}.message"),
                    "a `send_input` gives the child input: add `message`".into(),
                ));
            }
            let gives_input = call.message.is_some()
                && matches!(call.op, LifecycleOp::SendInput | LifecycleOp::Resume);
            let need = if gives_input {
                MODEL_LIFECYCLE_TOOLS
            } else {
                MODEL_CLOSE_TOOLS
            };
            if !self.needs.iter().any(|n| n == need) {
                return Err(invalid(
                    path,
                    format!(
                        "a scripted `{}` call reaches only a host whose model has that tool: add \"{need}\" to `needs`",
                        serde_json::to_value(call.op)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default()
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Scenario {
    /// A step expected to kill the host: it must be a host action, it cannot
    /// expect anything that needs the host's reply or its state afterwards,
    /// and no host action may follow before the next `restart`.
    pub(super) fn validate_host_exits(
        &self,
        i: usize,
        expect: &Expect,
        file: &Path,
    ) -> Result<(), ScenarioError> {
        let invalid = |path: String, message: String| ScenarioError::Invalid {
            file: file.to_path_buf(),
            path,
            message,
        };
        let step = &self.steps[i];
        if !step.action.is_host_action() || matches!(step.action, StepAction::Observe(_)) {
            return Err(invalid(
                format!("steps[{i}].expect.host_exits"),
                format!(
                    "`host_exits` belongs on a step that asks the host to act (turn, tool_call, answer, ...), not on `{}`",
                    step.action.key()
                ),
            ));
        }
        let delta_needs_state = expect.delta.as_ref().is_some_and(|d| {
            d.instances.is_some()
                || d.approvals_dispatched.is_some()
                || d.approvals_pending.is_some()
        });
        let needs_host: Vec<&str> = [
            ("outcome", expect.outcome.is_some()),
            ("reason", expect.reason.is_some()),
            ("spawn", expect.spawn.is_some()),
            ("state", !expect.state.is_empty()),
            ("instances", expect.instances.is_some()),
            ("approvals", expect.approvals.is_some()),
            ("questions", expect.questions.is_some()),
            ("receipts", !expect.receipts.is_empty()),
            ("tool_call", expect.tool_call.is_some()),
            ("woke", expect.woke.is_some()),
            (
                "effective_equals_ceiling_of",
                expect.effective_equals_ceiling_of.is_some(),
            ),
            ("effective", expect.effective.is_some()),
            ("grants", expect.grants.is_some()),
            ("records", expect.records.is_some()),
            ("delta.instances / delta.approvals_*", delta_needs_state),
        ]
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect();
        if !needs_host.is_empty() {
            return Err(invalid(
                format!("steps[{i}].expect"),
                format!(
                    "with `host_exits` the host gives no reply and cannot be observed after this step, so {} cannot be checked here: move them to the `restart` step that follows (only the observers' `delta` counts and `model_saw` can be checked on a step that kills the host)",
                    needs_host.join(", ")
                ),
            ));
        }
        for (j, later) in self.steps.iter().enumerate().skip(i + 1) {
            match &later.action {
                StepAction::Restart(_) => break,
                action if action.is_host_action() => {
                    return Err(invalid(
                        format!("steps[{j}].{}", action.key()),
                        format!(
                            "step {i} expects the host to exit (`host_exits`), so the host is dead until a `restart`: insert {{\"restart\": {{}}}} before this `{}` step",
                            action.key()
                        ),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

pub(super) fn list_or_none<'a>(items: impl Iterator<Item = &'a String>) -> String {
    let items: Vec<&str> = items.map(String::as_str).collect();
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}
