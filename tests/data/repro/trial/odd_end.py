#!/usr/bin/env python3
"""A tiny OpenAI-compatible streaming serve on 127.0.0.1 that ends oddly (found trying servegate from a clean
clone: each gave RESULT: PASS, exit 0).
usage: odd_end.py PORT [--finish REASON] [--segv-on-term]
--finish REASON   end every reply with this finish_reason (e.g. abort, as vLLM does for an aborted request)
--segv-on-term    answer everything, then die of SIGSEGV when asked to stop (SIGTERM)"""
import json, os, signal, sys, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
a = sys.argv[1:]
port = int(a[0])
finish = a[a.index('--finish') + 1] if '--finish' in a else 'stop'
if '--segv-on-term' in a:
    def on_term(*_):
        sys.stderr.write('caught SIGTERM; shutting down\n'); sys.stderr.flush()
        signal.signal(signal.SIGSEGV, signal.SIG_DFL); os.kill(os.getpid(), signal.SIGSEGV)
    signal.signal(signal.SIGTERM, on_term)
words = 'Paris is the capital of France .'.split(' ')
class H(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *x): sys.stderr.write('req ' + (x[0] % x[1:]) + '\n')
    def _json(self, code, obj):
        b = json.dumps(obj).encode(); self.send_response(code)
        self.send_header('Content-Type', 'application/json'); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        if self.path == '/health': return self._json(200, {'status': 'ok'})
        if self.path == '/v1/models': return self._json(200, {'object': 'list', 'data': [{'id': 'm', 'object': 'model'}]})
        self._json(404, {'error': 'no'})
    def do_POST(self):
        n = int(self.headers.get('Content-Length', 0)); self.rfile.read(n)
        self.send_response(200); self.send_header('Content-Type', 'text/event-stream'); self.send_header('Transfer-Encoding', 'chunked'); self.end_headers()
        def ev(obj):
            d = ('data: ' + (obj if isinstance(obj, str) else json.dumps(obj)) + '\n\n').encode()
            self.wfile.write(b'%x\r\n%s\r\n' % (len(d), d)); self.wfile.flush()
        time.sleep(0.02)
        for i, w in enumerate(words):
            ev({'object': 'chat.completion.chunk', 'model': 'm', 'choices': [{'index': 0, 'delta': {'content': (' ' if i else '') + w}, 'finish_reason': None}]})
            time.sleep(0.01)
        ev({'object': 'chat.completion.chunk', 'model': 'm', 'choices': [{'index': 0, 'delta': {}, 'finish_reason': finish}]})
        ev({'object': 'chat.completion.chunk', 'model': 'm', 'choices': [], 'usage': {'prompt_tokens': 9, 'completion_tokens': len(words), 'total_tokens': 9 + len(words)}})
        ev('[DONE]')
        self.wfile.write(b'0\r\n\r\n'); self.wfile.flush()
ThreadingHTTPServer(('127.0.0.1', port), H).serve_forever()
