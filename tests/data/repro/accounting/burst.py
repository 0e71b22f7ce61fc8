# A serve whose figures cannot be measured (kind 4 of docs/pass-is-proof.md). usage: burst.py PORT MODE [GAP_MS]
# MODE burst:   40 token events flushed in two writes of 20, GAP_MS apart (a buffering proxy), usage 40.
# MODE inflate: 8 token events at 50 tok/s whose usage.completion_tokens says 4000.
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port, mode = int(sys.argv[1]), sys.argv[2]
gap = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.003
def ev(obj): return b"data: " + json.dumps(obj).encode() + b"\n\n"
def tok(c): return ev({"choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]})
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers()
        self.wfile.write(b'{"data":[{"id":"m"}]}')
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        time.sleep(0.05)
        if mode == "burst":
            words = [" w%d" % i for i in range(40)]
            self.wfile.write(b"".join(tok(w) for w in words[:20])); self.wfile.flush()
            time.sleep(gap)
            self.wfile.write(b"".join(tok(w) for w in words[20:])); n = 40
        else:
            for w in ["Paris", " is", " the", " capital", " of", " France", ".", " Yes"]:
                self.wfile.write(tok(w)); self.wfile.flush(); time.sleep(0.02)
            n = 4000
        self.wfile.write(ev({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 9, "completion_tokens": n, "total_tokens": 9 + n}}))
        self.wfile.write(b"data: [DONE]\n\n"); self.wfile.flush()
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
