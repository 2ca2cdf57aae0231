// The module hook of bearer.mjs: `undici` resolves to a module that re-exports it
// with a `request` that adds the Authorization header.
let authorization = "";
const PREFIX = "justonce-bearer:";

export async function initialize(data) {
  authorization = data.authorization;
}

export async function resolve(specifier, context, next) {
  if (specifier === "undici" && !context.parentURL?.startsWith(PREFIX)) {
    const target = await next(specifier, context);
    return { url: PREFIX + encodeURIComponent(target.url), shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (!url.startsWith(PREFIX)) return next(url, context);
  const target = JSON.stringify(decodeURIComponent(url.slice(PREFIX.length)));
  const source = `
export * from ${target};
import * as undici from ${target};
const authorization = ${JSON.stringify(authorization)};
export function request(url, options = {}) {
  const headers = { ...(options.headers ?? {}) };
  if (!Object.keys(headers).some((name) => name.toLowerCase() === "authorization")) {
    headers.authorization = authorization;
  }
  return undici.request(url, { ...options, headers });
}
`;
  return { format: "module", source, shortCircuit: true };
}
