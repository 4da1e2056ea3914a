#!/usr/bin/env python3
"""An adapter that answers `initialize` correctly, then misbehaves on every later request as MODE says.

Modes: silent, exit_mid, not_json, wrong_id, huge_line, stderr_flood,
ignore_stdin_close, ignore_term, grandchild, no_newline_exit; and, for
requests in flight at once (it declares `concurrent-requests`), each
collecting BATCH requests before it answers any: batch_reversed (all, last
first), batch_duplicate (the first twice), batch_unknown_id (an id that was
never sent), batch_one_silent (all but the first).
"""
import json
import os
import signal
import subprocess
import sys

MODE = sys.argv[1]
BATCH = int(sys.argv[2]) if len(sys.argv) > 2 else 3


def batch_answer(rid):
    return {"outcome": "ok", "detail": f"answer to {rid}"}


def send_raw(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def answer(rid, result):
    send_raw(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")


def observe_result():
    return {"outcome": "ok", "observed": {"now": 0, "auto_approve": False}}


def main():
    if MODE == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if MODE == "grandchild":
        # A child that outlives us unless the whole group is killed; its pid
        # goes out as our version so the test can check it is gone.
        child = subprocess.Popen(["sleep", "300"])
    batch = []
    for line in sys.stdin:
        request = json.loads(line)
        rid, method = request["id"], request["method"]
        if method == "initialize":
            version = str(child.pid) if MODE == "grandchild" else "0"
            capabilities = ["concurrent-requests"] if MODE.startswith("batch_") else []
            answer(rid, {"host": {"name": MODE, "version": version}, "protocol_version": "1.0",
                         "capabilities": capabilities})
        elif MODE.startswith("batch_"):
            batch.append(rid)
            if len(batch) < BATCH:
                continue
            ids, batch = batch, []
            if MODE == "batch_reversed":
                for b in reversed(ids):
                    answer(b, batch_answer(b))
            elif MODE == "batch_duplicate":
                answer(ids[0], batch_answer(ids[0]))
                answer(ids[0], batch_answer(ids[0]))
            elif MODE == "batch_unknown_id":
                answer(max(ids) + 100, batch_answer(max(ids) + 100))
            elif MODE == "batch_one_silent":
                for b in ids[1:]:
                    answer(b, batch_answer(b))
        elif MODE == "silent":
            continue
        elif MODE == "exit_mid":
            sys.stderr.write("adapter: store is corrupt, giving up\n")
            sys.stderr.flush()
            sys.exit(3)
        elif MODE == "not_json":
            send_raw("Traceback (most recent call last): oops\n")
        elif MODE == "wrong_id":
            answer(rid + 100, observe_result())
        elif MODE == "huge_line":
            # 50 MB in one line, written in pieces so the adapter itself stays small.
            send_raw('{"jsonrpc":"2.0","id":%d,"result":{"detail":"' % rid)
            chunk = "a" * (1 << 20)
            for _ in range(50):
                send_raw(chunk)
            send_raw('"}}\n')
        elif MODE == "stderr_flood":
            chunk = "noise " * 10000 + "\n"
            for _ in range(100):
                sys.stderr.write(chunk)
            sys.stderr.write(f"flood done before #{rid}\n")
            sys.stderr.flush()
            answer(rid, observe_result())
        elif MODE == "no_newline_exit":
            send_raw(json.dumps({"jsonrpc": "2.0", "id": rid, "result": observe_result()}))
            sys.exit(0)
        else:
            answer(rid, observe_result())
    # End of input: a polite adapter exits here.
    if MODE in ("ignore_stdin_close", "ignore_term", "grandchild"):
        signal.pause()


if __name__ == "__main__":
    main()
