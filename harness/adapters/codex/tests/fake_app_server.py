#!/usr/bin/env python3
"""A stand-in for `codex app-server` used by test_adapter.py: speaks the same stdio protocol, scripted by input text.

Input containing SPAWN spawns a child thread (thread/started with parentThreadId and a
collabAgentToolCall item); APPROVE raises item/commandExecution/requestApproval and waits
for the answer; anything else answers with an agentMessage. Every message it receives is
appended to $FAKE_LOG, and its pid is written to $FAKE_PID.
"""
import json
import os
import sys
import threading

log_path = os.environ.get("FAKE_LOG")
if os.environ.get("FAKE_PID"):
    with open(os.environ["FAKE_PID"], "w") as f:
        f.write(str(os.getpid()))
lock = threading.Lock()
archived = set()
counter = [0]
waiting = {}


def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def fresh(prefix):
    counter[0] += 1
    return "%s-%d-%d" % (prefix, os.getpid(), counter[0])


def run_turn(thread, turn, text):
    send({"method": "turn/started", "params": {"threadId": thread, "turn": {"id": turn, "status": "inProgress"}}})
    send({"method": "thread/status/changed", "params": {"threadId": thread, "status": {"type": "active", "activeFlags": []}}})
    if "SPAWN" in text:
        child = fresh("child")
        send({"method": "thread/started", "params": {"thread": {"id": child, "parentThreadId": thread}}})
        send({"method": "item/completed", "params": {"threadId": thread, "turnId": turn, "item": {
            "type": "collabAgentToolCall", "id": fresh("item"), "tool": "spawnAgent", "status": "completed",
            "senderThreadId": thread, "receiverThreadIds": [child], "agentsStates": {}}}})
        run_turn(child, fresh("turn"), "child work")
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
    send({"method": "turn/completed", "params": {"threadId": thread, "turn": {"id": turn, "status": "completed", "error": None}}})
    send({"method": "thread/status/changed", "params": {"threadId": thread, "status": {"type": "idle"}}})


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
        if method == "initialize":
            send({"id": rid, "result": {"userAgent": "fake"}})
        elif method == "thread/start":
            send({"id": rid, "result": {"thread": {"id": fresh("thread")}}})
        elif method == "thread/archive":
            archived.add(params["threadId"])
            send({"id": rid, "result": {}})
        elif method in ("turn/start", "thread/resume", "thread/fork"):
            thread = params["threadId"]
            if thread in archived:
                send({"id": rid, "error": {"code": -32600, "message": "thread not found: " + thread}})
                continue
            if method == "thread/fork":
                send({"id": rid, "result": {"thread": {"id": fresh("thread")}}})
            elif method == "thread/resume":
                send({"id": rid, "result": {"thread": {"id": thread}}})
            else:
                turn = fresh("turn")
                send({"id": rid, "result": {"turn": {"id": turn, "status": "inProgress"}}})
                text = "".join(i.get("text", "") for i in params.get("input", []))
                threading.Thread(target=run_turn, args=(thread, turn, text), daemon=True).start()
        else:
            send({"id": rid, "error": {"code": -32601, "message": "fake: no " + method}})


if __name__ == "__main__":
    main()
