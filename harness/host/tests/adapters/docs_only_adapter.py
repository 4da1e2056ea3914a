#!/usr/bin/env python3
"""A host written from the documents alone (PROTOCOL.md, ENDPOINTS.md, MODEL.md), never from harness source.

Python standard library only. It declares every capability but the
authority-widening ones and `reusable-agents`, and does what the documents'
tables say: delegation and its checks, receipts, the external authorizer,
an MCP client (streamable HTTP, the standalone SSE stream for
`tools/list_changed`), eligibility and approvals (manual, automatic,
exact-call grants, the reviewer's risk), task capabilities, waits, events,
fault points and restarts (a JSON store replaced atomically on every
commit; a failed write reloads it, so nothing uncommitted survives). If a
document leaves out something the catalogue checks, this adapter fails
that scenario: that is what it is for.
"""
import hashlib
import hmac
import json
import os
import sys
import threading
import urllib.error
import urllib.request

CAPS = ["restart", "nested-delegation", "external-authorizer", "spawn-authority", "receipts", "clock",
        "model-lifecycle-tools", "model-close-tools", "mcp", "direct-tool-calls", "fork", "exact-call-grants", "wait", "events", "auto-approval", "reviewer",
        "task-capabilities", "fault-injection"]
FULL_REVIEW = {"elevated", "stale", "high"}
LISTS_TOOLS = {"instance/start", "instance/delegate", "receipt/prepare", "receipt/consume", "instance/turn",
               "instance/tool_call", "approval/answer", "capability/call"}
CLASSES = ["read", "file-write", "shell", "network", "mcp", "generic", "delegation"]
TERMINAL = {"closed", "cancelled", "failed"}
WI = "store.write_instance"


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def canon_number(x):
    # RFC 8785 writes numbers as ECMAScript does: 10.0 and 1e1 are both "10".
    if isinstance(x, int):
        return str(x)
    if x == int(x) and abs(x) < 1e21:
        return str(int(x))
    text = repr(x)
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{'+' if int(exponent) > 0 else '-'}{abs(int(exponent))}"
    return text


def canon(v):
    # RFC 8785: keys sorted, no whitespace, strings as json writes them
    # without ASCII escaping, numbers in their ECMAScript form.
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canon(v[k])
                              for k in sorted(v, key=lambda k: k.encode("utf-16-be"))) + "}"
    if isinstance(v, list):
        return "[" + ",".join(canon(x) for x in v) + "]"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return canon_number(v)
    return json.dumps(v, ensure_ascii=False)


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


# -------------------------------------------------------------------- MCP

class Mcp:
    """A streamable-HTTP MCP client (ENDPOINTS.md, "The MCP tool server")."""

    def __init__(self, url):
        self.url = url
        self.session = None
        self.version = None
        self.next_id = 0
        self.changed = False
        self.lock = threading.Lock()
        result = self.request("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                             "clientInfo": {"name": "docs-only", "version": "0"}})
        self.version = result.get("protocolVersion")
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        threading.Thread(target=self.listen, daemon=True).start()

    def headers(self):
        h = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if self.session:
            h["mcp-session-id"] = self.session
        if self.version:
            h["mcp-protocol-version"] = self.version
        return h

    def post(self, message):
        r = urllib.request.urlopen(urllib.request.Request(
            self.url, data=json.dumps(message).encode(), headers=self.headers()), timeout=10)
        if r.headers.get("mcp-session-id"):
            self.session = r.headers["mcp-session-id"]
        body = r.read().decode()
        if "text/event-stream" in (r.headers.get("content-type") or ""):
            for line in body.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    msg = json.loads(line[5:])
                    if "id" in msg and msg.get("id") == message.get("id"):
                        return msg
            return None
        return json.loads(body) if body.strip() else None

    def request(self, method, params):
        with self.lock:
            self.next_id += 1
            rid = self.next_id
        answer = self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if answer is None or "error" in answer:
            raise RuntimeError(f"MCP {method}: {answer}")
        return answer["result"]

    def listen(self):
        # The standalone SSE stream: where tools/list_changed arrives.
        try:
            h = self.headers()
            h["accept"] = "text/event-stream"
            r = urllib.request.urlopen(urllib.request.Request(self.url, headers=h, method="GET"))
            for raw in r:
                line = raw.decode().strip()
                if line.startswith("data:") and "notifications/tools/list_changed" in line:
                    self.changed = True
                    try:
                        self.list_tools()  # MCP clients re-list on the announcement.
                    except Exception as e:
                        log(f"re-list: {e!r}")
        except Exception as e:
            log(f"SSE stream ended: {e!r}")

    def list_tools(self):
        return self.request("tools/list", {}).get("tools", [])

    def call(self, name, arguments):
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        return "".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))


def tool_class(definition):
    cls = (definition.get("annotations") or {}).get("x-delegation-class")
    return cls if cls in CLASSES else "mcp"


def eligibility(policy, sandbox, cls):
    # PROTOCOL.md "Eligibility of a tool call".
    kind = sb_kind(sandbox)
    if kind == "read-only" and cls in ("shell", "file-write", "generic"):
        return ("denied", "read_only_context")
    if cls == "network" and (kind == "read-only" or (
            kind == "workspace-write" and not sandbox["workspace-write"]["network"])):
        return ("denied", "policy_denied")
    v = verdict(policy, cls)
    return {"run": ("runs", None), "ask": ("ask", None), "deny": ("denied", "policy_denied")}[v]


# ------------------------------------------------------------------- host

class Host:
    def __init__(self):
        self.env = None
        self.st = None
        self.path = None
        self.mcp = []
        self.grants = {}
        self.faults = {}

    def load(self, store_dir):
        os.makedirs(store_dir, exist_ok=True)
        self.path = os.path.join(store_dir, "state.json")
        if os.path.exists(self.path):
            with open(self.path) as f:
                self.st = json.load(f)
        else:
            self.st = {"now": 0, "config": {}, "auto_approve": None, "instances": {}, "records": [],
                       "next": 0, "used_authz": [], "events": [], "receipts": {},
                       "key": hashlib.sha256(os.urandom(32)).hexdigest(), "approvals": {}, "capabilities": {}, "outcomes": {}}

    def take_fault(self, point):
        if point not in self.faults:
            return False
        left = self.faults[point]
        if left is not None:
            left -= 1
            if left <= 0:
                del self.faults[point]
            else:
                self.faults[point] = left
        return True

    def rollback(self):
        # The store is the truth: what was not committed is forgotten.
        if os.path.exists(self.path):
            with open(self.path) as f:
                self.st = json.load(f)

    def commit(self, points=()):
        for point in points:
            if self.take_fault(point):
                self.rollback()
                raise Denied("store_write_failed", f"store write failed (fault {point})")
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.st, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def live_tools(self):
        tools = {}
        for client in self.mcp:
            for t in client.list_tools():
                tools[t["name"]] = t
        return tools

    def take_list_changed(self):
        changed = False
        for client in self.mcp:
            if client.changed:
                client.changed = False
                changed = True
        if changed:
            touched = False
            for inst in self.st["instances"].values():
                if inst["state"] not in TERMINAL and inst["ceiling"]["tools"] and not inst.get("invalidated"):
                    inst["invalidated"] = True
                    touched = True
            if touched:
                try:
                    self.commit([WI])
                except Denied:
                    self.mcp[0].changed = True  # still to be taken in
                    raise

    def check_sealed(self, inst, names, live):
        if inst.get("invalidated") and names:
            raise Denied("tool_list_changed", "the tool list changed after the seal")
        for n in names:
            if n not in inst["ceiling"]["tools"]:
                raise Denied("ceiling_exceeded", f"{n} not sealed")
            if n not in live or digest(live[n]) != inst["ceiling"]["tools"][n]:
                raise Denied("tool_drift", f"{n} changed or removed")

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
        if state in TERMINAL or state == "completed":
            self.grants = {g: v for g, v in self.grants.items() if v["instance"] != iid}
        if state in TERMINAL:
            self.record({"closed": "close", "cancelled": "cancel", "failed": "fail"}[state],
                        child=iid, allowed=True)
        self.commit([WI])

    # -------------------------------------------------------------- methods

    def configure(self, p):
        fresh = not self.st["instances"] and not self.st["records"]
        self.st["config"] = p
        if fresh or self.st["auto_approve"] is None:
            self.st["auto_approve"] = bool(p.get("auto_approve", False))
        self.commit()
        return {"outcome": "ok"}

    def start(self, p):
        cwd = norm_path(p["cwd"])
        live = self.live_tools() if p.get("tools") else {}
        sealed = {}
        for n in p.get("tools", []):
            if n not in live:
                raise Denied("projection_missing", f"{n} is not served")
            sealed[n] = digest(live[n])
        ceiling = {"sandbox": norm_sandbox(p["sandbox"]),
                   "approval_policy": canonical_policy(p["approval_policy"]),
                   "tools": sealed, "cwd": cwd,
                   "provider": p.get("provider", "harness"),
                   "delegation_depth": p.get("delegation_depth", 2)}
        iid = self.fresh()
        self.st["instances"][iid] = {"id": iid, "state": "running", "role": p["role"],
                                     "model": p.get("model", "reference-model"), "ceiling": ceiling}
        self.record("start", child=iid, requested_role=p["role"], effective=ceiling, allowed=True,
                    created_instances_delta=1)
        self.commit([WI])
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
        # Steps 11 and 12: the child's tools and every tool the request names.
        names = list(effective["tools"]) + [n for n in authority.get("tools") or []
                                            if n not in effective["tools"]]
        if names:
            self.check_sealed(pinst, names, self.live_tools())
        return effective

    def authorize(self, parent, req, effective):
        # ENDPOINTS.md "What to check, in this order".
        url = self.env.get("authorizer")
        if self.take_fault("authorizer.call"):
            raise Denied("authorizer_unavailable", "fault armed")
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
        pinst = self.live(parent)
        # Steps 9 and 10: the receipt's sealed tools and every tool the request names.
        sealed = stored["receipt"]["authority"]["tools"]
        names = list(sealed) + [n for n in (req.get("authority") or {}).get("tools") or []
                                if n not in sealed]
        if names:
            self.check_sealed(pinst, names, self.live_tools())
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
        try:
            self.commit([WI])
        except Denied as d:
            self.record(transition, parent=parent, requested_role=req.get("role"),
                        requested=req.get("authority") or {}, deny_reasons=[d.reason])
            self.commit()
            return {"outcome": "denied", "reason": d.reason, "detail": d.detail}
        first = self.turn(cid, req["task"])
        out = {"outcome": "ok", "instance": cid, "effective": effective}
        if "turn" in first:
            out["turn"] = first["turn"]
        return out

    def turn(self, iid, text):
        self.live(iid)
        if self.take_fault("model.call"):
            self.move(iid, "failed")
            raise Denied("store_write_failed", "model call failed (fault armed)")
        self.move(iid, "running")
        inst = self.st["instances"][iid]
        live = self.live_tools() if self.mcp else {}
        shown = [] if inst.get("invalidated") else [
            live[n] for n, d in inst["ceiling"]["tools"].items() if n in live and digest(live[n]) == d]
        body = json.dumps({"instance": iid, "role": inst["role"], "input": text, "tools": shown}).encode()
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
            out["tool_call"] = self.tool_call(iid, tool, reply["tool_call"].get("arguments") or {})["tool_call"]
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

    def tool_call(self, iid, tool, arguments):
        # PROTOCOL.md "Tool calls, in order".
        try:
            inst = self.live(iid)
            if tool not in inst["ceiling"]["tools"]:
                raise Denied("capability_denied", f"{tool} is not sealed")
            live = self.live_tools()
            self.check_sealed(inst, [tool], live)
            cls = tool_class(live[tool])
            kind, reason = eligibility(inst["ceiling"]["approval_policy"], inst["ceiling"]["sandbox"], cls)
            if kind == "denied":
                raise Denied(reason, f"{cls} is not allowed here")
            if kind == "runs":
                return self.run(tool, arguments, None)
            adigest = digest(arguments)
            sealed = inst["ceiling"]["tools"][tool]
            for g in self.grants.values():
                if g["instance"] == iid and g["tool"] == tool and g["tool_digest"] == sealed \
                        and g["arguments_digest"] == adigest:
                    return self.run(tool, arguments, None)
            self.st["next"] += 1
            aid = f"appr-{self.st['next']}"
            self.st["approvals"][aid] = {"approval": {
                "id": aid, "instance": iid, "class": cls, "tool": tool, "tool_digest": sealed,
                "arguments_digest": adigest, "state": "pending"}, "arguments": arguments}
            self.commit(["store.write_approval_request"])
            pending = {"outcome": "ok", "tool_call": {"tool": tool, "outcome": "pending_approval", "approval": aid}}
            if not self.st["auto_approve"]:
                return pending
            if inst.get("risk") in FULL_REVIEW:
                self.record("strict_review_required", child=iid, approval=aid)
                self.commit()
                return pending
            a = self.st["approvals"][aid]["approval"]
            a.update(state="decided", decision="allow", decided_by="policy")
            self.record("approval", child=iid, approval=aid, allowed=True, decided_by="policy")
            self.commit(["store.write_decision"])
            if self.take_fault("crash.after_decision_commit"):
                os._exit(1)
            a["state"] = "dispatched"
            self.commit()
            return self.run(tool, arguments, aid)
        except Denied as d:
            return {"outcome": "denied", "reason": d.reason, "detail": d.detail,
                    "tool_call": {"tool": tool, "outcome": "denied", "reason": d.reason}}

    def run(self, tool, arguments, approval):
        report = {"tool": tool, "outcome": "executed"}
        if approval:
            report["approval"] = approval
        out = {"outcome": "ok", "tool_call": report}
        try:
            report["result"] = self.mcp_call(tool, arguments)
        except Exception as e:
            out["detail"] = f"handler failed: {e}"
        return out

    def mcp_call(self, tool, arguments):
        for client in self.mcp:
            return client.call(tool, arguments)
        raise RuntimeError("no MCP server")

    def answer(self, aid, decision):
        entry = self.st["approvals"].get(aid)
        if entry is None:
            return {"outcome": "denied", "reason": "instance_unknown"}
        a = entry["approval"]
        tool = a["tool"]
        try:
            if a["state"] != "pending":
                raise Denied("event_replayed", "already answered")
            inst = self.live(a["instance"])
            a.update(state="decided", decision=decision, decided_by="person")
            self.record("approval", child=a["instance"], approval=aid,
                        allowed=decision in ("allow", "allow-exact"), decided_by="person")
            self.commit(["store.write_decision"])
            if decision == "deny":
                raise Denied("policy_denied", "a person denied the call")
            self.check_sealed(inst, [tool], self.live_tools())
            if decision == "allow-exact" and inst["state"] == "running":
                self.st["next"] += 1
                gid = f"grant-{self.st['next']}"
                self.grants[gid] = {"id": gid, "instance": a["instance"], "tool": tool,
                                    "tool_digest": a["tool_digest"], "arguments_digest": a["arguments_digest"]}
            if self.take_fault("crash.after_decision_commit"):
                os._exit(1)
            a["state"] = "dispatched"
            self.commit()
            return self.run(tool, entry["arguments"], aid)
        except Denied as d:
            return {"outcome": "denied", "reason": d.reason, "detail": d.detail,
                    "tool_call": {"tool": tool, "outcome": "denied", "reason": d.reason}}

    def deliver(self, p):
        event, iid, kind = p["event"], p["instance"], p["kind"]
        if event in self.st["events"]:
            raise Denied("event_replayed", "already delivered")
        if kind not in ("completed", "failed", "cancelled", "closed"):
            raise Denied("policy_denied", f"unknown event kind {kind}")
        if self.take_fault("event.deliver"):
            raise Denied("store_write_failed", "event delivery failed (fault armed)")
        self.st["events"].append(event)
        self.commit()
        self.move(iid, kind)
        return {"outcome": "ok", "instance": iid}

    def score(self, iid, risk):
        inst = self.live(iid)
        inst["risk"] = risk
        self.commit([WI])
        return {"outcome": "ok", "instance": iid}

    def issue(self, p):
        inst = self.live(p["agent"])
        for t in p["tools"]:
            if t not in inst["ceiling"]["tools"]:
                raise Denied("ceiling_exceeded", f"{t} is not in the agent's ceiling")
        self.st["next"] += 1
        cid = f"cap-{self.st['next']}"
        secret = p.get("secret") or hashlib.sha256(os.urandom(32)).hexdigest()
        self.st["capabilities"][cid] = {"capability": {
            "id": cid, "task": p["task"], "agent": p["agent"], "tools": p["tools"],
            "expires_at": p["expires_at"], "revoked": False},
            "secret_digest": hashlib.sha256(secret.encode()).hexdigest()}
        self.commit()
        token = {"id": cid}
        if not p.get("secret"):
            token["secret"] = secret
        return {"outcome": "ok", "capability": token}

    def cap_call(self, p):
        # PROTOCOL.md "Task capabilities".
        tool = p["tool"]
        try:
            d = hashlib.sha256(p["secret"].encode()).hexdigest()
            cap = next((c for c in self.st["capabilities"].values() if c["secret_digest"] == d), None)
            if cap is None:
                raise Denied("capability_denied", "unknown secret")
            c = cap["capability"]
            if c["task"] != p["task"] or c["agent"] != p["agent"]:
                raise Denied("capability_denied", "bound to another task or agent")
            if c["revoked"]:
                raise Denied("capability_denied", "revoked")
            if not self.st["now"] < c["expires_at"]:
                raise Denied("capability_denied", "expired")
            if tool not in c["tools"]:
                raise Denied("capability_denied", "not on the allowlist")
            key = f"{c['id']}/{p['call_id']}" if p.get("call_id") else None
            if key and key in self.st["outcomes"]:
                raise Denied("event_replayed", "already completed: " + self.st["outcomes"][key])
            inst = self.live(p["agent"])
            live = self.live_tools()
            self.check_sealed(inst, [tool], live)
            pol = inst["ceiling"]["approval_policy"]
            bounded = all(verdict(pol, x) != "ask" for x in CLASSES) and any(
                verdict(pol, x) == "deny" for x in CLASSES)
            if bounded and tool_class(live[tool]) != "delegation":
                raise Denied("capability_denied", "bounded credentials reach only delegation tools")
        except Denied as e:
            return {"outcome": "denied", "reason": e.reason, "detail": e.detail,
                    "tool_call": {"tool": tool, "outcome": "denied", "reason": e.reason}}
        out = self.run(tool, p.get("arguments") or {}, None)
        if key and out["tool_call"].get("outcome") == "executed":
            self.st["outcomes"][key] = out["tool_call"].get("result", "")
            self.commit()
            if self.take_fault("event.deliver"):
                out["detail"] = "event delivery failed; the outcome is kept"
        return out

    def revoke_cap(self, cid):
        c = self.st["capabilities"].get(cid)
        if c is None:
            raise Denied("capability_denied", "no such capability")
        c["capability"]["revoked"] = True
        self.commit()
        return {"outcome": "ok"}

    def fork(self, iid):
        src = self.live(iid)
        fid = self.fresh()
        fork = dict(json.loads(json.dumps(src)), id=fid, state="running")
        self.st["instances"][fid] = fork
        self.record("fork", parent=src.get("parent"), child=fid, effective=fork["ceiling"], allowed=True,
                    created_instances_delta=1)
        self.commit([WI])
        return {"outcome": "ok", "instance": fid, "effective": fork["ceiling"]}

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
                                              "approvals": [e["approval"] for e in self.st["approvals"].values()],
                                              "grants": list(self.grants.values()),
                                              "capabilities": [c["capability"] for c in self.st["capabilities"].values()],
                                              "instances": insts, "records": self.st["records"],
                                              "receipts": [{"id": r["receipt"]["id"], "parent": r["receipt"]["parent"],
                                                            "state": r["state"]} for r in self.st["receipts"].values()]}}

    def call(self, method, p):
        if method in LISTS_TOOLS:
            self.take_list_changed()
        if method == "instance/tool_call":
            return self.tool_call(p["instance"], p["tool"], p.get("arguments") or {})
        if method == "approval/answer":
            return self.answer(p["request"], p["decision"])
        if method == "instance/fork":
            return self.fork(p["instance"])
        if method == "instance/wait":
            return self.wait(p["instance"], p["deadline"])
        if method == "event/deliver":
            return self.deliver(p)
        if method == "approval/auto":
            self.st["auto_approve"] = bool(p["enabled"])
            self.commit()
            return {"outcome": "ok"}
        if method == "review/score":
            return self.score(p["instance"], p["risk"])
        if method == "capability/issue":
            return self.issue(p)
        if method == "capability/call":
            return self.cap_call(p)
        if method == "capability/revoke":
            return self.revoke_cap(p["capability"])
        if method == "fault/arm":
            if p.get("times") == 0:
                self.faults.pop(p["point"], None)
            else:
                self.faults[p["point"]] = p.get("times")
            return {"outcome": "ok"}
        if method == "fault/clear":
            self.faults.pop(p["point"], None)
            return {"outcome": "ok"}
        if method == "grant/revoke":
            if self.grants.pop(p["grant"], None) is None:
                raise Denied("capability_denied", "no such grant")
            return {"outcome": "ok"}
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
            # An observation takes it in too, but is never refused: a failed
            # write leaves the list_changed pending (PROTOCOL.md, the tables).
            try:
                self.take_list_changed()
            except Denied:
                pass
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
            host.mcp = [Mcp(server["url"]) for server in host.env.get("mcp_servers", [])]
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
