"""Unit tests of the codex adapter (run: `python3 -m unittest` in this folder).

They drive adapter.py over stdio against tests/fake_app_server.py, a small
stand-in speaking codex app-server's protocol, so they are fast and never
need the real codex binary or network.
"""
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import adapter  # noqa: E402

FAKE = os.path.join(HERE, "tests", "fake_app_server.py")


class Driver:
    """The adapter as the harness sees it: a subprocess with one request per line."""

    def __init__(self, store=None, **extra_env):
        self.tmp = tempfile.mkdtemp(prefix="codex-adapter-test-")
        self.store = store or os.path.join(self.tmp, "store")
        self.log = os.path.join(self.tmp, "fake.log")
        self.pidfile = os.path.join(self.tmp, "fake.pid")
        self.envfile = os.path.join(self.tmp, "fake.env")
        env = dict(os.environ, CODEX_ADAPTER_BINARY=FAKE, FAKE_LOG=self.log, FAKE_PID=self.pidfile,
                   FAKE_ENV=self.envfile, CODEX_ADAPTER_SETTLE_S="0.05", DELEGATION_STORE_DIR=self.store, **extra_env)
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "adapter.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        self.next_id = 1

    def raw(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def call(self, method, params=None):
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.next_id += 1
        answer = self.raw(json.dumps(msg))
        self.assert_framed(answer, msg["id"])
        return answer

    @staticmethod
    def assert_framed(answer, rid):
        assert answer["jsonrpc"] == "2.0" and answer["id"] == rid, answer
        assert ("result" in answer) != ("error" in answer), answer

    def initialize(self):
        return self.call("initialize", {"protocol_version": "1.0", "environment": {
            "model_endpoint": "http://127.0.0.1:9", "mcp_servers": [], "store_dir": self.store, "clock": "harness"}})

    def sent(self):
        with open(self.log) as f:
            return [json.loads(l) for l in f]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


START = {"role": "lead", "sandbox": {"workspace-write": {"writable_roots": ["/w/repo"], "network": False}},
         "approval_policy": "on-request", "cwd": "/w/repo", "delegation_depth": 1}


class Framing(unittest.TestCase):
    def setUp(self):
        self.d = Driver()

    def tearDown(self):
        self.d.close()

    def test_parse_error_has_null_id(self):
        answer = self.d.raw("{not json")
        self.assertIsNone(answer["id"])
        self.assertEqual(answer["error"]["code"], -32700)

    def test_before_initialize(self):
        self.assertEqual(self.d.call("state/observe")["error"]["code"], -32003)

    def test_wrong_major_version(self):
        answer = self.d.call("initialize", {"protocol_version": "2.0", "environment": {
            "model_endpoint": "http://127.0.0.1:9", "mcp_servers": [], "store_dir": self.d.store, "clock": "harness"}})
        self.assertEqual(answer["error"]["code"], -32004)

    def test_initialize_declares_only_real_capabilities(self):
        result = self.d.initialize()["result"]
        self.assertEqual(result["protocol_version"], "1.0")
        self.assertEqual(result["host"]["name"], "codex")
        for fake in ("receipts", "external-authorizer", "auto-approval", "clock", "fault-injection", "wait"):
            self.assertNotIn(fake, result["capabilities"])
        self.assertIn("direct-tool-calls", result["capabilities"])
        # codex's multi_agent_v1 send_input/resume_agent/close_agent/wait_agent, and v1's design
        # that a model-closed agent may be resumed (README, Lifecycle tools)
        for lifecycle in ("model-lifecycle-tools", "model-close-tools", "reusable-agents"):
            self.assertIn(lifecycle, result["capabilities"])
        # withheld only to reproduce finding 5 (tr/058 then runs); the tools stay declared
        withheld = Driver(CODEX_ADAPTER_REUSABLE_AGENTS="0")
        capabilities = withheld.initialize()["result"]["capabilities"]
        withheld.close()
        self.assertNotIn("reusable-agents", capabilities)
        self.assertIn("model-close-tools", capabilities)
        # codex starts at the first call that needs it, so a scenario found unsupported costs no start
        self.assertFalse(os.path.exists(self.d.log))
        self.d.call("host/configure", {})
        self.assertEqual(self.d.call("state/observe")["result"]["observed"]["instances"], [])
        self.assertFalse(os.path.exists(self.d.log))
        self.d.call("instance/start", START)
        for _ in range(50):
            if len(self.d.sent()) >= 2:
                break
            time.sleep(0.05)
        self.assertEqual(self.d.sent()[0]["method"], "initialize")
        self.assertEqual(self.d.sent()[1], {"method": "initialized"})

    def test_blank_lines_ignored_and_unsupported_is_32601(self):
        self.d.initialize()
        self.d.proc.stdin.write("\n")
        for method in ("instance/delegate", "receipt/prepare", "clock/set", "no/such"):
            self.assertEqual(self.d.call(method, {})["error"]["code"], -32601, method)

    def test_no_stray_output_only_json_lines(self):
        self.d.initialize()
        self.d.call("instance/start", START)
        self.assertEqual(self.d.call("state/observe")["result"]["outcome"], "ok")


class Mapping(unittest.TestCase):
    def setUp(self):
        self.d = Driver()
        self.d.initialize()

    def tearDown(self):
        self.d.close()

    def test_start_maps_sandbox_and_policy(self):
        result = self.d.call("instance/start", START)["result"]
        self.assertEqual(result["outcome"], "ok")
        self.assertEqual(result["effective"]["sandbox"], START["sandbox"])
        start = [m for m in self.d.sent() if m.get("method") == "thread/start"][0]["params"]
        self.assertEqual(start["sandbox"], "workspace-write")
        self.assertEqual(start["approvalPolicy"], "on-request")
        self.assertEqual(start["config"]["agents.max_depth"], 1)
        self.assertTrue(start["cwd"].endswith("/fs/w/repo"))
        # workspace-write without codex's default /tmp and $TMPDIR, so codex allows only the roots
        ww = start["config"]["sandbox_workspace_write"]
        self.assertEqual((ww["exclude_slash_tmp"], ww["exclude_tmpdir_env_var"], ww["network_access"]), (True, True, False))
        self.assertTrue(ww["writable_roots"][0].endswith("/fs/w/repo"))
        # codex stores a thread only once it is named or ran a turn: the adapter names it at once
        named = [m["params"] for m in self.d.sent() if m.get("method") == "thread/name/set"]
        self.assertEqual([n["name"] for n in named], [result["instance"]])

    def test_start_restricts_mcp_tools_by_name(self):
        # codex cannot seal by digest but can limit a thread to named MCP tools: the adapter asks
        # for exactly the named tools (none when none are named) on every harness MCP server.
        self.d.call("initialize", {"protocol_version": "1.0", "environment": {
            "model_endpoint": "http://127.0.0.1:9", "store_dir": self.d.store, "clock": "harness",
            "mcp_servers": [{"name": "harness", "url": "http://127.0.0.1:9/mcp"}]}})
        result = self.d.call("instance/start", dict(START, tools=["notes.read"]))["result"]
        self.assertEqual(result["outcome"], "ok")
        self.assertEqual(result["effective"]["tools"], {})
        self.d.call("instance/start", START)
        starts = [m["params"] for m in self.d.sent() if m.get("method") == "thread/start"]
        self.assertEqual(starts[0]["config"]["mcp_servers.harness.enabled_tools"], ["notes.read"])
        self.assertEqual(starts[1]["config"]["mcp_servers.harness.enabled_tools"], [])

    def test_options_codex_lacks_are_32001(self):
        for change in ({"approval_policy": {"granular": {"ask": ["shell"]}}},
                       {"sandbox": {"external": {"name": "vm"}}}):
            params = dict(START, **change)
            self.assertEqual(self.d.call("instance/start", params)["error"]["code"], -32001, change)
        self.assertEqual(self.d.call("host/configure", {"auto_approve": True})["error"]["code"], -32001)
        self.assertEqual(self.d.call("host/configure", {})["result"], {"outcome": "ok"})

    def test_started_instance_runs_until_its_turn_completes(self):
        # As the model: a new instance is running; a finished turn completes it.
        iid = self.d.call("instance/start", START)["result"]["instance"]
        state = lambda: {i["id"]: i["state"] for i in
                         self.d.call("state/observe")["result"]["observed"]["instances"]}[iid]
        self.assertEqual(state(), "running")
        self.d.call("instance/turn", {"instance": iid, "input": "hello"})
        self.assertEqual(state(), "completed")

    def test_turn_message_and_sandbox_policy(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        result = self.d.call("instance/turn", {"instance": iid, "input": "hello"})["result"]
        self.assertEqual(result["turn"], {"reply": "message", "text": "echo: hello"})
        turn = [m for m in self.d.sent() if m.get("method") == "turn/start"][0]["params"]
        self.assertEqual(turn["sandboxPolicy"]["type"], "workspaceWrite")
        self.assertFalse(turn["sandboxPolicy"]["networkAccess"])

    def test_spawn_reported_with_parent(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        result = self.d.call("instance/turn", {"instance": iid, "input": "SPAWN now"})["result"]
        self.assertEqual(result["turn"]["reply"], "spawn")
        child = result["turn"]["spawn"]["instance"]
        observed = self.d.call("state/observe")["result"]["observed"]
        by_id = {i["id"]: i for i in observed["instances"]}
        self.assertEqual(by_id[child]["parent"], iid)
        self.assertEqual(by_id[child]["state"], "completed")
        self.assertEqual(by_id[child]["ceiling"]["delegation_depth"], 0)

    def test_turn_that_gives_a_child_input_waits_for_the_child_turn(self):
        # codex runs the child's turn beside and after the parent's: the turn is over when the
        # child the model gave input is idle again, so its model request falls in this step
        d = Driver(FAKE_POKED_TURN_S="0.6")
        d.initialize()
        iid = d.call("instance/start", START)["result"]["instance"]
        child = d.call("instance/turn", {"instance": iid, "input": "SPAWN now"})["result"]["turn"]["spawn"]["instance"]
        result = d.call("instance/turn", {"instance": iid, "input": "POKE the child"})["result"]
        self.assertEqual(result["turn"], {"reply": "lifecycle", "op": "send_input", "target": child,
                                          "lifecycle": {"outcome": "ok", "instance": child}})
        observed = d.call("state/observe")["result"]["observed"]
        self.assertEqual({i["id"]: i["state"] for i in observed["instances"]}[child], "completed")
        d.close()

    def test_child_asking_approval_leaves_its_parent_turn_a_spawn(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        result = self.d.call("instance/turn", {"instance": iid, "input": "SPAWN-ASKING now"})["result"]
        self.assertEqual(result["turn"]["reply"], "spawn")
        child = result["turn"]["spawn"]["instance"]
        self.assertNotIn("tool_call", result)
        approvals = self.d.call("state/observe")["result"]["observed"]["approvals"]
        self.assertEqual([(a["instance"], a["state"]) for a in approvals], [(child, "pending")])
        answered = self.d.call("approval/answer", {"request": approvals[0]["id"], "decision": "allow"})["result"]
        self.assertEqual(answered["tool_call"]["outcome"], "executed")

    def test_input_to_a_child_waiting_for_an_answer_ends_the_turn(self):
        # codex keeps a child's new input behind its unanswered request from an earlier turn:
        # the parent's turn that gives it input ends once the parent's own turn does, reporting
        # the lifecycle call, and the child's request stays pending (not waited on to the deadline)
        d = Driver(CODEX_ADAPTER_TURN_DEADLINE_S="3")
        d.initialize()
        iid = d.call("instance/start", START)["result"]["instance"]
        child = d.call("instance/turn", {"instance": iid, "input": "SPAWN-ASKING now"})["result"]["turn"]["spawn"]["instance"]
        started = time.monotonic()
        result = d.call("instance/turn", {"instance": iid, "input": "POKE the child"})
        self.assertLess(time.monotonic() - started, 2)
        self.assertEqual(result["result"]["turn"]["reply"], "lifecycle")
        self.assertEqual(result["result"]["turn"]["target"], child)
        self.assertNotIn("tool_call", result["result"])
        approvals = d.call("state/observe")["result"]["observed"]["approvals"]
        self.assertEqual([(a["instance"], a["state"]) for a in approvals], [(child, "pending")])
        d.close()

    def test_turn_on_a_thread_waiting_for_an_answer_reports_that_request(self):
        # codex runs nothing on a thread whose request waits for a person: a new turn there is
        # reported as that pending request, not waited on until the deadline
        d = Driver(CODEX_ADAPTER_TURN_DEADLINE_S="3")
        d.initialize()
        iid = d.call("instance/start", START)["result"]["instance"]
        aid = d.call("instance/turn", {"instance": iid, "input": "APPROVE it"})["result"]["tool_call"]["approval"]
        started = time.monotonic()
        result = d.call("instance/turn", {"instance": iid, "input": "hello again"})
        self.assertLess(time.monotonic() - started, 2)
        self.assertEqual(result["result"]["tool_call"], {"tool": "exec_command", "outcome": "pending_approval",
                                                          "approval": aid})
        d.close()

    def test_approval_pending_then_answered(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        result = self.d.call("instance/turn", {"instance": iid, "input": "APPROVE this"})["result"]
        self.assertEqual(result["tool_call"]["outcome"], "pending_approval")
        aid = result["tool_call"]["approval"]
        approvals = self.d.call("state/observe")["result"]["observed"]["approvals"]
        self.assertEqual([(a["id"], a["state"], a["class"]) for a in approvals], [(aid, "pending", "shell")])
        answer = self.d.call("approval/answer", {"request": aid, "decision": "deny"})["result"]
        self.assertEqual(answer["tool_call"]["outcome"], "denied")
        # a person's deny is a refusal, its reason the adapter's (codex says none), and nothing is dispatched
        self.assertEqual((answer["outcome"], answer["reason"]), ("denied", "policy_denied"))
        self.assertIn("reason", answer["inferred"])
        replies = [m for m in self.d.sent() if "method" not in m and "result" in m]
        self.assertEqual(replies[-1]["result"], {"decision": "decline"})
        approvals = self.d.call("state/observe")["result"]["observed"]["approvals"]
        self.assertEqual(approvals[0]["decision"], "deny")
        self.assertEqual(approvals[0]["decided_by"], "person")
        self.assertEqual(approvals[0]["state"], "decided")
        # a settled request takes no further answer, whatever the decision: refused, nothing sent to codex
        sent_before = len(self.d.sent())
        for decision in ("allow", "deny", "allow-exact"):
            again = self.d.call("approval/answer", {"request": aid, "decision": decision})["result"]
            self.assertEqual((again["outcome"], again["reason"]), ("denied", "event_replayed"), decision)
        self.assertEqual(len(self.d.sent()), sent_before)

    def test_approval_allowed_is_dispatched(self):
        # the control of the deny above: an allow is sent to codex as accept and the request is dispatched
        iid = self.d.call("instance/start", START)["result"]["instance"]
        aid = self.d.call("instance/turn", {"instance": iid, "input": "APPROVE this"})["result"]["tool_call"]["approval"]
        answer = self.d.call("approval/answer", {"request": aid, "decision": "allow"})["result"]
        self.assertEqual(answer["outcome"], "ok")
        replies = [m for m in self.d.sent() if "method" not in m and "result" in m]
        self.assertEqual(replies[-1]["result"], {"decision": "accept"})
        approvals = self.d.call("state/observe")["result"]["observed"]["approvals"]
        self.assertEqual((approvals[0]["state"], approvals[0]["decision"]), ("dispatched", "allow"))

    def test_allow_exact_on_pending_request_is_32001(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        aid = self.d.call("instance/turn", {"instance": iid, "input": "APPROVE this"})["result"]["tool_call"]["approval"]
        self.assertEqual(self.d.call("approval/answer", {"request": aid, "decision": "allow-exact"})["error"]["code"], -32001)
        approvals = self.d.call("state/observe")["result"]["observed"]["approvals"]
        self.assertEqual(approvals[0]["state"], "pending")

    def test_close_deletes_and_codex_refusal_is_terminal(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        self.assertEqual(self.d.call("instance/close", {"instance": iid})["result"]["outcome"], "ok")
        self.assertIn("thread/delete", [m.get("method") for m in self.d.sent()])
        result = self.d.call("instance/turn", {"instance": iid, "input": "again"})["result"]
        self.assertEqual((result["outcome"], result["reason"]), ("denied", "instance_terminal"))
        self.assertEqual(self.d.call("instance/close", {"instance": iid})["result"]["reason"], "instance_terminal")

    def test_effective_authority_is_codex_answer_not_the_request(self):
        # a codex that answers /tmp writable although told to exclude it: the effective
        # authority shows the widening instead of echoing the request
        d = Driver(FAKE_WIDEN="1")
        d.initialize()
        result = d.call("instance/start", START)["result"]
        self.assertEqual(result["effective"]["sandbox"]["workspace-write"]["writable_roots"], ["/w/repo", "/tmp"])
        d.close()
        result = self.d.call("instance/start", START)["result"]
        self.assertEqual(result["effective"]["sandbox"], START["sandbox"])
        self.assertEqual(result["effective"]["cwd"], "/w/repo")

    def test_codex_runs_in_the_store_not_the_real_home_or_tmp(self):
        self.d.call("instance/start", START)
        with open(self.d.envfile) as f:
            env = json.load(f)
        for var in ("HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
                    "XDG_RUNTIME_DIR", "CODEX_HOME"):
            self.assertTrue(env[var].startswith(self.d.store + os.sep), (var, env[var]))
            self.assertTrue(os.path.isdir(env[var]), var)

    def test_tool_call_is_codex_mcp_server_tool_call(self):
        self.d.call("initialize", {"protocol_version": "1.0", "environment": {
            "model_endpoint": "http://127.0.0.1:9", "store_dir": self.d.store, "clock": "harness",
            "mcp_servers": [{"name": "harness", "url": "http://127.0.0.1:9/mcp"}]}})
        iid = self.d.call("instance/start", dict(START, tools=["notes.read"]))["result"]["instance"]
        result = self.d.call("instance/tool_call", {"instance": iid, "tool": "notes.read", "arguments": {"path": "a"}})["result"]
        self.assertEqual(result["tool_call"], {"tool": "notes.read", "outcome": "executed", "result": "called notes.read"})
        call = [m for m in self.d.sent() if m.get("method") == "mcpServer/tool/call"][0]["params"]
        thread = [m for m in self.d.sent() if m.get("method") == "thread/name/set"][0]["params"]["threadId"]
        self.assertEqual(call, {"threadId": thread, "server": "harness", "tool": "notes.read", "arguments": {"path": "a"}})
        # codex answers an error (it passes the MCP server's on): nothing codex refused by name,
        # so dispatched, and that reading marked inferred; never a made-up deny reason
        refused = self.d.call("instance/tool_call", {"instance": iid, "tool": "refused.tool"})["result"]
        self.assertEqual((refused["outcome"], refused["tool_call"]["outcome"], refused["inferred"]), ("ok", "executed", ["tool_call"]))
        self.assertIn("not enabled", refused["detail"])
        # codex's own refusal of a tool outside the server's enabled tools (a look-alike of a
        # sealed name): denied, no handler; the reason's name is the adapter's, so inferred
        disabled = self.d.call("instance/tool_call", {"instance": iid, "tool": "disabled.tool"})["result"]
        self.assertEqual((disabled["outcome"], disabled["reason"], disabled["tool_call"]["outcome"]),
                         ("denied", "capability_denied", "denied"))
        self.assertEqual(disabled["inferred"], ["reason", "tool_call"])
        # an isError result: codex's answer says it dispatched; nothing inferred
        gone = self.d.call("instance/tool_call", {"instance": iid, "tool": "gone.tool"})["result"]
        self.assertEqual(gone["tool_call"], {"tool": "gone.tool", "outcome": "executed", "result": "unknown tool gone.tool"})
        self.assertNotIn("inferred", gone)
        self.d.call("instance/close", {"instance": iid})
        closed = self.d.call("instance/tool_call", {"instance": iid, "tool": "notes.read"})["result"]
        self.assertEqual((closed["outcome"], closed["reason"]), ("denied", "instance_terminal"))
        # the refused call's own outcome, as the protocol's direct call reports it
        self.assertEqual(closed["tool_call"], {"tool": "notes.read", "outcome": "denied", "reason": "instance_terminal"})

    def test_tool_call_without_mcp_server_is_32001(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        self.assertEqual(self.d.call("instance/tool_call", {"instance": iid, "tool": "x"})["error"]["code"], -32001)

    def test_observe_reads_codex_store_and_marks_what_it_did_not(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        child = self.d.call("instance/turn", {"instance": iid, "input": "SPAWN-READONLY"})["result"]["turn"]["spawn"]["instance"]
        observed = self.d.call("state/observe")["result"]["observed"]
        by_id = {i["id"]: i for i in observed["instances"]}
        # the child's ceiling is what codex stored for it (read-only here), not its parent's copied
        self.assertEqual(by_id[child]["ceiling"]["sandbox"], "read-only")
        self.assertEqual(by_id[child]["ceiling"]["delegation_depth"], 0)
        self.assertEqual(by_id[child]["role"], "worker")
        self.assertEqual(by_id[iid]["ceiling"]["sandbox"], START["sandbox"])
        for entry in by_id.values():
            self.assertNotIn("inferred", entry)
        self.assertNotIn("inferred", observed)
        # closed: codex deleted the thread and says so (thread not found), nothing inferred
        self.d.call("instance/close", {"instance": child})
        observed = self.d.call("state/observe")["result"]["observed"]
        entry = {i["id"]: i for i in observed["instances"]}[child]
        self.assertEqual(entry["state"], "closed")
        self.assertNotIn("state", entry.get("inferred", []))
        self.assertIn("ceiling", entry["inferred"])
        # approvals are the adapter's bookkeeping with placeholder digests: marked inferred
        self.d.call("instance/turn", {"instance": iid, "input": "APPROVE this"})
        self.assertIn("approvals", self.d.call("state/observe")["result"]["observed"]["inferred"])

    def test_codex_state_lost_is_marked_inferred(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        for path in [os.path.join(r, f) for r, _d, fs in os.walk(os.path.join(self.d.store, "codex-home")) for f in fs
                     if f.startswith("rollout-")]:
            os.remove(path)
        self.d.close()
        self.d = Driver(store=self.d.store)
        self.d.initialize()
        observed = self.d.call("state/observe")["result"]["observed"]
        self.assertEqual(observed["instances"][0]["inferred"], ["state", "ceiling"])
        self.assertIn("instances", observed["inferred"])

    def test_roles_become_codex_agent_role_layers(self):
        roles = {"reviewer": {"sandbox": "read-only", "approval_policy": "never"},
                 "worker": {"sandbox": {"workspace-write": {"writable_roots": ["/w/repo"], "network": False}}}}
        self.assertEqual(self.d.call("host/configure", {"roles": roles})["result"], {"outcome": "ok"})
        self.d.call("instance/start", START)
        config = [m["params"] for m in self.d.sent() if m.get("method") == "thread/start"][0]["config"]
        path = config["agents.reviewer.config_file"]
        with open(path) as f:
            text = f.read()
        self.assertIn('sandbox_mode = "read-only"', text)
        self.assertIn('approval_policy = "never"', text)
        with open(config["agents.worker.config_file"]) as f:
            worker = f.read()
        self.assertIn('sandbox_mode = "workspace-write"', worker)
        self.assertIn("exclude_slash_tmp = true", worker)
        # a role codex cannot express is left out of codex, not approximated
        self.assertEqual(self.d.call("host/configure", {"roles": dict(roles, vm={"sandbox": {"external": {"name": "v"}}},
                                                                      builder={"approval_policy": {"granular": {"ask": [], "deny": []}}})})
                         ["result"], {"outcome": "ok"})
        self.d.call("instance/start", START)
        config = [m["params"] for m in self.d.sent() if m.get("method") == "thread/start"][1]["config"]
        self.assertIn("agents.reviewer.config_file", config)
        self.assertFalse([k for k in config if k.startswith(("agents.vm.", "agents.builder."))])

    def test_spawn_without_child_marks_its_reason_inferred(self):
        a = adapter.Adapter()
        a.state = adapter.State(tempfile.mkdtemp())
        inst = a.state.new_instance("T1", role="lead")
        a.state.spawn_asked["T1"] = 1
        a.turns["T1"] = {"items": [{"type": "agentMessage", "text": "ok"}], "done": True, "status": "completed",
                         "spawn_asked": 0, "refused_before": set()}
        result = a._turn_report(inst, "T1", 0, [])
        self.assertEqual(result["turn"]["spawn"]["reason"], "policy_denied")
        self.assertEqual(result["turn"]["spawn"]["inferred"], ["reason"])
        self.assertEqual(result["inferred"], ["spawn"])

    def test_resumed_instance_runs_until_its_next_turn_completes(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        state = lambda: {i["id"]: i["state"] for i in
                         self.d.call("state/observe")["result"]["observed"]["instances"]}[iid]
        self.d.call("instance/turn", {"instance": iid, "input": "hello"})
        self.assertEqual(state(), "completed")
        self.assertEqual(self.d.call("instance/resume", {"instance": iid})["result"]["outcome"], "ok")
        self.assertEqual(state(), "running")
        self.d.call("instance/turn", {"instance": iid, "input": "again"})
        self.assertEqual(state(), "completed")

    def test_child_resume_keeps_codex_depth_count_from_its_root(self):
        # codex counts depth from the root: a resumed child keeps its root's agents.max_depth
        iid = self.d.call("instance/start", dict(START, delegation_depth=2))["result"]["instance"]
        child = self.d.call("instance/turn", {"instance": iid, "input": "SPAWN"})["result"]["turn"]["spawn"]["instance"]
        result = self.d.call("instance/resume", {"instance": child})["result"]
        self.assertEqual(result["effective"]["delegation_depth"], 1)
        resume = [m["params"] for m in self.d.sent() if m.get("method") == "thread/resume"][-1]
        self.assertEqual(resume["config"]["agents.max_depth"], 2)

    def test_failed_mcp_items_say_who_refused(self):
        a = adapter.Adapter()
        a.state = adapter.State(tempfile.mkdtemp())
        inst = a.state.new_instance("T1", role="lead")

        def report(error):
            a.turns["T1"] = {"items": [{"type": "mcpToolCall", "tool": "probe_read", "status": "failed",
                                        "error": {"message": error}}],
                             "done": True, "status": "completed", "spawn_asked": 0, "refused_before": set()}
            return a._turn_report(inst, "T1", 0, [])

        # codex's own refusal under never: policy_denied in codex's words, nothing inferred
        never = report("MCP tool call requires approval, but approval policy is never")
        self.assertEqual((never["tool_call"]["outcome"], never["tool_call"]["reason"]), ("denied", "policy_denied"))
        self.assertNotIn("inferred", never)
        # the server failed a call codex sent: dispatched, codex refused nothing
        server = report("tool call error: tool call failed for `harness/notes.read`\n\nCaused by: Mcp error: -32602")
        self.assertEqual(server["tool_call"]["outcome"], "executed")
        self.assertNotIn("reason", server["tool_call"])

    def test_close_of_a_forked_thread_archives_when_codex_keeps_it(self):
        iid = self.d.call("instance/start", START)["result"]["instance"]
        self.d.call("instance/turn", {"instance": iid, "input": "hello"})
        self.d.call("instance/fork", {"instance": iid})
        result = self.d.call("instance/close", {"instance": iid})["result"]
        self.assertEqual(result["outcome"], "ok")
        self.assertEqual([m["method"] for m in self.d.sent() if m.get("method") in ("thread/delete", "thread/archive")],
                         ["thread/delete", "thread/archive"])
        entry = {i["id"]: i for i in self.d.call("state/observe")["result"]["observed"]["instances"]}[iid]
        self.assertEqual(entry["state"], "closed")
        self.assertNotIn("inferred", entry)

    def test_unknown_instance(self):
        result = self.d.call("instance/turn", {"instance": "i-99", "input": "x"})["result"]
        self.assertEqual(result["reason"], "instance_unknown")


class Shutdown(unittest.TestCase):
    def test_stdin_eof_stops_adapter_and_app_server(self):
        d = Driver()
        d.initialize()
        d.call("instance/start", START)
        with open(d.pidfile) as f:
            fake_pid = int(f.read())
        t0 = time.monotonic()
        d.proc.stdin.close()
        d.proc.wait(5)
        d.proc.stdout.close()
        self.assertLess(time.monotonic() - t0, 3.0)
        for _ in range(50):
            try:
                os.kill(fake_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            self.fail("the app-server outlived the adapter")

    def test_restart_keeps_instances(self):
        d = Driver()
        d.initialize()
        iid = d.call("instance/start", START)["result"]["instance"]
        d.call("instance/close", {"instance": iid})
        d.close()
        again = Driver(store=d.store)
        again.initialize()
        observed = again.call("state/observe")["result"]["observed"]
        self.assertEqual([(i["id"], i["state"]) for i in observed["instances"]], [(iid, "closed")])
        new = again.call("instance/start", START)["result"]["instance"]
        self.assertNotEqual(new, iid)
        again.close()

    def test_turn_after_restart_reloads_thread_with_sealed_ceiling(self):
        env = {"protocol_version": "1.0", "environment": {
            "model_endpoint": "http://127.0.0.1:9", "clock": "harness",
            "mcp_servers": [{"name": "harness", "url": "http://127.0.0.1:9/mcp"}]}}
        d = Driver()
        env["environment"]["store_dir"] = d.store
        d.call("initialize", env)
        iid = d.call("instance/start", dict(START, tools=["notes.read"], delegation_depth=0))["result"]["instance"]
        self.assertFalse([m for m in d.sent() if m.get("method") == "thread/resume"])
        d.close()
        again = Driver(store=d.store)
        again.call("initialize", env)
        result = again.call("instance/turn", {"instance": iid, "input": "hello"})["result"]
        self.assertEqual(result["turn"], {"reply": "message", "text": "echo: hello"})
        methods = [m for m in again.sent() if m.get("method") in ("thread/resume", "turn/start")]
        self.assertEqual([m["method"] for m in methods], ["thread/resume", "turn/start"])
        resume = methods[0]["params"]
        self.assertEqual((resume["sandbox"], resume["approvalPolicy"]), ("workspace-write", "on-request"))
        self.assertEqual(resume["config"]["agents.max_depth"], 0)
        self.assertEqual(resume["config"]["mcp_servers.harness.enabled_tools"], ["notes.read"])
        self.assertTrue(resume["config"]["sandbox_workspace_write"]["exclude_slash_tmp"])
        again.call("instance/turn", {"instance": iid, "input": "again"})
        self.assertEqual(len([m for m in again.sent() if m.get("method") == "thread/resume"]), 1)
        again.close()

    def test_fork_and_resume_carry_the_sealed_ceiling(self):
        d = Driver()
        d.initialize()
        iid = d.call("instance/start", dict(START, approval_policy="never"))["result"]["instance"]
        fork = d.call("instance/fork", {"instance": iid})["result"]
        self.assertEqual(fork["effective"]["approval_policy"], "never")
        d.call("instance/resume", {"instance": iid})
        for method in ("thread/fork", "thread/resume"):
            params = [m for m in d.sent() if m.get("method") == method][0]["params"]
            self.assertEqual((params["sandbox"], params["approvalPolicy"]), ("workspace-write", "never"), method)
            self.assertEqual(params["config"]["agents.max_depth"], 1, method)
        d.close()


class Relay(unittest.TestCase):
    def test_relay_adds_instance_header_from_thread_id(self):
        seen = []

        class Endpoint(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                seen.append((self.path, self.headers.get("x-delegation-instance"), body))
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        server = http.server.HTTPServer(("127.0.0.1", 0), Endpoint)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        state = adapter.State(tempfile.mkdtemp())
        relay = adapter.make_relay("http://127.0.0.1:%d" % server.server_address[1], state)
        req = urllib.request.Request("http://127.0.0.1:%d/v1/responses" % relay.server_address[1],
                                     data=b'{"x":1}', headers={"thread-id": "T1"}, method="POST")
        self.assertEqual(urllib.request.urlopen(req).read(), b"{}")
        self.assertEqual(seen, [("/v1/responses", "i-1", b'{"x":1}')])
        relay.shutdown()
        relay.server_close()
        server.shutdown()
        server.server_close()


class ToolNames(unittest.TestCase):
    """The relay's rewrite of scripted MCP tool calls into codex's namespaced names."""

    OFFERED_BODY = json.dumps({"tools": [
        {"type": "function", "name": "exec_command"},
        {"type": "namespace", "name": "mcp__harness", "tools": [{"type": "function", "name": "notes_read"}]},
        {"type": "namespace", "name": "multi_agent_v1", "tools": [{"type": "function", "name": "spawn_agent"}]},
    ]}).encode()

    def test_offered_mcp_tools_only_from_mcp_namespaces(self):
        self.assertEqual(adapter.offered_mcp_tools(self.OFFERED_BODY),
                         {"notes_read": ("mcp__harness", "notes_read")})
        self.assertEqual(adapter.offered_mcp_tools(b"not json"), {})

    def test_sse_function_call_rewritten_others_unchanged(self):
        offered = adapter.offered_mcp_tools(self.OFFERED_BODY)
        call = {"type": "function_call", "name": "notes.read", "arguments": "{}", "call_id": "c1"}
        spawn = {"type": "function_call", "namespace": "multi_agent_v1", "name": "spawn_agent", "arguments": "{}"}
        unknown = {"type": "function_call", "name": "notes.write", "arguments": "{}"}
        sse = "".join("event: response.output_item.done\ndata: %s\n\n" % json.dumps({"item": i})
                      for i in (call, spawn, unknown)).encode()
        out = adapter.map_tool_calls(sse, offered).decode()
        items = [json.loads(l[5:])["item"] for l in out.split("\n") if l.startswith("data:")]
        self.assertEqual(items[0]["namespace"], "mcp__harness")
        self.assertEqual(items[0]["name"], "notes_read")
        self.assertEqual(items[0]["call_id"], "c1")
        self.assertEqual(items[1], spawn)
        self.assertEqual(items[2], unknown)
        self.assertTrue(out.startswith("event: response.output_item.done\n"))

    def test_json_answer_rewritten_and_nothing_offered_is_identity(self):
        offered = adapter.offered_mcp_tools(self.OFFERED_BODY)
        doc = json.dumps({"output": [{"type": "function_call", "name": "notes.read"}]}).encode()
        self.assertEqual(json.loads(adapter.map_tool_calls(doc, offered))["output"][0]["namespace"], "mcp__harness")
        self.assertEqual(adapter.map_tool_calls(doc, {}), doc)

    def test_refused_calls_only_trailing_unsupported_outputs(self):
        body = json.dumps({"input": [
            {"type": "function_call_output", "call_id": "old", "output": "unsupported call: gone.tool"},
            {"type": "message", "role": "user", "content": "again"},
            {"type": "function_call", "call_id": "c2", "name": "notes.read"},
            {"type": "function_call_output", "call_id": "c1", "output": "NOTE-TEXT"},
            {"type": "function_call_output", "call_id": "c2", "output": "unsupported call: notes.read"},
        ]}).encode()
        self.assertEqual(adapter.trailing_outputs(body),
                         {"c1": "NOTE-TEXT", "c2": "unsupported call: notes.read"})
        self.assertEqual(adapter.refused_calls(adapter.trailing_outputs(body)), {"c2": "notes.read"})
        self.assertEqual(adapter.trailing_outputs(b"{}"), {})
        self.assertEqual(adapter.trailing_outputs(b"[1]"), {})

    def test_turn_report_names_a_refused_call_as_denied(self):
        a = adapter.Adapter()
        a.state = adapter.State(tempfile.mkdtemp())
        inst = a.state.new_instance("T1", role="lead")
        a.state.refused_calls["T1"] = {"old": "notes.read", "c2": "notes.read", "c3": "spawn_agent"}
        a.turns["T1"] = {"items": [{"type": "agentMessage", "text": "ok"}], "done": True,
                         "status": "completed", "spawn_asked": 0, "refused_before": {"old"}}
        result = a._turn_report(inst, "T1", 0, [])
        self.assertEqual(result["turn"], {"reply": "tool_call", "tool": "notes.read"})
        self.assertEqual(result["tool_call"]["outcome"], "denied")
        self.assertEqual(result["tool_call"]["reason"], "unsupported_call")
        a.turns["T1"]["refused_before"] = {"old", "c2", "c3"}
        self.assertEqual(a._turn_report(inst, "T1", 0, [])["turn"], {"reply": "message", "text": "ok"})


def sse(*items):
    return "".join("event: response.output_item.done\ndata: %s\n\n" % json.dumps({"item": i})
                   for i in items).encode()


def sse_items(data):
    return [json.loads(l[5:])["item"] for l in data.decode().split("\n") if l.startswith("data:")]


def lifecycle_call(name, arguments, call_id="c1"):
    return {"type": "function_call", "namespace": "multi_agent_v1", "name": name, "call_id": call_id,
            "arguments": json.dumps(arguments)}


class AgentIds(unittest.TestCase):
    """The relay's rewrite of the protocol instance ids in scripted multi_agent_v1 lifecycle
    calls into codex's agent ids (the child's thread id), and nothing else."""

    IDS = {"i-1": "thread-root", "i-2": "thread-child"}

    def test_each_lifecycle_tool_names_the_child_by_its_thread_id(self):
        calls = [lifecycle_call("send_input", {"target": "i-2", "message": "CHILD_FOLLOW_UP i-1"}, "c1"),
                 lifecycle_call("close_agent", {"target": "i-2"}, "c2"),
                 lifecycle_call("resume_agent", {"id": "i-2"}, "c3"),
                 lifecycle_call("wait_agent", {"targets": ["i-2", "i-1"], "timeout_ms": 1000}, "c4")]
        noted = {}
        items = sse_items(adapter.map_tool_calls(sse(*calls), {}, self.IDS, noted))
        args = [json.loads(i["arguments"]) for i in items]
        self.assertEqual(args[0], {"target": "thread-child", "message": "CHILD_FOLLOW_UP i-1"})
        self.assertEqual(args[1], {"target": "thread-child"})
        self.assertEqual(args[2], {"id": "thread-child"})
        self.assertEqual(args[3], {"targets": ["thread-child", "thread-root"], "timeout_ms": 1000})
        for before, after in zip(calls, items):
            self.assertEqual({k: v for k, v in after.items() if k != "arguments"},
                             {k: v for k, v in before.items() if k != "arguments"})
        self.assertEqual(noted, {"c1": ("send_input", "i-2"), "c2": ("close_agent", "i-2"),
                                 "c3": ("resume_agent", "i-2"), "c4": ("wait_agent", "i-2")})

    def test_unknown_ids_and_other_calls_pass_unchanged(self):
        unknown = lifecycle_call("send_input", {"target": "i-9", "message": "x"})
        spawn = lifecycle_call("spawn_agent", {"message": "task for i-2", "agent_type": "worker"})
        outside = {"type": "function_call", "name": "send_input", "arguments": json.dumps({"target": "i-2"})}
        items = sse_items(adapter.map_tool_calls(sse(unknown, spawn, outside), {}, self.IDS))
        self.assertEqual(items, [unknown, spawn, outside])
        self.assertEqual(items[0]["arguments"], unknown["arguments"])

    def test_answer_without_a_call_to_rewrite_passes_byte_for_byte(self):
        spawn = lifecycle_call("spawn_agent", {"message": "task", "agent_type": "worker"})
        # spacing json.dumps would not write: a re-serialised line would differ
        data = (b"event: response.output_item.done\ndata:   "
                + json.dumps({"item": spawn}, separators=(" , ", " : ")).encode() + b"\n\n")
        self.assertEqual(adapter.map_tool_calls(data, {"notes_read": ("mcp__harness", "notes_read")}, self.IDS), data)
        unknown = json.dumps({"output": [lifecycle_call("close_agent", {"target": "i-9"})]}, indent=1).encode()  # one JSON document
        self.assertEqual(adapter.map_tool_calls(unknown, {}, self.IDS), unknown)

    def test_json_answer_maps_ids_beside_mcp_names(self):
        offered = {"notes_read": ("mcp__harness", "notes_read")}
        doc = json.dumps({"output": [lifecycle_call("close_agent", {"target": "i-2"}),
                                     {"type": "function_call", "name": "notes.read", "arguments": "{}"}]}).encode()
        output = json.loads(adapter.map_tool_calls(doc, offered, self.IDS))["output"]
        self.assertEqual(json.loads(output[0]["arguments"]), {"target": "thread-child"})
        self.assertEqual((output[1]["namespace"], output[1]["name"]), ("mcp__harness", "notes_read"))

    def test_relay_maps_ids_and_notes_what_codex_answered(self):
        answers = [sse(lifecycle_call("send_input", {"target": "i-2", "message": "again"}, "call-7"))]
        bodies = []

        class Endpoint(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                bodies.append(self.rfile.read(int(self.headers["content-length"])))
                data = answers.pop(0) if answers else b"{}"
                self.send_response(200)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        server = http.server.HTTPServer(("127.0.0.1", 0), Endpoint)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        state = adapter.State(tempfile.mkdtemp())
        state.new_instance("thread-root")
        state.new_instance("thread-child", parent="i-1")
        relay = adapter.make_relay("http://127.0.0.1:%d" % server.server_address[1], state)
        url = "http://127.0.0.1:%d/v1/responses" % relay.server_address[1]
        first = urllib.request.Request(url, data=b'{"input": []}', headers={"thread-id": "thread-root"}, method="POST")
        answer = sse_items(urllib.request.urlopen(first).read())
        self.assertEqual(json.loads(answer[0]["arguments"]), {"target": "thread-child", "message": "again"})
        self.assertEqual(state.lifecycle_calls, {"thread-root": {"call-7": ("send_input", "i-2")}})
        refusal = json.dumps({"input": [{"type": "function_call_output", "call_id": "call-7",
                                         "output": "agent with id thread-child not found"}]}).encode()
        second = urllib.request.Request(url, data=refusal, headers={"thread-id": "thread-root"}, method="POST")
        urllib.request.urlopen(second).read()
        self.assertEqual(state.lifecycle_outputs, {"thread-root": {"call-7": "agent with id thread-child not found"}})
        self.assertEqual(bodies[1], refusal)  # the request itself passes unchanged
        relay.shutdown()
        relay.server_close()
        server.shutdown()
        server.server_close()

    def test_turn_reports_what_codex_did_with_a_lifecycle_call(self):
        a = adapter.Adapter()
        a.state = adapter.State(tempfile.mkdtemp())
        root = a.state.new_instance("T1", role="lead")
        child = a.state.new_instance("T2", parent=root["id"], state="closed")
        a.state.lifecycle_calls["T1"] = {"old": ("close_agent", child["id"]), "c5": ("send_input", child["id"])}
        a.state.lifecycle_outputs["T1"] = {"c5": "agent with id T2 not found"}
        a.turns["T1"] = {"items": [{"type": "agentMessage", "text": "ok"}], "done": True, "status": "completed",
                         "spawn_asked": 0, "refused_before": set(), "lifecycle_before": {"old"}}
        # no collabAgentToolCall item: codex refused the call before it reached an agent
        turn = a._turn_report(root, "T1", 0, [])["turn"]
        self.assertEqual((turn["reply"], turn["op"], turn["target"]), ("lifecycle", "send_input", child["id"]))
        self.assertEqual(turn["lifecycle"]["outcome"], "denied")
        self.assertEqual(turn["lifecycle"]["reason"], "instance_terminal")
        self.assertEqual(turn["lifecycle"]["inferred"], ["reason"])
        self.assertIn("agent with id T2 not found", turn["lifecycle"]["detail"])
        # a tool result without an item is codex carrying the call out
        a.state.lifecycle_outputs["T1"]["c5"] = json.dumps({"submission_id": "s-1"})
        self.assertEqual(a._turn_report(root, "T1", 0, [])["turn"]["lifecycle"], {"outcome": "ok", "instance": child["id"]})
        # codex's own item, when there is one, says what it did
        a.turns["T1"]["items"].insert(0, {"type": "collabAgentToolCall", "id": "c6", "tool": "resumeAgent",
                                          "status": "failed", "senderThreadId": "T1", "receiverThreadIds": ["T2"],
                                          "agentsStates": {"T2": {"status": "notFound"}}})
        turn = a._turn_report(root, "T1", 0, [])["turn"]
        self.assertEqual((turn["op"], turn["target"], turn["lifecycle"]["outcome"]), ("resume", child["id"], "denied"))
        self.assertIn("notFound", turn["lifecycle"]["detail"])
        a.turns["T1"]["items"][0].update(status="completed", tool="closeAgent")
        self.assertEqual(a._turn_report(root, "T1", 0, [])["turn"],
                         {"reply": "lifecycle", "op": "close", "target": child["id"],
                          "lifecycle": {"outcome": "ok", "instance": child["id"]}})


class Expectations(unittest.TestCase):
    """conformance/expectations.py: reasons composed from what codex lacks, hand-checked failures only."""

    def setUp(self):
        sys.path.insert(0, os.path.join(HERE, "conformance"))
        import expectations
        self.x = expectations

    def test_reasons_name_the_missing_capability_property_or_method(self):
        twins = {"tr/001-x": "tr/036-x-spawned", "ce/017-z": "ce/030-z-spawned"}
        self.assertEqual(self.x.reason_for("a", [("capability", "receipts"), ("capability", "clock")], {}, set()),
                         self.x.CAPABILITY["receipts"] + "; " + self.x.CAPABILITY["clock"])
        self.assertIn("its spawn-based twin tr/036-x-spawned is what runs on codex",
                      self.x.reason_for("tr/001-x", [("method", "instance/delegate")], twins, set()))
        self.assertIn("no spawn-based twin", self.x.reason_for("ce/001-y", [("method", "instance/delegate")], twins, set()))
        # a twin that is unsupported itself (its spawn asks for authority) is not said to run
        self.assertIn("its spawn-based twin ce/030-z-spawned cannot run on codex either",
                      self.x.reason_for("ce/017-z", [("method", "instance/delegate")], twins, {"ce/030-z-spawned"}))
        self.assertEqual(self.x.causes_from_report(["wait", "method `instance/cancel` (step 3)",
                                                     "what this scenario asks of it: it declares `reusable-agents`"]),
                         [("capability", "wait"), ("method", "instance/cancel"), ("property", "reusable-agents")])
        # a start codex refuses with -32001 (a granular policy it has no word for) names that, not a capability
        self.assertIn("instance/start is -32001", self.x.reason_for("pg/028-x", [("method", "instance/start")], {}, set()))
        with self.assertRaises(SystemExit):
            self.x.reason_for("a", [("capability", "teleportation")], {}, set())

    def test_known_unsupported_causes_are_derived_again(self):
        scenario = {"id": "z", "needs": ["nested-delegation", "wait", "full-access-children"], "unless": ["reusable-agents"]}
        self.assertEqual(self.x.causes_again(scenario, None), [("capability", "wait"), ("property", "reusable-agents")])
        self.assertEqual(self.x.causes_again({"id": "z", "needs": []}, self.x.METHOD["instance/cancel"] + "; more"),
                         [("method", "instance/cancel")])
        with self.assertRaises(SystemExit):
            self.x.causes_again({"id": "z", "needs": []}, "no reason anyone wrote")


if __name__ == "__main__":
    unittest.main()
