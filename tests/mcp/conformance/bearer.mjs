// The conformance suite connects without credentials; justonce's HTTP transport
// needs a bearer token. Loaded with `node --import`, this adds
// `Authorization: Bearer $JUSTONCE_CONFORMANCE_TOKEN` to every request the suite
// sends (through the global fetch, as the MCP SDK does, through undici's `request`,
// as its DNS-rebinding scenario does, and through `node:http`'s `request`, as the
// 0.2 line's header-validation scenarios do) that carries none, without touching
// the suite.
import http from "node:http";
import { register } from "node:module";

const token = process.env.JUSTONCE_CONFORMANCE_TOKEN;
if (token) {
  const authorization = `Bearer ${token}`;
  const fetch = globalThis.fetch;
  globalThis.fetch = (input, init = {}) => {
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    if (!headers.has("authorization")) headers.set("authorization", authorization);
    return fetch(input, { ...init, headers });
  };
  const request = http.request;
  http.request = (options, ...rest) => {
    if (options && typeof options === "object" && !(options instanceof URL)) {
      const headers = { ...(options.headers ?? {}) };
      if (!Object.keys(headers).some((name) => name.toLowerCase() === "authorization")) {
        headers.authorization = authorization;
      }
      options = { ...options, headers };
    }
    return request(options, ...rest);
  };
  register("./bearer-hooks.mjs", import.meta.url, { data: { authorization } });
}
