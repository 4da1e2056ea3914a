// The harness's MCP servers as Claude Code sees them: Claude Code's names for their tools, and the digests of the definitions they serve.
//
// Claude Code names an MCP tool `mcp__<server>__<tool>`, each part with every
// character outside [a-zA-Z0-9_-] replaced by `_`, and its permission rules
// key on that name. The digests are the protocol's (SHA-256 over RFC 8785
// JSON of the definition as served); Claude Code keeps no digest, so they
// come from the adapter's own `tools/list` and are reported as inferred.
// The streamable-HTTP client and the digests are ../../node-common/mcp.mjs.

import { sanitize, canonicalJson, digestOf, listTools, toolCatalogue as catalogue } from '../../node-common/mcp.mjs';

export { sanitize, canonicalJson, digestOf, listTools };

/** The name Claude Code gives tool `tool` of MCP server `server`. */
export const claudeToolName = (server, tool) => `mcp__${sanitize(server)}__${sanitize(tool)}`;

/** Every tool the servers serve now, with `claude`: Claude Code's name for it. */
export const toolCatalogue = (servers) =>
  catalogue(servers, { key: 'claude', hostName: claudeToolName, clientName: 'delegation-harness-claude-code-adapter' });
