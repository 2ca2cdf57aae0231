// The 0.2 suite runs its scenarios one after another, each as a client of its own,
// and several of them make the very same call: the input-required-result-* scenarios
// call test_input_required_result_elicitation with no arguments in five of them. To
// justonce the same call by the same principal in no conversation, within the short
// unscoped window, is one call: the second is a replay of the first's outcome, not a
// new question. Loaded with `node --import`, this gives each scenario whose name
// starts with one of $JUSTONCE_CONFORMANCE_OWN_CONVERSATION (prefixes, comma
// separated) a conversation of its own, as the runs of several agents would have: the
// Justonce-Conversation header, set to the scenario's name on every request the
// suite sends through the global fetch, without touching the suite. It learns which
// scenario runs from the suite's own "=== Running scenario: NAME ===" line.
const prefixes = (process.env.JUSTONCE_CONFORMANCE_OWN_CONVERSATION ?? "")
  .split(",")
  .filter((prefix) => prefix !== "");

if (prefixes.length > 0) {
  let scenario = null;
  const log = console.log;
  console.log = (...args) => {
    const running = typeof args[0] === "string" && args[0].match(/=== Running scenario: (\S+) ===/);
    if (running) scenario = running[1];
    return log(...args);
  };
  const fetch = globalThis.fetch;
  globalThis.fetch = (input, init = {}) => {
    if (!scenario || !prefixes.some((prefix) => scenario.startsWith(prefix))) {
      return fetch(input, init);
    }
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    if (!headers.has("justonce-conversation")) headers.set("justonce-conversation", scenario);
    return fetch(input, { ...init, headers });
  };
}
