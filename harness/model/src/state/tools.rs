//! Tools as sealed and served: the seal, the drift check, what the model may be shown, and `tools/list_changed` (SD).

use super::*;

impl HostState {
    pub fn live_instance(&self, id: &str) -> Decided<&InstanceRecord> {
        let inst = self.instances.get(id).ok_or_else(|| {
            Denial::new(DenyReason::InstanceUnknown, format!("no instance `{id}`"))
        })?;
        if inst.state.is_terminal() {
            return Err(Denial::new(
                DenyReason::InstanceTerminal,
                format!("instance `{id}` is {:?}", inst.state),
            ));
        }
        Ok(inst)
    }

    /// Seals named tools from the live definitions, exactly or not at all (SD5).
    pub(super) fn seal_tools(
        names: &[String],
        live: &LiveTools,
    ) -> Decided<BTreeMap<String, String>> {
        names
            .iter()
            .map(|n| {
                live.get(n)
                    .map(|d| (n.clone(), d.digest.clone()))
                    .ok_or_else(|| {
                        Denial::new(
                            DenyReason::ProjectionMissing,
                            format!("tool `{n}` is not served, so it cannot be sealed exactly"),
                        )
                    })
            })
            .collect()
    }

    /// Every sealed tool of `ceiling` still matches its live definition (SD2, SD4).
    pub(super) fn check_sealed_tools(
        &self,
        inst: &InstanceRecord,
        names: &[&String],
        live: &LiveTools,
    ) -> Decided<()> {
        if inst.tools_invalidated && !names.is_empty() {
            return Err(Denial::new(
                DenyReason::ToolListChanged,
                "the tool list changed after the seal; a new receipt is needed",
            ));
        }
        for name in names {
            // A name the ceiling does not hold was never sealed for this
            // instance (a receipt of another parent reaches here only through
            // a mutant): refused, never a lookup that panics.
            let Some(sealed) = inst.ceiling.tools.get(*name) else {
                return Err(Denial::new(
                    DenyReason::CeilingExceeded,
                    format!("tool `{name}` is not sealed in the instance's ceiling"),
                ));
            };
            match live.get(*name) {
                Some(def) if self.decisions.sealed_tool_matches(sealed, def) => {}
                Some(def) => {
                    return Err(Denial::new(
                        DenyReason::ToolDrift,
                        format!(
                            "tool `{name}` changed: sealed {sealed}, live {}",
                            def.digest
                        ),
                    ));
                }
                None => {
                    return Err(Denial::new(
                        DenyReason::ToolDrift,
                        format!("tool `{name}` was removed after it was sealed"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The sealed tools whose live definitions still match: all the model may be shown (SD2).
    pub fn model_visible_tools(&self, instance: &str, live: &LiveTools) -> Vec<Value> {
        self.model_visible_definitions(instance, live)
            .into_iter()
            .map(|d| d.raw.clone())
            .collect()
    }

    /// The definitions behind [`HostState::model_visible_tools`], already
    /// digested: re-digesting what the model is shown costs two canonical
    /// JSON writes and hashes per tool per turn.
    pub fn model_visible_definitions<'l>(
        &self,
        instance: &str,
        live: &'l LiveTools,
    ) -> Vec<&'l ToolDefinition> {
        let Some(inst) = self.instances.get(instance) else {
            return vec![];
        };
        if inst.tools_invalidated {
            return vec![];
        }
        inst.ceiling
            .tools
            .iter()
            .filter_map(|(name, digest)| {
                live.get(name)
                    .filter(|d| self.decisions.sealed_tool_matches(digest, d))
            })
            .collect()
    }

    /// The MCP server announced `tools/list_changed`: every live instance's
    /// seal is invalid until a new receipt (SD3). Durable, so a restart does not forget it.
    pub fn tool_list_changed(&mut self, journal: &mut dyn Journal) -> Decided<()> {
        if !self.decisions.takes_in_list_changed() {
            return Ok(());
        }
        let mut writes = Vec::new();
        let mut updated = Vec::new();
        for inst in self.instances.values() {
            if !inst.state.is_terminal()
                && !inst.tools_invalidated
                && !inst.ceiling.tools.is_empty()
            {
                let mut u = inst.clone();
                u.tools_invalidated = true;
                writes.push(Self::instance_write(&u));
                updated.push(u);
            }
        }
        if writes.is_empty() {
            return Ok(());
        }
        self.commit(journal, writes)?;
        for u in updated {
            self.instances.insert(u.id.clone(), u);
        }
        Ok(())
    }
}
