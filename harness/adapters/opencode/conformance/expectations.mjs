#!/usr/bin/env node
// Writes expectations.json from a full-catalogue JSON report: each unsupported scenario with the opencode capability it lacks, each known failure with its evidence.
//
// Usage: node harness/adapters/opencode/conformance/expectations.mjs REPORT.json [known-failures.json]
//
// The reason of an unsupported scenario is composed from what the harness
// says it lacked (the capabilities it needs, or the first method or option
// the adapter refused) through the table below, which says what opencode
// has or has not; a cause missing from the table stops the script, so no
// scenario is listed without a reason. Failures and errors are never
// written from the report: they come from `known-failures.json` beside this
// script (scenario -> evidence), written by hand after checking each one,
// and a failure that is not there is left out so that the run shows it.

import { readFileSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeExpectations } from '../../node-common/expectations.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));

/** What opencode 1.18.33 lacks, per capability the catalogue asks for. */
const CAPABILITY = {
  receipts: 'opencode issues no delegation receipts (children only come from the model\'s `task` call)',
  clock: 'opencode reads the system clock; nothing in it takes the harness\'s clock',
  'external-authorizer': 'nothing in opencode consults an external service before it creates a child (a plugin could, but that would be the adapter\'s authorizer, not opencode\'s)',
  'auto-approval': 'opencode has no persistence-gated automatic approval: its `allow` rules run a tool unasked, with no decision committed before dispatch',
  'exact-call-grants': 'opencode\'s `always` reply approves the request\'s `always` patterns (`*` for an MCP tool: every later call, any arguments) for the session, not one exact call',
  'direct-tool-calls': 'opencode has no call that runs a tool as if its model had asked for it (`/session/{id}/shell` runs a shell command only)',
  'fault-injection': 'opencode\'s store writes and dispatch cannot be failed on demand from outside',
  events: 'opencode has no single-use host events to deliver',
  'task-capabilities': 'opencode has no task capability credentials',
  reviewer: 'opencode has no risk-scored approval reviewer',
  'model-close-tools': 'opencode\'s model has no tool to close a child, reopen it without input or poll it: `task` only starts a child or continues one (`task_id`) with a prompt',
  'spawn-authority': 'opencode\'s `task` tool takes only {description, prompt, subagent_type, task_id}: a spawn cannot ask for an authority, so the refusal this scenario looks for cannot be asked for (`repro/child-authority.mjs`: the child opencode creates holds no more than its parent on every axis the adapter expresses)',
  'clarification-questions': 'opencode\'s questions to a person come only from its model\'s own `question` tool inside a turn; no call of its HTTP API makes a session ask one (`instance/ask`), so the adapter does not declare clarification-questions',
  'concurrent-requests': 'the adapter answers one request at a time (node-common/rpc.mjs reads the next request only after answering the last, driving opencode\'s HTTP API one call after another), so no two actions are in flight at once through it',
};

/** What the adapter refuses, per method or option, and why opencode has no equivalent. */
const METHOD = {
  'instance/delegate': 'opencode has no admission call: children exist only when the model calls `task` (`POST /session {parentID}` makes a child-shaped session with no admission check, so mapping it would test the adapter, not opencode); the spawn-based twins run instead where the catalogue has them',
  'instance/fail': 'opencode has no failed state to put a session in',
  'instance/tool_call': CAPABILITY['direct-tool-calls'],
  'approval/auto': CAPABILITY['auto-approval'],
  'receipt/prepare': CAPABILITY.receipts,
  'receipt/consume': CAPABILITY.receipts,
  'event/deliver': CAPABILITY.events,
  'clock/set': CAPABILITY.clock,
  // host/configure's refusals: -32001 for an option opencode cannot honour.
  'host/configure': 'the scenario configures an option opencode cannot honour and the adapter refuses (-32001): `strict_mode` (opencode has no sandbox to require of a child), `auto_approve` (see auto-approval), `authorizer_required` (see external-authorizer), or a role default naming tools, another provider or an external sandbox (the adapter makes only a role\'s sandbox, network and delegation depth into opencode agent rules; a role\'s tool list is not mapped yet)',
  'approval/answer': 'the decision is `allow-exact`: opencode\'s replies are once, always (every later call of the tool in the session, any arguments) and reject; none is one exact call',
};

const [reportPath, failuresPath = join(HERE, 'known-failures.json')] = process.argv.slice(2);
if (!reportPath) {
  process.stderr.write('usage: expectations.mjs REPORT.json [known-failures.json]\n');
  process.exit(2);
}
const failures = existsSync(failuresPath) ? JSON.parse(readFileSync(failuresPath, 'utf8')) : {};
writeExpectations({
  reportPath,
  known: failures,
  tables: { capability: CAPABILITY, method: METHOD },
  expectationsPath: join(HERE, '..', 'expectations.json'),
  extra: {},
});
