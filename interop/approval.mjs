// Usage: node approval.mjs stdio CONFIG APPROVER_TOKEN
//        node approval.mjs http CONFIG APPROVER_TOKEN CLIENT_TOKEN
//
// Starts `policyc gateway --config CONFIG` (policyc from PATH) and makes
// tool calls the policy holds for approval with the TypeScript MCP SDK's
// client, over the stdio front or over the streamable HTTP front with the
// bearer CLIENT_TOKEN, while a human is played through the gateway's admin
// API. Addresses are read from the gateway's log, so CONFIG may listen on
// port 0. Prints what the client and the API saw as JSON.
import { spawn } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createInterface } from "node:readline";

const [mode, config, approverToken, clientToken] = process.argv.slice(2);
if (!["stdio", "http"].includes(mode) || !config || !approverToken || (mode === "http" && !clientToken)) {
  console.error("usage: node approval.mjs stdio|http CONFIG APPROVER_TOKEN [CLIENT_TOKEN]");
  process.exit(2);
}

// addresses resolves to the addresses the gateway's log says it serves
// on, once each listener it names in wanted has said so.
function addresses(stream, wanted) {
  const found = {};
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the gateway did not serve within 60 s")), 60_000);
    createInterface({ input: stream }).on("line", (line) => {
      process.stderr.write(line + "\n");
      const m = /msg="serving (the approvals page and admin API|streamable HTTP)" address=(\S+)/.exec(line);
      if (m) found[m[1] === "streamable HTTP" ? "front" : "admin"] = m[2];
      if (wanted.every((w) => found[w])) {
        clearTimeout(timer);
        resolve(found);
      }
    });
  });
}

let transport, gateway, listening;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: "policyc", args: ["gateway", "--config", config], stderr: "pipe" });
  listening = addresses(transport.stderr, ["admin"]);
} else {
  gateway = spawn("policyc", ["gateway", "--config", config], { stdio: ["ignore", "inherit", "pipe"] });
  process.on("exit", () => gateway.kill("SIGTERM")); // however this script ends
  listening = addresses(gateway.stderr, ["admin", "front"]);
  transport = new StreamableHTTPClientTransport(new URL(`http://${(await listening).front}/`), {
    requestInit: { headers: { Authorization: `Bearer ${clientToken}` } },
  });
}
const client = new Client({ name: "policyc-interop", version: "1.0.0" });
await client.connect(transport);
const admin = `http://${(await listening).admin}/api/v1`;

async function api(method, path, body) {
  const res = await fetch(admin + path, {
    method,
    headers: { Authorization: `Bearer ${approverToken}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// requests returns the gate's requests of status for tool, oldest first, or
// undefined while there are none.
async function requests(status, tool) {
  const { requests } = await api("GET", `/requests?status=${status}`);
  const list = requests.filter((r) => r.tool === tool).reverse();
  return list.length > 0 ? list : undefined;
}

// waitFor polls until f returns something, for at most 30 s.
async function waitFor(what, f) {
  for (let i = 0; i < 300; i++) {
    const v = await f();
    if (v) return v;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const text = (r) => r.content.map((c) => c.text).join("\n");
const out = {};

// 1. A call held longer than the client's request timeout, which the client
// restarts on progress: the gate's progress notifications keep it waiting
// until a human approves it, and then the held call itself runs.
{
  const started = Date.now();
  const progress = [];
  const call = client.callTool({ name: "everything__get-sum", arguments: { a: 2, b: 3 } }, undefined, {
    timeout: 2500,
    resetTimeoutOnProgress: true,
    onprogress: (p) => progress.push(p),
  });
  const [req] = await waitFor("the held call's request", () => requests("pending", "get-sum"));
  out.held = { principal: req.principal, server: req.server, tool: req.tool, calls: req.calls };
  await sleep(Math.max(0, 4000 - (Date.now() - started))); // past the client's own timeout
  await api("POST", `/requests/${req.id}/approve`, { for: "once", reason: "checked" });
  const res = await call;
  out.held.waited_past_client_timeout = Date.now() - started > 2500;
  out.held.result = text(res);
  out.held.progress_while_held = progress.length >= 2 && progress.every((p) => typeof p.message === "string" && p.message.includes(req.id));
  out.held.status = (await api("GET", `/requests/${req.id}`)).status;
}

// 2. A human denies: the agent gets a tool error saying so, not a
// JSON-RPC error it might retry.
{
  const call = client.callTool({ name: "everything__echo", arguments: { message: "rm -rf" } });
  const [req] = await waitFor("the request to deny", () => requests("pending", "echo"));
  await api("POST", `/requests/${req.id}/deny`, { reason: "not this one" });
  const res = await call;
  out.denied = { is_error: res.isError === true, says_who_and_why: /carol denied it, saying: not this one/.test(text(res)) };
}

// 3. A client that gives up (its request timeout, without restarting it on
// progress) cancels the call; the request goes on, for the agent's retry
// (a human then denies it).
{
  let err;
  try {
    await client.callTool({ name: "everything__get-sum", arguments: { a: 40, b: 2 } }, undefined, { timeout: 1500 });
  } catch (e) {
    err = e;
  }
  out.given_up = { client_error_code: err?.code };
  const [req] = await waitFor("the abandoned request", () => requests("pending", "get-sum"));
  // Once the gateway has taken the cancellation, no call is held for it.
  await waitFor("the cancellation", async () => (await api("GET", `/requests/${req.id}`)).waiting === 0);
  out.given_up.status = req.status;
  await api("POST", `/requests/${req.id}/deny`, { reason: "abandoned" });
}

// 4. Over HTTP, a client that ends its session (DELETE) while a call is
// held ends the hold at once (the DELETE is answered); the request goes on.
if (mode === "http") {
  client.callTool({ name: "everything__get-sum", arguments: { a: 4, b: 4 } }).catch(() => {});
  const [req] = await waitFor("the held call's request", () => requests("pending", "get-sum"));
  await transport.terminateSession();
  out.session_ended = { status: (await api("GET", `/requests/${req.id}`)).status };
}

await client.close();
gateway?.kill("SIGTERM"); // its output pipe would keep this script running
console.log(JSON.stringify(out, null, 2));
