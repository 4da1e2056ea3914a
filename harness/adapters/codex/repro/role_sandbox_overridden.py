#!/usr/bin/env python3
"""Reproduction: codex 0.171.0 lays the parent's live sandbox over a role's read-only sandbox_mode, so a read-only role's child writes files (CE3).

The evidence is the file system, not the adapter: the child's own shell command creates
a file in the workspace, and the script checks whether the file exists. It drives
adapter.py (and the real codex it installs) over protocol v1 against a small scripted
Responses endpoint of its own:

  control: a read-only root runs `touch root-wrote.txt` through exec_command: the file
           must NOT appear (codex's sandbox works on this machine)
  case:    host/configure roles {reviewer: read-only, never}; a workspace-write root's
           model calls spawn_agent {agent_type: reviewer}; the child's model runs
           `touch child-wrote.txt`: the file appears when codex gave the child the
           parent's sandbox instead of the role's

Prints what codex recorded as the child's permission profile (its rollout), the files,
and REPRODUCED when the control held and the child wrote. Exit 0 then, 1 otherwise.
Run from anywhere: python3 harness/adapters/codex/repro/role_sandbox_overridden.py
"""
import glob
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

ADAPTER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "adapter.py")


class Model(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        items = body.get("input") or []
        last = items[-1] if items else {}
        text = json.dumps(last)
        call = None
        if last.get("type") != "function_call_output":
            if "DELEGATE-NOW" in text:
                call = ("multi_agent_v1", "spawn_agent", {"message": "CHILD-WRITE", "agent_type": "reviewer"})
            elif "CHILD-WRITE" in text:
                call = (None, "exec_command", {"cmd": "touch child-wrote.txt"})
            elif "ROOT-WRITE" in text:
                call = (None, "exec_command", {"cmd": "touch root-wrote.txt"})
        if call:
            namespace, name, args = call
            item = {"type": "function_call", "id": "fc_1", "call_id": "call_%s_%d" % (name, id(self)), "name": name,
                    "arguments": json.dumps(args), "status": "completed"}
            if namespace:
                item["namespace"] = namespace
        else:
            item = {"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "done", "annotations": []}]}
        usage = {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0}
        done = {"id": "r1", "object": "response", "created_at": 0, "status": "completed", "model": "m",
                "output": [item], "usage": usage}
        events = [("response.created", {"type": "response.created", "response": dict(done, status="in_progress", output=[])}),
                  ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
                  ("response.completed", {"type": "response.completed", "response": done})]
        data = "".join("event: %s\ndata: %s\n\n" % (e, json.dumps(d)) for e, d in events).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    store = tempfile.mkdtemp(prefix="codex-repro-role-")
    proc = subprocess.Popen([sys.executable, ADAPTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(os.path.join(store, "adapter.log"), "w"), text=True,
                            env=dict(os.environ, DELEGATION_STORE_DIR=store))
    ids = iter(range(1, 100))

    def call(method, params=None):
        msg = {"jsonrpc": "2.0", "id": next(ids), "method": method}
        if params is not None:
            msg["params"] = params
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        print("%-16s %s" % (method, json.dumps(answer.get("result", answer.get("error")))[:160]))
        return answer.get("result") or {}

    call("initialize", {"protocol_version": "1.0", "environment": {
        "model_endpoint": "http://127.0.0.1:%d" % server.server_address[1], "mcp_servers": [],
        "store_dir": store, "clock": "harness"}})
    call("host/configure", {"roles": {"reviewer": {"sandbox": "read-only", "approval_policy": "never"}}})
    control = call("instance/start", {"role": "lead", "sandbox": "read-only", "approval_policy": "never",
                                      "cwd": "/w/ro", "delegation_depth": 1})["instance"]
    call("instance/turn", {"instance": control, "input": "ROOT-WRITE"})
    parent = call("instance/start", {"role": "lead", "approval_policy": "never", "cwd": "/w/repo", "delegation_depth": 1,
                                     "sandbox": {"workspace-write": {"writable_roots": ["/w/repo"], "network": False}}})["instance"]
    call("instance/turn", {"instance": parent, "input": "DELEGATE-NOW"})
    proc.stdin.close()
    proc.wait(10)
    server.shutdown()
    root_file = os.path.join(store, "fs", "w", "ro", "root-wrote.txt")
    child_file = os.path.join(store, "fs", "w", "repo", "child-wrote.txt")
    for path in glob.glob(os.path.join(store, "codex-home", "sessions", "*", "*", "*", "*.jsonl")):
        with open(path) as f:
            records = [json.loads(line) for line in f]
        meta = next((r["payload"] for r in records if r.get("type") == "session_meta"), {})
        role = meta.get("agent_role")
        contexts = [r["payload"] for r in records if r.get("type") == "turn_context"]
        if role and contexts:
            writes = [e["path"].get("path") for e in contexts[-1]["permission_profile"]["file_system"]["entries"]
                      if e.get("access") == "write"]
            print("codex's rollout for the %s child: writable %s" % (role, writes))
    print("control, read-only root wrote root-wrote.txt:", os.path.exists(root_file))
    print("reviewer (read-only role) child wrote child-wrote.txt:", os.path.exists(child_file))
    reproduced = not os.path.exists(root_file) and os.path.exists(child_file)
    print("REPRODUCED" if reproduced else "NOT REPRODUCED")
    return 0 if reproduced else 1


if __name__ == "__main__":
    sys.exit(main())
