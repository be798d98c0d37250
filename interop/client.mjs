// Usage: node client.mjs [--http-upstream] http|stdio CONFIG [TOKEN]
//
// Starts `policyc gateway --config CONFIG` (policyc from PATH) and talks to
// it with the TypeScript MCP SDK's own client: over streamable HTTP with the
// bearer TOKEN (the address is read from the gateway's log, so CONFIG may
// listen on port 0), or over stdio. Prints what the client saw as JSON: the
// listings, the answers of allowed items, and whether each denied item was
// answered exactly as an item that does not exist.
//
// With --http-upstream, the reference server runs over streamable HTTP on a
// free port first, and the gateway is started on a copy of CONFIG
// (CONFIG.run.cue) in which EVERYTHING_URL is replaced by its URL.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const args = process.argv.slice(2);
const httpUpstream = args[0] === "--http-upstream";
const [mode, configArg, token] = httpUpstream ? args.slice(1) : args;
if (!["http", "stdio"].includes(mode) || !configArg) {
  console.error("usage: node client.mjs [--http-upstream] http|stdio CONFIG [TOKEN]");
  process.exit(2);
}

// outcome runs f and returns its result, or the error the client got.
async function outcome(f) {
  try {
    return { result: await f() };
  } catch (e) {
    return { error: { code: e.code, message: e.message, data: e.data ?? null } };
  }
}

// likeAbsent reports whether the answer for name is the answer for
// absentName with one name put for the other: denial must leak nothing.
function likeAbsent(got, name, want, absentName) {
  const norm = (o, n) => JSON.stringify(o).split(n).join("NAME");
  return got.error !== undefined && norm(got, name) === norm(want, absentName);
}

async function scenario(client) {
  const out = {};
  out.server = client.getServerVersion()?.name;
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  out.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
  out.resources = (await client.listResources()).resources.map((r) => r.uri);
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);

  const text = (r) => r.content.map((c) => c.text).join("\n");
  out.echo = text(await client.callTool({ name: "everything__echo", arguments: { message: "through the gateway" } }));
  out.sum = text(await client.callTool({ name: "everything__get-sum", arguments: { a: 2, b: 3 } }));

  const call = (name) => outcome(() => client.callTool({ name, arguments: {} }));
  const absentTool = await call("everything__no-such-tool");
  out.absent_tool = absentTool.error;
  out.denied_tools_like_absent = {};
  for (const name of ["everything__get-env", "everything__gzip-file-as-resource", "get-env", "other__echo"]) {
    out.denied_tools_like_absent[name] = likeAbsent(await call(name), name, absentTool, "everything__no-such-tool");
  }

  const prompt = await client.getPrompt({ name: "everything__simple-prompt" });
  out.prompt = prompt.messages.map((m) => m.content.text).join("\n");
  const get = (name) => outcome(() => client.getPrompt({ name, arguments: { resourceType: "Text", resourceId: "1" } }));
  const absentPrompt = await get("everything__no-such-prompt");
  out.denied_prompts_like_absent = {};
  for (const name of ["everything__resource-prompt", "everything__completable-prompt"]) {
    out.denied_prompts_like_absent[name] = likeAbsent(await get(name), name, absentPrompt, "everything__no-such-prompt");
  }

  const read = await client.readResource({ uri: "demo://resource/static/document/features.md" });
  out.read = read.contents.map((c) => c.text.split("\n")[0]).join("\n");
  const fromTemplate = await client.readResource({ uri: "demo://resource/dynamic/text/7" });
  out.read_from_template = fromTemplate.contents.map((c) => c.uri);
  const readURI = (uri) => outcome(() => client.readResource({ uri }));
  const absentURI = "demo://resource/static/document/none.md";
  const absentRead = await readURI(absentURI);
  out.denied_resources_like_absent = {};
  for (const uri of ["demo://resource/static/document/startup.md", "demo://resource/dynamic/blob/1"]) {
    out.denied_resources_like_absent[uri] = likeAbsent(await readURI(uri), uri, absentRead, absentURI);
  }

  // Progress notifications pass through, in order, tied to the call.
  const progress = [];
  const long = await client.callTool(
    { name: "everything__trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } },
    undefined,
    { onprogress: (p) => progress.push(p) },
  );
  out.long = text(long);
  out.progress_passed_through =
    progress.length > 0 && progress.every((p, i) => p.total === 3 && p.progress === progress[0].progress + i);
  return out;
}

// waitForLine resolves to the first match of re in the lines of stream
// (each copied to standard error), or rejects after 60 s or when the process
// exits first.
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

// freePort returns a port nothing listens on now.
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

let config = configArg;
let upstream;
if (httpUpstream) {
  const port = await freePort();
  upstream = spawn("node", ["node_modules/@modelcontextprotocol/server-everything/dist/index.js", "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  await waitForLine(upstream, upstream.stderr, /listening on port/, "the HTTP upstream");
  config = configArg.replace(/\.cue$/, "") + ".run.cue";
  writeFileSync(config, readFileSync(configArg, "utf8").replaceAll("EVERYTHING_URL", `http://127.0.0.1:${port}/mcp`));
}

// startHTTP starts the gateway and resolves to its address once it serves.
function startHTTP() {
  const gw = spawn("policyc", ["gateway", "--config", config], { stdio: ["ignore", "inherit", "pipe"] });
  const exited = new Promise((resolve) => gw.on("exit", (code, signal) => resolve(code ?? signal)));
  const address = waitForLine(gw, gw.stderr, /msg="serving streamable HTTP" address=(\S+)/, "the gateway").then((m) => m[1]);
  return { gw, exited, address };
}

const client = new Client({ name: "policyc-interop", version: "1.0.0" });
let out;
try {
  if (mode === "http") {
    const { gw, exited, address } = startHTTP();
    try {
      const url = new URL(`http://${await address}/`);
      await client.connect(
        new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
      );
      out = await scenario(client);
      await client.close();
    } finally {
      gw.kill("SIGTERM");
    }
    out.gateway_exit = await exited;
  } else {
    await client.connect(new StdioClientTransport({ command: "policyc", args: ["gateway", "--config", config], stderr: "inherit" }));
    out = await scenario(client);
    await client.close();
  }
} finally {
  upstream?.kill("SIGTERM");
}
console.log(JSON.stringify(out, null, 2));
