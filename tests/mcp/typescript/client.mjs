// The official TypeScript MCP SDK's client against `justonce serve`, as
// docs/agent-builders.md ("From the TypeScript SDK") shows it: the one line that names
// the conversation, and what a refusal of the host is to the developer.
//
// Usage: node client.mjs SDK_DIR stdio JUSTONCE DB HTTP_CONFIG
//        node client.mjs SDK_DIR http URL TOKEN
//
// SDK_DIR is node_modules/@modelcontextprotocol/sdk (pinned in tests/mcp/upstreams/).
// The server refuses calls that name no conversation. Prints one JSON object: what each
// call answered, or the error it rejected with.

const [sdk, transport, ...rest] = process.argv.slice(2);
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StdioClientTransport } = await import(`${sdk}/dist/esm/client/stdio.js`);
const { StreamableHTTPClientTransport } = await import(`${sdk}/dist/esm/client/streamableHttp.js`);

function connection() {
  if (transport === "stdio") {
    const [justonce, db, config] = rest;
    const args = ["--db", db, "serve", "--http-config", config, "--unscoped", "refuse"];
    return new StdioClientTransport({ command: justonce, args });
  }
  const [url, token] = rest;
  return new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}

const client = new Client({ name: "typescript-recipe", version: "1.0.0" });
await client.connect(connection());

const notify = { event: "refund.issued", data: { order_id: "4417" } };
const report = {};
async function call(name, request) {
  try {
    const result = await client.callTool(request);
    report[name] = { isError: result.isError ?? false, text: result.content.map((c) => c.text ?? c.resource?.text).join("\n") };
  } catch (e) {
    report[name] = { rejected: { code: e.code, message: e.message } };
  }
}

// docs/agent-builders.md: the one line.
await call("first", { name: "notify", arguments: notify, _meta: { "dev.justonce/conversation": "ticket-4417" } });
await call("again", { name: "notify", arguments: notify, _meta: { "dev.justonce/conversation": "ticket-4417" } });
await call("other", { name: "notify", arguments: notify, _meta: { "dev.justonce/conversation": "ticket-5001" } });
await call("unnamed", { name: "notify", arguments: notify });

await client.close();
console.log(JSON.stringify(report));
