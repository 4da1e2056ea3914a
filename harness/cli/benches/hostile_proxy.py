#!/usr/bin/env python3
"""A hostile adapter: relays the protocol to a correct host (the reference host) and misbehaves as MODE says.

Usage: hostile_proxy.py MODE HOST_COMMAND...

Until its trigger (the first `instance/delegate` request) it is a faithful
relay, so the harness reaches the steps that matter; then it does what a
broken adapter does. Used by hostile_adapters.py to build the README's
hostile-adapter table; stdlib only.

Modes:
  hang            stops answering (the host behind it keeps running)
  crash           writes a last word to stderr and exits 3
  garbage         answers with a Python traceback instead of JSON
  huge_line       answers with one 60 MB line
  wrong_id        answers under another id
  duplicate_id    sends the answer twice
  stderr_flood    writes 400 MiB to stderr, then answers
  invalid_utf8    answers with bytes that are not UTF-8
  deep_json       answers with an array nested 100,000 deep
  lying           says a delegation it admitted was denied
  unsolicited     sends the harness a request of its own, then answers
  silent_start    never answers `initialize` (an unflushed stdout)
  setsid_child    starts a process in a new session that outlives it
  stderr_log      logs every request it receives to stderr (the canaries too)
"""
import json
import os
import subprocess
import sys
import threading

MODE, HOST = sys.argv[1], sys.argv[2:]
out_lock = threading.Lock()


def write(data):
    with out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def main():
    if MODE == "setsid_child":
        subprocess.Popen(["setsid", "sleep", "300"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    host = subprocess.Popen(HOST, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    pending = {}  # request id -> method, for requests the trigger cares about
    triggered = threading.Event()

    def relay_replies():
        for line in host.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                write(line)
                continue
            method = pending.pop(json.dumps(message.get("id")), None)
            if method == "initialize" and MODE == "silent_start":
                continue
            if method == "instance/delegate" and not triggered.is_set():
                triggered.set()
                if misbehave(message, line):
                    continue
            write(line)

    threading.Thread(target=relay_replies, daemon=True).start()
    for line in sys.stdin.buffer:
        if MODE == "stderr_log":
            sys.stderr.buffer.write(b"request: " + line)
            sys.stderr.buffer.flush()
        try:
            request = json.loads(line)
            if "method" in request and "id" in request:
                pending[json.dumps(request["id"])] = request["method"]
        except ValueError:
            pass
        host.stdin.write(line)
        host.stdin.flush()
    host.stdin.close()
    host.wait()


def misbehave(reply, line):
    """Does MODE's harm at the trigger; True when the real reply is withheld."""
    rid = reply.get("id")
    if MODE == "hang":
        return True
    if MODE == "crash":
        sys.stderr.write("adapter: lost the host's state, giving up\n")
        sys.stderr.flush()
        os._exit(3)
    if MODE == "garbage":
        write(b"Traceback (most recent call last):\n  File \"adapter.py\", line 1\nKeyError: 'x'\n")
        return True
    if MODE == "huge_line":
        write(b'{"jsonrpc":"2.0","id":%s,"result":{"detail":"' % json.dumps(rid).encode())
        chunk = b"a" * (1 << 20)
        for _ in range(60):
            write(chunk)
        write(b'"}}\n')
        return True
    if MODE == "wrong_id":
        reply["id"] = (rid if isinstance(rid, int) else 0) + 1000
        write(json.dumps(reply).encode() + b"\n")
        return True
    if MODE == "duplicate_id":
        write(line)
        write(line)
        return True
    if MODE == "stderr_flood":
        chunk = b"noise " * 174763 + b"\n"  # 1 MiB
        for _ in range(400):
            sys.stderr.buffer.write(chunk)
        sys.stderr.flush()
        return False
    if MODE == "invalid_utf8":
        write(b'{"jsonrpc":"2.0","id":%s,"result":{"outcome":"\xff\xfe"}}\n' % json.dumps(rid).encode())
        return True
    if MODE == "deep_json":
        write(b'{"jsonrpc":"2.0","id":%s,"result":' % json.dumps(rid).encode()
              + b"[" * 100000 + b"]" * 100000 + b"}\n")
        return True
    if MODE == "lying":
        result = reply.get("result") or {}
        if result.get("outcome") == "ok":
            result = {"outcome": "denied", "reason": "ceiling_exceeded"}
            reply["result"] = result
            write(json.dumps(reply).encode() + b"\n")
            return True
        return False
    if MODE == "unsolicited":
        write(b'{"jsonrpc":"2.0","id":"adapter-1","method":"host/ping","params":{}}\n')
        return False
    return False


if __name__ == "__main__":
    main()
