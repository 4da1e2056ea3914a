#!/usr/bin/env python3
"""Writes codex's expectations.json from a full-catalogue JSON report: each unsupported scenario with the codex capability it lacks, each known failure and known-unverified scenario with its hand-checked evidence.

Usage: python3 harness/adapters/codex/conformance/expectations.py REPORT.json

The reason of an unsupported scenario is composed from what it lacked through
the tables below, which say what codex 0.171.0 has not: the capabilities the
scenario needs and the adapter does not declare, a property it declares
(`unless`), or the method or option the adapter refused (-32601 / -32001). A
cause missing from the tables stops the script, so no scenario is listed
without a reason. The report names the cause of a scenario it found
unsupported; for one the current expectations already list, the capabilities
are compared again (the scenario file against adapter.py's CAPABILITIES) and
a refused method is read back from the current reason.

Failures, unverified and inconclusive results are never written from the report: they come
from `known-failures.json` beside this script (scenario -> {expect, reason}),
written by hand after checking each one against the report's evidence. A
failure with no entry there is left out so that the next run shows it; an
entry whose scenario now passes stops the script (remove it: it is stale).
Each known failure also lists the checks it fails at in this report
(`failed`), so a run where it fails at other checks is a failure again, not
this known one.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ADAPTER_DIR = os.path.dirname(HERE)
sys.path.insert(0, ADAPTER_DIR)
import adapter  # noqa: E402  (CAPABILITIES: what the adapter declares)

# The capabilities that are a way to more authority: never missing, the scenarios run and
# check the refusal (PROTOCOL.md, Capabilities).
AUTHORITY_WIDENING = ("remote-targets", "worktrees", "other-providers", "full-access-children")

# What codex 0.171.0 lacks, per capability the catalogue asks for (README, Unsupported).
CAPABILITY = {
    "receipts": "codex has no delegation receipts (spawn_agent creates the child in one step)",
    "clock": "codex reads the system clock; it cannot run on the harness's clock (clock/set)",
    "external-authorizer": "codex consults no external authorizer before creating a child (a hook command could, "
                           "but its checks would be the adapter's, not codex's)",
    "auto-approval": "codex has no policy auto-approval (approvals_reviewer = auto_review is a model-driven "
                     "guardian, not a policy switch)",
    "exact-call-grants": "codex has no exact-call grants: acceptForSession allows a whole class for the session, "
                         "and nothing revokes it",
    "task-capabilities": "codex has no task capabilities",
    "fault-injection": "codex has no fault injection points",
    "events": "codex takes no host events from the client (event/deliver)",
    "wait": "app-server has no wait on a thread (wait_agent is a tool of the parent's model)",
    "reviewer": "codex takes no risk scores from the client (review/score)",
    "clarification-questions": "codex's questions to a person come from its model's own request_user_input tool "
                               "inside a turn; the adapter has no client-side method that makes a thread ask one "
                               "(instance/ask), so it does not declare clarification-questions",
    "concurrent-requests": "the codex adapter answers one request at a time (it reads the next request only after "
                           "answering the last, driving codex's app-server turn by turn), so no two actions are in "
                           "flight at once through it; racing them would take an adapter that multiplexes requests "
                           "onto codex's threads",
    "spawn-authority": "codex's spawn_agent takes message, agent_type, model, reasoning_effort, fork_context and "
                       "items, no authority (sandbox, approval policy, cwd, target, tools), so the authority this "
                       "spawn requests cannot reach codex; a spawn_agent child gets its parent's live sandbox and "
                       "approval policy",
}

# What codex is by design, per property a scenario does not apply to (`unless`).
PROPERTY = {
    "reusable-agents": "codex's multi_agent_v1 declares `reusable-agents`: resume_agent exists to reopen an agent "
                       "its model closed with close_agent (\"Resume a previously closed agent by id so it can "
                       "receive send_input and wait_agent calls\", codex's own tool description), so a child the "
                       "model closed may be reopened by design (README, Lifecycle tools; with the property "
                       "withheld the harness counts the reopened child's request)",
}

# What the adapter refuses, per method, and why codex has no counterpart.
DELEGATE = ("codex has no client-side delegation (instance/delegate): a child exists only when the model calls "
            "spawn_agent inside a turn")
METHOD = {
    "instance/delegate": DELEGATE,
    "instance/cancel": "codex has no cancelled (terminal) state: turn/interrupt stops a running turn and leaves the "
                       "thread idle and usable (instance/cancel)",
    "instance/fail": "codex has no way to mark a thread failed from outside (instance/fail)",
    # instance/start's -32001: an approval policy or sandbox codex has no word for
    "instance/start": "codex cannot express the start's approval policy or sandbox (a granular policy that asks for "
                      "and refuses nothing: codex's granular switches are per prompt kind and its never refuses an "
                      "MCP call that needs approval; an external sandbox): instance/start is -32001",
    # host/configure's -32001 in a scenario whose capabilities codex has: strict mode
    "host/configure": "codex has no strict mode for children (host/configure strict_mode is -32001)",
}

MISSING_PROPERTY = "what this scenario asks of it: it declares `"
DENY_REASONS = {"unsupported_call": "tool_drift"}


def catalogue(root):
    """{scenario id: its file's JSON} for the catalogue under `root`."""
    scenarios = {}
    for area in sorted(os.listdir(root)):
        folder = os.path.join(root, area)
        if area == "schema" or not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if name.endswith(".json"):
                with open(os.path.join(folder, name)) as f:
                    scenario = json.load(f)
                scenarios[scenario["id"]] = scenario
    return scenarios


def causes_from_report(missing):
    """("capability"|"property"|"method", name) for each cause the report names."""
    causes = []
    for cause in missing:
        if cause.startswith(MISSING_PROPERTY):
            causes.append(("property", cause[len(MISSING_PROPERTY):].rstrip("`")))
        elif cause.startswith("method `"):
            causes.append(("method", cause.split("`")[1]))
        else:
            causes.append(("capability", cause))
    return causes


def causes_again(scenario, previous_reason):
    """The causes of a scenario the current expectations list as unsupported: its capabilities
    against the adapter's, or else the refused method its current reason names."""
    causes = [("capability", need) for need in scenario.get("needs", [])
              if need not in adapter.CAPABILITIES and need not in AUTHORITY_WIDENING]
    causes += [("property", p) for p in scenario.get("unless", []) if p in adapter.CAPABILITIES]
    if causes:
        return causes
    for method, text in METHOD.items():
        if previous_reason and previous_reason.startswith(text):
            return [("method", method)]
    raise SystemExit("%s: unsupported, but neither a missing capability nor a refused method explains it"
                     % scenario["id"])


def reason_for(scenario_id, causes, twins, unsupported):
    parts = []
    for kind, name in causes:
        table = {"capability": CAPABILITY, "property": PROPERTY, "method": METHOD}[kind]
        if name not in table:
            raise SystemExit("%s: no reason known for %s `%s`; add it to %s" % (scenario_id, kind, name, __file__))
        text = table[name]
        if kind == "method" and name == "instance/delegate":
            twin = twins.get(scenario_id)
            if twin is None:
                text += "; the catalogue has no spawn-based twin of it yet"
            elif twin in unsupported:
                text += "; its spawn-based twin %s cannot run on codex either (see its entry)" % twin
            else:
                text += "; its spawn-based twin %s is what runs on codex" % twin
        if text not in parts:
            parts.append(text)
    if not parts:
        raise SystemExit("%s: unsupported without a cause" % scenario_id)
    return "; ".join(parts)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: expectations.py REPORT.json\n")
        return 2
    with open(argv[1]) as f:
        report = json.load(f)
    with open(os.path.join(HERE, "known-failures.json")) as f:
        hand_checked = json.load(f)
    out = os.path.join(ADAPTER_DIR, "expectations.json")
    with open(out) as f:
        previous = {e["scenario"]: e["reason"] for e in json.load(f)["known"]}
    scenarios = catalogue(os.path.join(ADAPTER_DIR, "..", "..", "..", "scenarios"))
    twins = {s["twin_of"]: sid for sid, s in scenarios.items() if s.get("twin_of")}
    unsupported = {s["id"] for s in report["scenarios"] if s["raw_verdict"] == "unsupported"}
    known, left_out, stale = [], [], []
    for s in sorted(report["scenarios"], key=lambda s: s["id"]):
        sid, raw = s["id"], s["raw_verdict"]
        # A passing negative whose control did not pass: the runner's verdict, listed or not.
        if s["verdict"] == "inconclusive" or s.get("expected") == "inconclusive":
            raw = "inconclusive"
        if sid in hand_checked:
            entry = hand_checked[sid]
            if raw in ("pass", "unsupported"):
                stale.append("%s (%s now)" % (sid, raw))
                continue
            if entry["expect"] != raw:
                raise SystemExit("%s: known-failures.json expects %s, the report says %s"
                                 % (sid, entry["expect"], raw))
            listed = {"scenario": sid, "expect": entry["expect"], "reason": entry["reason"]}
            if raw == "fail":
                # the checks the hand-checked evidence describes, as this run failed them
                listed["failed"] = sorted({failure["at"] for failure in s["failures"]})
            known.append(listed)
        elif raw == "unsupported":
            causes = (causes_from_report(s["missing"]) if s.get("missing")
                      else causes_again(scenarios[sid], previous.get(sid)))
            known.append({"scenario": sid, "expect": "unsupported", "reason": reason_for(sid, causes, twins, unsupported)})
        elif raw != "pass":
            left_out.append("%s (%s)" % (sid, raw))
    if stale:
        raise SystemExit("known-failures.json lists scenarios that no longer fail; remove them: " + ", ".join(stale))
    with open(out, "w") as f:
        json.dump({"known": known, "deny_reasons": DENY_REASONS}, f, indent=2)
        f.write("\n")
    sys.stderr.write("%d entries written to %s\n" % (len(known), out))
    for item in left_out:
        sys.stderr.write("not listed (the run shows it): %s\n" % item)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
