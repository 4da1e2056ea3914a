#!/usr/bin/env node
// Writes expectations.json from a full-catalogue JSON report: each unsupported scenario with the Qwen Code capability it lacks, each known failure with its evidence.
//
// Usage: node harness/adapters/qwen-code/conformance/expectations.mjs REPORT.json [known-failures.json]
//
// The reason of an unsupported scenario is composed from what the harness
// says it lacked (the capabilities it needs, or the first method or option
// the adapter refused) through the tables below, which say what Qwen Code
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

/** What Qwen Code 0.24.4 lacks, per capability the catalogue asks for. */
const CAPABILITY = {
  receipts: 'Qwen Code issues no delegation receipts: a subagent exists only when the model calls `agent`',
  clock: 'Qwen Code reads the system clock; nothing in it takes the harness\'s clock',
  'external-authorizer': 'nothing in Qwen Code consults an external service before it starts a subagent (a PreToolUse hook could, but that would be the adapter\'s script deciding, not Qwen Code)',
  'auto-approval': 'Qwen Code has no persistence-gated automatic approval: an allow rule or an approval mode (auto-edit, auto, yolo) runs a tool unasked, with no decision committed before dispatch',
  'exact-call-grants': 'Qwen Code has no grant of one exact call to revoke: its answers are per call or permission rules wider than one call',
  'direct-tool-calls': 'Qwen Code has no way for a client to run a tool as if its model had asked for it: every tool call comes from the model\'s answer',
  'fault-injection': 'Qwen Code\'s store writes and dispatch cannot be failed on demand from outside',
  events: 'Qwen Code has no single-use host events to deliver',
  'task-capabilities': 'Qwen Code has no task capability credentials',
  reviewer: 'Qwen Code has no risk-scored approval reviewer the harness can score (its `auto` mode\'s classifier is a model call, not a score the harness sets)',
  wait: 'Qwen Code has no client call that waits for a session or subagent (a headless run returns when the turn ends)',
  'spawn-authority': 'Qwen Code\'s `agent` tool takes {description, prompt, subagent_type, run_in_background} (and fork options): no sandbox, approval policy, cwd or tool list, so the authority this spawn requests cannot reach Qwen Code (a subagent runs under its session\'s approval mode, permission rules and its agent definition)',
  'model-lifecycle-tools': 'Qwen Code\'s `send_message` continues only a background subagent that is still running; the foreground subagents a spawn starts (so that the parent\'s turn waits for them) have no tool by which the parent\'s model gives them more input, resumes or closes them',
  'model-close-tools': 'Qwen Code\'s `task_stop` stops a running background subagent; no tool closes a finished one or reopens one without input',
  fork: 'the adapter does not declare fork: Qwen Code\'s `--resume ID --fork-session` makes a new session only with a model request (a headless run needs a prompt, and a local command stores no session), so a fork could not be made without an extra request',
  'clarification-questions': 'Qwen Code\'s questions to a person come only from its model\'s own `ask_user_question` tool inside a turn; no client call makes a session or subagent ask one (`instance/ask`), so the adapter does not declare clarification-questions',
  'concurrent-requests': 'the adapter answers one request at a time (node-common/rpc.mjs reads the next request only after answering the last, driving one headless `qwen` run per turn), so no two actions are in flight at once through it',
};

/** What the adapter refuses, per method or option, and why Qwen Code has no equivalent. */
const METHOD = {
  'instance/delegate': 'Qwen Code has no admission call: a subagent exists only when the model calls `agent` in a turn; the spawn-based twins run instead where the catalogue has them',
  'instance/close': 'Qwen Code has no close: a session stays resumable as long as its files exist, and deleting its files would be the adapter\'s act, not Qwen Code\'s',
  'instance/cancel': 'Qwen Code has no cancelled state: an interrupt stops a running turn and leaves the session usable',
  'instance/fail': 'Qwen Code has no failed state to put a session in',
  'instance/resume': 'the adapter does not map `instance/resume`: every turn already resumes the session (`--resume`), and a subagent cannot be continued from outside',
  'instance/turn': 'a turn on a subagent: Qwen Code runs a foreground subagent only inside its parent\'s `agent` call, never from outside (the step\'s error message says so)',
  'instance/fork': 'the adapter does not map `instance/fork` (see the capability fork)',
  'instance/tool_call': CAPABILITY['direct-tool-calls'],
  'approval/answer': 'a decision other than allow or deny: Qwen Code\'s answer to a `can_use_tool` request is allow or deny for that call (or permission rules wider than one call)',
  'approval/auto': CAPABILITY['auto-approval'],
  'receipt/prepare': CAPABILITY.receipts,
  'receipt/consume': CAPABILITY.receipts,
  'event/deliver': CAPABILITY.events,
  'clock/set': CAPABILITY.clock,
  'host/configure': 'the scenario configures an option Qwen Code cannot honour and the adapter refuses (-32001): `strict_mode` (Qwen Code has no sandbox policy by which to refuse an unsandboxed subagent), `auto_approve` (see auto-approval), `authorizer_required` (see external-authorizer), a role with its own provider or an external sandbox, or a role none of whose tools is served (an agent definition without tools gets every tool)',
  'instance/start': 'the root asks for an option the adapter cannot map (-32001): a `granular` approval policy (Qwen Code\'s permission rules are per tool, not per action class), an `external` sandbox, or another model or provider',
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
