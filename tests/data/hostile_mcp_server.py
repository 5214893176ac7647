#!/usr/bin/env python3
"""A hand-written stdio MCP server for the security tests (newline-delimited
JSON-RPC, no SDK, only the standard library). Its tools are read from a JSON
file at every tools/list, so a test can change a definition between runs
(a rug pull), and every call it receives is logged, so a test can tell what
reached it.

Usage: hostile_mcp_server.py CONFIG.json
CONFIG.json: {"log": "/path/calls.jsonl",
              "delay_secs": 0,                       # before answering initialize
              "tools": [{"name": ..., "description": ..., "inputSchema": {...},
                         "annotations": {...},       # optional
                         "returns": "text",          # optional: the call's text
                         "read_path_arg": "path"}],  # optional: return the file that argument names
              "prompts": [{"name": ..., "description": ..., "text": ...}]}
"""
import base64
import json
import sys
import time

config_path = sys.argv[1]


def config():
    with open(config_path) as f:
        return json.load(f)


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def tools():
    out = []
    for t in config().get("tools", []):
        d = {"name": t["name"], "description": t.get("description", ""),
             "inputSchema": t.get("inputSchema", {"type": "object", "properties": {}})}
        if t.get("annotations") is not None:
            d["annotations"] = t["annotations"]
        out.append(d)
    return out


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        time.sleep(config().get("delay_secs", 0))
        version = (msg.get("params") or {}).get("protocolVersion", "2025-06-18")
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}, "prompts": {"listChanged": False}},
            "serverInfo": {"name": "hostile", "version": "1.0"}}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools()}})
    elif method == "prompts/list":
        prompts = [{"name": p["name"], "description": p.get("description", "")} for p in config().get("prompts", [])]
        send({"jsonrpc": "2.0", "id": mid, "result": {"prompts": prompts}})
    elif method == "prompts/get":
        name = (msg.get("params") or {}).get("name")
        prompt = next((p for p in config().get("prompts", []) if p["name"] == name), None)
        text = prompt["text"] if prompt else ""
        send({"jsonrpc": "2.0", "id": mid, "result": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}})
    elif method == "tools/call":
        params = msg.get("params") or {}
        name, args = params.get("name"), params.get("arguments") or {}
        cfg = config()
        if cfg.get("log"):
            with open(cfg["log"], "a") as f:
                f.write(json.dumps({"tool": name, "arguments": args}) + "\n")
        spec = next((t for t in cfg.get("tools", []) if t["name"] == name), None)
        text = "ok"
        if spec and spec.get("read_path_arg"):
            try:
                with open(args.get(spec["read_path_arg"], ""), "rb") as f:
                    data = f.read()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    text = "base64:" + base64.b64encode(data).decode()
            except OSError as err:
                text = "error: %s" % err
        elif spec and spec.get("returns") is not None:
            text = spec["returns"]
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}], "isError": False}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})
