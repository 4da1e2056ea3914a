#!/usr/bin/env python3
"""Reproduction: codex 0.171.0 lets a parent's model reopen a closed child (resume_agent + send_input), TR1, unless the thread was deleted.

No catalogue scenario can script it (the harness endpoint cannot emit codex's
`resume_agent`/`send_input`), so this drives adapter.py (and the real codex it
installs) over protocol v1 against a small scripted Responses endpoint of its own,
and counts the requests that endpoint receives for the child (the endpoint's own count,
by the x-delegation-instance header the relay adds from codex's thread-id header):

  1. start root i-1 (workspace-write, approval never, delegation depth 1)
  2. turn on i-1 "DELEGATE-NOW": the model calls spawn_agent -> child i-2 (1 request)
  3. close i-2: --via delete (default: instance/close, app-server thread/delete),
     --via archive (instance/close with CODEX_ADAPTER_CLOSE_METHOD=thread/archive),
     --via close_agent (the parent's model calls close_agent on it)
  4. turn on i-2 directly: expected refused (instance_terminal) with no request
  5. turn on i-1 "RESUME-IT": the model calls resume_agent {id: <child thread>}
  6. turn on i-1 "SEND-IT": the model calls send_input {target, message: "REVIVED_TASK"}
  7. count the endpoint's requests made for i-2 after the close

Prints REOPENED when i-2 made a model request after it was closed, STAYED CLOSED otherwise.
Exit 0 when codex did what the README says for that way of closing (archive, close_agent:
reopened; delete: stayed closed), 1 otherwise.
Run from anywhere: python3 harness/adapters/codex/repro/resume_agent_reopens.py [--via delete|archive|close_agent]
"""
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

ADAPTER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "adapter.py")
REQUESTS = []  # (instance header, last input text)


class Model(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        items = body.get("input") or []
        last = [i for i in items if i.get("role") == "user" or i.get("type") == "function_call_output"]
        text = json.dumps(last[-1]) if last else ""
        REQUESTS.append((self.headers.get("x-delegation-instance"), text[:200]))
        ids = re.findall(r'agent_id\\+":\\+"([0-9a-f-]+)', json.dumps(items))
        child = ids[-1] if ids else "none"
        answered = "function_call_output" in text
        call = None
        if not answered:
            for marker, name, args in (("DELEGATE-NOW", "spawn_agent", {"message": "child task: summarise", "agent_type": "worker"}),
                                       ("CLOSE-IT", "close_agent", {"target": child}),
                                       ("RESUME-IT", "resume_agent", {"id": child}),
                                       ("SEND-IT", "send_input", {"target": child, "message": "REVIVED_TASK"})):
                if marker in text:
                    call = {"type": "function_call", "id": "fc_" + name, "call_id": "call_%s_%d" % (name, len(REQUESTS)),
                            "namespace": "multi_agent_v1", "name": name, "arguments": json.dumps(args),
                            "status": "completed"}
        item = call or {"type": "message", "id": "m%d" % len(REQUESTS), "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "done", "annotations": []}]}
        usage = {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0}
        done = {"id": "r%d" % len(REQUESTS), "object": "response", "created_at": 0, "status": "completed",
                "model": "m", "output": [item], "usage": usage}
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
    via = sys.argv[sys.argv.index("--via") + 1] if "--via" in sys.argv else "delete"
    env = dict(os.environ)
    if via == "archive":
        env["CODEX_ADAPTER_CLOSE_METHOD"] = "thread/archive"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    store = tempfile.mkdtemp(prefix="codex-repro-")
    proc = subprocess.Popen([sys.executable, ADAPTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(os.path.join(store, "adapter.log"), "w"), text=True,
                            env=dict(env, DELEGATION_STORE_DIR=store))
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
    call("host/configure", {})
    call("instance/start", {"role": "lead", "sandbox": {"workspace-write": {"writable_roots": ["/w/repo"], "network": False}},
                            "approval_policy": "never", "cwd": "/w/repo", "delegation_depth": 1})
    call("instance/turn", {"instance": "i-1", "input": "plan, then DELEGATE-NOW"})
    if via == "close_agent":
        call("instance/turn", {"instance": "i-1", "input": "CLOSE-IT"})
    else:
        call("instance/close", {"instance": "i-2"})
    closed_at = len(REQUESTS)
    call("instance/turn", {"instance": "i-2", "input": "FOLLOW_UP"})
    call("instance/turn", {"instance": "i-1", "input": "RESUME-IT"})
    call("instance/turn", {"instance": "i-1", "input": "SEND-IT"})
    time.sleep(3)  # the revived child runs after the parent's turn ends
    observed = call("state/observe").get("observed", {})
    proc.stdin.close()
    proc.wait(10)
    after = [r for r in REQUESTS[closed_at:] if r[0] == "i-2"]
    print("child states:", {i["id"]: i["state"] for i in observed.get("instances", [])})
    print("requests for i-2 after the close (%s):" % via, len(after))
    for r in after:
        print("  ", r[1])
    print("what codex answered the parent's model after the close:")
    for r in REQUESTS[closed_at:]:
        if r[0] == "i-1" and "function_call_output" in r[1]:
            print("  ", r[1])
    print("REOPENED" if after else "STAYED CLOSED")
    server.shutdown()
    expected_reopened = via != "delete"
    return 0 if bool(after) == expected_reopened else 1


if __name__ == "__main__":
    sys.exit(main())
