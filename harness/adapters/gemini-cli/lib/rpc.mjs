// JSON-RPC 2.0 framing for host protocol v1, shared by the Node adapters: see ../../node-common/rpc.mjs.
export * from '../../node-common/rpc.mjs';
