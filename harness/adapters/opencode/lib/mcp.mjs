// The harness's MCP servers as opencode sees them: opencode's names for their tools, and the digests of the definitions they serve.
//
// opencode names an MCP tool `<server>_<tool>`, each part with every
// character outside [a-zA-Z0-9_-] replaced by `_` (read in the 1.18.33
// binary), and its permission rules key on that name. The digests are the
// protocol's (SHA-256 over RFC 8785 JSON of the definition as served); opencode
// keeps no digest and shows no raw definition, so they come from the
// adapter's own `tools/list` and are reported as inferred.

import { sanitize, canonicalJson, digestOf, listTools, toolCatalogue as catalogue } from '../../node-common/mcp.mjs';

export { sanitize, canonicalJson, digestOf, listTools };

/** The name opencode gives tool `tool` of MCP server `server`. */
export const opencodeToolName = (server, tool) => `${sanitize(server)}_${sanitize(tool)}`;

/** Every tool the servers serve now, with `opencode`: opencode's name for it. */
export const toolCatalogue = (servers) =>
  catalogue(servers, { key: 'opencode', hostName: opencodeToolName, clientName: 'delegation-harness-opencode-adapter' });
