// Usage: node checkpoint.mjs CONFIG ADMIN_TOKEN_VAR
//
// Starts `policyc gateway --config CONFIG` (policyc from PATH) over the stdio
// front and plays an agent with the TypeScript MCP SDK's client at its
// default request timeout (60 s), against calls held for approval for
// longer than that: each held call is answered with a checkpoint before the
// client's timeout, the agent waits through the gateway's wait tool, and a
// human decides with `policyc approvals approve|deny`, its token in the
// variable ADMIN_TOKEN_VAR. Prints what the agent saw as JSON.
import { execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { createInterface } from "node:readline";

const [config, tokenVar] = process.argv.slice(2);
if (!config || !tokenVar) {
  console.error("usage: node checkpoint.mjs CONFIG ADMIN_TOKEN_VAR");
  process.exit(2);
}

const transport = new StdioClientTransport({ command: "policyc", args: ["gateway", "--config", config], stderr: "pipe" });
const admin = new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error("the gateway did not serve within 60 s")), 60_000);
  createInterface({ input: transport.stderr }).on("line", (line) => {
    process.stderr.write(line + "\n");
    const m = /msg="serving the approvals page and admin API" address=(\S+)/.exec(line);
    if (m) {
      clearTimeout(timer);
      resolve(`http://${m[1]}`);
    }
  });
});
const client = new Client({ name: "policyc-interop", version: "1.0.0" });
await client.connect(transport);

const waitTool = "policyc__wait_for_approval";
const text = (r) => r.content.map((c) => c.text).join("\n");
// A decision through the CLI, as an approver makes it.
const decide = async (verb, id, ...flags) =>
  execFileSync("policyc", ["approvals", verb, id, "--admin", await admin, "--token-env", tokenVar, ...flags], { encoding: "utf8" });

// checkpoint calls a held tool at the client's default timeout and returns
// what came back, and how long it took.
async function checkpoint(name, args) {
  const started = Date.now();
  const res = await client.callTool({ name, arguments: args });
  const sc = res.structuredContent ?? res._meta?.["dev.policyc/approval"] ?? {};
  return {
    id: sc.request_id,
    seen: {
      before_client_timeout: Date.now() - started < 60_000,
      is_error: res.isError === true,
      status: sc.status,
      wait_tool: sc.wait_tool,
      says_wait: text(res).includes(`Call the tool ${waitTool}`) && text(res).includes("repeat this call exactly once"),
    },
  };
}

// wait calls the wait tool for id until it answers anything but pending,
// deciding with decision after the given number of pending answers.
async function wait(id, slices, decision) {
  for (let n = 0; ; n++) {
    if (n === slices) await decision();
    const res = await client.callTool({ name: waitTool, arguments: { request_id: id } });
    const st = res.structuredContent?.status;
    if (st !== "pending") return { pending_slices: n, status: st, is_error: res.isError === true, text: text(res) };
  }
}

const out = {};
const tools = (await client.listTools()).tools.map((t) => t.name);
out.wait_tool_listed = tools.includes(waitTool);

// Approved after several slices of waiting: the retry runs, once.
{
  const args = { a: 20, b: 22 };
  const { id, seen } = await checkpoint("everything__get-sum", args);
  const w = await wait(id, 3, () => decide("approve", id, "--for", "once"));
  const retry = await client.callTool({ name: "everything__get-sum", arguments: args });
  const again = await checkpoint("everything__get-sum", args);
  out.approved = {
    checkpoint: seen,
    waited_slices: w.pending_slices,
    wait_says: w.status,
    told_to_repeat_once: w.text.includes("exactly once, with the same arguments"),
    retry: text(retry),
    second_retry_asks_again: again.id !== undefined && again.id !== id && again.seen.status === "pending",
  };
  await decide("deny", again.id, "--reason", "once was enough");
}

// Denied: the wait tool says so, with the reason, as a tool error. The held
// tool has an output schema; the checkpoint is not validated against it.
{
  const { id, seen } = await checkpoint("everything__get-structured-content", { location: "Chicago" });
  const w = await wait(id, 1, () => decide("deny", id, "--reason", "not today"));
  out.denied = { checkpoint: seen, wait_says: w.status, is_error: w.is_error, says_why: w.text.includes("saying: not today") };
}

// Expired: no one decides within the request's life.
{
  const { id, seen } = await checkpoint("brief__echo", { message: "hello" });
  const w = await wait(id, -1, () => {});
  out.expired = { checkpoint: seen, wait_says: w.status, is_error: w.is_error };
}

await client.close();
console.log(JSON.stringify(out, null, 2));
