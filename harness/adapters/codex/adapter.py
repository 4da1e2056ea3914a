#!/usr/bin/env python3
"""Host protocol v1 adapter for codex (`codex app-server`), Python 3 standard library only.

Reads protocol v1 requests (JSON-RPC 2.0, one per line) on stdin and drives a
pinned codex (0.171.0) through its app-server stdio protocol. codex is
isolated in the store directory (CODEX_HOME with its own config.toml) and
talks to the harness's model endpoint through a small loopback relay that
only adds the `x-delegation-instance` / `x-delegation-role` headers, derived
from the `thread-id` header codex itself sends; request bodies pass unchanged,
so the endpoint still counts every request, and in the answers only a scripted
call to an MCP tool codex offered is renamed to codex's namespaced name and the
instance ids in a scripted multi-agent lifecycle call become codex's agent ids.

See README.md beside this file for the mapping, what is unsupported and why,
and the findings.
"""
import http.client
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

CODEX_VERSION = "0.171.0"
PACKAGE = "@openai/codex@" + CODEX_VERSION
BINARY_SUFFIX = "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
STATE_FILE = "codex-adapter-state.json"
TURN_DEADLINE_S = float(os.environ.get("CODEX_ADAPTER_TURN_DEADLINE_S", "22"))
SETTLE_S = float(os.environ.get("CODEX_ADAPTER_SETTLE_S", "0.3"))
MCP_STARTUP_S = float(os.environ.get("CODEX_ADAPTER_MCP_STARTUP_S", "5"))
# The app-server call behind instance/close: thread/delete (terminal); thread/archive only to
# reproduce what an archived thread allows (README, Findings 5: tr/057 with thread/archive).
CLOSE_METHOD = os.environ.get("CODEX_ADAPTER_CLOSE_METHOD", "thread/delete")

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL = -32603
UNSUPPORTED_OPTION = -32001
HOST_FAILURE = -32002
NOT_INITIALIZED = -32003
BAD_VERSION = -32004

TERMINAL = ("closed", "cancelled", "failed")
# What observe reports for an instance codex said nothing about yet (always marked inferred).
DEFAULT_CEILING = {"sandbox": "read-only", "approval_policy": "never", "tools": {}, "cwd": "/",
                   "provider": "harness", "delegation_depth": 0}
MULTI_AGENT_TOOLS = ("spawn_agent", "send_input", "wait_agent", "close_agent", "resume_agent")
# codex's collabAgentToolCall tools that act on an existing child, as protocol lifecycle ops,
# and the multi_agent_v1 tools the model calls for them
LIFECYCLE_OPS = {"sendInput": "send_input", "resumeAgent": "resume", "closeAgent": "close", "wait": "wait"}
LIFECYCLE_TOOL_OPS = {"send_input": "send_input", "resume_agent": "resume", "close_agent": "close",
                      "wait_agent": "wait"}

# What codex 0.171.0 has (README, Mapping). The model-side lifecycle tools are codex's
# multi_agent_v1 send_input, resume_agent, close_agent and wait_agent, reached by the endpoint's
# scripted calls once the relay names the child by codex's agent id. `reusable-agents` is a
# property of v1, not a feature: codex's close_agent shuts an agent down and resume_agent
# exists to reopen it ("Resume a previously closed agent by id so it can receive send_input
# and wait_agent calls", codex's own tool description), so a child its model closed may be
# reopened by design (README, Mapping, "Lifecycle tools").
CAPABILITIES = ["nested-delegation", "mcp", "restart", "fork", "direct-tool-calls",
                "model-lifecycle-tools", "model-close-tools", "reusable-agents"]
# CODEX_ADAPTER_REUSABLE_AGENTS=0 leaves `reusable-agents` undeclared, only to reproduce with
# the harness's own observers what v1's design does (README, Findings 5: tr/058 then runs and
# the endpoint counts the reopened child's request); a conformance run declares it.
if os.environ.get("CODEX_ADAPTER_REUSABLE_AGENTS", "1") == "0":
    CAPABILITIES.remove("reusable-agents")

# Methods of protocol v1 codex has no counterpart for: -32601 (unsupported), see README.
UNSUPPORTED_METHODS = {
    "instance/delegate": "codex has no client-facing delegation; children are created only by the model's spawn_agent call inside a turn",
    "receipt/prepare": "codex has no delegation receipts",
    "receipt/consume": "codex has no delegation receipts",
    "receipt/revoke": "codex has no delegation receipts",
    "instance/cancel": "codex has no cancelled state for an idle thread (turn/interrupt only stops a running turn)",
    "instance/fail": "codex has no way to mark a thread failed from outside",
    "instance/wait": "app-server has no wait on a thread; wait_agent is a model tool",
    "event/deliver": "codex has no host events addressed by the client",
    "approval/auto": "codex's automatic review (approvals_reviewer=auto_review) is a model-driven guardian, not a policy switch",
    "grant/revoke": "codex has session-wide approvals (acceptForSession), not exact-call grants",
    "capability/issue": "codex has no task capabilities",
    "capability/call": "codex has no task capabilities",
    "capability/revoke": "codex has no task capabilities",
    "clock/set": "codex reads the system clock; it cannot run on the harness's clock",
    "fault/arm": "codex has no fault injection points",
    "fault/clear": "codex has no fault injection points",
}


def log(message):
    sys.stderr.write("[codex-adapter] %s\n" % message)
    sys.stderr.flush()


class ProtocolError(Exception):
    def __init__(self, code, message):
        Exception.__init__(self, message)
        self.code = code
        self.message = message


# ---------------------------------------------------------------- install


def cache_dir():
    base = os.environ.get("CODEX_ADAPTER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "delegation-harness")
    return os.path.join(base, "codex-" + CODEX_VERSION)


def find_binary(prefix):
    candidate = os.path.join(prefix, BINARY_SUFFIX)
    if os.access(candidate, os.X_OK):
        return candidate
    for root, _dirs, files in os.walk(os.path.join(prefix, "node_modules")):
        if "codex" in files and os.sep + "bin" in root and "vendor" in root:
            path = os.path.join(root, "codex")
            if os.access(path, os.X_OK):
                return path
    return None


def ensure_codex():
    """The pinned codex binary, installed into the cache on first use."""
    explicit = os.environ.get("CODEX_ADAPTER_BINARY")
    if explicit:
        return explicit
    prefix = cache_dir()
    found = find_binary(prefix)
    if found:
        return found
    os.makedirs(prefix, exist_ok=True)
    log("installing %s into %s" % (PACKAGE, prefix))
    done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", prefix, PACKAGE],
                          stdout=sys.stderr, stderr=sys.stderr)
    found = find_binary(prefix)
    if done.returncode != 0 or not found:
        raise ProtocolError(HOST_FAILURE, "could not install %s into %s" % (PACKAGE, prefix))
    return found


# ---------------------------------------------------------------- state


class State:
    """The adapter's bookkeeping, committed to store_dir after every change.

    It maps protocol instance ids to codex thread ids and keeps what codex has
    no word for (the role and sealed authority the harness asked for). codex
    keeps the threads themselves (rollouts in CODEX_HOME, also in store_dir).
    """

    def __init__(self, store_dir):
        self.path = os.path.join(store_dir, STATE_FILE)
        self.lock = threading.RLock()
        self.next_instance = 1
        self.next_approval = 1
        self.instances = {}  # id -> dict(id, thread, parent, state, role, model, ceiling, requested, policy)
        self.by_thread = {}
        self.approvals = {}  # id -> dict (persisted part)
        self.spawn_asked = {}  # thread -> model answers carrying a spawn_agent call (seen by the relay)
        self.refused_calls = {}  # thread -> {call_id: tool name} codex answered "unsupported call" (seen by the relay)
        self.lifecycle_calls = {}  # thread -> {call_id: (codex tool, scripted id)} lifecycle calls the relay passed to codex
        self.lifecycle_outputs = {}  # thread -> {call_id: codex's output to the model for that call} (seen by the relay)
        if os.path.exists(self.path):
            with open(self.path) as f:
                data = json.load(f)
            self.next_instance = data["next_instance"]
            self.next_approval = data["next_approval"]
            self.instances = data["instances"]
            self.approvals = data["approvals"]
            for inst in self.instances.values():
                if inst.get("thread"):
                    self.by_thread[inst["thread"]] = inst["id"]
                if inst["state"] == "running":
                    # the turn died with the previous process; codex keeps the thread idle
                    inst["state"] = "completed"

    def commit(self):
        with self.lock:
            data = {"next_instance": self.next_instance, "next_approval": self.next_approval,
                    "instances": self.instances, "approvals": self.approvals}
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)

    def new_instance(self, thread, **fields):
        with self.lock:
            iid = "i-%d" % self.next_instance
            self.next_instance += 1
            inst = {"id": iid, "thread": thread, "parent": None, "state": "completed",
                    "role": "worker", "model": "reference-model", "ceiling": None,
                    "requested": None}
            inst.update(fields)
            self.instances[iid] = inst
            if thread:
                self.by_thread[thread] = iid
            self.commit()
            return inst

    def instance_for_thread(self, thread, parent_thread=None, role=None):
        """The instance of a codex thread, created on first sight (a child the relay saw first)."""
        with self.lock:
            iid = self.by_thread.get(thread)
            if iid:
                inst = self.instances[iid]
                if parent_thread and not inst.get("parent"):
                    parent = self.by_thread.get(parent_thread)
                    if parent:
                        inst["parent"] = parent
                        self._inherit(inst, self.instances[parent])
                        self.commit()
                return inst
            parent = self.by_thread.get(parent_thread) if parent_thread else None
            inst = self.new_instance(thread, state="running", role=role or "worker")
            if parent:
                inst["parent"] = parent
                self._inherit(inst, self.instances[parent])
                self.commit()
            return inst

    def _inherit(self, inst, parent):
        # Until codex's store says what the child got (its rollout's turn context, read by
        # observe), the parent's ceiling one level down stands in, marked inferred. The child's
        # turns carry no sandbox override: codex keeps the child's own.
        if inst.get("ceiling") is None and parent.get("ceiling") is not None:
            ceiling = dict(parent["ceiling"])
            ceiling["delegation_depth"] = max(0, parent["ceiling"]["delegation_depth"] - 1)
            inst["ceiling"] = ceiling
            inst["ceiling_inferred"] = True
            inst["policy"] = None
            inst["tools"] = list(parent.get("tools") or [])

    def agent_ids(self):
        """{protocol instance id: codex agent id}: codex names an agent by its thread id."""
        with self.lock:
            return {iid: inst["thread"] for iid, inst in self.instances.items() if inst.get("thread")}

    def set_state(self, iid, state):
        with self.lock:
            inst = self.instances.get(iid)
            if inst and inst["state"] != state:
                inst["state"] = state
                self.commit()


# ---------------------------------------------------------------- relay


def make_relay(target_base, state):
    """A loopback HTTP relay to the model endpoint that adds the instance headers."""
    target = urllib.parse.urlsplit(target_base)

    class Relay(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def _forward(self):
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "content-length", "connection", "accept-encoding")}
            thread = self.headers.get("thread-id") or self.headers.get("session-id")
            if thread:
                outputs = trailing_outputs(body)
                refused = refused_calls(outputs)
                with state.lock:
                    if refused:
                        state.refused_calls.setdefault(thread, {}).update(refused)
                    called = state.lifecycle_calls.get(thread, {})
                    answered = {cid: out for cid, out in outputs.items() if cid in called}
                    if answered:
                        state.lifecycle_outputs.setdefault(thread, {}).update(answered)
                inst = state.instance_for_thread(thread)
                headers["x-delegation-instance"] = inst["id"]
                headers["x-delegation-role"] = inst.get("role") or "worker"
            conn = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=120)
            try:
                conn.request(self.command, (target.path.rstrip("/") + self.path), body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except OSError as e:
                self.send_response(502)
                payload = json.dumps({"error": {"message": "relay: %s" % e}}).encode()
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            finally:
                conn.close()
            passed = {}
            data = map_tool_calls(data, offered_mcp_tools(body), state.agent_ids(), passed)
            if thread and passed:
                with state.lock:
                    state.lifecycle_calls.setdefault(thread, {}).update(passed)
            if thread and b'"spawn_agent"' in data:
                # the model asked this thread to spawn; whether codex obeyed shows in the items
                with state.lock:
                    state.spawn_asked[thread] = state.spawn_asked.get(thread, 0) + 1
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(k, v)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_POST = _forward
        do_GET = _forward

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ---------------------------------------------------------------- app-server client


class AppServer:
    """One `codex app-server` process and its JSON-RPC-like stdio stream (no "jsonrpc" member)."""

    def __init__(self, argv, env, on_notification, on_request):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, start_new_session=False)
        self.lock = threading.Lock()
        self.cond = threading.Condition()
        self.responses = {}
        self.next_id = 1
        self.on_notification = on_notification
        self.on_request = on_request
        self.alive = True
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self):
        for line in self.proc.stderr:
            sys.stderr.write("[codex] " + line.decode("utf-8", "replace"))
        sys.stderr.flush()

    def _read(self):
        for raw in self.proc.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                log("codex wrote a non-JSON line: %r" % raw[:200])
                continue
            try:
                if "method" in msg and "id" in msg:
                    self.on_request(msg)
                elif "method" in msg:
                    self.on_notification(msg)
                else:
                    with self.cond:
                        self.responses[msg.get("id")] = msg
                        self.cond.notify_all()
            except Exception as e:  # never let one odd message kill the reader
                log("handling %s failed: %r" % (msg.get("method"), e))
        with self.cond:
            self.alive = False
            self.cond.notify_all()

    def send(self, msg):
        data = (json.dumps(msg) + "\n").encode()
        with self.lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def call(self, method, params, timeout=15.0):
        with self.cond:
            rid = self.next_id
            self.next_id += 1
        self.send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        with self.cond:
            while rid not in self.responses:
                left = deadline - time.monotonic()
                if left <= 0 or not self.alive:
                    raise ProtocolError(HOST_FAILURE, "codex did not answer %s (%s)" % (
                        method, "exited" if not self.alive else "timeout"))
                self.cond.wait(left)
            msg = self.responses.pop(rid)
        return msg

    def stop(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# ---------------------------------------------------------------- mapping


def codex_sandbox(sandbox):
    """(thread/start `sandbox` mode, turn/start `sandboxPolicy`) for a protocol sandbox."""
    if sandbox == "read-only":
        return "read-only", {"type": "readOnly", "networkAccess": False}
    if sandbox == "full-access":
        return "danger-full-access", {"type": "dangerFullAccess"}
    if isinstance(sandbox, dict) and "workspace-write" in sandbox:
        ww = sandbox["workspace-write"] or {}
        # codex's workspace-write also makes /tmp and $TMPDIR writable unless told not to:
        # without the two exclusions codex would allow more than the roots asked for
        return "workspace-write", {"type": "workspaceWrite",
                                   "writableRoots": list(ww.get("writable_roots") or []),
                                   "networkAccess": bool(ww.get("network")),
                                   "excludeSlashTmp": True, "excludeTmpdirEnvVar": True}
    raise ProtocolError(UNSUPPORTED_OPTION, "sandbox %s has no codex counterpart (codex's externalSandbox "
                        "means 'already sandboxed outside', which would widen)" % json.dumps(sandbox))


def protocol_sandbox(policy, to_harness_path, tmpdir="$TMPDIR", cwd=None):
    """The protocol sandbox codex reports (a SandboxPolicy of a thread/start or fork answer, or a
    rollout's sandbox_policy), or None when codex reports something protocol v1 cannot say.

    Writable /tmp or $TMPDIR (codex's defaults) cannot be said in protocol v1 either: such a
    policy is reported with those directories as roots, so a widening shows."""
    if not isinstance(policy, dict):
        return None
    kind = policy.get("type")
    if kind in ("readOnly", "read-only"):
        return "read-only"
    if kind in ("dangerFullAccess", "danger-full-access"):
        return "full-access"
    if kind in ("workspaceWrite", "workspace-write"):
        roots = policy.get("writableRoots", policy.get("writable_roots")) or []
        exclude_tmp = policy.get("excludeSlashTmp", policy.get("exclude_slash_tmp"))
        exclude_tmpdir = policy.get("excludeTmpdirEnvVar", policy.get("exclude_tmpdir_env_var"))
        # codex's workspace-write makes the thread's cwd writable besides the listed roots
        roots = [to_harness_path(r) for r in ([cwd] if cwd else []) + list(roots)]
        roots = [r for i, r in enumerate(roots) if r not in roots[:i]]
        if not exclude_tmp:
            roots.append("/tmp")
        if not exclude_tmpdir:
            roots.append(tmpdir)
        network = policy.get("networkAccess", policy.get("network_access"))
        return {"workspace-write": {"writable_roots": roots, "network": bool(network)}}
    if kind in ("externalSandbox", "external-sandbox"):
        return {"external": {"name": "codex-external-sandbox"}}
    return None


def sandbox_from_profile(profile, to_harness_path):
    """The protocol sandbox of a codex permission profile (what a rollout's turn_context or
    thread_settings_applied stores and codex enforces), or None when protocol v1 cannot say it.

    Write entries are the writable roots (/tmp or $TMPDIR among them when codex was not told
    to exclude them); read-only carve-outs inside a root (.git, .codex) only narrow."""
    if not isinstance(profile, dict):
        return None
    fs = profile.get("file_system") or {}
    network = profile.get("network") == "enabled"
    if profile.get("type") == "external":
        return {"external": {"name": "codex-external-sandbox"}}
    if profile.get("type") == "disabled":
        return "full-access"  # codex's danger-full-access: no sandbox at all
    if fs.get("type") != "restricted":
        return "full-access" if fs.get("type") == "unrestricted" else None
    roots = []
    for entry in fs.get("entries") or []:
        if entry.get("access") != "write":
            continue
        path = entry.get("path") or {}
        if path.get("type") == "special" and (path.get("value") or {}).get("kind") == "root":
            return "full-access"
        if path.get("type") == "path":
            harness = to_harness_path(path.get("path"))
            if harness not in roots:
                roots.append(harness)
        else:
            roots.append(json.dumps(path))
    if not roots:
        return "read-only"
    return {"workspace-write": {"writable_roots": roots, "network": network}}


def rollout_authority(path):
    """(permission profile, approval policy, cwd) of the latest settings a codex rollout file
    records for its thread (turn_context or thread_settings_applied), or None."""
    latest = None
    try:
        with open(path) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                payload = record.get("payload") or {}
                if record.get("type") == "turn_context":
                    latest = payload
                elif payload.get("type") == "thread_settings_applied":
                    latest = payload.get("thread_settings") or {}
    except OSError:
        return None
    if not latest or "permission_profile" not in latest:
        return None
    return latest.get("permission_profile"), latest.get("approval_policy"), latest.get("cwd")


def rollout_turns(path):
    """How many turns a codex rollout file records (its turn_context records)."""
    try:
        with open(path) as f:
            return sum(1 for line in f if '"turn_context"' in line and json.loads(line).get("type") == "turn_context")
    except OSError:
        return 0


def protocol_approval(policy):
    """The protocol approval policy for codex's AskForApproval, or None (granular, on-failure)."""
    if policy in ("never", "untrusted", "on-request"):
        return policy
    return None


def codex_approval(policy):
    if policy in ("never", "untrusted", "on-request"):
        return policy
    raise ProtocolError(UNSUPPORTED_OPTION, "approval policy %s has no codex counterpart (codex's granular "
                        "switches are per prompt kind, not per action class)" % json.dumps(policy))


APPROVAL_CLASSES = {
    "item/commandExecution/requestApproval": ("shell", "exec_command"),
    "execCommandApproval": ("shell", "exec_command"),
    "item/fileChange/requestApproval": ("file-write", "apply_patch"),
    "applyPatchApproval": ("file-write", "apply_patch"),
    "item/permissions/requestApproval": ("generic", "request_permissions"),
    "mcpServer/elicitation/request": ("mcp", "mcp_elicitation"),
}


class Adapter:
    def __init__(self):
        self.initialized = False
        self.state = None
        self._server = None
        self.launch = None  # (argv, env) of codex app-server, started at the first call that needs codex
        self.relay = None
        self.cond = threading.Condition()
        self.turns = {}  # thread -> dict(turn_id, status, items, error, done)
        self.thread_status = {}  # thread -> "idle" | "active" | ...
        self.pending = {}  # approval id -> codex request message (live only)
        self.spawned = []  # (parent thread, child thread) seen, in order
        self.store_dir = None
        self.mcp_servers = []
        self.loaded = set()  # threads this codex process knows (started, resumed, forked or spawned here)
        self.roles = {}  # host/configure roles: name -> default authority, written as codex agent roles
        self.mcp_status = {}  # (thread or None, server key) -> codex's MCP startup state
        self.tmpdir = "$TMPDIR"

    @property
    def server(self):
        """The codex app-server process, started on first use: a scenario the harness finds
        unsupported before it starts an instance then costs no codex start-up."""
        if self._server is None:
            argv, env = self.launch
            server = AppServer(argv, env, self.on_notification, self.on_request)
            self._server = server
            answer = server.call("initialize", {"clientInfo": {"name": "delegation-harness", "version": "1"}}, timeout=20)
            if "error" in answer:
                raise ProtocolError(HOST_FAILURE, "codex initialize: %s" % answer["error"])
            server.send({"method": "initialized"})
            self.codex_info = answer.get("result") or {}
        return self._server

    # -- codex events (reader thread)

    def on_notification(self, msg):
        method, params = msg["method"], msg.get("params") or {}
        thread = params.get("threadId")
        with self.cond:
            if method == "thread/started":
                t = params.get("thread") or {}
                parent = t.get("parentThreadId")
                if parent:
                    self.state.instance_for_thread(t["id"], parent_thread=parent,
                                                   role=t.get("agentRole") or None)
                    self.loaded.add(t["id"])
                    self.spawned.append((parent, t["id"]))
            elif method == "thread/status/changed":
                status = (params.get("status") or {}).get("type")
                self.thread_status[thread] = status
                iid = self.state.by_thread.get(thread)
                if iid and self.state.instances[iid]["state"] not in TERMINAL:
                    if status == "active":
                        self.state.set_state(iid, "running")
            elif method == "turn/started":
                turn = params.get("turn") or {}
                entry = self.turns.setdefault(thread, {})
                entry.update({"turn_id": turn.get("id"), "done": False, "items": [], "error": None})
                iid = self.state.by_thread.get(thread)
                if iid:
                    if self.state.instances[iid]["state"] in TERMINAL:
                        # codex runs a turn for a thread we closed (resume_agent reopens it): report what codex does
                        log("codex started a turn on %s, recorded %s: reporting it running" % (iid, self.state.instances[iid]["state"]))
                    self.state.set_state(iid, "running")
            elif method == "turn/completed":
                turn = params.get("turn") or {}
                entry = self.turns.setdefault(thread, {"items": []})
                entry.update({"turn_id": turn.get("id"), "done": True, "status": turn.get("status"),
                              "error": turn.get("error")})
                iid = self.state.by_thread.get(thread)
                if iid and self.state.instances[iid].get("resumed"):
                    with self.state.lock:
                        self.state.instances[iid]["resumed"] = False
                        self.state.commit()
                if iid and self.state.instances[iid]["state"] == "running":
                    self.state.set_state(iid, "completed")
            elif method == "item/completed":
                item = params.get("item") or {}
                entry = self.turns.setdefault(thread, {"items": [], "done": False})
                entry.setdefault("items", []).append(item)
                if item.get("type") == "collabAgentToolCall" and item.get("tool") == "spawnAgent":
                    for child in item.get("receiverThreadIds") or []:
                        self.state.instance_for_thread(child, parent_thread=thread)
                        self.spawned.append((thread, child))
                        self.loaded.add(child)
                if (item.get("type") == "collabAgentToolCall" and item.get("tool") in ("closeAgent", "resumeAgent")
                        and item.get("status") == "completed"):
                    # the model closed or reopened a child: codex's own lifecycle, reported as is
                    for child in item.get("receiverThreadIds") or []:
                        iid = self.state.by_thread.get(child)
                        if iid:
                            self.state.set_state(iid, "closed" if item["tool"] == "closeAgent" else "completed")
            elif method == "mcpServer/startupStatus/updated":
                self.mcp_status[(thread, params.get("name"))] = params.get("status")
            elif method == "thread/closed":
                iid = self.state.by_thread.get(thread)
                if iid:
                    log("codex closed thread %s (%s)" % (thread, iid))
            self.cond.notify_all()

    def on_request(self, msg):
        method, params = msg["method"], msg.get("params") or {}
        if method not in APPROVAL_CLASSES:
            log("declining codex request %s" % method)
            self.server.send({"id": msg["id"], "error": {"code": -32601, "message": "not supported by the adapter"}})
            return
        klass, tool = APPROVAL_CLASSES[method]
        thread = params.get("threadId") or params.get("conversationId")
        with self.cond:
            inst = self.state.instance_for_thread(thread) if thread else None
            with self.state.lock:
                aid = "a-%d" % self.state.next_approval
                self.state.next_approval += 1
                self.state.approvals[aid] = {
                    "id": aid, "instance": inst["id"] if inst else "unknown", "class": klass,
                    "tool": tool, "tool_digest": "sha256:" + "0" * 64,
                    "arguments_digest": "sha256:" + "0" * 64, "state": "pending",
                    "codex_method": method, "item": params.get("itemId"),
                }
                self.state.commit()
            self.pending[aid] = msg
            self.cond.notify_all()

    # -- protocol methods

    def handle(self, method, params):
        if method == "initialize":
            return self.initialize(params)
        if not self.initialized:
            raise ProtocolError(NOT_INITIALIZED, "initialize first")
        if method in UNSUPPORTED_METHODS:
            raise ProtocolError(METHOD_NOT_FOUND, UNSUPPORTED_METHODS[method])
        handler = {
            "host/configure": self.configure,
            "instance/start": self.start,
            "instance/turn": self.turn,
            "instance/close": self.close,
            "instance/tool_call": self.tool_call,
            "instance/resume": self.resume,
            "instance/fork": self.fork,
            "approval/answer": self.answer,
            "state/observe": self.observe,
        }.get(method)
        if handler is None:
            raise ProtocolError(METHOD_NOT_FOUND, "%s is not part of protocol v1 as this adapter knows it" % method)
        return handler(params or {})

    def initialize(self, params):
        version = str(params.get("protocol_version", ""))
        if version.split(".")[0] != "1":
            raise ProtocolError(BAD_VERSION, "this adapter speaks protocol 1.x, not %s" % version)
        env = params.get("environment") or {}
        self.store_dir = env.get("store_dir") or os.environ.get("DELEGATION_STORE_DIR")
        self.mcp_servers = [m for m in (env.get("mcp_servers") or []) if isinstance(m, dict) and m.get("name")]
        if not self.store_dir:
            raise ProtocolError(INVALID_PARAMS, "no store_dir")
        os.makedirs(self.store_dir, exist_ok=True)
        if self.launch is None:
            self.state = State(self.store_dir)
            binary = ensure_codex()
            self.relay = make_relay(env["model_endpoint"], self.state)
            home = os.path.join(self.store_dir, "codex-home")
            os.makedirs(home, exist_ok=True)
            self.tmpdir = isolated_env(self.store_dir)["TMPDIR"]
            self.workspace_root = os.path.realpath(os.path.join(self.store_dir, "fs"))
            os.makedirs(self.workspace_root, exist_ok=True)
            with open(os.path.join(home, "config.toml"), "w") as f:
                f.write(codex_config("http://127.0.0.1:%d/v1" % self.relay.server_address[1],
                                     env.get("mcp_servers") or []))
            child_env = dict(os.environ)
            child_env.update(isolated_env(self.store_dir))
            child_env.update({"CODEX_HOME": home, "DELEGATION_FAKE_KEY": "harness", "NO_COLOR": "1",
                              "RUST_LOG": os.environ.get("CODEX_ADAPTER_RUST_LOG", "error")})
            self.launch = ([binary, "app-server"], child_env)
        self.initialized = True
        return {"host": {"name": "codex", "version": CODEX_VERSION}, "protocol_version": "1.0",
                "capabilities": CAPABILITIES}

    def configure(self, p):
        if p.get("auto_approve"):
            raise ProtocolError(UNSUPPORTED_OPTION, "auto_approve: codex has no policy auto-approval (see README)")
        if p.get("authorizer_required"):
            raise ProtocolError(UNSUPPORTED_OPTION, "authorizer_required: codex cannot consult an external authorizer")
        if p.get("strict_mode"):
            raise ProtocolError(UNSUPPORTED_OPTION, "strict_mode: codex has no strict mode for children")
        roles = {}
        for name, default in (p.get("roles") or {}).items():
            try:
                self.role_layer(name, default)
            except ProtocolError as e:
                # a role codex cannot express (a granular approval policy, an external sandbox) is
                # not defined in codex at all: a spawn naming it meets codex's own refusal of an
                # unknown agent_type, never a role silently made wider or narrower
                log("role %s is not defined in codex: %s" % (name, e.message))
                continue
            roles[name] = default
        self.roles = roles
        return {"outcome": "ok"}

    def role_layer(self, name, default):
        """Write codex's config layer for a harness role: `[agents.NAME] config_file` points at it.

        codex applies the layer to a child that spawn_agent names with `agent_type = NAME`.
        The layer says the role's sandbox and approval policy in codex's own keys; what codex
        then does with them (its spawn code lays the parent's live sandbox and approval policy
        over the role's) is codex's, and the CE3 scenarios show it.
        """
        if not all(c.isalnum() or c in "_-" for c in name) or not name:
            raise ProtocolError(UNSUPPORTED_OPTION, "role name %r is not a codex agent_type" % name)
        lines = ["# codex agent role %s, written by the delegation-harness codex adapter" % name]
        sandbox = (default or {}).get("sandbox")
        if sandbox is not None:
            mode, policy = codex_sandbox(sandbox)
            lines.append("sandbox_mode = %s" % toml_string(mode))
            if policy.get("type") == "workspaceWrite":
                lines += ["[sandbox_workspace_write]",
                          "writable_roots = %s" % json.dumps([self.real_path(r) for r in policy["writableRoots"]]),
                          "network_access = %s" % ("true" if policy["networkAccess"] else "false"),
                          "exclude_slash_tmp = true", "exclude_tmpdir_env_var = true"]
        approval = (default or {}).get("approval_policy")
        if approval is not None:
            lines.insert(1, "approval_policy = %s" % toml_string(codex_approval(approval)))
        path = os.path.join(self.store_dir, "codex-home", "roles", name + ".toml")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def real_path(self, path):
        """Where a harness path lives on this machine: under store_dir/fs (the harness's /w/repo need not exist)."""
        norm = os.path.normpath("/" + path.lstrip("/"))
        real = os.path.join(self.workspace_root, norm.lstrip("/"))
        os.makedirs(real, exist_ok=True)
        return real

    def start(self, p):
        # codex cannot seal a tool by digest, but it can restrict a thread to MCP tools by name
        # (`mcp_servers.KEY.enabled_tools`, per thread): that restriction is what the adapter
        # asks for. Drift detection is then codex's own (or its absence): the SD scenarios run.
        tools = [t for t in (p.get("tools") or []) if isinstance(t, str)]
        if p.get("provider", "harness") != "harness":
            raise ProtocolError(UNSUPPORTED_OPTION, "provider %s: only the harness's model endpoint is configured" % p["provider"])
        mode, policy = codex_sandbox(p["sandbox"])
        approval = codex_approval(p["approval_policy"])
        depth = int(p.get("delegation_depth", 2))
        if isinstance(policy.get("writableRoots"), list):
            policy["writableRoots"] = [self.real_path(r) for r in policy["writableRoots"]]
        config = self.thread_config({"ceiling": {"delegation_depth": depth}, "tools": tools, "policy": policy})
        params = {"cwd": self.real_path(p["cwd"]), "approvalPolicy": approval, "sandbox": mode,
                  "config": config}
        answer = self.server.call("thread/start", params)
        if "error" in answer:
            raise ProtocolError(HOST_FAILURE, "codex thread/start: %s" % answer["error"].get("message"))
        thread = answer["result"]["thread"]["id"]
        self.loaded.add(thread)
        ceiling = self.ceiling_from_codex(answer["result"], depth)
        with self.cond:
            inst = self.state.instance_for_thread(thread)
            inst.update({"role": p.get("role", "lead"), "model": p.get("model", "reference-model"),
                         "ceiling": ceiling, "policy": policy, "state": "running", "tools": tools})
            self.state.commit()
        self.persist_thread(inst)
        self.await_mcp_startup(thread)
        return {"outcome": "ok", "instance": inst["id"], "effective": ceiling}

    def await_mcp_startup(self, thread):
        """Wait until codex has connected the thread's MCP servers and listed their tools.

        codex starts a thread's MCP sessions in the background; a tool change the harness makes
        right after the start would otherwise race codex's first listing, and codex's verdict
        on it would depend on that race instead of on what codex does with a changed tool."""
        keys = [server_key(s["name"]) for s in self.mcp_servers]
        deadline = time.monotonic() + MCP_STARTUP_S
        with self.cond:
            while True:
                settled = [k for k in keys if self.mcp_status.get((thread, k), self.mcp_status.get((None, k)))
                           in ("ready", "failed", "cancelled")]
                left = deadline - time.monotonic()
                if len(settled) == len(keys) or left <= 0:
                    if len(settled) < len(keys):
                        log("codex's MCP startup for %s not settled after %.0f s: %s" % (thread, MCP_STARTUP_S, keys))
                    return
                self.cond.wait(min(left, 0.1))

    def persist_thread(self, inst):
        """Make codex store a new thread now: it writes a thread's rollout only at its first turn
        or when the thread is named, and a thread it never stored is gone after a restart."""
        answer = self.server.call("thread/name/set", {"threadId": inst["thread"], "name": inst["id"]})
        if "error" in answer:
            raise ProtocolError(HOST_FAILURE, "codex thread/name/set: %s" % answer["error"].get("message"))

    def to_harness_path(self, real):
        """The harness path of a path codex reports (the inverse of real_path); others unchanged."""
        root = self.workspace_root.rstrip("/")
        if real == root:
            return "/"
        if real.startswith(root + "/"):
            return real[len(root):]
        return real

    def ceiling_from_codex(self, answer, depth):
        """The authority codex says a thread has (a thread/start, resume or fork answer).

        Sandbox, approval policy and cwd are codex's answer; codex seals no tool definition
        (tools {}); the delegation depth is the `agents.max_depth` the thread was configured
        with, which codex enforces (zc/016) but does not echo."""
        sandbox = protocol_sandbox(answer.get("sandbox"), self.to_harness_path, self.tmpdir, answer.get("cwd"))
        approval = protocol_approval(answer.get("approvalPolicy"))
        if sandbox is None or approval is None:
            raise ProtocolError(HOST_FAILURE, "codex answered an authority protocol v1 cannot say: sandbox %s, approval %s"
                                % (json.dumps(answer.get("sandbox")), json.dumps(answer.get("approvalPolicy"))))
        return {"sandbox": sandbox, "approval_policy": approval, "tools": {},
                "cwd": self.to_harness_path(answer.get("cwd") or ""), "provider": "harness",
                "delegation_depth": depth}

    def _inst(self, iid):
        inst = self.state.instances.get(iid)
        if inst is None:
            # an id codex never saw: there is no thread to ask codex about, so the refusal is the adapter's
            return None, {"outcome": "denied", "reason": "instance_unknown", "inferred": ["reason"],
                          "detail": "no instance %s" % iid}
        return inst, None

    def turn(self, p):
        inst, refusal = self._inst(p.get("instance"))
        if refusal:
            return refusal
        thread = inst["thread"]
        with self.cond:
            spawned_before = len(self.spawned)
            approvals_before = set(self.pending)
            self.turns[thread] = {"items": [], "done": False, "turn_id": None,
                                  "spawn_asked": self.state.spawn_asked.get(thread, 0),
                                  "refused_before": set(self.state.refused_calls.get(thread, {})),
                                  "lifecycle_before": set(self.state.lifecycle_calls.get(thread, {}))}
        params = {"threadId": thread, "input": [{"type": "text", "text": p.get("input", ""), "text_elements": []}]}
        if inst.get("policy"):
            params["sandboxPolicy"] = inst["policy"]
        if inst["state"] in TERMINAL:
            log("forwarding a turn to %s although the adapter recorded it %s: codex decides" % (inst["id"], inst["state"]))
        if thread not in self.loaded:
            refused = self.reload(inst)
            if refused is not None:
                self._no_turn(thread)
                return refused
        answer = self.server.call("turn/start", params)
        if "error" in answer:
            self._no_turn(thread)
            message = answer["error"].get("message", "")
            if inst["state"] in TERMINAL:
                return {"outcome": "denied", "reason": "instance_terminal", "detail": "codex refused: %s" % message}
            raise ProtocolError(HOST_FAILURE, "codex turn/start: %s" % message)
        turn_id = answer["result"]["turn"]["id"]
        with self.cond:
            self.turns[thread]["turn_id"] = turn_id
        return self._await_turn(inst, thread, spawned_before, approvals_before)

    def _no_turn(self, thread):
        """codex started no turn on the thread: nothing of it is running, so a later turn of its
        parent that waits for the thread (a child it gives input or reopens) does not wait on it."""
        with self.cond:
            if thread in self.turns and self.turns[thread].get("turn_id") is None:
                self.turns[thread]["done"] = True
            self.cond.notify_all()

    def reload(self, inst):
        """Load a thread of an earlier codex process (before a restart) into this one.

        codex loads a stored thread only through thread/resume, which the adapter gives the
        sealed ceiling, not codex's defaults. None when loaded; a denied result when codex
        refuses a thread recorded terminal (its own refusal)."""
        loaded = self.server.call("thread/resume", dict(self.sealed_params(inst), excludeTurns=True))
        if "error" in loaded:
            message = loaded["error"].get("message", "")
            if inst["state"] in TERMINAL:
                return {"outcome": "denied", "reason": "instance_terminal", "detail": "codex refused: %s" % message}
            raise ProtocolError(HOST_FAILURE, "codex thread/resume to load %s: %s" % (inst["id"], message))
        self.loaded.add(inst["thread"])
        return None

    def _await_turn(self, inst, thread, spawned_before, approvals_before):
        deadline = time.monotonic() + TURN_DEADLINE_S
        with self.cond:
            while True:
                new_approvals = [a for a in self.pending if a not in approvals_before]
                # a request of this thread from an earlier turn, still unanswered: codex runs
                # nothing more on the thread (new input waits behind it) until a person answers
                still_waiting = [a for a in self.pending if a in approvals_before
                                 and self.state.approvals[a]["instance"] == inst["id"]]
                entry = self.turns.get(thread) or {}
                children = self._turn_children(thread, spawned_before)
                children_busy = [c for c in children if self._busy(c)]
                if still_waiting or [a for a in new_approvals if self.state.approvals[a]["instance"] == inst["id"]]:
                    new_approvals += still_waiting
                    break  # this thread waits for a person's answer
                if new_approvals and entry.get("done"):
                    break  # the turn is over and a child it set to work waits for a person's answer
                children_waiting = self._waiting_on_earlier_request(children, approvals_before)
                if children_waiting and entry.get("done"):
                    # a child given input while its request from an earlier turn is unanswered:
                    # codex keeps the input behind that request, so the child stays busy until a
                    # person answers, and waiting for it to go idle could only end at the deadline
                    new_approvals += children_waiting
                    break
                if entry.get("done") and not children_busy:
                    # settle: a child's first status change can trail its spawn or its input
                    self.cond.wait(SETTLE_S)
                    children = self._turn_children(thread, spawned_before)
                    if not [c for c in children if self._busy(c)] and not [a for a in self.pending if a not in approvals_before]:
                        break
                    continue
                left = deadline - time.monotonic()
                if left <= 0 or not self.server.alive:
                    raise ProtocolError(HOST_FAILURE, "codex turn on %s did not finish within %.0f s" % (inst["id"], TURN_DEADLINE_S))
                self.cond.wait(min(left, 0.2))
            return self._turn_report(inst, thread, spawned_before, new_approvals)

    def _turn_children(self, thread, spawned_before):
        """The children a turn set to work: those spawned in it, and those its model gave
        input or reopened (codex's sendInput and resumeAgent items name them), whose own turns
        codex runs beside or after the parent's. The turn is over when they are idle too."""
        children = [c for (_p, c) in self.spawned[spawned_before:]]
        for item in (self.turns.get(thread) or {}).get("items") or []:
            if item.get("type") == "collabAgentToolCall" and item.get("tool") in ("sendInput", "resumeAgent"):
                children += [c for c in item.get("receiverThreadIds") or [] if c not in children]
        return children

    def _waiting_on_earlier_request(self, children, approvals_before):
        """The requests, raised before this turn and still unanswered, of the children it set to work."""
        instances = {self.state.by_thread.get(c) for c in children} - {None}
        return [a for a in self.pending if a in approvals_before
                and self.state.approvals[a]["instance"] in instances]

    def _busy(self, thread):
        entry = self.turns.get(thread)
        if entry is not None and not entry.get("done"):
            return True
        return self.thread_status.get(thread) == "active"

    def _turn_report(self, inst, thread, spawned_before, new_approvals):
        entry = self.turns.get(thread) or {}
        items = entry.get("items") or []
        result = {"outcome": "ok", "instance": inst["id"]}
        spawns = [i for i in items if i.get("type") == "collabAgentToolCall" and i.get("tool") == "spawnAgent"]
        lifecycle_items = [i for i in items if i.get("type") == "collabAgentToolCall" and i.get("tool") in LIFECYCLE_OPS]
        lifecycle_calls = [(cid, call) for cid, call in self.state.lifecycle_calls.get(thread, {}).items()
                           if cid not in entry.get("lifecycle_before", set())]
        children = []
        for (parent, child) in self.spawned[spawned_before:]:
            if parent == thread and child not in children:
                children.append(child)
        # a request of this thread is its turn's reply; a child's (the child this turn spawned or
        # gave input asks to run a tool) is the child's, and the turn's reply is the spawn or the
        # lifecycle call; the child's request shows pending in the observed approvals
        own_approvals = [a for a in new_approvals if self.state.approvals[a]["instance"] == inst["id"]]
        if own_approvals or (new_approvals and not (spawns or children or lifecycle_items or lifecycle_calls)):
            aid = (own_approvals or new_approvals)[-1]
            approval = self.state.approvals[aid]
            result["turn"] = {"reply": "tool_call", "tool": approval["tool"]}
            result["tool_call"] = {"tool": approval["tool"], "outcome": "pending_approval", "approval": aid}
        elif spawns or children:
            if children:
                child = self.state.instance_for_thread(children[0], parent_thread=thread)
                result["turn"] = {"reply": "spawn", "spawn": {"outcome": "ok", "instance": child["id"]}}
            else:
                status = spawns[0].get("status")
                # codex gives no reason for a spawn that made no child: the reason is the adapter's
                result["turn"] = {"reply": "spawn", "spawn": {
                    "outcome": "denied", "reason": "policy_denied", "inferred": ["reason"],
                    "detail": "codex's spawn_agent call ended %s without a child thread" % status}}
                result["inferred"] = ["spawn"]
        elif lifecycle_items:
            result["turn"] = self._lifecycle_report(lifecycle_items[0])
        elif lifecycle_calls:
            result["turn"] = self._lifecycle_without_item(thread, *lifecycle_calls[0])
        elif self.state.spawn_asked.get(thread, 0) > entry.get("spawn_asked", 0):
            result["turn"] = {"reply": "spawn", "spawn": {
                "outcome": "denied", "reason": "policy_denied", "inferred": ["reason"],
                "detail": "the model called spawn_agent and codex created no child (multi-agent tools withheld or refused)"}}
            result["inferred"] = ["spawn"]
        elif entry.get("status") == "failed" and not [i for i in items if i.get("type") in ("agentMessage",)]:
            error = entry.get("error") or {}
            result["turn"] = {"reply": "model_failed", "detail": error.get("message") or "turn failed"}
        else:
            tool_items = [i for i in items if i.get("type") in ("commandExecution", "mcpToolCall", "fileChange", "dynamicToolCall")]
            refused = [name for cid, name in self.state.refused_calls.get(thread, {}).items()
                       if cid not in entry.get("refused_before", set()) and name not in MULTI_AGENT_TOOLS]
            if not tool_items and refused:
                # codex's own refusal of a tool the thread is not offered; its name for it is
                # `unsupported_call` (mapped onto the harness vocabulary in expectations.json)
                result["turn"] = {"reply": "tool_call", "tool": refused[0]}
                result["tool_call"] = {"tool": refused[0], "outcome": "denied", "reason": "unsupported_call",
                                       "detail": "codex answered the model 'unsupported call: %s' and ran nothing" % refused[0]}
            elif tool_items:
                item = tool_items[0]
                tool = {"commandExecution": "exec_command", "fileChange": "apply_patch"}.get(item["type"]) or item.get("tool") or item["type"]
                ok = item.get("status") in ("completed",)
                result["turn"] = {"reply": "tool_call", "tool": tool}
                result["tool_call"] = {"tool": tool, "outcome": "executed" if ok else "denied"}
                error_text = str((item.get("error") or {}).get("message", ""))
                if item["type"] == "mcpToolCall" and item.get("status") == "failed" and MCP_SERVER_FAILED in error_text:
                    # codex dispatched the call and the MCP server answered an error (codex's item
                    # says "tool call failed for `server/tool`"): codex refused nothing
                    result["tool_call"] = {"tool": tool, "outcome": "executed",
                                           "result": "error: %s" % str((item.get("error") or {}).get("message", ""))[:400]}
                    log("codex's mcpToolCall of %s failed at the MCP server: %s" % (tool, json.dumps(item.get("error"))[:600]))
                elif item["type"] == "mcpToolCall" and APPROVAL_NEVER in error_text:
                    # codex's own refusal: the call needs approval and the policy says never ask
                    result["tool_call"]["reason"] = "policy_denied"
                    result["tool_call"]["detail"] = "codex: %s" % error_text[:300]
                elif not ok:
                    # codex's item says declined or failed, not why in the harness's words
                    result["tool_call"]["reason"] = "policy_denied"
                    result["tool_call"]["detail"] = "codex's %s item ended %s" % (item["type"], item.get("status"))
                    log("codex %s item ended %s: %s" % (item["type"], item.get("status"), json.dumps(item)[:600]))
                    result["inferred"] = ["reason"]
            else:
                texts = [i.get("text") or "" for i in items if i.get("type") == "agentMessage"]
                result["turn"] = {"reply": "message", "text": texts[-1] if texts else ""}
        return result

    def _lifecycle_report(self, item):
        """The TurnReport of a model's call of one of codex's lifecycle tools on a child, from
        codex's collabAgentToolCall item: the op, the child, and whether codex carried it out.

        codex's item says completed or failed and the child's status (`agentsStates`), not
        why in the harness's words: a refusal's reason is the adapter's reading, marked."""
        receivers = item.get("receiverThreadIds") or []
        target = self.state.by_thread.get(receivers[0], receivers[0]) if receivers else "unknown"
        said = self.state.lifecycle_outputs.get(item.get("senderThreadId"), {}).get(item.get("id"))
        if item.get("status") == "completed":
            outcome = {"outcome": "ok", "instance": target}
        else:
            states = item.get("agentsStates") or {}
            status = ((states.get(receivers[0]) if receivers else None) or {}).get("status")
            inst = self.state.instances.get(target) or {}
            reason = "instance_terminal" if inst.get("state") in TERMINAL else "instance_unknown"
            outcome = {"outcome": "denied", "reason": reason, "inferred": ["reason"],
                       "detail": "codex's %s call ended %s (agent status %s)%s" % (
                           item.get("tool"), item.get("status"), status,
                           "; codex answered the model: %s" % said[:300] if said else "")}
        return {"reply": "lifecycle", "op": LIFECYCLE_OPS[item["tool"]], "target": target, "lifecycle": outcome}

    def _lifecycle_without_item(self, thread, call_id, call):
        """The TurnReport of a lifecycle call codex showed no collabAgentToolCall item for, from
        what codex answered the model (seen by the relay in the next request): a tool result
        (a JSON object) is codex carrying the call out; anything else is its refusal before the
        call reached an agent (e.g. "agent with id … not found"), whose reason in the harness's
        words is the adapter's reading, marked."""
        tool, scripted = call
        output = self.state.lifecycle_outputs.get(thread, {}).get(call_id)
        target = scripted or "unknown"
        try:
            carried_out = isinstance(json.loads(output), dict)
        except (TypeError, ValueError):
            carried_out = False
        if carried_out:
            return {"reply": "lifecycle", "op": LIFECYCLE_TOOL_OPS[tool], "target": target,
                    "lifecycle": {"outcome": "ok", "instance": target}}
        inst = self.state.instances.get(target) or {}
        reason = "instance_terminal" if inst.get("state") in TERMINAL else "instance_unknown"
        return {"reply": "lifecycle", "op": LIFECYCLE_TOOL_OPS[tool], "target": target, "lifecycle": {
            "outcome": "denied", "reason": reason, "inferred": ["reason"],
            "detail": "codex ran no %s and answered the model: %s" % (tool, (output or "(nothing seen)")[:300])}}

    def answer(self, p):
        aid = p.get("request")
        approval = self.state.approvals.get(aid)
        if approval is None:
            return {"outcome": "denied", "reason": "instance_unknown", "detail": "no approval %s" % aid}
        decision = p.get("decision")
        if approval["state"] != "pending":
            # codex's request was answered once; app-server takes no second answer to it, so
            # whatever the decision (allow-exact too) nothing is sent and nothing runs again
            return {"outcome": "denied", "reason": "event_replayed", "inferred": ["reason"],
                    "detail": "approval %s is already %s; codex's request was answered once" % (aid, approval["state"])}
        if decision == "allow-exact":
            raise ProtocolError(UNSUPPORTED_OPTION, "allow-exact: codex's acceptForSession is session-wide, wider than one exact call")
        msg = self.pending.pop(aid, None)
        if msg is None:
            return {"outcome": "denied", "reason": "policy_denied", "inferred": ["reason"],
                    "detail": "approval %s belongs to a codex process that is gone; it stays pending" % aid}
        reply = "accept" if decision == "allow" else "decline"
        if approval["codex_method"] in ("execCommandApproval", "applyPatchApproval"):
            reply = "approved" if decision == "allow" else "denied"
        with self.state.lock:
            approval.update({"state": "decided", "decision": decision, "decided_by": "person"})
            self.state.commit()
        body = {"decision": reply}
        if approval["codex_method"] == "mcpServer/elicitation/request":
            body = {"action": "accept" if decision == "allow" else "decline", "content": None}
        elif approval["codex_method"] == "item/permissions/requestApproval":
            # codex's permission request is answered with the grant itself: all it asked, or nothing
            asked = (msg.get("params") or {}).get("permissions") or {}
            body = {"permissions": asked if decision == "allow" else {}, "scope": "turn"}
        self.server.send({"id": msg["id"], "result": body})
        if decision == "allow":
            # only an allowed request is dispatched to the handler; a denied one stays decided
            # (PROTOCOL.md: a deny is committed and nothing is dispatched)
            with self.state.lock:
                approval["state"] = "dispatched"
                self.state.commit()
        inst = self.state.instances.get(approval["instance"])
        if inst is None:
            return {"outcome": "ok"}
        thread = inst["thread"]
        with self.cond:
            approvals_before = set(self.pending)
            spawned_before = len(self.spawned)
        result = self._await_turn(inst, thread, spawned_before, approvals_before)
        answer = {"outcome": "ok"}
        tool_call = result.get("tool_call")
        if tool_call is None:
            # codex showed no item for the answered request: what became of it is the adapter's guess
            tool_call = {"tool": approval["tool"], "outcome": "executed" if decision == "allow" else "denied"}
            if decision != "allow":
                tool_call["reason"] = "policy_denied"
            answer["inferred"] = ["tool_call"]
        elif result.get("inferred"):
            answer["inferred"] = list(result["inferred"])
        tool_call["approval"] = aid
        answer["tool_call"] = tool_call
        if decision != "allow":
            # the protocol's answer to a person's deny is a refusal; codex answers a decline with
            # nothing of its own, so the reason is the adapter's (marked inferred)
            answer.update({"outcome": "denied", "reason": "policy_denied",
                           "inferred": sorted(set(answer.get("inferred", [])) | {"reason"})})
        return answer

    def mcp_server_of(self, inst, tool):
        """The codex MCP server key serving `tool` for the instance's thread (codex's own listing
        when there is more than one harness server)."""
        keys = [server_key(s["name"]) for s in self.mcp_servers]
        if len(keys) == 1:
            return keys[0]
        for key in keys:
            answer = self.server.call("mcpServerStatus/list", {"threadId": inst["thread"], "serverName": key})
            for status in (answer.get("result") or {}).get("data") or []:
                if tool in (status.get("tools") or {}):
                    return key
        return keys[0] if keys else None

    def tool_call(self, p):
        """`mcpServer/tool/call {threadId, server, tool, arguments}`: codex's client-side call of an
        MCP tool in a thread's MCP session. Whatever codex checks on that path (enabled tools,
        drift, approvals) is codex's; the adapter adds nothing and reports what codex did."""
        inst, refusal = self._inst(p.get("instance"))
        if refusal:
            return refusal
        tool = p.get("tool")
        if not isinstance(tool, str):
            raise ProtocolError(INVALID_PARAMS, "tool must be a string")
        server = self.mcp_server_of(inst, tool)
        if server is None:
            raise ProtocolError(UNSUPPORTED_OPTION, "no MCP server is configured, and codex's direct calls reach only MCP tools")
        if inst["thread"] not in self.loaded:
            loaded = self.reload(inst)
            if loaded is not None:
                return dict(loaded, tool_call={"tool": tool, "outcome": "denied", "reason": loaded["reason"]})
        answer = self.server.call("mcpServer/tool/call", {"threadId": inst["thread"], "server": server, "tool": tool,
                                                         "arguments": p.get("arguments") or {}}, timeout=TURN_DEADLINE_S)
        if "error" in answer:
            message = answer["error"].get("message", "")
            if inst["state"] in TERMINAL and terminal_refusal(message):
                # the protocol's refusal of a direct call carries the call's own outcome too
                return {"outcome": "denied", "reason": "instance_terminal", "detail": "codex refused: %s" % message,
                        "tool_call": {"tool": tool, "outcome": "denied", "reason": "instance_terminal"}}
            if CODEX_DISABLED_TOOL in message:
                # codex's own refusal: the tool is not among those the thread's MCP server
                # enables (the ceiling's tools, as the adapter configured enabled_tools), so no
                # handler ran; codex names no reason, so the reason is the adapter's (inferred)
                return {"outcome": "denied", "reason": "capability_denied", "inferred": ["reason", "tool_call"],
                        "detail": "codex refused: %s" % message,
                        "tool_call": {"tool": tool, "outcome": "denied", "reason": "capability_denied"}}
            # otherwise codex passes an MCP server's error on as its own (the server's "no tool
            # named X"): codex refused nothing it could name, so the call is reported
            # dispatched, and that reading of codex's error is marked inferred
            log("codex answered mcpServer/tool/call with an error: %s" % message[:800])
            return {"outcome": "ok", "instance": inst["id"], "inferred": ["tool_call"],
                    "detail": "codex answered mcpServer/tool/call with an error: %s" % message,
                    "tool_call": {"tool": tool, "outcome": "executed", "result": "error: %s" % message}}
        result = answer.get("result") or {}
        text = "".join(c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict))
        if result.get("isError"):
            # codex dispatched the call and the MCP server answered an error result: codex's
            # answer says so, and codex refused nothing
            log("the MCP server answered %s with an error through codex: %s" % (tool, text[:800]))
        report = {"tool": tool, "outcome": "executed", "result": text}
        return {"outcome": "ok", "instance": inst["id"], "tool_call": report}

    def close(self, p):
        """`thread/delete` (or `thread/archive`, CLOSE_METHOD): codex's client-side close.

        thread/delete is the terminal one: codex removes the thread from its store, refuses every
        later turn, resume and fork ("thread not found"), and its parent's model cannot reopen it
        with resume_agent; an archived thread comes back with thread/unarchive and resume_agent
        (README, Findings). A second close is sent to codex as well, and its refusal is the answer."""
        inst, refusal = self._inst(p.get("instance"))
        if refusal:
            return refusal
        method = CLOSE_METHOD
        answer = self.server.call(method, {"threadId": inst["thread"]})
        if "error" in answer and method == "thread/delete" and FORK_REFERENCES in answer["error"].get("message", ""):
            # codex keeps a thread a fork still refers to: archiving is the only close codex has
            # left for it (not terminal: Findings 5), and observe then reads it as archived
            log("codex refused to delete %s (%s): archiving it" % (inst["id"], answer["error"].get("message")))
            method = "thread/archive"
            answer = self.server.call(method, {"threadId": inst["thread"]})
        if "error" in answer:
            message = answer["error"].get("message", "")
            if terminal_refusal(message):
                return {"outcome": "denied", "reason": "instance_terminal", "detail": "codex refused: %s" % message}
            raise ProtocolError(HOST_FAILURE, "codex %s: %s" % (method, message))
        with self.state.lock:
            inst["state"] = "closed"
            inst["deleted"] = method == "thread/delete"
            self.state.commit()
        result = {"outcome": "ok", "instance": inst["id"]}
        if method != CLOSE_METHOD:
            result["detail"] = "codex refused to delete the thread (a fork refers to it); archived instead"
        return result

    def thread_config(self, inst):
        """The per-thread config of the sealed ceiling: delegation depth, the named MCP tools, the
        workspace-write roots without /tmp and $TMPDIR, and the configured roles."""
        ceiling = inst.get("ceiling") or {}
        config = {"agents.max_depth": self.configured_depth(inst, ceiling)}
        for server in self.mcp_servers:
            config["mcp_servers.%s.enabled_tools" % server_key(server["name"])] = list(inst.get("tools") or [])
        policy = inst.get("policy") or {}
        if policy.get("type") == "workspaceWrite":
            config["sandbox_workspace_write"] = {
                "writable_roots": list(policy.get("writableRoots") or []),
                "network_access": bool(policy.get("networkAccess")),
                "exclude_slash_tmp": True, "exclude_tmpdir_env_var": True}
        for name in sorted(self.roles):
            path = os.path.join(self.store_dir, "codex-home", "roles", name + ".toml")
            config["agents.%s.config_file" % name] = path
            config["agents.%s.description" % name] = "harness role %s" % name
        return config

    def configured_depth(self, inst, ceiling):
        """codex's `agents.max_depth` for a thread: codex counts a spawned child's depth from its
        root, so a spawned child keeps its root's configured depth (its own remaining depth
        would stop it one level early); a root or a fork has its own."""
        root = inst
        while root.get("parent") and not root.get("forked_from") and root["parent"] in self.state.instances:
            root = self.state.instances[root["parent"]]
        if root is not inst:
            return int((root.get("ceiling") or {}).get("delegation_depth", 0))
        return int(ceiling.get("delegation_depth", 0))

    def sealed_params(self, inst):
        """thread/resume and thread/fork parameters that restore the sealed ceiling, not codex's
        defaults: a root's as it was started, a child's as codex's store has it."""
        ceiling = inst.get("ceiling")
        policy = inst.get("policy")
        if inst.get("parent") and not inst.get("forked_from"):
            ceiling = self.observed_instance(inst, self.codex_thread(inst)).get("ceiling") or ceiling
            policy = None
        params = {"threadId": inst["thread"]}
        if ceiling:
            mode, derived = codex_sandbox(ceiling["sandbox"])
            if policy is None and derived.get("type") == "workspaceWrite":
                derived["writableRoots"] = [self.real_path(r) for r in derived["writableRoots"]]
                policy = derived
            params["sandbox"] = mode
            params["approvalPolicy"] = codex_approval(ceiling["approval_policy"])
        params["config"] = self.thread_config(dict(inst, ceiling=ceiling, policy=policy))
        return params

    def resume(self, p):
        inst, refusal = self._inst(p.get("instance"))
        if refusal:
            return refusal
        if inst["state"] in TERMINAL:
            log("forwarding a resume of %s (recorded %s) to codex: codex decides" % (inst["id"], inst["state"]))
        ceiling = inst.get("ceiling") or {}
        params = dict(self.sealed_params(inst), excludeTurns=True)
        answer = self.server.call("thread/resume", params)
        if "error" in answer:
            if inst["state"] in TERMINAL:
                return {"outcome": "denied", "reason": "instance_terminal", "detail": "codex refused: %s" % answer["error"].get("message")}
            raise ProtocolError(HOST_FAILURE, "codex thread/resume: %s" % answer["error"].get("message"))
        self.loaded.add(inst["thread"])
        with self.state.lock:
            # codex took the resume: the instance runs again until its next turn completes
            inst["resumed"] = True
            self.state.commit()
        depth = int(ceiling.get("delegation_depth", 0))
        return {"outcome": "ok", "instance": inst["id"], "effective": self.ceiling_from_codex(answer["result"], depth)}

    def fork(self, p):
        inst, refusal = self._inst(p.get("instance"))
        if refusal:
            return refusal
        answer = self.server.call("thread/fork", dict(self.sealed_params(inst), excludeTurns=True))
        if "error" in answer:
            if inst["state"] in TERMINAL:
                return {"outcome": "denied", "reason": "instance_terminal", "detail": "codex refused: %s" % answer["error"].get("message")}
            raise ProtocolError(HOST_FAILURE, "codex thread/fork: %s" % answer["error"].get("message"))
        thread = answer["result"]["thread"]["id"]
        depth = int((inst.get("ceiling") or {}).get("delegation_depth", 0))
        ceiling = self.ceiling_from_codex(answer["result"], depth)
        with self.cond:
            new = self.state.instance_for_thread(thread)
            # codex records a fork's source (forkedFromId), not a parent: the protocol's parent
            # of a fork (its source's parent) is the adapter's, and observe says so
            new.update({"parent": inst.get("parent"), "parent_inferred": bool(inst.get("parent")),
                        "role": inst["role"], "model": inst["model"],
                        "ceiling": ceiling, "policy": inst.get("policy"), "state": "running",
                        "forked_from": inst["id"], "tools": list(inst.get("tools") or [])})
            self.loaded.add(thread)
            self.state.commit()
        self.persist_thread(new)
        return {"outcome": "ok", "instance": new["id"], "effective": ceiling}

    def codex_thread(self, inst):
        """codex's own record of an instance's thread (`thread/read`), or None when codex has none."""
        answer = self.server.call("thread/read", {"threadId": inst["thread"]})
        if "error" in answer:
            return None
        return (answer.get("result") or {}).get("thread")

    def observed_instance(self, inst, thread):
        """One instance as codex's store has it, with `inferred` naming what only the adapter knows."""
        inferred = []
        entry = {"id": inst["id"], "role": inst.get("role") or "worker", "model": inst.get("model") or "reference-model"}
        if thread is None:
            # codex has no such thread: after the adapter's confirmed thread/delete that is codex's
            # own word that the instance is gone (closed); anything else is the adapter's record
            if not inst.get("deleted"):
                inferred.append("state")
            entry["state"] = inst["state"]
            entry["ceiling"] = inst.get("ceiling") or DEFAULT_CEILING
            inferred.append("ceiling")
            if inst.get("parent"):
                entry["parent"] = inst["parent"]
                inferred.append("parent")
            entry["inferred"] = inferred
            return entry
        path = thread.get("path") or ""
        status = (thread.get("status") or {}).get("type")
        authority = rollout_authority(path) if path else None
        if os.sep + "archived_sessions" + os.sep in path:
            entry["state"] = "closed"
        elif status == "active":
            entry["state"] = "running"
        else:
            # idle or not loaded: completed once a turn ran (the rollout records its turn context),
            # else running, as a started instance is until its first turn completes; likewise a
            # resume codex accepted runs until the next turn of the thread completes
            entry["state"] = "completed" if rollout_turns(path) and not inst.get("resumed") else "running"
        parent_thread = thread.get("parentThreadId")
        if parent_thread:
            parent = self.state.by_thread.get(parent_thread)
            if parent:
                entry["parent"] = parent
        elif inst.get("parent"):
            entry["parent"] = inst["parent"]
            inferred.append("parent")
        if thread.get("agentRole"):
            entry["role"] = thread["agentRole"]
        if thread.get("model"):
            entry["model"] = thread["model"]
        spawn = ((thread.get("source") or {}).get("subAgent") or {}).get("thread_spawn") if isinstance(thread.get("source"), dict) else None
        ceiling = dict(inst.get("ceiling") or DEFAULT_CEILING)
        if authority is not None:
            profile, approval, cwd = authority
            sandbox = sandbox_from_profile(profile, self.to_harness_path)
            approval = protocol_approval(approval)
            if sandbox is not None and approval is not None:
                ceiling.update({"sandbox": sandbox, "approval_policy": approval,
                                "cwd": self.to_harness_path(cwd or thread.get("cwd") or "")})
            else:
                inferred.append("ceiling")
        elif inst.get("ceiling_inferred") or not inst.get("ceiling"):
            inferred.append("ceiling")
        if spawn and isinstance(spawn.get("depth"), int):
            # codex refuses a spawn deeper than agents.max_depth (the root's configured depth),
            # counting depth from the root: what is left is the root's depth minus the child's
            root = inst
            while root.get("parent") and root["parent"] in self.state.instances:
                root = self.state.instances[root["parent"]]
            ceiling["delegation_depth"] = max(0, int((root.get("ceiling") or {}).get("delegation_depth", 0)) - spawn["depth"])
        entry["ceiling"] = ceiling
        if inferred:
            entry["inferred"] = inferred
        return entry

    def observe(self, _p):
        with self.state.lock:
            known = list(self.state.instances.values())
        instances = [self.observed_instance(inst, self.codex_thread(inst)) for inst in known]
        observed = {"now": 0, "auto_approve": False, "instances": instances}
        inferred = []
        if any("state" in (i.get("inferred") or []) for i in instances):
            inferred.append("instances")
        with self.state.lock:
            approvals = []
            for a in self.state.approvals.values():
                entry = {k: a[k] for k in ("id", "instance", "class", "tool", "tool_digest", "arguments_digest", "state")}
                for k in ("decision", "decided_by"):
                    if a.get(k):
                        entry[k] = a[k]
                approvals.append(entry)
        if approvals:
            # codex keeps no approval records: ids, states and decisions are the adapter's
            # bookkeeping of codex's requests and answers, and the digests are placeholders
            inferred.append("approvals")
        observed["approvals"] = approvals
        if inferred:
            observed["inferred"] = inferred
        return {"outcome": "ok", "observed": observed}

    def shutdown(self):
        if self._server:
            self._server.stop()
        if self.relay:
            self.relay.shutdown()


ISOLATED_DIRS = {"HOME": "home", "XDG_CONFIG_HOME": "xdg/config", "XDG_DATA_HOME": "xdg/data",
                 "XDG_CACHE_HOME": "xdg/cache", "XDG_STATE_HOME": "xdg/state", "XDG_RUNTIME_DIR": "xdg/runtime",
                 "TMPDIR": "tmp"}


def isolated_env(store_dir):
    """HOME, XDG_* and TMPDIR inside the store, created: codex and the commands it runs touch nothing outside it."""
    env = {}
    for var, sub in ISOLATED_DIRS.items():
        path = os.path.join(store_dir, "env", sub)
        os.makedirs(path, mode=0o700, exist_ok=True)
        env[var] = path
    return env


# codex 0.171.0's words when mcpServer/tool/call names a tool outside the server's enabled_tools.
CODEX_DISABLED_TOOL = "is disabled for MCP server"


def terminal_refusal(message):
    """Whether codex's error says the thread is gone or archived (its refusal of a closed thread)."""
    return any(s in message for s in ("not found", "archived", "no rollout found", "not loaded"))


def toml_string(s):
    return json.dumps(s)


def server_key(name):
    """The [mcp_servers.KEY] codex knows a harness MCP server by."""
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def codex_tool_name(name):
    """How codex 0.171.0 shows an MCP tool's name to the model (inside namespace `mcp__SERVER`)."""
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


# The multi-agent v1 tools of codex 0.171.0 whose arguments name an agent, and the argument
# that does (a list of ids for wait_agent), as codex's own tool definitions in every request
# say. An agent id is the agent's thread id: spawn_agent's output `agent_id`.
AGENT_ID_ARGUMENTS = {"send_input": "target", "close_agent": "target", "resume_agent": "id",
                      "wait_agent": "targets"}
MULTI_AGENT_NAMESPACE = "multi_agent_v1"


def codex_agent_arguments(arguments, key, agent_ids):
    """A multi-agent call's JSON arguments with the protocol instance ids under `key` replaced
    by codex's agent ids; unchanged (the same string) when no value names a known instance."""
    try:
        args = json.loads(arguments)
    except (TypeError, ValueError):
        return arguments
    if not isinstance(args, dict) or key not in args:
        return arguments
    value = args[key]
    if isinstance(value, str) and value in agent_ids:
        args[key] = agent_ids[value]
    elif isinstance(value, list) and any(isinstance(v, str) and v in agent_ids for v in value):
        args[key] = [agent_ids.get(v, v) if isinstance(v, str) else v for v in value]
    else:
        return arguments
    return json.dumps(args)


def scripted_agent_id(arguments, key):
    """The (first) agent id a multi-agent call's JSON arguments name under `key`, or None."""
    try:
        value = json.loads(arguments).get(key)
    except (TypeError, ValueError, AttributeError):
        return None
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, str) else None


def map_tool_calls(data, offered, agent_ids=None, lifecycle_calls=None):
    """Rewrite the harness model's scripted function calls into what codex knows.

    Two rewrites, nothing else:
    - MCP tool names. The harness's endpoint scripts a call by the tool's MCP name
      (`notes.read`), as a plain function call; codex offers MCP tools inside a namespace
      `mcp__SERVER` under a sanitised name (`notes_read`). `offered` maps a plain name to
      (namespace, codex name) for the MCP tools of the request codex made. Only function
      calls without a namespace whose name is one of those are rewritten.
    - Agent ids. The endpoint scripts codex's multi-agent v1 lifecycle calls (send_input,
      close_agent, resume_agent, wait_agent) with the protocol's instance ids, which codex has
      never seen; `agent_ids` maps an instance id to its codex thread id (codex's agent id).
      Only the id arguments of those calls are rewritten; an id that names no instance passes
      unchanged, for codex to refuse. Each such call is noted in `lifecycle_calls` (when
      given) as {call_id: (tool name, the id the endpoint scripted)}, so the adapter can
      report what codex answered the model for it.
    Everything else (spawn_agent, built-in tools, unknown tools) passes unchanged, byte for
    byte: only a JSON document (an SSE data line) holding a rewritten call is re-serialised.
    `data` is the endpoint's answer: SSE text or one JSON document.
    """
    if not (offered or agent_ids) or b'"function_call"' not in data:
        return data
    agent_ids = agent_ids or {}

    def fix(value):
        """Rewrite the calls inside `value` in place; whether any was rewritten."""
        changed = False
        if isinstance(value, dict):
            if (value.get("type") == "function_call" and not value.get("namespace")
                    and isinstance(value.get("name"), str) and codex_tool_name(value["name"]) in offered):
                namespace, name = offered[codex_tool_name(value["name"])]
                value["namespace"] = namespace
                value["name"] = name
                changed = True
            elif (value.get("type") == "function_call" and value.get("namespace") == MULTI_AGENT_NAMESPACE
                    and value.get("name") in AGENT_ID_ARGUMENTS):
                key = AGENT_ID_ARGUMENTS[value["name"]]
                if lifecycle_calls is not None:
                    lifecycle_calls[value.get("call_id") or ""] = (
                        value["name"], scripted_agent_id(value.get("arguments"), key))
                arguments = codex_agent_arguments(value.get("arguments"), key, agent_ids)
                changed = arguments is not value.get("arguments")
                value["arguments"] = arguments
            for v in value.values():
                changed = fix(v) or changed
        elif isinstance(value, list):
            for v in value:
                changed = fix(v) or changed
        return changed

    def rewritten(document):
        """The JSON text `document` with its calls rewritten, or None when it holds none to rewrite."""
        try:
            parsed = json.loads(document)
        except ValueError:
            return None
        return json.dumps(parsed) if fix(parsed) else None

    text = data.decode("utf-8")
    if text.lstrip().startswith("{"):
        whole = rewritten(text)
        return data if whole is None else whole.encode()
    out = []
    for line in text.split("\n"):
        if line.startswith("data:"):
            event = rewritten(line[5:])
            if event is not None:
                line = "data: " + event
        out.append(line)
    return "\n".join(out).encode()


UNSUPPORTED_CALL = "unsupported call: "
# codex's refusal to delete a thread that a fork's history still refers to
FORK_REFERENCES = "forked history still references it"
# codex's words in a failed mcpToolCall item: the server failed the call it was sent, or codex
# refused to send it because it needs an approval the policy never gives
MCP_SERVER_FAILED = "tool call failed for `"
APPROVAL_NEVER = "requires approval, but approval policy is never"


def trailing_outputs(body):
    """{call_id: output text} of the tool outputs that end a Responses request body: what codex
    answered the model for the calls of the model's previous answer."""
    try:
        items = json.loads(body).get("input") or []
    except (ValueError, AttributeError):
        return {}
    if not isinstance(items, list):
        return {}
    outputs = {}
    for item in reversed(items):  # only the outputs that end the request: this answer's calls
        if not (isinstance(item, dict) and item.get("type") == "function_call_output"):
            break
        output = item.get("output")
        outputs[item.get("call_id") or ""] = output if isinstance(output, str) else json.dumps(output)
    return outputs


def refused_calls(outputs):
    """{call_id: tool name} of the calls codex refused as unknown, among a request's trailing
    outputs (`trailing_outputs`).

    When the model calls a tool the thread is not offered (removed from the MCP server, never
    enabled for it, or withheld), codex runs nothing and sends the model the output
    "unsupported call: NAME"; app-server shows no item for it, so the request is where the
    adapter sees codex's refusal.
    """
    return {cid: out[len(UNSUPPORTED_CALL):].strip() for cid, out in outputs.items()
            if out.startswith(UNSUPPORTED_CALL)}


def offered_mcp_tools(body):
    """{plain name: (namespace, codex name)} for the MCP tools in a Responses request body."""
    try:
        tools = json.loads(body).get("tools") or []
    except (ValueError, AttributeError):
        return {}
    offered = {}
    for tool in tools:
        if isinstance(tool, dict) and tool.get("type") == "namespace" and str(tool.get("name", "")).startswith("mcp__"):
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    offered[inner["name"]] = (tool["name"], inner["name"])
    return offered


def codex_config(base_url, mcp_servers):
    lines = [
        "# written by the delegation-harness codex adapter; regenerated at every start",
        'model_provider = "fake"',
        'model = "reference-model"',
        'approvals_reviewer = "user"',
        "check_for_update_on_startup = false",
        "",
        "[model_providers.fake]",
        'name = "delegation-harness model endpoint"',
        "base_url = %s" % toml_string(base_url),
        'wire_api = "responses"',
        'env_key = "DELEGATION_FAKE_KEY"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[otel]",
        'exporter = "none"',
        "",
    ]
    for server in mcp_servers:
        name = server_key(server["name"])
        lines += ["[mcp_servers.%s]" % name, "url = %s" % toml_string(server["url"]), ""]
    return "\n".join(lines)


def main():
    adapter = Adapter()
    stop = threading.Event()

    def on_term(_signo, _frame):
        adapter.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    out = sys.stdout
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except ValueError as e:
                out.write(json.dumps({"jsonrpc": "2.0", "id": None,
                                      "error": {"code": -32700, "message": "parse error: %s" % e}}) + "\n")
                out.flush()
                continue
            rid = request.get("id")
            method = request.get("method")
            try:
                result = adapter.handle(method, request.get("params"))
                reply = {"jsonrpc": "2.0", "id": rid, "result": result}
            except ProtocolError as e:
                reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": e.code, "message": e.message}}
            except Exception as e:  # a bug of ours: say so for this step only
                log("internal error on %s: %r" % (method, e))
                reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": INTERNAL, "message": repr(e)}}
            out.write(json.dumps(reply) + "\n")
            out.flush()
    finally:
        stop.set()
        adapter.shutdown()


if __name__ == "__main__":
    if sys.argv[1:] == ["--install"]:
        print(ensure_codex())
    else:
        main()
