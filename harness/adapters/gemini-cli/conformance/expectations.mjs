#!/usr/bin/env node
// Writes expectations.json from a full-catalogue JSON report: each unsupported scenario with the Gemini CLI capability it lacks, each known failure with its evidence.
//
// Usage: node harness/adapters/gemini-cli/conformance/expectations.mjs REPORT.json [known-failures.json]
//
// The reason of an unsupported scenario is composed from what the harness
// says it lacked (the capabilities it needs, or the first method or option
// the adapter refused) through the tables below, which say what Gemini CLI
// has or has not; a cause missing from the tables stops the script, so no
// scenario is listed without a reason. Failures, errors and unverified
// results are never written from the report: they come from
// `known-failures.json` beside this script (scenario -> {expect, reason}),
// written by hand after checking each one, and one that is not there is left
// out so that the run shows it.

import { readFileSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeExpectations } from '../../node-common/expectations.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));

/** What Gemini CLI 0.61.0 lacks, per capability the catalogue asks for. */
const CAPABILITY = {
  'nested-delegation': 'Gemini CLI gives no subagent the `invoke_agent` tool ("We do not allow agents to call other agents", packages/core/src/agents/local-executor.ts): only a main session delegates',
  receipts: 'Gemini CLI issues no delegation receipts: a subagent exists only when the model calls `invoke_agent`',
  clock: 'Gemini CLI reads the system clock; nothing in it takes the harness\'s clock',
  'external-authorizer': 'nothing in Gemini CLI consults an external service before it starts a subagent (a BeforeTool hook could, but that would be the adapter\'s script deciding, not Gemini CLI)',
  'auto-approval': 'Gemini CLI has no persistence-gated automatic approval: a policy rule allows or denies a tool unasked, with no decision committed before dispatch',
  'exact-call-grants': 'Gemini CLI\'s answers to a permission request (ACP `session/request_permission`) are allow once, reject, or allow always for the session, the MCP server or the tool: none is a grant of one exact call',
  'direct-tool-calls': 'Gemini CLI has no way for a client to run a tool as if its model had asked for it: every tool call comes from the model\'s answer',
  'fault-injection': 'Gemini CLI\'s store writes and dispatch cannot be failed on demand from outside',
  events: 'Gemini CLI has no single-use host events to deliver',
  'task-capabilities': 'Gemini CLI has no task capability credentials',
  reviewer: 'Gemini CLI has no risk-scored approval reviewer the harness can score',
  wait: 'Gemini CLI has no client call that waits for a session or subagent (its -p run returns when the turn ends)',
  fork: 'Gemini CLI has no fork of a session from its command line (the adapter does not copy session files itself: that would be its act, not Gemini CLI\'s)',
  'spawn-authority': 'Gemini CLI\'s `invoke_agent` tool takes {agent_name, prompt}: no sandbox, approval policy, cwd or tool list, so the authority this spawn requests cannot reach Gemini CLI (a subagent runs under its session\'s policy and its agent definition)',
  'model-lifecycle-tools': 'Gemini CLI has no tool by which a model gives an existing subagent more input: a subagent runs only within its parent\'s `invoke_agent` call',
  'model-close-tools': 'Gemini CLI has no tool that closes, reopens or polls a subagent',
  'clarification-questions': 'no client call makes a Gemini CLI session or subagent ask a person a question (`instance/ask`), and none of the tools Gemini CLI shows its model in the adapter\'s non-interactive runs asks one (the harness\'s model endpoint records them), so the adapter does not declare clarification-questions',
  'concurrent-requests': 'the adapter answers one request at a time (node-common/rpc.mjs reads the next request only after answering the last, driving one `gemini -p` run per turn), so no two actions are in flight at once through it',
};

/** What the adapter refuses, per method or option, and why Gemini CLI has no equivalent. */
const METHOD = {
  'instance/delegate': 'Gemini CLI has no admission call: a subagent exists only when the model calls `invoke_agent` in a turn; the spawn-based twins run instead where the catalogue has them',
  'instance/close': 'Gemini CLI has no close: a session stays resumable as long as its files exist, and deleting its files would be the adapter\'s act, not Gemini CLI\'s',
  'instance/cancel': 'Gemini CLI has no cancelled state: an interrupt stops a running turn and leaves the session usable',
  'instance/fail': 'Gemini CLI has no failed state to put a session in',
  'instance/resume': 'the adapter does not map `instance/resume`: every turn already resumes the session (`--resume`), and a subagent cannot be continued at all once its `invoke_agent` call ended',
  'instance/turn': 'a turn on a subagent (Gemini CLI runs a subagent only within its parent\'s `invoke_agent` call, never from outside); or, in a root that runs `gemini -p` because none of its sealed tools needs a person, a call Gemini CLI would ask about under `on-request` or `untrusted`: `gemini -p` asks no one; or a later turn of a root that may ask a person (ACP mode): Gemini CLI 0.61.0\'s `session/load` starts a new chat record for the session before it looks the session up, and within the clock minute of the session file\'s creation that record hides the conversation and the load fails ("No previous sessions found for this project", README finding 14), so whether the turn runs would depend on the clock',
  'instance/fork': CAPABILITY.fork,
  'instance/tool_call': CAPABILITY['direct-tool-calls'],
  'approval/auto': CAPABILITY['auto-approval'],
  'approval/answer': 'the decision is `allow-exact`: Gemini CLI\'s answers to a permission request are allow once, reject, or allow always for the session, the MCP server or the tool, none of them one exact call',
  'receipt/prepare': CAPABILITY.receipts,
  'receipt/consume': CAPABILITY.receipts,
  'event/deliver': CAPABILITY.events,
  'clock/set': CAPABILITY.clock,
  'host/configure': 'the scenario configures an option Gemini CLI cannot honour and the adapter refuses (-32001): `strict_mode` (Gemini CLI has no sandbox policy by which to refuse an unsandboxed subagent), `auto_approve` (see auto-approval), `authorizer_required` (see external-authorizer), a role with its own provider or approval policy, or a role none of whose tools the harness\'s MCP servers serve (an agent definition\'s empty tool list would not be that role\'s default)',
  'instance/start': 'the root asks for an option Gemini CLI cannot express (-32001): a `granular` approval policy (Gemini CLI\'s policy rules are per tool, not per action class), an `external` sandbox, or another model or provider',
};

const [reportPath, failuresPath = join(HERE, 'known-failures.json')] = process.argv.slice(2);
if (!reportPath) {
  process.stderr.write('usage: expectations.mjs REPORT.json [known-failures.json]\n');
  process.exit(2);
}
const failures = existsSync(failuresPath) ? JSON.parse(readFileSync(failuresPath, 'utf8')) : { known: {}, deny_reasons: {} };
writeExpectations({
  reportPath,
  known: failures.known,
  tables: { capability: CAPABILITY, method: METHOD },
  expectationsPath: join(HERE, '..', 'expectations.json'),
  extra: { deny_reasons: failures.deny_reasons },
});
