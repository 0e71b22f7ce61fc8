#!/usr/bin/env python3
"""Hostile and scripted fake serves for servegate's reliability tests (tests/reliability.rs, scripts/kill-loop.sh).

One OpenAI-compatible-looking HTTP server; GET /health and /v1/models always answer 200 (so the serve becomes
ready), and POST /v1/chat/completions behaves as --mode says:

  ok            a correct, short SSE stream ("Paris." in three chunks, usage, [DONE])
  silent        reads the request and never answers (the connection stays open)
  stall         sends the head and two chunks, then nothing more, connection open ("stops mid-stream")
  cut           sends the head and two chunks, then closes the connection (no finish_reason, no [DONE])
  trickle       sends the head, then one byte every 100 ms, forever
  garbage       200 with 256 KiB of random bytes (not UTF-8, not SSE), then closes
  endless-line  200 text/event-stream, "data: " and then "a" forever without a newline (1 MiB blocks,
                --block-delay-ms apart)
  huge          200 with Content-Length 4 GiB, a valid SSE chunk (--event-bytes characters of content, default
                1) repeated until the client goes away
  exit          /health answers 200 once, then the process exits (before or while the request is sent)
  auth          401 unless "Authorization: Bearer KEY" (KEY from --expect-key-file or $HOSTILE_EXPECT_KEY), else as ok
  echo-headers  as ok, but prints every request header to stderr (the serve's log) and echoes them in a
                response header (X-Echo) and in the content
  redirect      302 to http://192.0.2.1:9/elsewhere (another host) for the chat request
  tls           as ok, over TLS with --cert/--key (a self-signed certificate)

--times FILE appends "start <pid> <t>" when the serve starts listening and "stop <pid> <t>" when it gets
SIGTERM (t = time.time()); used by the device-hold test. --pid-file FILE writes the pid. Standard library only.
"""
import argparse
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

p = argparse.ArgumentParser()
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, required=True)
p.add_argument("--mode", required=True)
p.add_argument("--times", default=None)
p.add_argument("--pid-file", default=None)
p.add_argument("--cert", default=None)
p.add_argument("--key", default=None)
p.add_argument("--expect-key-file", default=None, help="auth mode: the expected key (else $HOSTILE_EXPECT_KEY)")
p.add_argument("--event-bytes", type=int, default=1, help="huge mode: content characters per SSE event")
p.add_argument("--block-delay-ms", type=int, default=0, help="endless-line mode: pause after each 1 MiB")
p.add_argument("--delay-ms", type=int, default=0, help="ok mode: pause before each chunk")
ARGS = p.parse_args()
HEALTH_SEEN = {"n": 0}


def log(line):
    print(line, file=sys.stderr, flush=True)


def stamp(word):
    if ARGS.times:
        with open(ARGS.times, "a") as f:
            f.write(f"{word} {os.getpid()} {time.time():.6f}\n")
            f.flush()
            os.fsync(f.fileno())


def chunk(content=None, finish=None, usage=None):
    c = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "fake",
         "choices": [{"index": 0, "delta": ({"content": content} if content is not None else {}),
                      "finish_reason": finish}]}
    if usage is not None:
        c["choices"] = []
        c["usage"] = usage
    return b"data: " + json.dumps(c).encode() + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply_json(self, code, body, extra_headers=()):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra_headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_GET(self):
        if self.path == "/health":
            HEALTH_SEEN["n"] += 1
            self.reply_json(200, {"status": "ok"})
            if ARGS.mode == "exit":
                log("[backend] stopping server right after ready")
                os._exit(0)
        elif self.path == "/v1/models":
            self.reply_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        else:
            self.reply_json(404, {"error": {"code": 404, "message": "not found"}})

    def head(self, content_type="text/event-stream", length=None):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        if length is not None:
            self.send_header("Content-Length", str(length))
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()

    def ok_stream(self, words=("Paris", ".", "")):
        self.head()
        for w in words:
            if ARGS.delay_ms:
                time.sleep(ARGS.delay_ms / 1000.0)
            self.wfile.write(chunk(w))
            self.wfile.flush()
        self.wfile.write(chunk(None, "stop"))
        self.wfile.write(chunk(usage={"prompt_tokens": 3, "completion_tokens": len(words), "total_tokens": 3 + len(words)}))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0") or 0)
        self.rfile.read(n)
        mode = ARGS.mode
        log(f"srv  request: POST {self.path} mode={mode}")
        try:
            if mode in ("ok", "tls"):
                self.ok_stream()
            elif mode == "silent":
                time.sleep(3600)
            elif mode in ("stall", "cut"):
                self.head()
                self.wfile.write(chunk("Par"))
                self.wfile.write(chunk("is"))
                self.wfile.flush()
                if mode == "stall":
                    time.sleep(3600)
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            elif mode == "trickle":
                self.head()
                while True:
                    self.wfile.write(b":")
                    self.wfile.flush()
                    time.sleep(0.1)
            elif mode == "garbage":
                self.head("application/octet-stream")
                data = os.urandom(256 * 1024)
                self.wfile.write(data)
                self.wfile.flush()
                self.close_connection = True
            elif mode == "endless-line":
                self.head()
                self.wfile.write(b"data: ")
                block = b"a" * (1 << 20)
                while True:
                    self.wfile.write(block)
                    if ARGS.block_delay_ms:
                        self.wfile.flush()
                        time.sleep(ARGS.block_delay_ms / 1000.0)
            elif mode == "huge":
                self.head(length=4 << 30)
                one = chunk("x" * ARGS.event_bytes)
                block = one * ((1 << 20) // len(one))
                while True:
                    self.wfile.write(block)
            elif mode == "auth":
                key = os.environ.get("HOSTILE_EXPECT_KEY", "")
                if ARGS.expect_key_file:
                    with open(ARGS.expect_key_file) as f:
                        key = f.read().strip()
                want = "Bearer " + key
                got = self.headers.get("Authorization")
                if got != want:
                    log("srv  401: missing or wrong bearer token")
                    self.reply_json(401, {"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}})
                    return
                log("srv  bearer token accepted")
                self.ok_stream()
            elif mode == "echo-headers":
                for k, v in self.headers.items():
                    log(f"srv  header {k}: {v}")
                auth = self.headers.get("Authorization", "")
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("X-Echo", auth)
                self.send_header("Connection", "close")
                self.end_headers()
                # One event holding the header, its bytes split mid-key over two network writes (and so,
                # likely, two reads).
                ev = chunk("Paris. You sent " + auth)
                cut = ev.find(auth.encode()) + len(auth) // 2
                self.wfile.write(ev[:cut])
                self.wfile.flush()
                time.sleep(0.05)
                self.wfile.write(ev[cut:])
                self.wfile.write(chunk(None, "stop"))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True
            elif mode == "redirect":
                self.send_response(302)
                self.send_header("Location", "http://192.0.2.1:9/v1/chat/completions")
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.wfile.flush()
            else:
                self.reply_json(500, {"error": {"code": 500, "message": f"unknown mode {mode}"}})
        except (BrokenPipeError, ConnectionResetError):
            log("srv  client went away")
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    if ARGS.pid_file:
        with open(ARGS.pid_file + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(ARGS.pid_file + ".tmp", ARGS.pid_file)

    def on_term(signo, frame):
        stamp("stop")
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    httpd = Server((ARGS.host, ARGS.port), Handler)
    if ARGS.mode == "tls":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.cert, ARGS.key)
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    stamp("start")
    log(f"main: server is listening on http://{ARGS.host}:{ARGS.port} - mode {ARGS.mode}")
    httpd.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
