// The harness's MCP servers as GitHub Copilot CLI sees them: Copilot's names for their tools, and the digests of the definitions they serve.
//
// Copilot offers an MCP tool to the model as `<server>-<tool>`, each part
// with every character outside [a-zA-Z0-9_-] replaced by `-` (1.0.102:
// `notes.read` on server `harness` is `harness-notes-read`), and
// `--excluded-tools` takes that name. The digests are the protocol's; Copilot
// keeps none, so they come from the adapter's own `tools/list` and are
// reported inferred. The client and the digests are ../../node-common/mcp.mjs.

import { canonicalJson, digestOf, listTools, toolCatalogue as catalogue } from '../../node-common/mcp.mjs';

export { canonicalJson, digestOf, listTools };

const dashed = (name) => String(name).replace(/[^a-zA-Z0-9_-]/g, '-');

/** The name Copilot gives tool `tool` of MCP server `server`. */
export const copilotToolName = (server, tool) => `${dashed(server)}-${dashed(tool)}`;

/** Every tool the servers serve now, with `copilot`: Copilot's name for it. */
export const toolCatalogue = (servers) =>
  catalogue(servers, { key: 'copilot', hostName: copilotToolName, clientName: 'delegation-harness-copilot-adapter' });
