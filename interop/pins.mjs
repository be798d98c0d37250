// Usage: node pins.mjs http|stdio CONFIG [TOKEN]
//
// Starts `policyc gateway --config CONFIG` (policyc from PATH) and asks it,
// with the TypeScript MCP SDK's client, for its tools: prints as JSON the
// names listed, echo's description when it is listed, and whether a call
// of echo and of get-sum was served or answered exactly as a tool that
// does not exist (the pins of a drifted tool).
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, config, token] = process.argv.slice(2);
if (!["http", "stdio"].includes(mode) || !config) {
  console.error("usage: node pins.mjs http|stdio CONFIG [TOKEN]");
  process.exit(2);
}

async function outcome(f) {
  try {
    return { result: await f() };
  } catch (e) {
    return { error: { code: e.code, message: e.message, data: e.data ?? null } };
  }
}

async function scenario(client) {
  const tools = (await client.listTools()).tools;
  const out = { tools: tools.map((t) => t.name) };
  out.echo_description = tools.find((t) => t.name === "everything__echo")?.description ?? null;
  const call = (name, args) => outcome(() => client.callTool({ name, arguments: args }));
  const norm = (o, n) => JSON.stringify(o).split(n).join("NAME");
  const absent = await call("everything__no-such-tool", {});
  for (const [name, args] of [["everything__echo", { message: "hi" }], ["everything__get-sum", { a: 2, b: 3 }]]) {
    const got = await call(name, args);
    out[name] = got.error === undefined ? "served" : norm(got, name) === norm(absent, "everything__no-such-tool") ? "absent" : got.error;
  }
  return out;
}

function waitForLine(proc, stream, re, what) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start within 60 s`)), 60_000);
    proc.on("error", reject);
    proc.on("exit", (code, signal) => reject(new Error(`${what} exited (${code ?? signal}) before it started`)));
    createInterface({ input: stream }).on("line", (line) => {
      process.stderr.write(line + "\n");
      const m = re.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    });
  });
}

const client = new Client({ name: "policyc-interop-pins", version: "1.0.0" });
let out;
if (mode === "http") {
  const gw = spawn("policyc", ["gateway", "--config", config], { stdio: ["ignore", "inherit", "pipe"] });
  const exited = new Promise((resolve) => gw.on("exit", (code, signal) => resolve(code ?? signal)));
  try {
    const m = await waitForLine(gw, gw.stderr, /msg="serving streamable HTTP" address=(\S+)/, "the gateway");
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://${m[1]}/`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
    );
    out = await scenario(client);
    await client.close();
  } finally {
    gw.kill("SIGTERM");
  }
  await exited;
} else {
  await client.connect(new StdioClientTransport({ command: "policyc", args: ["gateway", "--config", config], stderr: "inherit" }));
  out = await scenario(client);
  await client.close();
}
console.log(JSON.stringify(out, null, 2));
