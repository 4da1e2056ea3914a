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

import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

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
  'host/configure': 'the scenario configures an option opencode cannot honour and the adapter refuses (-32001): `strict_mode` (opencode has no sandbox to require of a child), `auto_approve` (see auto-approval) or `authorizer_required` (see external-authorizer)',
  'approval/answer': 'the decision is `allow-exact`: opencode\'s replies are once, always (every later call of the tool in the session, any arguments) and reject; none is one exact call',
};

function reasonFor(scenario) {
  const parts = [];
  for (const cause of scenario.missing || []) {
    const method = cause.match(/^method `([^`]+)`/);
    const text = method ? METHOD[method[1]] : CAPABILITY[cause];
    if (!text) throw new Error(`${scenario.id}: no reason known for \`${cause}\`; add it to conformance/expectations.mjs`);
    parts.push(method ? `\`${method[1]}\` refused at ${cause.replace(/^method `[^`]+` /, '').replace(/^\((.*)\)$/, '$1')}: ${text}` : `needs \`${cause}\`: ${text}`);
  }
  if (parts.length === 0) throw new Error(`${scenario.id}: unsupported without a cause in the report`);
  return parts.join('; ');
}

// A known failure lists the checks it fails at in this report (`failed`):
// a later run that fails at other checks is then a failure again, not this
// known one (README, "Expectations file").
function failedAt(scenario, expect) {
  if (expect !== 'fail') return {};
  return { failed: [...new Set((scenario.failures || []).map((f) => f.at))].sort() };
}

const [reportPath, failuresPath = join(HERE, 'known-failures.json')] = process.argv.slice(2);
if (!reportPath) {
  process.stderr.write('usage: expectations.mjs REPORT.json [known-failures.json]\n');
  process.exit(2);
}
const report = JSON.parse(readFileSync(reportPath, 'utf8'));
const failures = existsSync(failuresPath) ? JSON.parse(readFileSync(failuresPath, 'utf8')) : {};
// A known-unsupported scenario's report entry carries no cause: its current reason stays.
const previous = new Map((existsSync(join(HERE, '..', 'expectations.json')) ? JSON.parse(readFileSync(join(HERE, '..', 'expectations.json'), 'utf8')).known : []).map((e) => [e.scenario, e.reason]));
const known = [];
for (const s of [...report.scenarios].sort((a, b) => a.id.localeCompare(b.id))) {
  if (failures[s.id]) {
    const expect = failures[s.id].expect || 'fail';
    known.push({ scenario: s.id, expect, reason: failures[s.id].reason, ...failedAt(s, expect) });
  } else if (s.raw_verdict === 'unsupported') {
    const reason = (s.missing || []).length === 0 && previous.has(s.id) ? previous.get(s.id) : reasonFor(s);
    known.push({ scenario: s.id, expect: 'unsupported', reason });
  }
}
const out = join(HERE, '..', 'expectations.json');
writeFileSync(out, `${JSON.stringify({ known }, null, 2)}\n`);
process.stderr.write(`${known.length} entries written to ${out}\n`);
