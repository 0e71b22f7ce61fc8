"""Record one HTTP exchange with a real serve as servegate evidence: `NAME.reads.jsonl` (timed reads of the
body, the format of src/io/reads.rs) and `NAME.meta.json` (status, content type, request body).

Usage: python3 capture.py URL OUT_PREFIX [BODY_JSON_OR_RAW] [--raw]
  GET when no body is given; POST with Content-Type application/json otherwise (--raw: send BODY as is,
  e.g. bad JSON). How the captures under tests/data/runtimes/ were made (docs/runtimes.md).
"""
import http.client
import json
import sys
import time
import urllib.parse


def main():
    args = [a for a in sys.argv[1:] if a != "--raw"]
    raw = "--raw" in sys.argv
    url, out = args[0], args[1]
    body = args[2] if len(args) > 2 else None
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    t0 = time.monotonic()
    if body is None:
        conn.request("GET", u.path)
    else:
        data = body.encode() if raw else json.dumps(json.loads(body)).encode()
        conn.request("POST", u.path, data, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    reads = []
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        t = (time.monotonic() - t0) * 1000.0
        try:
            reads.append({"t_ms": round(t, 3), "text": chunk.decode("utf-8")})
        except UnicodeDecodeError:
            reads.append({"t_ms": round(t, 3), "hex": chunk.hex()})
    with open(out + ".reads.jsonl", "w") as fh:
        for r in reads:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    meta = {
        "url": u.path,
        "status": resp.status,
        "content_type": resp.getheader("content-type"),
        "server": resp.getheader("server"),
        "request": body,
    }
    with open(out + ".meta.json", "w") as fh:
        json.dump(meta, fh, indent=1)
        fh.write("\n")
    print(resp.status, len(reads), "reads")


if __name__ == "__main__":
    main()
