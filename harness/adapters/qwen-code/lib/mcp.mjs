// The harness's MCP servers as Qwen Code sees them: Qwen Code's names for their tools, and the digests of the definitions they serve.
//
// Qwen Code names an MCP tool `mcp__<server>__<tool>` when that is a letter
// followed by [A-Za-z0-9_-], 63 characters at most; otherwise every other
// character becomes `_` and a hash of the raw name is appended (its
// `normalizeToolNameForProvider`: `notes.read` is
// `mcp__harness__notes_read_1k3gxzc`). Its permission rules and its tool
// calls use that name. The digests are the protocol's (SHA-256 over RFC 8785
// JSON of the definition as served); Qwen Code keeps none, so they come from
// the adapter's own `tools/list` and are reported as inferred. The
// streamable-HTTP client and the digests are ../../node-common/mcp.mjs.

import { digestOf, toolCatalogue as catalogue } from '../../node-common/mcp.mjs';

export { digestOf };

const MAX_TOOL_NAME_LENGTH = 63;

/** Qwen Code's `stableToolNameHash`: 32-bit FNV-1a over UTF-16 code units, base 36, 7 digits. */
function stableHash(name) {
  let hash = 2166136261;
  for (let i = 0; i < name.length; i += 1) hash = Math.imul(hash ^ name.charCodeAt(i), 16777619);
  return (hash >>> 0).toString(36).padStart(7, '0');
}

/** The name Qwen Code gives tool `tool` of MCP server `server`. */
export function qwenToolName(server, tool) {
  const raw = `mcp__${server}__${tool}`;
  if (raw.length <= MAX_TOOL_NAME_LENGTH && /^[A-Za-z][A-Za-z0-9_-]*$/.test(raw)) return raw;
  const suffix = `_${stableHash(raw)}`;
  return `${raw.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, MAX_TOOL_NAME_LENGTH - suffix.length)}${suffix}`;
}

/** Every tool the servers serve now, with `qwen`: Qwen Code's name for it. */
export const toolCatalogue = (servers) =>
  catalogue(servers, { key: 'qwen', hostName: qwenToolName, clientName: 'delegation-harness-qwen-code-adapter' });
