// The module hook of globsync.mjs: `fs` and `node:fs` resolve to fs-globsync.mjs,
// except from that module itself.
const shim = new URL("./fs-globsync.mjs", import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL !== shim) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}
