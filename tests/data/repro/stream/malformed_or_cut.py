# A serve whose replies read "It is safe." to a careless client (stdlib only; style of tests/data/repro/accounting/cut_or_slow.py).
# Request 1: the event carrying " not" is broken JSON (both OpenAI SDKs raise on it); the rest is well formed,
#            so the text without that event says the opposite of what the serve sent.
# Request 2: every token arrives, then the finish chunk is whole JSON but the connection closes before the blank
#            line that would dispatch it (no [DONE]): no SSE client delivers that event.
# Later requests: a complete, well-formed reply "It is safe.".
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
N = [0]
def chunk(delta, finish=None):
    return b"data: " + json.dumps({"id": "s", "object": "chat.completion.chunk", "model": "m",
                                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode()
def ev(delta, finish=None): return chunk(delta, finish) + b"\n\n"
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers()
        self.wfile.write(b'{"data":[{"id":"m"}]}' if "models" in self.path else b'{}')
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"])); N[0] += 1
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        w = self.wfile
        w.write(ev({"role": "assistant", "content": ""})); w.write(ev({"content": "It is"})); w.flush()
        if N[0] == 1:
            w.write(chunk({"content": " not"})[:-4] + b"\n\n")  # cut JSON, then the blank line
            w.write(ev({"content": " safe."})); w.write(ev({}, "stop")); w.write(b"data: [DONE]\n\n"); return
        w.write(ev({"content": " safe."}))
        if N[0] == 2:
            w.write(chunk({}, "stop")); w.flush(); return  # then close: no blank line, no [DONE]
        w.write(ev({}, "stop")); w.write(b"data: [DONE]\n\n")
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
