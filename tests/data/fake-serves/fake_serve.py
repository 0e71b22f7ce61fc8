#!/usr/bin/env python3
"""A scripted fake of a llama.cpp-style OpenAI-compatible serve, for servegate's lifecycle tests.

Behaviours (each a flag), in the order a real serve goes through them:
  --refuse-ms N         do not listen for N ms after start (clients get "connection refused")
  --bind-port P         bind P instead of --port (the test holds P to make the bind fail for real);
                        on failure print llama.cpp's "couldn't bind HTTP server socket" line, exit 1
  --loading-ms N        answer /health with 503 "Loading model" for N ms after binding (-1: forever)
  --exit-after-ready-ms N   N ms after the first 200, print "[backend] stopping server..." and exit 0
  --ignore-term         ignore SIGTERM (only SIGKILL ends it)
  --fork-child          fork a child (a grandchild of the runner) that sleeps; its pid goes to
                        --child-pid-file; --child-ignore-term makes it ignore SIGTERM too
Log lines imitate llama-server's; server lines go to stderr, "main:" lines to stdout (both end up in
the same log file). Python standard library only.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bind-port", type=int, default=None)
    p.add_argument("--refuse-ms", type=int, default=0)
    p.add_argument("--loading-ms", type=int, default=0)
    p.add_argument("--exit-after-ready-ms", type=int, default=-1)
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--fork-child", action="store_true")
    p.add_argument("--child-ignore-term", action="store_true")
    p.add_argument("--child-pid-file", default=None)
    p.add_argument("--model-id", default="fake-model")
    return p.parse_args()


ARGS = parse_args()
STATE = {"loaded_at": None, "exit_timer": None}
LOCK = threading.Lock()


def err(line):
    print(line, file=sys.stderr, flush=True)


def out(line):
    print(line, file=sys.stdout, flush=True)


def fork_child():
    pid = os.fork()
    if pid == 0:
        if ARGS.child_ignore_term:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(300)
        os._exit(0)
    if ARGS.child_pid_file:
        tmp = ARGS.child_pid_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(pid))
        os.replace(tmp, ARGS.child_pid_file)
    err(f"fork: grandchild pid {pid}")


def loading():
    if ARGS.loading_ms < 0:
        return True
    return time.monotonic() < STATE["loaded_at"]


def die_after_ready():
    err("[backend] stopping server...")
    os._exit(0)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path in ("/health", "/v1/health"):
            if loading():
                code = 503
                body = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
            else:
                code, body = 200, {"status": "ok"}
        elif self.path == "/v1/models":
            code = 200
            body = {"object": "list", "data": [{"id": ARGS.model_id, "object": "model", "owned_by": "llamacpp"}]}
        else:
            code, body = 404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        err(f"srv  log_server_r: request: GET {self.path} {self.client_address[0]} {code}")
        if code == 200 and self.path.endswith("health") and ARGS.exit_after_ready_ms >= 0:
            with LOCK:
                if STATE["exit_timer"] is None:
                    t = threading.Timer(ARGS.exit_after_ready_ms / 1000.0, die_after_ready)
                    t.daemon = True
                    STATE["exit_timer"] = t
                    t.start()

    def log_message(self, fmt, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    if ARGS.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if ARGS.fork_child:
        fork_child()
    err(f"srv    load_model: loading model '{ARGS.model_id}.gguf'")
    if ARGS.refuse_ms > 0:
        time.sleep(ARGS.refuse_ms / 1000.0)
    port = ARGS.bind_port if ARGS.bind_port is not None else ARGS.port
    try:
        httpd = Server((ARGS.host, port), Handler)
    except OSError as e:
        err(f"E couldn't bind HTTP server socket, hostname: {ARGS.host}, port: {port}")
        err(f"main: exiting due to HTTP server error ({e})")
        sys.exit(1)
    STATE["loaded_at"] = time.monotonic() + max(ARGS.loading_ms, 0) / 1000.0

    def announce():
        if ARGS.loading_ms < 0:
            return
        delay = STATE["loaded_at"] - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        out("main: model loaded")
        out(f"main: server is listening on http://{ARGS.host}:{port} - starting the main loop")

    threading.Thread(target=announce, daemon=True).start()
    httpd.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
