#!/usr/bin/env python3
"""A host written from the documents alone (PROTOCOL.md, ENDPOINTS.md, MODEL.md), never from harness source.

It holds the reference behaviour the documents state for what it declares:
delegation and its checks, nested children, the external authorizer,
receipts, the clock, the model's lifecycle tools and restarts (a JSON store
replaced atomically on every commit). It has no MCP client, so every
scenario needing `mcp` is unsupported. If a document leaves out something
these scenarios check, this adapter fails them: that is what it is for.
"""
import hashlib
import hmac
import json
import os
import sys
import urllib.error
import urllib.request

CAPS = ["restart", "nested-delegation", "external-authorizer", "spawn-authority", "receipts", "clock",
        "model-lifecycle-tools", "model-close-tools"]
CLASSES = ["read", "file-write", "shell", "network", "mcp", "generic", "delegation"]
TERMINAL = {"closed", "cancelled", "failed"}


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def canon(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(v):
    return "sha256:" + hashlib.sha256(canon(v).encode()).hexdigest()


class Denied(Exception):
    def __init__(self, reason, detail=""):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# ---------------------------------------------------------------- authority

def norm_path(raw):
    if not isinstance(raw, str) or not raw.startswith("/") or "\0" in raw:
        raise Denied("ceiling_exceeded", f"bad path {raw!r}")
    parts = []
    for p in raw.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if not parts:
                raise Denied("ceiling_exceeded", "path escapes")
            parts.pop()
        else:
            parts.append(p)
    return "/" + "/".join(parts)


def within(a, b):
    return a == b or b == "/" or a.startswith(b + "/")


def sb_kind(s):
    return s if isinstance(s, str) else next(iter(s))


def norm_sandbox(s):
    if sb_kind(s) == "workspace-write":
        w = s["workspace-write"]
        roots = sorted({norm_path(r) for r in w.get("writable_roots", [])})
        roots = [r for r in roots if not any(o != r and within(r, o) for o in roots)]
        return {"workspace-write": {"writable_roots": roots, "network": bool(w.get("network", False))}}
    return s


def sb_leq(a, b):
    ka, kb = sb_kind(a), sb_kind(b)
    if ka == "external" or kb == "external":
        return a == b
    if ka == "read-only" or kb == "full-access":
        return True
    if ka == "full-access" or kb == "read-only":
        return False
    wa, wb = a["workspace-write"], b["workspace-write"]
    return (not wa["network"] or wb["network"]) and all(
        any(within(r, s) for s in wb["writable_roots"]) for r in wa["writable_roots"])


def sb_meet(a, b):
    ka, kb = sb_kind(a), sb_kind(b)
    if ka == "external" or kb == "external":
        if a == b:
            return a
        raise Denied("ceiling_exceeded", "external sandbox")
    if ka == "read-only" or kb == "read-only":
        return "read-only"
    if ka == "full-access":
        return b
    if kb == "full-access":
        return a
    wa, wb = a["workspace-write"], b["workspace-write"]
    roots = set()
    for r in wa["writable_roots"]:
        for s in wb["writable_roots"]:
            if within(r, s):
                roots.add(r)
            elif within(s, r):
                roots.add(s)
    return norm_sandbox({"workspace-write": {"writable_roots": sorted(roots),
                                             "network": wa["network"] and wb["network"]}})


def verdict(policy, cls):
    # PROTOCOL.md "Approval policies" table.
    if policy == "never":
        return "run" if cls == "read" else "deny"
    if policy == "untrusted":
        return "run" if cls == "read" else "ask"
    if policy == "on-request":
        return "run" if cls in ("read", "file-write") else "ask"
    g = policy["granular"]
    if cls in g.get("deny", []):
        return "deny"
    if cls in g.get("ask", []):
        return "ask"
    return "run"


RANK = {"deny": 0, "ask": 1, "run": 2}


def pol_leq(a, b):
    return all(RANK[verdict(a, c)] <= RANK[verdict(b, c)] for c in CLASSES)


def canonical_policy(p):
    for named in ("never", "untrusted", "on-request"):
        if all(verdict(named, c) == verdict(p, c) for c in CLASSES):
            return named
    return {"granular": {"ask": [c for c in CLASSES if verdict(p, c) == "ask"],
                         "deny": [c for c in CLASSES if verdict(p, c) == "deny"]}}


def pol_meet(a, b):
    ask, deny = [], []
    for c in CLASSES:
        v = min(verdict(a, c), verdict(b, c), key=RANK.get)
        if v == "ask":
            ask.append(c)
        elif v == "deny":
            deny.append(c)
    return canonical_policy({"granular": {"ask": ask, "deny": deny}})


def exceeding(a, b):
    axes = []
    if not sb_leq(a["sandbox"], b["sandbox"]):
        axes.append("sandbox")
    if not pol_leq(a["approval_policy"], b["approval_policy"]):
        axes.append("approval_policy")
    if any(b["tools"].get(n) != d for n, d in a["tools"].items()):
        axes.append("tools")
    if not within(a["cwd"], b["cwd"]):
        axes.append("cwd")
    if a["provider"] != b["provider"]:
        axes.append("provider")
    if a["delegation_depth"] > b["delegation_depth"]:
        axes.append("delegation")
    return axes


def resolve(base, req):
    tools = dict(base["tools"])
    if req.get("tools") is not None:
        tools = {}
        for n in req["tools"]:
            if n not in base["tools"]:
                raise Denied("projection_missing", f"tool {n} cannot be sealed")
            tools[n] = base["tools"][n]
    cwd = norm_path(req["cwd"]) if req.get("cwd") is not None else base["cwd"]
    return {
        "sandbox": norm_sandbox(req["sandbox"]) if req.get("sandbox") is not None else base["sandbox"],
        "approval_policy": req.get("approval_policy") or base["approval_policy"],
        "tools": tools, "cwd": cwd,
        "provider": req.get("provider") or base["provider"],
        "delegation_depth": req["delegation_depth"] if req.get("delegation_depth") is not None
        else base["delegation_depth"],
    }


def meet(a, b):
    if within(a["cwd"], b["cwd"]):
        cwd = a["cwd"]
    elif within(b["cwd"], a["cwd"]):
        cwd = b["cwd"]
    else:
        raise Denied("ceiling_exceeded", "cwd")
    if a["provider"] != b["provider"]:
        raise Denied("ceiling_exceeded", "provider")
    return {"sandbox": sb_meet(a["sandbox"], b["sandbox"]),
            "approval_policy": pol_meet(a["approval_policy"], b["approval_policy"]),
            "tools": {n: d for n, d in a["tools"].items() if b["tools"].get(n) == d},
            "cwd": cwd, "provider": a["provider"],
            "delegation_depth": min(a["delegation_depth"], b["delegation_depth"])}


# ------------------------------------------------------------------- host

class Host:
    def __init__(self):
        self.env = None
        self.st = None
        self.path = None

    def load(self, store_dir):
        os.makedirs(store_dir, exist_ok=True)
        self.path = os.path.join(store_dir, "state.json")
        if os.path.exists(self.path):
            with open(self.path) as f:
                self.st = json.load(f)
        else:
            self.st = {"now": 0, "config": {}, "auto_approve": None, "instances": {}, "records": [],
                       "next": 0, "used_authz": [], "events": [], "receipts": {},
                       "key": hashlib.sha256(os.urandom(32)).hexdigest()}

    def commit(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.st, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def fresh(self):
        self.st["next"] += 1
        return f"inst-{self.st['next']}"

    def record(self, transition, **fields):
        r = {"seq": len(self.st["records"]) + 1, "transition": transition, "allowed": False,
             "deny_reasons": [], "receipt_ids": [], "created_instances_delta": 0}
        r.update(fields)
        self.st["records"].append(r)

    def live(self, iid):
        inst = self.st["instances"].get(iid)
        if inst is None:
            raise Denied("instance_unknown", f"no instance {iid}")
        if inst["state"] in TERMINAL:
            raise Denied("instance_terminal", f"{iid} is {inst['state']}")
        return inst

    def move(self, iid, state):
        inst = self.st["instances"].get(iid)
        if inst is None:
            raise Denied("instance_unknown")
        cur = inst["state"]
        allowed = cur == state or (cur not in TERMINAL and state != "preregistered"
                                   and not (cur == "preregistered" and state == "completed"))
        if not allowed:
            raise Denied("instance_terminal", f"{cur} -> {state}")
        if cur == state:
            return
        inst["state"] = state
        if state in TERMINAL:
            self.record({"closed": "close", "cancelled": "cancel", "failed": "fail"}[state],
                        child=iid, allowed=True)
        self.commit()

    # -------------------------------------------------------------- methods

    def configure(self, p):
        fresh = not self.st["instances"] and not self.st["records"]
        self.st["config"] = p
        if fresh or self.st["auto_approve"] is None:
            self.st["auto_approve"] = bool(p.get("auto_approve", False))
        self.commit()
        return {"outcome": "ok"}

    def start(self, p):
        if p.get("tools"):
            raise Denied("projection_missing", "no MCP support")
        ceiling = {"sandbox": norm_sandbox(p["sandbox"]),
                   "approval_policy": canonical_policy(p["approval_policy"]),
                   "tools": {}, "cwd": norm_path(p["cwd"]),
                   "provider": p.get("provider", "harness"),
                   "delegation_depth": p.get("delegation_depth", 2)}
        iid = self.fresh()
        self.st["instances"][iid] = {"id": iid, "state": "running", "role": p["role"],
                                     "model": p.get("model", "reference-model"), "ceiling": ceiling}
        self.record("start", child=iid, requested_role=p["role"], effective=ceiling, allowed=True,
                    created_instances_delta=1)
        self.commit()
        return {"outcome": "ok", "instance": iid, "effective": ceiling}

    def admit(self, parent, req):
        # PROTOCOL.md "Delegation, in order".
        pinst = self.live(parent)
        if req.get("target") not in (None, "local"):
            raise Denied("unsupported_target", "remote target")
        if req.get("worktree"):
            raise Denied("unsupported_target", "worktree")
        ceiling = pinst["ceiling"]
        if ceiling["delegation_depth"] == 0:
            raise Denied("policy_denied", "parent may not delegate")
        cap = dict(ceiling, delegation_depth=ceiling["delegation_depth"] - 1)
        authority = req.get("authority") or {}
        if authority.get("provider") not in (None, cap["provider"]):
            raise Denied("unsupported_target", "other provider")
        requested = resolve(cap, authority)
        axes = exceeding(requested, cap)
        if axes:
            raise Denied("ceiling_exceeded", f"exceeds on {axes}")
        role_default = self.st["config"].get("roles", {}).get(req["role"])
        role = meet(resolve(cap, role_default), cap) if role_default else cap
        effective = meet(requested, role)
        if self.st["config"].get("strict_mode") and effective["sandbox"] == "full-access":
            raise Denied("policy_denied", "strict mode")
        return effective

    def authorize(self, parent, req, effective):
        # ENDPOINTS.md "What to check, in this order".
        url = self.env.get("authorizer")
        if not url:
            raise Denied("authorizer_unavailable", "no authorizer")
        canonical_req = dict(req)
        canonical_req["authority"] = req.get("authority") or {}
        rdigest = digest(canonical_req)
        now = self.st["now"]
        deadline = now + 5000
        body = json.dumps({"version": "1", "parent": parent, "request": req, "request_digest": rdigest,
                           "now": now, "deadline": deadline}).encode()
        try:
            r = urllib.request.urlopen(urllib.request.Request(
                url.rstrip("/") + "/authorize", data=body,
                headers={"content-type": "application/json"}), timeout=1.5)
            text = r.read()
        except Exception as e:
            raise Denied("authorizer_unavailable", str(e))
        try:
            reply = json.loads(text)
        except Exception:
            raise Denied("authorizer_malformed", "not json")
        if not isinstance(reply, dict) or reply.get("version") != "1":
            raise Denied("authorizer_malformed", "version")
        if reply.get("decision") == "deny":
            raise Denied("authorizer_denied", str(reply.get("reason")))
        if reply.get("decision") != "allow":
            raise Denied("authorizer_malformed", "decision")
        rc = reply.get("receipt") or {}
        if not all(k in rc for k in ("id", "binding", "expires_at")):
            raise Denied("authorizer_malformed", "receipt")
        if rc["binding"] != rdigest:
            raise Denied("binding_mismatch", "binding")
        if not now < rc["expires_at"]:
            raise Denied("authorizer_replay", "expired")
        if rc["id"] in self.st["used_authz"]:
            raise Denied("authorizer_replay", "replayed")
        if "decided_at" not in reply:
            raise Denied("authorizer_malformed", "decided_at")
        if not reply["decided_at"] < deadline:
            raise Denied("authorizer_unavailable", "late")
        if reply.get("constraints") is not None:
            c = reply["constraints"]
            try:
                bound = dict(effective, delegation_depth=effective["delegation_depth"])
                narrowed = resolve(bound, c)
            except Denied:
                raise Denied("authorizer_malformed", "constraint")
            except Exception:
                raise Denied("authorizer_malformed", "constraint")
            if exceeding(narrowed, bound):
                raise Denied("authorizer_malformed", "widening constraint")
            effective = meet(narrowed, bound)
        return effective, rc["id"]

    def commitment(self, req):
        canonical_req = dict(req)
        canonical_req["authority"] = req.get("authority") or {}
        return digest(canonical_req)

    def seal(self, receipt):
        unsealed = dict(receipt, seal="")
        return "hmac:" + hmac.new(self.st["key"].encode(), canon(unsealed).encode(), "sha256").hexdigest()

    def prepare(self, p):
        parent, req = p["parent"], p["request"]
        try:
            effective = self.admit(parent, req)
        except Denied as d:
            self.record("prepare", parent=parent, requested_role=req.get("role"),
                        requested=req.get("authority") or {}, deny_reasons=[d.reason])
            self.commit()
            return {"outcome": "denied", "reason": d.reason, "detail": d.detail}
        self.st["next"] += 1
        now = self.st["now"]
        ttl = p.get("ttl_ms")
        if ttl is None:
            ttl = self.st["config"].get("receipt_ttl_ms", 60000)
        receipt = {"id": f"rcpt-{self.st['next']}", "parent": parent, "call_id": p["call_id"],
                   "commitment": self.commitment(req), "role": req["role"], "authority": effective,
                   "issued_at": now, "expires_at": now + ttl, "seal": ""}
        receipt["seal"] = self.seal(receipt)
        self.st["receipts"][receipt["id"]] = {"receipt": receipt, "state": "issued"}
        self.commit()
        return {"outcome": "ok", "receipt": receipt}

    def check_receipt(self, presented, parent, req):
        # PROTOCOL.md "Receipts, in order".
        rid = presented.get("id") if isinstance(presented, dict) else None
        if not isinstance(rid, str):
            raise Denied("receipt_missing")
        stored = self.st["receipts"].get(rid)
        if stored is None:
            raise Denied("receipt_missing")
        if presented != stored["receipt"]:
            raise Denied("binding_mismatch", "altered")
        if stored["state"] == "consumed":
            raise Denied("receipt_consumed")
        if stored["state"] in ("revoked", "expired"):
            raise Denied("receipt_expired")
        if not self.st["now"] < stored["receipt"]["expires_at"]:
            stored["state"] = "expired"
            self.commit()
            raise Denied("receipt_expired")
        if stored["receipt"]["parent"] != parent or stored["receipt"]["commitment"] != self.commitment(req):
            raise Denied("binding_mismatch", "bound elsewhere")
        self.live(parent)
        return stored["receipt"]["authority"], rid

    def revoke_receipt(self, rid):
        stored = self.st["receipts"].get(rid)
        if stored is None:
            raise Denied("receipt_missing")
        if stored["state"] != "issued":
            raise Denied("receipt_consumed")
        stored["state"] = "revoked"
        self.commit()
        return {"outcome": "ok"}

    def set_clock(self, now):
        self.st["now"] = now
        for r in self.st["receipts"].values():
            if r["state"] == "issued" and now >= r["receipt"]["expires_at"]:
                r["state"] = "expired"
        self.commit()
        return {"outcome": "ok"}

    def delegate(self, parent, req, presented=None):
        transition = "delegate" if presented is None else "consume"
        rid = None
        try:
            if presented is None:
                effective = self.admit(parent, req)
            else:
                effective, rid = self.check_receipt(presented, parent, req)
            authz = None
            if self.st["config"].get("authorizer_required"):
                effective, authz = self.authorize(parent, req, effective)
        except Denied as d:
            self.record(transition, parent=parent, requested_role=req.get("role"),
                        requested=req.get("authority") or {}, deny_reasons=[d.reason])
            self.commit()
            return {"outcome": "denied", "reason": d.reason, "detail": d.detail}
        cid = self.fresh()
        self.st["instances"][cid] = {"id": cid, "parent": parent, "state": "running",
                                     "role": req["role"], "model": req.get("model") or "reference-model",
                                     "requested": req.get("authority") or {}, "ceiling": effective,
                                     "risk": self.st["instances"][parent].get("risk")}
        rec = dict(parent=parent, child=cid, requested_role=req["role"],
                   requested=req.get("authority") or {}, effective=effective, allowed=True,
                   created_instances_delta=1)
        if authz:
            rec["decided_by"] = "external"
            self.st["used_authz"].append(authz)
        if rid:
            rec["receipt_ids"] = [rid]
            self.st["receipts"][rid]["state"] = "consumed"
        self.record(transition, **rec)
        self.commit()
        first = self.turn(cid, req["task"])
        out = {"outcome": "ok", "instance": cid, "effective": effective}
        if "turn" in first:
            out["turn"] = first["turn"]
        return out

    def turn(self, iid, text):
        self.live(iid)
        self.move(iid, "running")
        inst = self.st["instances"][iid]
        body = json.dumps({"instance": iid, "role": inst["role"], "input": text, "tools": []}).encode()
        url = self.env["model_endpoint"].rstrip("/") + "/neutral/turn"
        try:
            r = urllib.request.urlopen(urllib.request.Request(
                url, data=body, headers={"content-type": "application/json",
                                         "x-delegation-instance": iid}), timeout=10)
            reply = json.loads(r.read())["reply"]
        except Exception as e:
            self.move(iid, "failed")
            return {"outcome": "ok", "instance": iid, "turn": {"reply": "model_failed", "detail": str(e)}}
        out = {"outcome": "ok", "instance": iid}
        if "message" in reply:
            out["turn"] = {"reply": "message", "text": reply["message"].get("text", "")}
        elif "tool_call" in reply:
            tool = reply["tool_call"].get("tool", "")
            out["turn"] = {"reply": "tool_call", "tool": tool}
            out["tool_call"] = {"tool": tool, "outcome": "denied", "reason": "capability_denied"}
        elif "spawn" in reply:
            out["turn"] = {"reply": "spawn", "spawn": self.delegate(iid, reply["spawn"])}
        elif "lifecycle" in reply:
            call = reply["lifecycle"]
            out["turn"] = {"reply": "lifecycle", "op": call["op"], "target": call["target"],
                           "lifecycle": self.lifecycle(call)}
        else:
            out["turn"] = {"reply": "model_failed", "detail": "not understood"}
        if self.st["instances"][iid]["state"] == "running":
            self.move(iid, "completed")
        return out

    def lifecycle(self, call):
        t, op = call["target"], call["op"]
        try:
            if op == "send_input":
                return self.turn(t, call.get("message", ""))
            if op == "resume":
                r = self.resume(t)
                if call.get("message") is not None:
                    return self.turn(t, call["message"])
                return r
            if op == "close":
                return self.end(t, "closed")
            if op == "wait":
                return self.wait(t, self.st["now"])
        except Denied as d:
            return {"outcome": "denied", "reason": d.reason}
        return {"outcome": "denied", "reason": "policy_denied"}

    def end(self, iid, state):
        self.live(iid)
        self.move(iid, state)
        return {"outcome": "ok", "instance": iid}

    def resume(self, iid):
        inst = self.live(iid)
        self.move(iid, "running")
        return {"outcome": "ok", "instance": iid, "effective": inst["ceiling"]}

    def wait(self, iid, deadline):
        inst = self.st["instances"].get(iid)
        if inst is None:
            raise Denied("instance_unknown")
        if inst["state"] != "running":
            return {"outcome": "ok", "instance": iid, "woke": "event"}
        if self.st["now"] >= deadline:
            return {"outcome": "ok", "instance": iid, "woke": "deadline"}
        return {"outcome": "ok", "instance": iid}

    def observe(self):
        insts = []
        for i in self.st["instances"].values():
            o = {k: i[k] for k in ("id", "state", "role", "model", "ceiling")}
            for k in ("parent", "requested", "risk"):
                if i.get(k) is not None:
                    o[k] = i[k]
            insts.append(o)
        return {"outcome": "ok", "observed": {"now": self.st["now"], "auto_approve": bool(self.st["auto_approve"]),
                                              "instances": insts, "records": self.st["records"],
                                              "receipts": [{"id": r["receipt"]["id"], "parent": r["receipt"]["parent"],
                                                            "state": r["state"]} for r in self.st["receipts"].values()]}}

    def call(self, method, p):
        if method == "host/configure":
            return self.configure(p)
        if method == "instance/start":
            return self.start(p)
        if method == "instance/delegate":
            return self.delegate(p["parent"], p["request"])
        if method == "instance/turn":
            return self.turn(p["instance"], p["input"])
        if method in ("instance/close", "instance/cancel", "instance/fail"):
            return self.end(p["instance"], {"instance/close": "closed", "instance/cancel": "cancelled",
                                            "instance/fail": "failed"}[method])
        if method == "instance/resume":
            return self.resume(p["instance"])
        if method == "state/observe":
            return self.observe()
        if method == "receipt/prepare":
            return self.prepare(p)
        if method == "receipt/consume":
            return self.delegate(p["parent"], p["request"], p["receipt"])
        if method == "receipt/revoke":
            return self.revoke_receipt(p["receipt"])
        if method == "clock/set":
            return self.set_clock(p["now"])
        return None


def main():
    host = Host()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        rid, method, params = req["id"], req["method"], req.get("params") or {}
        if method == "initialize":
            host.env = params["environment"]
            host.load(host.env["store_dir"])
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "host": {"name": "docs-only", "version": "0"}, "protocol_version": "1.0",
                "capabilities": CAPS}})
            continue
        try:
            result = host.call(method, params)
        except Denied as d:
            result = {"outcome": "denied", "reason": d.reason, "detail": d.detail}
        except Exception as e:  # a bug here: say so, never guess
            log(f"{method}: {e!r}")
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": repr(e)}})
            continue
        if result is None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "result": result})


if __name__ == "__main__":
    main()
