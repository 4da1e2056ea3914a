//! Prepared delegation receipts: issue, seal, check on consume, revoke (RC).

use super::*;

impl HostState {
    pub fn prepare_receipt(
        &mut self,
        journal: &mut dyn Journal,
        parent: &str,
        call_id: &str,
        request: &SpawnRequest,
        ttl: Option<Millis>,
        live: &LiveTools,
    ) -> ActionResult {
        let admission = match self.admit_delegation(parent, request, live) {
            Ok(a) => a,
            Err(d) => return self.deny_delegation(journal, "prepare", parent, request, d),
        };
        let (next_id, seq) = (self.next_id, self.seq);
        let id = self.fresh_id("rcpt");
        let mut receipt = Receipt {
            id: id.clone(),
            parent: parent.into(),
            call_id: call_id.into(),
            commitment: admission.commitment,
            role: request.role.clone(),
            authority: admission.effective,
            authorization: None,
            issued_at: self.now,
            expires_at: self.now + ttl.unwrap_or(self.config.receipt_ttl_ms),
            seal: String::new(),
        };
        receipt.seal = self.seal_of(&receipt);
        let record = ReceiptRecord {
            receipt: receipt.clone(),
            state: ReceiptState::Issued,
        };
        let write = Write {
            table: Table::Receipts,
            key: id.clone(),
            value: RowValue::new(record.clone()),
        };
        if let Err(d) = self.commit(journal, vec![write]) {
            self.next_id = next_id;
            self.seq = seq;
            return d.into();
        }
        self.receipts.insert(id, record);
        let mut r = ActionResult::ok();
        r.receipt = Some(receipt);
        r
    }

    /// The seal of a receipt that has none yet: a hash, under the seal key,
    /// of every other field as serde_json writes the struct.
    ///
    /// No one recomputes a seal: a presented receipt is compared with the
    /// stored one, field by field, seal included. So the writing need only
    /// be deterministic, which a struct's is (its fields in declaration
    /// order, its maps ordered), and not canonical: a JCS write through a
    /// value was about 60,000 instructions a receipt, most of a seal's cost.
    pub(super) fn seal_of(&self, receipt: &Receipt) -> String {
        debug_assert!(receipt.seal.is_empty(), "a receipt is sealed once");
        let mut sealed = Vec::with_capacity(512);
        sealed.extend_from_slice(self.seal_key.as_bytes());
        sealed.push(b'\n');
        serde_json::to_writer(&mut sealed, receipt).expect("a receipt serialises");
        sha256_hex(&sealed)
    }

    /// Checks a presented receipt: known, untampered, unexpired, unconsumed,
    /// bound to this parent and request (RC1 to RC4), then admits.
    pub fn admit_receipt(
        &mut self,
        journal: &mut dyn Journal,
        presented: &Value,
        parent: &str,
        request: &SpawnRequest,
        live: &LiveTools,
    ) -> Decided<Admission> {
        let Some(id) = presented.get("id").and_then(Value::as_str) else {
            return Err(Denial::new(
                DenyReason::ReceiptMissing,
                "no receipt id presented",
            ));
        };
        let Some(stored) = self.receipts.get(id).cloned() else {
            return Err(Denial::new(
                DenyReason::ReceiptMissing,
                format!("no receipt `{id}` was issued"),
            ));
        };
        if !self
            .decisions
            .presented_receipt_matches(presented, &to_value(&stored.receipt))
        {
            return Err(Denial::new(
                DenyReason::BindingMismatch,
                format!("receipt `{id}` was altered"),
            ));
        }
        match stored.state {
            ReceiptState::Consumed => {
                return Err(Denial::new(
                    DenyReason::ReceiptConsumed,
                    format!("receipt `{id}` was already used"),
                ));
            }
            ReceiptState::Revoked | ReceiptState::Expired => {
                return Err(Denial::new(
                    DenyReason::ReceiptExpired,
                    format!("receipt `{id}` is {:?}", stored.state),
                ));
            }
            ReceiptState::Issued => {}
        }
        if self
            .decisions
            .receipt_expired(self.now, stored.receipt.expires_at)
        {
            let mut expired = stored.clone();
            expired.state = ReceiptState::Expired;
            let write = Write {
                table: Table::Receipts,
                key: id.into(),
                value: RowValue::new(expired.clone()),
            };
            if self.commit(journal, vec![write]).is_ok() {
                self.receipts.insert(id.into(), expired);
            }
            return Err(Denial::new(
                DenyReason::ReceiptExpired,
                format!("receipt `{id}` expired"),
            ));
        }
        let other_parent = !self
            .decisions
            .receipt_bound_to_parent(&stored.receipt.parent, parent);
        if other_parent || stored.receipt.commitment != Self::commitment(request) {
            return Err(Denial::new(
                DenyReason::BindingMismatch,
                format!("receipt `{id}` is bound to another parent or request"),
            ));
        }
        let p = self.live_instance(parent)?;
        let names = super::delegation::sealed_and_requested_tools(
            &stored.receipt.authority,
            &request.authority,
        );
        if self.decisions.checks_sealed_tools_on_consume() {
            self.check_sealed_tools(p, &names, live)?;
        }
        Ok(Admission {
            parent: parent.into(),
            request: request.clone(),
            effective: stored.receipt.authority.clone(),
            commitment: stored.receipt.commitment.clone(),
            receipt: Some(id.into()),
        })
    }

    pub fn revoke_receipt(&mut self, journal: &mut dyn Journal, id: &str) -> ActionResult {
        let Some(mut r) = self.receipts.get(id).cloned() else {
            return Denial::new(DenyReason::ReceiptMissing, format!("no receipt `{id}`")).into();
        };
        if r.state != ReceiptState::Issued {
            return Denial::new(
                DenyReason::ReceiptConsumed,
                format!("receipt `{id}` is {:?}", r.state),
            )
            .into();
        }
        r.state = ReceiptState::Revoked;
        let write = Write {
            table: Table::Receipts,
            key: id.into(),
            value: RowValue::new(r.clone()),
        };
        match self.commit(journal, vec![write]) {
            Ok(()) => {
                self.receipts.insert(id.into(), r);
                ActionResult::ok()
            }
            Err(d) => d.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt() -> Receipt {
        serde_json::from_value(json!({
            "id": "rcpt-1", "parent": "inst-1", "call_id": "call-1",
            "commitment": "sha256:00", "role": "worker",
            "authority": {"sandbox": "read-only", "approval_policy": "never", "tools": {},
                          "cwd": "/w/repo", "provider": "harness", "delegation_depth": 0},
            "issued_at": 1000, "expires_at": 61000, "seal": ""
        }))
        .expect("a receipt")
    }

    #[test]
    fn a_seal_is_the_same_for_the_same_receipt_and_key_and_differs_with_either() {
        let state = HostState::new("key-1".into());
        let seal = state.seal_of(&receipt());
        assert!(seal.starts_with("sha256:") && seal.len() == 71, "{seal}");
        assert_eq!(state.seal_of(&receipt()), seal, "deterministic");
        assert_ne!(
            HostState::new("key-2".into()).seal_of(&receipt()),
            seal,
            "keyed"
        );
        let altered: [fn(&mut Receipt); 4] = [
            |r| r.expires_at += 1,
            |r| r.parent = "inst-2".into(),
            |r| r.authority.delegation_depth = 1,
            |r| r.authorization = Some("auth-1".into()),
        ];
        for (i, alter) in altered.iter().enumerate() {
            let mut other = receipt();
            alter(&mut other);
            assert_ne!(state.seal_of(&other), seal, "alteration {i} kept the seal");
        }
    }
}
