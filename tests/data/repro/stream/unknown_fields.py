"""A stdlib streaming serve whose every reply carries two lines SSE ignores between its events: `foobar:xxx`
(an unknown field) and a line with no colon. Usage: unknown_fields.py PORT."""
import sys, json, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
port = int(sys.argv[1])
class H(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a): pass
    def do_GET(self):
        b = json.dumps({'status': 'ok', 'data': [{'id': 'm'}]}).encode()
        self.send_response(200); self.send_header('Content-Type', 'application/json'); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_POST(self):
        n = int(self.headers.get('Content-Length', 0)); self.rfile.read(n)
        self.send_response(200); self.send_header('Content-Type', 'text/event-stream'); self.send_header('Connection', 'close'); self.end_headers()
        words = 'Paris is the capital of France and a city on the Seine'.split(' ')
        for i, w in enumerate(words):
            ch = {'choices': [{'index': 0, 'delta': {'content': (' ' if i else '') + w}, 'finish_reason': None}]}
            self.wfile.write(('data: ' + json.dumps(ch) + '\n\n').encode())
            if i == 2: self.wfile.write(b'foobar:xxx\n\n')
            if i == 4: self.wfile.write(b'a line with no colon\n\n')
            self.wfile.flush(); time.sleep(0.02)
        ch = {'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}], 'usage': {'prompt_tokens': 3, 'completion_tokens': len(words), 'total_tokens': 3 + len(words)}}
        self.wfile.write(('data: ' + json.dumps(ch) + '\n\ndata: [DONE]\n\n').encode()); self.wfile.flush()
ThreadingHTTPServer(('127.0.0.1', port), H).serve_forever()
