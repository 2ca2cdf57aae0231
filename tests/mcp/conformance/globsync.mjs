// Node 20 lacks fs.globSync (Node 22), which @modelcontextprotocol/conformance imports
// for its results summary. Loaded with `node --import`, this adds it without touching
// the suite: a module hook answers the suite's `import ... from "fs"` with a module
// that re-exports node:fs plus a small globSync. On Node 22 and later it does nothing.
import fs from "node:fs";
import { register } from "node:module";

if (typeof fs.globSync !== "function") {
  register("./globsync-hooks.mjs", import.meta.url);
}
