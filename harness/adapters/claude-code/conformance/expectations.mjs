#!/usr/bin/env node
// Writes expectations.json from a full-catalogue JSON report: each unsupported scenario with the Claude Code capability it lacks, each known failure with its evidence.
//
// Usage: node harness/adapters/claude-code/conformance/expectations.mjs REPORT.json [known-failures.json]
//
// The reason of an unsupported scenario is composed from what the harness
// says it lacked (the capabilities it needs, or the first method or option
// the adapter refused) through the tables below, which say what Claude Code
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

/** What Claude Code 2.1.332 lacks, per capability the catalogue asks for. */
const CAPABILITY = {
  receipts: 'Claude Code issues no delegation receipts: a subagent exists only when the model calls `Agent`',
  clock: 'Claude Code reads the system clock; nothing in it takes the harness\'s clock',
  'external-authorizer': 'nothing in Claude Code consults an external service before it starts a subagent (a PreToolUse hook could, but that would be the adapter\'s script deciding, not Claude Code)',
  'auto-approval': 'Claude Code has no persistence-gated automatic approval: an allow rule runs a tool unasked, with no decision committed before dispatch',
  'exact-call-grants': 'Claude Code\'s answers to a permission request are allow or deny for that call, or permission updates (rules, modes, directories) wider than one exact call; there is no grant of one exact call to revoke',
  'direct-tool-calls': 'Claude Code has no way for a client to run a tool as if its model had asked for it: every tool call comes from the model\'s answer',
  'fault-injection': 'Claude Code\'s store writes and dispatch cannot be failed on demand from outside',
  events: 'Claude Code has no single-use host events to deliver',
  'task-capabilities': 'Claude Code has no task capability credentials',
  reviewer: 'Claude Code has no risk-scored approval reviewer the harness can score',
  wait: 'Claude Code has no client call that waits for a session or subagent (its -p run returns when the turn ends)',
  'spawn-authority': 'Claude Code\'s `Agent` tool takes {description, prompt, subagent_type, model, run_in_background, isolation}: no sandbox, approval policy, cwd or tool list, so the authority this spawn requests cannot reach Claude Code (a subagent runs under its session\'s permission rules and its agent definition)',
  'model-close-tools': 'Claude Code has no tool that closes a finished subagent (`TaskStop` stops a running background task) and none that reopens one without input',
  'clarification-questions': 'Claude Code\'s questions to a person come only from its model\'s own `AskUserQuestion` tool inside a turn; no client call makes a session or subagent ask one (`instance/ask`), so the adapter does not declare clarification-questions',
  'concurrent-requests': 'the adapter answers one request at a time (node-common/rpc.mjs reads the next request only after answering the last, driving one `claude -p` run per turn), so no two actions are in flight at once through it',
};

/** What the adapter refuses, per method or option, and why Claude Code has no equivalent. */
const METHOD = {
  'instance/delegate': 'Claude Code has no admission call: a subagent exists only when the model calls `Agent` in a turn; the spawn-based twins run instead where the catalogue has them',
  'instance/close': 'Claude Code has no close: a session or subagent stays resumable as long as its files exist, and deleting its files would be the adapter\'s act, not Claude Code\'s',
  'instance/cancel': 'Claude Code has no cancelled state: an interrupt stops a running turn and leaves the session usable',
  'instance/fail': 'Claude Code has no failed state to put a session in',
  'instance/resume': 'the adapter does not map `instance/resume`: every turn already resumes the session (`--resume`), and a subagent can be continued only by its parent\'s model (`SendMessage`)',
  'instance/turn': 'a turn on a subagent: Claude Code continues a subagent only through its parent\'s model (`SendMessage`), never from outside',
  'instance/fork': 'forking a subagent: Claude Code forks main sessions (`--fork-session`), not subagents',
  'instance/tool_call': CAPABILITY['direct-tool-calls'],
  'approval/auto': CAPABILITY['auto-approval'],
  'receipt/prepare': CAPABILITY.receipts,
  'receipt/consume': CAPABILITY.receipts,
  'event/deliver': CAPABILITY.events,
  'clock/set': CAPABILITY.clock,
  'host/configure': 'the scenario configures an option Claude Code cannot honour and the adapter refuses (-32001): `strict_mode` (Claude Code has no sandbox policy by which to refuse an unsandboxed subagent), `auto_approve` (see auto-approval), `authorizer_required` (see external-authorizer) or a role with its own tools or provider',
  'instance/start': 'the root asks for an option Claude Code cannot express (-32001): a `granular` approval policy (Claude Code\'s permission rules are per tool, not per action class), an `external` sandbox, or another model or provider',
  'approval/answer': 'the decision is `allow-exact`: Claude Code answers a permission request with allow or deny for that call, or with permission updates wider than one exact call',
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
