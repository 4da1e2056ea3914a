#!/usr/bin/env python3
"""A well-behaved protocol v1 adapter: answers initialize and state/observe, refuses the rest as unsupported.

It also exercises the optional parts a real adapter may use: a `log`
notification before each answer and the DELEGATION_STORE_DIR variable.
"""
import json
import os
import sys

METHOD_NOT_FOUND = -32601
UNSUPPORTED_OPTION = -32001
INVALID_PARAMS = -32602


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main():
    for line in sys.stdin:
        request = json.loads(line)
        method, rid = request["method"], request["id"]
        send({"jsonrpc": "2.0", "method": "log",
              "params": {"level": "info", "message": f"got {method} #{rid}"}})
        if method == "initialize":
            env = request["params"]["environment"]
            result = {"host": {"name": "echo-py", "version": env["store_dir"]},
                      "protocol_version": "1.0", "capabilities": ["clock"]}
        elif method == "state/observe":
            result = {"outcome": "ok", "detail": os.environ.get("DELEGATION_STORE_DIR", ""),
                      "observed": {"now": 0, "auto_approve": False}}
        elif method == "clock/set":
            result = {"outcome": "ok"}
        elif method == "fault/arm":
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": UNSUPPORTED_OPTION, "message": "no fault points"}})
            continue
        elif method == "instance/close":
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": INVALID_PARAMS, "message": "unknown instance id format"}})
            continue
        elif method == "instance/fail":
            # A refusal under the host's own name for the reason, as a real host would answer.
            result = {"outcome": "denied", "reason": "already_finished"}
        elif method == "instance/cancel":
            # Well-framed but not an ActionResult: a violation for this step only.
            result = {"outcome": "maybe"}
        else:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": METHOD_NOT_FOUND, "message": f"{method} not implemented"}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": result})


if __name__ == "__main__":
    main()
