#!/usr/bin/env node
// A stand-in for any npm MCP server package (tests/integration/security2_mcp.rs):
// it writes the environment it was started with, as JSON, to the file named by
// its first argument (else $HOME/server-env.json), then speaks just enough MCP
// over stdio for `cowork mcp test` and the agent: one tool, `list_notes`.
const fs = require('fs');
const out = process.argv[2] || (process.env.HOME || '/tmp') + '/server-env.json';
fs.writeFileSync(out, JSON.stringify(process.env, null, 1));
const rl = require('readline').createInterface({input: process.stdin});
const send = (o) => process.stdout.write(JSON.stringify(o) + '\n');
rl.on('line', (line) => {
  let m;
  try { m = JSON.parse(line); } catch (e) { return; }
  if (m.id === undefined) return;
  if (m.method === 'initialize') send({jsonrpc: '2.0', id: m.id, result: {protocolVersion: (m.params || {}).protocolVersion || '2025-06-18', capabilities: {tools: {}}, serverInfo: {name: 'envdump', version: '1'}}});
  else if (m.method === 'tools/list') send({jsonrpc: '2.0', id: m.id, result: {tools: [{name: 'list_notes', description: 'Lists notes', inputSchema: {type: 'object', properties: {}}}]}});
  else if (m.method === 'tools/call') send({jsonrpc: '2.0', id: m.id, result: {content: [{type: 'text', text: 'no notes'}]}});
  else if (m.method === 'ping') send({jsonrpc: '2.0', id: m.id, result: {}});
  else send({jsonrpc: '2.0', id: m.id, error: {code: -32601, message: 'method not found'}});
});
