// Usage: node oauth.mjs CONFIG CLIENT_ID CLIENT_SECRET ISSUER
//
// Starts `policyc gateway --config CONFIG` (policyc from PATH) on a free
// port, GATEWAY_PORT in CONFIG replaced by it (in CONFIG.run.cue), and
// connects the TypeScript MCP SDK's client to it with nothing but client
// credentials: the SDK finds the authorization server by itself, through
// the gateway's 401, its protected resource metadata and the provider's
// metadata, gets a token by the client-credentials grant and presents it.
// Prints what the client saw as JSON: the discovery, the tools listed, a
// call's answer, and whether a denied tool is answered as an absent one.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [configArg, clientId, clientSecret, issuer] = process.argv.slice(2);
if (!configArg || !clientId || !clientSecret || !issuer) {
  console.error("usage: node oauth.mjs CONFIG CLIENT_ID CLIENT_SECRET ISSUER");
  process.exit(2);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// waitForLine resolves to the first match of re in the lines of stream
// (each copied to standard error), or rejects after 60 s or when the
// process exits first.
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

const port = await freePort();
const config = configArg.replace(/\.cue$/, "") + ".run.cue";
writeFileSync(config, readFileSync(configArg, "utf8").replaceAll("GATEWAY_PORT", String(port)));
const gw = spawn("policyc", ["gateway", "--config", config], { stdio: ["ignore", "inherit", "pipe"] });
const exited = new Promise((resolve) => gw.on("exit", (code, signal) => resolve(code ?? signal)));
const address = (await waitForLine(gw, gw.stderr, /msg="serving streamable HTTP" address=(\S+)/, "the gateway"))[1];

// What the client fetches on its way to a token, in order.
const fetched = [];
const fetchFn = async (url, init) => {
  const u = new URL(url);
  const res = await fetch(url, init);
  fetched.push(`${init?.method ?? "GET"} ${u.origin === issuer ? "ISSUER" : u.origin === `http://${address}` ? "GATEWAY" : u.origin}${u.pathname} ${res.status}`);
  return res;
};

const out = {};
try {
  const url = new URL(`http://${address}/`);
  const provider = new ClientCredentialsProvider({ clientId, clientSecret, scope: "mcp", expectedIssuer: issuer });
  const client = new Client({ name: "policyc-interop-oauth", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider, fetch: fetchFn }));
  out.discovery = fetched.filter((f) => !f.startsWith("POST GATEWAY/ 2"));
  const aud = JSON.parse(Buffer.from(provider.tokens().access_token.split(".")[1], "base64url")).aud;
  out.token_for_the_gateway = [aud].flat().includes(`http://${address}/`);
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  const text = (r) => r.content.map((c) => c.text).join("\n");
  out.echo = text(await client.callTool({ name: "everything__echo", arguments: { message: "with a token" } }));
  const outcome = async (f) => {
    try {
      return { result: await f() };
    } catch (e) {
      return { error: { code: e.code, message: e.message } };
    }
  };
  const norm = (o, n) => JSON.stringify(o).split(n).join("NAME");
  const absent = await outcome(() => client.callTool({ name: "everything__no-such-tool", arguments: {} }));
  const denied = await outcome(() => client.callTool({ name: "everything__get-sum", arguments: { a: 1, b: 2 } }));
  out.denied_like_absent = denied.error !== undefined && norm(denied, "everything__get-sum") === norm(absent, "everything__no-such-tool");
  await client.close();
} finally {
  gw.kill("SIGTERM");
}
out.gateway_exit = await exited;
console.log(JSON.stringify(out, null, 2));
