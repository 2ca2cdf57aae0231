// node:fs with a globSync for the patterns the conformance suite uses: `**/NAME`
// and `DIR/**/NAME` (NAME may hold `*`), relative to `options.cwd`.
import fs from "node:fs";
import path from "node:path";

export * from "node:fs";
export default fs;

function matcher(glob) {
  const escaped = glob.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*");
  return new RegExp(`^${escaped}$`);
}

export function globSync(pattern, options = {}) {
  const cwd = options.cwd ?? process.cwd();
  const parts = pattern.split("/");
  const name = matcher(parts.pop());
  const recursive = parts.at(-1) === "**";
  if (recursive) parts.pop();
  if (parts.some((p) => p.includes("*"))) {
    throw new Error(`globSync polyfill: unsupported pattern ${pattern}`);
  }
  const base = parts.join("/");
  const found = [];
  const walk = (relative) => {
    let entries;
    try {
      entries = fs.readdirSync(path.join(cwd, relative), { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const child = relative ? `${relative}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (recursive) walk(child);
      } else if (name.test(entry.name)) {
        found.push(child);
      }
    }
  };
  walk(base);
  return found.sort();
}
