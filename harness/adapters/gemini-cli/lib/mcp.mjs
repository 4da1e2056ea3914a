// The harness's MCP servers as Gemini CLI sees them: Gemini CLI's names for their tools, and the digests of the definitions they serve.
//
// Gemini CLI names an MCP tool `mcp_<server>_<tool>` with every character
// outside [a-zA-Z0-9_\-.:] replaced by `_` (`generateValidName` in
// packages/core/src/tools/mcp-tool.ts; the model endpoint's
// `gemini_mcp_tool_name` is the same rule), and its policy rules key on that
// name. Gemini CLI keeps no digest: the digests come from the adapter's own
// `tools/list` (../../node-common/mcp.mjs) and are reported as inferred.

import { digestOf, toolCatalogue as catalogue } from '../../node-common/mcp.mjs';

export { digestOf };

/** The name Gemini CLI gives tool `tool` of MCP server `server` (names up to 63 characters; longer ones are shortened by Gemini CLI and not handled here). */
export function geminiToolName(server, tool) {
  const joined = `${server}_${tool}`;
  const prefixed = joined.startsWith('mcp_') ? joined : `mcp_${joined}`;
  let name = prefixed.replace(/[^a-zA-Z0-9_\-.:]/g, '_');
  if (/^[^a-zA-Z_]/.test(name)) name = `_${name}`;
  return name.length > 63 ? `${name.slice(0, 30)}...${name.slice(-30)}` : name;
}

/** Every tool the servers serve now, with `gemini`: Gemini CLI's name for it. */
export const toolCatalogue = (servers) =>
  catalogue(servers, { key: 'gemini', hostName: geminiToolName, clientName: 'delegation-harness-gemini-cli-adapter' });
