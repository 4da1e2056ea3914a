#!/usr/bin/env node
// Writes expectations.json from a full-catalogue JSON report: each unsupported scenario with the GitHub Copilot CLI capability it lacks, each known failure with its evidence.
//
// Usage: node harness/adapters/copilot/conformance/expectations.mjs REPORT.json [known-failures.json]
//
// The reason of an unsupported scenario is composed from what the harness
// says it lacked (the capabilities it needs, or the first method or option
// the adapter refused) through the tables below, which say what Copilot has
// or has not; a cause missing from the tables stops the script, so no
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

/** What Copilot CLI 1.0.102 lacks, per capability the catalogue asks for. */
const CAPABILITY = {
  receipts: 'Copilot issues no delegation receipts: a subagent exists only when the model calls `task`',
  clock: 'Copilot reads the system clock; nothing in it takes the harness\'s clock',
  'external-authorizer': 'nothing in Copilot consults an external service before it starts a subagent',
  'auto-approval': 'Copilot has no persistence-gated automatic approval: an allow rule runs a tool unasked, with no decision committed before dispatch',
  'exact-call-grants': 'Copilot\'s permission answers are for a call, a session or a rule wider than one exact call; there is no grant of one exact call to revoke',
  'direct-tool-calls': 'Copilot has no way for a client to run a tool as if its model had asked for it: every tool call comes from the model\'s answer',
  'fault-injection': 'Copilot\'s store writes and dispatch cannot be failed on demand from outside',
  events: 'Copilot has no single-use host events to deliver',
  'task-capabilities': 'Copilot has no task capability credentials',
  reviewer: 'Copilot has no risk-scored approval reviewer the harness can score (its assisted-approval judge is a model, not a score the harness can set)',
  wait: 'Copilot has no client call that waits for a session or subagent (its -p run returns when the turn ends)',
  'spawn-authority': 'Copilot\'s `task` tool takes {name, description, prompt, agent_type, model, reasoning_effort, context_tier, mode}: no sandbox, approval policy, cwd or tool list, so the authority this spawn requests cannot reach Copilot (a subagent runs under its session\'s permission rules and its custom agent\'s tool list)',
  fork: 'the adapter does not map fork: `copilot -p` has no fork of a session (its `/fork` is an interactive command)',
  'model-lifecycle-tools': 'a `task` subagent run in the foreground (`mode: sync`, so the parent\'s turn waits for it) is not resumable (`resumable: false` in Copilot\'s events); `write_agent` reaches only background agents, whose turns outlive the `copilot -p` run',
  'model-close-tools': 'Copilot has no tool that closes a finished subagent',
  'clarification-questions': 'no client call makes a Copilot session or subagent ask a person a question (`instance/ask`), and none of the tools Copilot shows its model in the adapter\'s non-interactive runs asks one (the harness\'s model endpoint records them), so the adapter does not declare clarification-questions',
  'concurrent-requests': 'the adapter answers one request at a time (node-common/rpc.mjs reads the next request only after answering the last, driving one `copilot -p` run per turn), so no two actions are in flight at once through it',
};

/** What the adapter refuses, per method or option, and why Copilot has no equivalent. */
const METHOD = {
  'instance/delegate': 'Copilot has no admission call: a subagent exists only when the model calls `task` in a turn; the spawn-based twins run instead where the catalogue has them',
  'instance/close': 'Copilot has no close: a session stays resumable as long as its files exist, and deleting them would be the adapter\'s act, not Copilot\'s',
  'instance/cancel': 'Copilot has no cancelled state a client can put a session or subagent in',
  'instance/fail': 'Copilot has no failed state to put a session in',
  'instance/resume': 'the adapter does not map `instance/resume`: every turn already resumes the session (`--session-id`), and a subagent is continued only by its parent\'s model',
  'instance/turn': 'a turn on a subagent: Copilot continues a subagent only through its parent\'s model (`write_agent` on a background agent), never from outside',
  'instance/fork': CAPABILITY.fork,
  'instance/tool_call': CAPABILITY['direct-tool-calls'],
  'approval/answer': 'the decision is `allow-exact`: Copilot\'s permission request (over ACP) offers allow once, always allow (a rule for the rest of the session) and deny, no grant of one exact call',
  'approval/auto': CAPABILITY['auto-approval'],
  'receipt/prepare': CAPABILITY.receipts,
  'receipt/consume': CAPABILITY.receipts,
  'event/deliver': CAPABILITY.events,
  'clock/set': CAPABILITY.clock,
  'host/configure': 'the scenario configures an option Copilot cannot honour and the adapter refuses (-32001): `strict_mode` (Copilot has no sandbox policy by which to refuse an unsandboxed subagent), `auto_approve` (see auto-approval), `authorizer_required` (see external-authorizer), a role with its own provider, or a role none of whose tools is served',
  'instance/start': 'the root asks for an option Copilot cannot express (-32001): a `granular` approval policy that names the delegation class (Copilot\'s `task` asks no permission, and a deny rule on it does not hold), an `external` sandbox, or another model or provider',
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
