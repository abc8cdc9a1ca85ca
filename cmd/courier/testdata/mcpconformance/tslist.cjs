// tslist drives `courier mcp` with the official TypeScript SDK's stdio
// client, as an agent built on it would: initialize, tools/list (so that
// the client validates structured content against an output schema, if
// list has one), then the list tool page after page.
//
//   node tslist.cjs COURIER WORKSPACE
//
// The SDK is the one npm ci installs beside it (the conformance suite's
// dependency), required as an agent's code would. The script reads
// requests on stdin, one a line, "LIMIT" (0: the tool's default page),
// or "parse FILE" (JSON.parse of a file that `courier list --format
// json` printed: {"ms":wall,"cpu_ms":CPU,"entries":n}), and answers each
// on stdout with one line of JSON once the whole listing (all: true) is
// paged:
//
//   {"limit":L,"ms":wall,"cpu_ms":the client's CPU,"server_cpu_ms":
//    that of `courier mcp` (from /proc, 10 ms ticks),"decode_ms":the
//    client's JSON.parse (of the frames and of the listing's text) and
//    schema checks,"entries":n,"pages":p,
//    "max_frame":the largest response line in bytes}
//
// or {"error": "..."}. The session stays open between requests.
'use strict';
const fs = require('node:fs');
const readline = require('node:readline');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport, getDefaultEnvironment } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { ReadBuffer } = require('@modelcontextprotocol/sdk/shared/stdio.js');

const [courier, ws] = process.argv.slice(2);
if (!courier || !ws) {
  console.error('usage: node tslist.cjs COURIER WORKSPACE');
  process.exit(64);
}

// The client's decode: each frame's JSON.parse and JSON-RPC schema check
// (ReadBuffer.readMessage), and the output schema check of callTool.
let decodeNs = 0n;
let maxFrame = 0;
const readMessage = ReadBuffer.prototype.readMessage;
ReadBuffer.prototype.readMessage = function () {
  const nl = this._buffer ? this._buffer.indexOf('\n') : -1;
  const t = process.hrtime.bigint();
  const msg = readMessage.call(this);
  decodeNs += process.hrtime.bigint() - t;
  if (msg && nl > maxFrame) maxFrame = nl;
  return msg;
};

async function main() {
  const client = new Client({ name: 'tslist', version: '1' });
  // The server's environment is the SDK's default, and COURIER_CPUPROFILE
  // for a profile of the server.
  const env = getDefaultEnvironment();
  if (process.env.COURIER_CPUPROFILE) env.COURIER_CPUPROFILE = process.env.COURIER_CPUPROFILE;
  const transport = new StdioClientTransport({ command: courier, args: ['--root', ws, 'mcp'], env, stderr: 'inherit' });
  await client.connect(transport);
  serverPid = transport.pid;
  await client.listTools();
  const validator = client.getToolOutputValidator('list');
  client.getToolOutputValidator = name => {
    const v = name === 'list' ? validator : undefined;
    return v && (sc => {
      const t = process.hrtime.bigint();
      const r = v(sc);
      decodeNs += process.hrtime.bigint() - t;
      return r;
    });
  };
  // The mailbox opened once, as the CLI's first run warms the cache.
  await client.callTool({ name: 'list', arguments: { limit: 1 } });

  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    try {
      const out = line.startsWith('parse ') ? parseFile(line.slice(6)) : await page(client, Number(line));
      process.stdout.write(JSON.stringify(out) + '\n');
    } catch (err) {
      process.stdout.write(JSON.stringify({ error: String(err && err.message || err) }) + '\n');
    }
  }
  await client.close();
}

// serverCPU is the CPU time `courier mcp` has used, in ms (Linux).
let serverPid = 0;
function serverCPU() {
  try {
    const stat = fs.readFileSync(`/proc/${serverPid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // utime, stime: ticks of 10 ms
  } catch {
    return NaN;
  }
}

// With TSLIST_CHECK=1 (the tests; not the benchmark, whose client
// reads the structured content only) each page's text is checked: what a
// host gives a model is the count and the next cursor, then a header and
// one line an entry, its id first, ten tab-separated columns.
const check = process.env.TSLIST_CHECK === '1';
const HEADER = 'id\tprovider\tdirection\tfrom\tstatus\tclaimed_by\ttimestamp\tcorrelation_id\treply_to\tpreview';
function checkText(content, sc) {
  if (content.length !== 1 || content[0].type !== 'text') throw new Error(`a listing's content is not one text: ${JSON.stringify(content).slice(0, 200)}`);
  const lines = content[0].text.replace(/\n$/, '').split('\n');
  const cursor = sc.next_cursor ? `cursor "${sc.next_cursor}"` : 'cursor';
  if (!lines[0].startsWith(`${sc.count} entries`) || lines[0].includes(cursor) !== Boolean(sc.next_cursor)) {
    throw new Error(`the text's first line ${JSON.stringify(lines[0].slice(0, 200))} does not give the count ${sc.count} and the cursor`);
  }
  if (lines.length !== sc.count + 2 || lines[1] !== HEADER) throw new Error(`the text has ${lines.length} lines for ${sc.count} entries`);
  sc.messages.forEach((m, i) => {
    const l = lines[i + 2];
    if (!l.startsWith(m.id + '\t') || l.split('\t').length !== 10) throw new Error(`the text's line for ${m.id} is ${JSON.stringify(l)}`);
  });
}

// parseFile is what a consumer of `courier list --format json` spends
// on its output: reading it (from a file here, from a pipe there) and
// JSON.parse.
function parseFile(path) {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  const list = JSON.parse(fs.readFileSync(path, 'utf8'));
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  const used = process.cpuUsage(cpu);
  return { ms, cpu_ms: (used.user + used.system) / 1000, entries: list.length };
}

async function page(client, limit) {
  decodeNs = 0n;
  maxFrame = 0;
  const server = serverCPU();
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  let entries = 0, pages = 0, cursor = '';
  for (;;) {
    const args = { all: true };
    if (limit > 0) args.limit = limit;
    if (cursor) args.cursor = cursor;
    const res = await client.callTool({ name: 'list', arguments: args });
    if (res.isError) throw new Error(res.content.map(c => c.text).join(' '));
    // A listing's JSON: its structured content, or its text's, decoded
    // here (the client's decode too).
    let sc = res.structuredContent;
    if (!sc) {
      const t = process.hrtime.bigint();
      sc = JSON.parse(res.content[0].text);
      decodeNs += process.hrtime.bigint() - t;
    }
    if (sc.count !== sc.messages.length) throw new Error(`count ${sc.count}, ${sc.messages.length} messages`);
    if (check) checkText(res.content, sc);
    entries += sc.count;
    pages++;
    cursor = sc.next_cursor || '';
    if (!cursor) break;
  }
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  const used = process.cpuUsage(cpu);
  return { limit, ms, cpu_ms: (used.user + used.system) / 1000, server_cpu_ms: serverCPU() - server,
    decode_ms: Number(decodeNs) / 1e6, entries, pages, max_frame: maxFrame };
}

main().catch(err => {
  console.error('tslist:', err && err.stack || err);
  process.exit(1);
});
