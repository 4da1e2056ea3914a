#!/usr/bin/env python3
"""Reproduction: a catalogue scenario fails on codex only because its read tool lacks `readOnlyHint: true`.

codex 0.171.0 runs an MCP tool without asking only when the server annotates it
`readOnlyHint: true`; under approval policy `never` it refuses any other MCP call itself
("needs approval"), under `on-request` it asks a person first. A scenario whose read tool
says nothing of the kind therefore fails on codex at the tool call, for the catalogue's
phrasing, not for what the scenario asks.

The script runs the scenario twice through the harness (`delegation-harness run --host
codex`, no expectations file, so every result shows as it is): as the catalogue has it,
and as a copy in a temporary catalogue where only the named tool gains
`readOnlyHint: true`. The evidence is the harness's own (its tool server's handler count
and its endpoint's request counts), not the adapter's attribution. Prints REPRODUCED and
exits 0 when the original fails and the copy passes; exits 1 otherwise.

Usage: python3 harness/adapters/codex/repro/read_only_hint.py SCENARIO_ID TOOL
  e.g. python3 harness/adapters/codex/repro/read_only_hint.py zc/047-spawn-role-with-parent-tool read_notes
Needs the release build: CARGO_TARGET_DIR/release/delegation-harness (or `target/`).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))
EXPECTATIONS = {"known": [], "deny_reasons": {"unsupported_call": "tool_drift"}}


def harness_binary():
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    path = os.path.join(target, "release", "delegation-harness")
    if not os.path.exists(path):
        sys.exit("no %s: build it first (cargo build --release -p delegation-harness)" % path)
    return path


def verdict(scenarios, scenario_id, expectations):
    """The raw verdict of one scenario run against codex, from the harness's JSON report."""
    with tempfile.TemporaryDirectory(prefix="codex-repro-") as tmp:
        report = os.path.join(tmp, "report.json")
        subprocess.run([harness_binary(), "run", "--host", "codex", "--scenarios", scenarios,
                        "--expectations", expectations, "--filter", scenario_id, "--seed", "1",
                        "--report", "json=" + report], cwd=REPO, check=False)
        with open(report) as f:
            results = json.load(f)["scenarios"]
    if len(results) != 1:
        sys.exit("%s: expected one scenario, the filter matched %d" % (scenario_id, len(results)))
    return results[0]["raw_verdict"]


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.split("\n\n")[-2])
    scenario_id, tool = argv[1], argv[2]
    source = os.path.join(REPO, "scenarios", scenario_id + ".json")
    if not os.path.exists(source):
        sys.exit("no scenario file %s" % source)
    with open(source) as f:
        scenario = json.load(f)
    definitions = [t["definition"] for t in scenario.get("setup", {}).get("tools", [])
                   if t.get("definition", {}).get("name") == tool]
    if len(definitions) != 1:
        sys.exit("%s: setup.tools has no tool named %r" % (scenario_id, tool))
    if definitions[0].get("annotations", {}).get("readOnlyHint") is True:
        sys.exit("%s: %s already says readOnlyHint: true; nothing to reproduce" % (scenario_id, tool))
    with tempfile.TemporaryDirectory(prefix="codex-repro-catalogue-") as tmp:
        expectations = os.path.join(tmp, "expectations.json")
        with open(expectations, "w") as f:
            json.dump(EXPECTATIONS, f)
        as_is = verdict(os.path.join(REPO, "scenarios"), scenario_id, expectations)
        catalogue = os.path.join(tmp, "scenarios")
        shutil.copytree(os.path.join(REPO, "scenarios", "schema"), os.path.join(catalogue, "schema"))
        definitions[0].setdefault("annotations", {})["readOnlyHint"] = True
        os.makedirs(os.path.dirname(os.path.join(catalogue, scenario_id)), exist_ok=True)
        with open(os.path.join(catalogue, scenario_id + ".json"), "w") as f:
            json.dump(scenario, f, indent=2)
        hinted = verdict(catalogue, scenario_id, expectations)
    print("%s as the catalogue has it: %s; with readOnlyHint on %s: %s" % (scenario_id, as_is, tool, hinted))
    if as_is == "fail" and hinted == "pass":
        print("REPRODUCED: the read tool's missing readOnlyHint is the whole failure")
        return 0
    print("NOT REPRODUCED")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
