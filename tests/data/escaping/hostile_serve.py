#!/usr/bin/env python3
"""A hostile OpenAI-style streaming serve for tests/escaping.rs: every text it can put in front of servegate holds
EVIL (`::` workflow commands, `%0A`, CR, LF, ESC, BEL and the legacy `##[`). Never used by a real gate; Python
standard library only.

usage: hostile_serve.py PORT [--evil-version] [--errors] [--evil-models]
  /version       {"version": "1.0.0"}, or EVIL with --evil-version (the engine release a regression compares)
  /v1/models     the model `m`, or EVIL only with --evil-models (the asked model is then not served)
  POST           a streamed reply whose text is EVIL, 8 chunks 5 ms apart; with --errors every other request
                 (the 1st, 3rd, ...) is answered HTTP 500 with an OpenAI error body whose message is EVIL
  log            EVIL printed to stderr (serve.log) at start and once per request
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EVIL = "\n::stop-commands::z\r::error::fake%0A::add-mask::k\x1b[31m\x07##[error]legacy"
port = int(sys.argv[1])
flags = set(sys.argv[2:])
count = [0]


def log(text):
    sys.stderr.write("INFO " + text + "\n")
    sys.stderr.flush()


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _json(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        if self.path == "/health":
            return self._json(200, {"status": "ok"})
        if self.path == "/v1/models":
            ids = [EVIL] if "--evil-models" in flags else ["m"]
            return self._json(200, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})
        if self.path == "/version":
            return self._json(200, {"version": EVIL if "--evil-version" in flags else "1.0.0"})
        self._json(404, {"error": {"message": EVIL, "code": 404}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        self.rfile.read(n)
        log("request " + EVIL)
        count[0] += 1
        if "--errors" in flags and count[0] % 2 == 1:
            return self._json(500, {"error": {"message": EVIL, "type": "server_error", "code": 500}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def ev(obj):
            d = ("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(d), d))
            self.wfile.flush()

        time.sleep(0.01)
        for i in range(8):
            ch = {"index": 0, "delta": {"content": EVIL if i == 0 else " word"}, "finish_reason": None}
            ev({"id": "x", "object": "chat.completion.chunk", "model": EVIL, "choices": [ch]})
            time.sleep(0.005)
        ev({"id": "x", "object": "chat.completion.chunk", "model": EVIL,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        ev("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


log("starting " + EVIL)
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
