#!/usr/bin/env python3
"""A scripted fake OpenAI-compatible chat serve for the gate harness's own tests (tests/junit.rs).

Never used by a real gate. Answers GET /health (200), GET /v1/models, and POST /v1/chat/completions with a
streamed (SSE, include_usage) reply of --reply, one word per chunk, --token-ms apart, and llama.cpp-style
`timings` (predicted_per_second = --server-tok-s) so a rate assertion with `source = "server"` is deterministic. Prints --log lines
(ANSI colour codes included, as real serves do) to stderr at start, so route assertions have a log to read.
Python standard library only.
"""
import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

p = argparse.ArgumentParser()
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, required=True)
p.add_argument("--reply", default="Paris is the capital of France.")
p.add_argument("--token-ms", type=float, default=4.0)
p.add_argument("--model-id", default="fake-chat")
p.add_argument("--server-tok-s", type=float, default=50.0, help="llama.cpp-style timings.predicted_per_second")
p.add_argument("--log", action="append", default=[])
ARGS = p.parse_args()


def log(line):
    print(line, file=sys.stderr, flush=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.send_json(200, {"status": "ok"})
        elif self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{"id": ARGS.model_id, "object": "model"}]})
        else:
            self.send_json(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        if self.path != "/v1/chat/completions":
            self.send_json(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(obj):
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

        def chunk(delta, finish=None):
            return {"id": "c1", "object": "chat.completion.chunk", "created": 1700000000, "model": ARGS.model_id,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        event(chunk({"role": "assistant"}))
        words = ARGS.reply.split(" ")
        for i, w in enumerate(words):
            time.sleep(ARGS.token_ms / 1000.0)
            event(chunk({"content": w if i == 0 else " " + w}))
        event(chunk({}, "stop"))
        event({"id": "c1", "object": "chat.completion.chunk", "created": 1700000000, "model": ARGS.model_id,
               "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": len(words), "total_tokens": 9 + len(words)},
               "timings": {"predicted_n": len(words), "predicted_per_second": ARGS.server_tok_s}})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def log_message(self, fmt, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


for line in ARGS.log:
    log(line)
httpd = Server((ARGS.host, ARGS.port), Handler)
log(f"main: server is listening on http://{ARGS.host}:{ARGS.port}")
httpd.serve_forever(poll_interval=0.05)
