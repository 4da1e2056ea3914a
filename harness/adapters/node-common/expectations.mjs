// Writes a Node adapter's expectations.json from a full-catalogue JSON report, with the host's own tables of what it lacks: shared by the opencode and Claude Code generators.
//
// An unsupported scenario's reason is composed from what the harness says it
// lacked (the capabilities it needs, or the first method or option the
// adapter refused) through the host's tables; a cause missing from them stops
// the script, so no scenario is listed without a reason. Failures, errors and
// unverified results come only from the hand-checked known failures, never
// from the report; a known failure also lists the checks it fails at in this
// report (`failed`), so a later run that fails at other checks is a failure
// again, not this known one (README, "Expectations file").

import { readFileSync, writeFileSync, existsSync } from 'node:fs';

function reasonFor(scenario, { capability, method: methods }) {
  const parts = [];
  for (const cause of scenario.missing || []) {
    const method = cause.match(/^method `([^`]+)`/);
    const text = method ? methods[method[1]] : capability[cause];
    if (!text) throw new Error(`${scenario.id}: no reason known for \`${cause}\`; add it to conformance/expectations.mjs`);
    parts.push(method ? `\`${method[1]}\` refused at ${cause.replace(/^method `[^`]+` /, '').replace(/^\((.*)\)$/, '$1')}: ${text}` : `needs \`${cause}\`: ${text}`);
  }
  if (parts.length === 0) throw new Error(`${scenario.id}: unsupported without a cause in the report`);
  return parts.join('; ');
}

function failedAt(scenario, expect) {
  if (expect !== 'fail') return {};
  return { failed: [...new Set((scenario.failures || []).map((f) => f.at))].sort() };
}

/**
 * Writes `expectationsPath` from the report at `reportPath`. `known` maps a
 * scenario id to its hand-checked `{expect, reason}`; `tables` is the host's
 * `{capability, method}`; `extra` is written beside `known` (e.g. `deny_reasons`).
 */
export function writeExpectations({ reportPath, known: listed, tables, expectationsPath, extra = {} }) {
  const report = JSON.parse(readFileSync(reportPath, 'utf8'));
  // A known-unsupported scenario's report entry carries no cause: its current reason stays.
  const previous = new Map((existsSync(expectationsPath) ? JSON.parse(readFileSync(expectationsPath, 'utf8')).known : []).map((e) => [e.scenario, e.reason]));
  const known = [];
  for (const s of [...report.scenarios].sort((a, b) => a.id.localeCompare(b.id))) {
    const entry = listed[s.id];
    if (entry) {
      const expect = entry.expect || 'fail';
      known.push({ scenario: s.id, expect, reason: entry.reason, ...failedAt(s, expect) });
    } else if (s.raw_verdict === 'unsupported') {
      const reason = (s.missing || []).length === 0 && previous.has(s.id) ? previous.get(s.id) : reasonFor(s, tables);
      known.push({ scenario: s.id, expect: 'unsupported', reason });
    }
  }
  writeFileSync(expectationsPath, `${JSON.stringify({ known, ...extra }, null, 2)}\n`);
  process.stderr.write(`${known.length} entries written to ${expectationsPath}\n`);
}
