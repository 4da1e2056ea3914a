#!/usr/bin/env python3
"""A stand-in for `codex app-server` used by test_adapter.py: speaks the same stdio protocol, scripted by input text, with a store like codex's.

Threads are stored as rollout files under $CODEX_HOME/sessions only once they are
named (thread/name/set) or run a turn, as codex does; a turn appends a turn_context
with the thread's permission profile. Input containing SPAWN spawns a child thread
(thread/started with parentThreadId, a collabAgentToolCall item, a child rollout with
source.subagent depth); SPAWN-READONLY gives the child a read-only profile of its own;
SPAWN-ASKING spawns a child whose own turn (beside its parent's, as in codex) asks approval;
APPROVE raises item/commandExecution/requestApproval and waits for the answer (a turn/start
meanwhile starts nothing, the input waits behind the running turn); POKE gives
the thread's last child input as codex's send_input does (a sendInput collabAgentToolCall
item, then the child's own turn, which outlasts the parent's by FAKE_POKED_TURN_S; none while the
child is still in a turn, as codex keeps the input behind it); anything
else answers with an agentMessage. thread/delete removes the rollout (refused while a fork
refers to the thread), thread/archive moves it to archived_sessions. mcpServer/tool/call answers "called TOOL" (an error for
tool "refused.tool", codex's own refusal for "disabled.tool", an isError result for "gone.tool"). Every message it receives is appended to $FAKE_LOG, its pid is
written to $FAKE_PID, its HOME/TMPDIR/XDG_* to $FAKE_ENV; $FAKE_WIDEN makes it answer a
workspace-write sandbox with /tmp writable whatever it was asked.
"""
import json
import os
import sys
import threading
import time

log_path = os.environ.get("FAKE_LOG")
if os.environ.get("FAKE_PID"):
    with open(os.environ["FAKE_PID"], "w") as f:
        f.write(str(os.getpid()))
if os.environ.get("FAKE_ENV"):
    with open(os.environ["FAKE_ENV"], "w") as f:
        json.dump({k: v for k, v in os.environ.items() if k in ("HOME", "TMPDIR", "CODEX_HOME") or k.startswith("XDG_")}, f)
HOME = os.environ.get("CODEX_HOME") or "."
SESSIONS = os.path.join(HOME, "sessions")
ARCHIVED = os.path.join(HOME, "archived_sessions")
lock = threading.Lock()
counter = [0]
waiting = {}
loaded = {}  # thread -> settings dict (sandbox policy, approval, cwd, parent, depth, role)
active = set()
children = {}  # thread -> the children it spawned, in order


def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def fresh(prefix):
    counter[0] += 1
    return "%s-%d-%d" % (prefix, os.getpid(), counter[0])


def rollout(thread):
    for folder in (SESSIONS, ARCHIVED):
        path = os.path.join(folder, "rollout-%s.jsonl" % thread)
        if os.path.exists(path):
            return path
    return None


def append(thread, record):
    path = rollout(thread) or os.path.join(SESSIONS, "rollout-%s.jsonl" % thread)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def store(thread):
    """Write the session_meta of a thread not stored yet."""
    if rollout(thread):
        return
    s = loaded[thread]
    meta = {"id": thread, "cwd": s["cwd"], "parent_thread_id": s.get("parent")}
    if s.get("parent"):
        meta["source"] = {"subagent": {"thread_spawn": {"parent_thread_id": s["parent"], "depth": s["depth"],
                                                        "agent_role": s.get("role")}}}
    append(thread, {"type": "session_meta", "payload": meta})


def profile(policy):
    kind = policy.get("type")
    if kind == "dangerFullAccess":
        return {"type": "disabled"}
    entries = [{"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"}]
    if kind == "workspaceWrite":
        for root in [policy.get("cwd")] + list(policy.get("writableRoots") or []):
            if root:
                entries.append({"path": {"type": "path", "path": root}, "access": "write"})
        for tmp, flag in (("/tmp", "excludeSlashTmp"), (os.environ.get("TMPDIR", "/tmp"), "excludeTmpdirEnvVar")):
            if not policy.get(flag):
                entries.append({"path": {"type": "path", "path": tmp}, "access": "write"})
    return {"type": "managed", "file_system": {"type": "restricted", "entries": entries},
            "network": "enabled" if policy.get("networkAccess") else "restricted"}


def thread_object(thread):
    s = loaded.get(thread) or {}
    path = rollout(thread)
    meta = {}
    if path:
        with open(path) as f:
            meta = json.loads(f.readline()).get("payload") or {}
    out = {"id": thread, "path": path, "cwd": meta.get("cwd") or s.get("cwd"),
           "parentThreadId": meta.get("parent_thread_id") or s.get("parent"),
           "status": {"type": "active" if thread in active else ("idle" if thread in loaded else "notLoaded")}}
    spawn = ((meta.get("source") or {}).get("subagent") or {}).get("thread_spawn")
    if spawn:
        out["source"] = {"subAgent": {"thread_spawn": spawn}}
        out["agentRole"] = spawn.get("agent_role")
    return out


def settings_answer(thread):
    s = loaded[thread]
    policy = dict(s["sandbox"])
    policy.pop("cwd", None)
    return {"thread": thread_object(thread), "sandbox": policy, "approvalPolicy": s["approval"], "cwd": s["cwd"]}


def sandbox_policy(mode, config, cwd):
    if mode == "read-only":
        return {"type": "readOnly", "networkAccess": False}
    if mode == "danger-full-access":
        return {"type": "dangerFullAccess"}
    ww = config.get("sandbox_workspace_write") or {}
    # FAKE_WIDEN: answer as a codex that ignores the /tmp exclusion it was asked for
    return {"type": "workspaceWrite", "writableRoots": [r for r in ww.get("writable_roots", []) if r != cwd],
            "networkAccess": bool(ww.get("network_access")),
            "excludeSlashTmp": bool(ww.get("exclude_slash_tmp")) and not os.environ.get("FAKE_WIDEN"),
            "excludeTmpdirEnvVar": bool(ww.get("exclude_tmpdir_env_var")), "cwd": cwd}


def run_turn(thread, turn, text, policy=None, busy_s=0.0):
    s = loaded[thread]
    if policy:
        s["sandbox"] = dict(policy, cwd=s["cwd"])
    store(thread)
    append(thread, {"type": "turn_context", "payload": {"cwd": s["cwd"], "approval_policy": s["approval"],
                                                        "permission_profile": profile(s["sandbox"])}})
    active.add(thread)
    send({"method": "turn/started", "params": {"threadId": thread, "turn": {"id": turn, "status": "inProgress"}}})
    send({"method": "thread/status/changed", "params": {"threadId": thread, "status": {"type": "active", "activeFlags": []}}})
    if "SPAWN" in text:
        child = fresh("child")
        child_sandbox = dict(s["sandbox"])
        if "SPAWN-READONLY" in text:
            child_sandbox = {"type": "readOnly", "cwd": s["cwd"]}
        loaded[child] = {"sandbox": child_sandbox, "approval": s["approval"], "cwd": s["cwd"], "parent": thread,
                         "depth": s.get("depth", 0) + 1, "role": "worker"}
        children.setdefault(thread, []).append(child)
        send({"method": "thread/started", "params": {"thread": {"id": child, "parentThreadId": thread}}})
        send({"method": "item/completed", "params": {"threadId": thread, "turnId": turn, "item": {
            "type": "collabAgentToolCall", "id": fresh("item"), "tool": "spawnAgent", "status": "completed",
            "senderThreadId": thread, "receiverThreadIds": [child], "agentsStates": {}}}})
        if "SPAWN-ASKING" in text:
            threading.Thread(target=run_turn, args=(child, fresh("turn"), "APPROVE child work"), daemon=True).start()
        else:
            run_turn(child, fresh("turn"), "child work")
    if "POKE" in text and children.get(thread):
        child = children[thread][-1]
        send({"method": "item/completed", "params": {"threadId": thread, "turnId": turn, "item": {
            "type": "collabAgentToolCall", "id": fresh("item"), "tool": "sendInput", "status": "completed",
            "senderThreadId": thread, "receiverThreadIds": [child], "agentsStates": {}}}})
        if child not in active:  # a child still in a turn (waiting for an answer) keeps the input behind it
            poked = threading.Thread(target=run_turn, args=(child, fresh("turn"), "poked"),
                                     kwargs={"busy_s": float(os.environ.get("FAKE_POKED_TURN_S", "0.5"))}, daemon=True)
            poked.start()
            time.sleep(0.05)  # the child's turn has started when the parent's ends, as in codex
    if "APPROVE" in text:
        rid = fresh("srv")
        event = threading.Event()
        waiting[rid] = event
        send({"id": rid, "method": "item/commandExecution/requestApproval",
              "params": {"threadId": thread, "turnId": turn, "itemId": "cmd-1", "command": "touch x"}})
        event.wait(10)
        decision = waiting.pop(rid + ":answer", "decline")
        status = "completed" if decision == "accept" else "declined"
        send({"method": "item/completed", "params": {"threadId": thread, "turnId": turn, "item": {
            "type": "commandExecution", "id": "cmd-1", "command": "touch x", "status": status}}})
    else:
        send({"method": "item/completed", "params": {"threadId": thread, "turnId": turn, "item": {
            "type": "agentMessage", "id": fresh("item"), "text": "echo: " + text}}})
    time.sleep(busy_s)
    active.discard(thread)
    send({"method": "turn/completed", "params": {"threadId": thread, "turn": {"id": turn, "status": "completed", "error": None}}})
    send({"method": "thread/status/changed", "params": {"threadId": thread, "status": {"type": "idle"}}})


def handle(method, params, rid):
    thread = params.get("threadId")
    if method == "initialize":
        return {"userAgent": "fake"}
    if method == "thread/start":
        thread = fresh("thread")
        cwd = params["cwd"]
        loaded[thread] = {"sandbox": sandbox_policy(params["sandbox"], params.get("config") or {}, cwd),
                          "approval": params["approvalPolicy"], "cwd": cwd, "depth": 0}
        return settings_answer(thread)
    if method == "thread/name/set":
        if thread not in loaded:
            raise LookupError("thread not found: %s" % thread)
        store(thread)
        return {}
    if method == "thread/read":
        if not rollout(thread) and thread not in loaded:
            raise LookupError("thread not loaded: %s" % thread)
        return {"thread": thread_object(thread)}
    if method == "thread/delete":
        if any(s.get("forked_from") == thread for s in loaded.values()):
            raise LookupError("cannot delete thread %s: forked history still references it" % thread)
        path = rollout(thread)
        if not path and thread not in loaded:
            raise LookupError("thread not found: %s" % thread)
        if path:
            os.remove(path)
        loaded.pop(thread, None)
        return {}
    if method == "thread/archive":
        path = rollout(thread)
        if not path:
            raise LookupError("no rollout found for thread id %s" % thread)
        os.makedirs(ARCHIVED, exist_ok=True)
        os.replace(path, os.path.join(ARCHIVED, os.path.basename(path)))
        loaded.pop(thread, None)
        return {}
    if method in ("thread/resume", "thread/fork"):
        path = rollout(thread)
        if not path or ARCHIVED in path:
            raise LookupError("no rollout found for thread id %s" % thread)
        with open(path) as f:
            meta = json.loads(f.readline())["payload"]
        cwd = meta["cwd"]
        settings = {"sandbox": sandbox_policy(params.get("sandbox", "read-only"), params.get("config") or {}, cwd),
                    "approval": params.get("approvalPolicy", "on-request"), "cwd": cwd,
                    "parent": meta.get("parent_thread_id"), "depth": (((meta.get("source") or {}).get("subagent") or {})
                                                                      .get("thread_spawn") or {}).get("depth", 0)}
        if method == "thread/fork":
            settings["forked_from"] = thread
            thread = fresh("thread")
            settings["parent"] = None
        loaded[thread] = settings
        return settings_answer(thread)
    if method == "turn/start":
        if thread not in loaded:
            raise LookupError("thread not found: %s" % thread)
        turn = fresh("turn")
        text = "".join(i.get("text", "") for i in params.get("input", []))
        if thread in active:
            # codex keeps input for a thread whose turn is still running (e.g. waiting for an
            # approval) behind that turn: nothing starts now
            return {"turn": {"id": turn, "status": "inProgress"}}
        threading.Thread(target=run_turn, args=(thread, turn, text, params.get("sandboxPolicy")), daemon=True).start()
        return {"turn": {"id": turn, "status": "inProgress"}}
    if method == "mcpServer/tool/call":
        if thread not in loaded:
            raise LookupError("thread not found: %s" % thread)
        if params["tool"] == "refused.tool":
            raise LookupError("tool refused.tool is not enabled for server %s" % params["server"])
        if params["tool"] == "disabled.tool":
            # codex 0.171.0's own words for a tool outside the server's enabled_tools
            raise LookupError("tool 'disabled.tool' is disabled for MCP server '%s'" % params["server"])
        if params["tool"] == "gone.tool":
            return {"content": [{"type": "text", "text": "unknown tool gone.tool"}], "isError": True}
        return {"content": [{"type": "text", "text": "called " + params["tool"]}]}
    raise NotImplementedError("fake: no " + method)


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        if log_path:
            with open(log_path, "a") as f:
                f.write(json.dumps(msg) + "\n")
        if "method" not in msg:  # an answer to one of our requests
            rid = msg.get("id")
            if rid in waiting:
                waiting[str(rid) + ":answer"] = (msg.get("result") or {}).get("decision")
                waiting[rid].set()
            continue
        method, params, rid = msg["method"], msg.get("params") or {}, msg.get("id")
        if rid is None:
            continue
        try:
            send({"id": rid, "result": handle(method, params, rid)})
        except LookupError as e:
            send({"id": rid, "error": {"code": -32600, "message": str(e)}})
        except NotImplementedError as e:
            send({"id": rid, "error": {"code": -32601, "message": str(e)}})


if __name__ == "__main__":
    main()
