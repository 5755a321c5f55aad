// The official MCP TypeScript SDK's client (what Node-based agent harnesses use) driving one
// `leanrig serve`, commanded by bench/ts_mcp.py over this process's stdin/stdout, a JSON line
// each way: {"name", "arguments"} in; {"ms", "cpu_ms", "structured", "is_error"} out.
// "ms" is the wall time of the SDK's callTool, measured here, as the Python rows measure
// theirs: the bench's own pipe to this process is outside it.
// argv: the server's command and arguments. The server's stderr goes to ours (which
// bench/ts_mcp.py discards, as it does the Python rows' servers').
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
const client = new Client({ name: "leanrig-bench-ts", version: "0" });
await client.connect(transport);
process.stdout.write(JSON.stringify({ ready: true }) + "\n");

for await (const line of createInterface({ input: process.stdin })) {
  const { name, arguments: toolArgs } = JSON.parse(line);
  const cpu = process.cpuUsage();
  const started = performance.now();
  let reply;
  try {
    const result = await client.callTool({ name, arguments: toolArgs });
    const ms = performance.now() - started;
    const used = process.cpuUsage(cpu);
    reply = {
      ms,
      cpu_ms: (used.user + used.system) / 1000,
      structured: result.structuredContent ?? null,
      is_error: Boolean(result.isError),
    };
  } catch (error) {
    reply = { error: String(error) };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
}
await client.close();
