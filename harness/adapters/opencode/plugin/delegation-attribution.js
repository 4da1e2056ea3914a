// opencode plugin installed by the delegation-harness adapter: tags every model request with the session it is made for.
//
// opencode sends no instance header of its own that the harness reads; its
// `chat.headers` hook runs before each model call with the session id, and the
// adapter uses opencode session ids as instance ids, so the harness's model
// endpoint can count requests per instance (`x-delegation-instance`).
export const DelegationAttribution = async () => ({
  'chat.headers': async (input, output) => {
    if (input && input.sessionID) output.headers['x-delegation-instance'] = input.sessionID;
  },
});
