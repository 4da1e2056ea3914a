// The harness's MCP servers as Qwen Code sees them: Qwen Code's names for their tools, and the digests of the definitions they serve.
//
// Qwen Code names an MCP tool `mcp__<server>__<tool>`, each part with every
// character outside [A-Za-z0-9_-] replaced by `_`, and its permission rules
// key on that name. The digests are the protocol's (SHA-256 over RFC 8785
// JSON of the definition as served); Qwen Code keeps none, so they come from
// the adapter's own `tools/list` and are reported as inferred. The
// streamable-HTTP client and the digests are ../../node-common/mcp.mjs.

import { sanitize, digestOf, toolCatalogue as catalogue } from '../../node-common/mcp.mjs';

export { digestOf };

/** The name Qwen Code gives tool `tool` of MCP server `server`. */
export const qwenToolName = (server, tool) => `mcp__${sanitize(server)}__${sanitize(tool)}`;

/** Every tool the servers serve now, with `qwen`: Qwen Code's name for it. */
export const toolCatalogue = (servers) =>
  catalogue(servers, { key: 'qwen', hostName: qwenToolName, clientName: 'delegation-harness-qwen-code-adapter' });
