"""servegate's locustfile: `[load] driver = "locust"` (docs/load.md, "Drivers").

One central schedule, execution fanned out over Locust workers, raw per-request records back:

* the MASTER (`--master --sg-plan PLAN.json`) holds the plan (the request bodies, in order, and the
  target) and hands out request indexes one at a time (`sg_claim` -> `sg_grant`): a closed loop of
  `--users` slots shared by every worker, exactly as servegate's own client shares one counter. Each grant
  carries the master's clock, so every claim is also a clock handshake (NTP-style: the worker stamps the
  claim's send and the grant's arrival). The master writes each worker's records as they come
  (`worker-<k>.jsonl` in the plan's `out` directory, k in the order workers first claimed) and quits when
  every user has been told there is nothing left;
* each WORKER's users (one per slot) claim, send the request over a plain socket (HTTP/1.1,
  `Connection: close`, the same head as servegate's client), stamp every `recv()` of the reply with
  `time.perf_counter()` (CLOCK_MONOTONIC on Linux: Python's precision, the return of the read, not the
  kernel's receive time), de-chunk, and send the record to the master (`sg_record`).

A record (one JSON object per line, every time in the WORKER's perf_counter seconds):
  {"node", "index", "freed", "claim_sent", "master_t", "claim_recv", "sent", "head", "end",
   "status", "headers", "error", "truncated", "reads": [{"t_ms", "text"} or {"t_ms", "hex"}, ...]}
`freed`: when the slot freed (its intended send time); `claim_sent`/`claim_recv`: around the grant (the
slot's wake-up is `claim_recv`); `sent`: just before the request's bytes were written, after the connect;
reads' `t_ms` count from `sent`, in ms. servegate merges the files (servegate_core::evidence::locust).

Remote workers: `locust -f servegate_locustfile.py --worker --master-host HOST --master-port PORT`;
they need nothing else (the target, the bodies and the API key come with each grant).
"""

import json
import os
import socket
import time
import uuid

import gevent
from gevent.event import AsyncResult, Event
from locust import User, constant, events, task
from locust.runners import MasterRunner, WorkerRunner

clock = time.perf_counter
BODY_CAP_BYTES = 64 * 1024 * 1024
PLAN_SCHEMA = "servegate.locust-plan/1"
_pending = {}


@events.init_command_line_parser.add_listener
def _args(parser):
    parser.add_argument("--sg-plan", default="", help="servegate: the plan JSON (master only)")


@events.init.add_listener
def _init(environment, **_kw):
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        _Master(environment)
    elif isinstance(runner, WorkerRunner):
        runner.register_message("sg_grant", _on_grant)


def _on_grant(environment, msg, **_kw):
    ar = _pending.pop(msg.data.get("id"), None)
    if ar is not None:
        ar.set(msg.data)


class _Master:
    def __init__(self, environment):
        self.env = environment
        path = environment.parsed_options.sg_plan
        if not path:
            raise SystemExit("servegate locustfile: the master needs --sg-plan PLAN.json")
        with open(path, encoding="utf-8") as f:
            plan = json.load(f)
        if plan.get("schema") != PLAN_SCHEMA:
            raise SystemExit("servegate locustfile: plan schema %r, expected %r" % (plan.get("schema"), PLAN_SCHEMA))
        self.plan = plan
        self.api_key = os.environ.get("SERVEGATE_LOCUST_API_KEY") or None
        self.next = 0
        self.judged_t0 = None
        self.users_done = 0
        self.files = {}
        self.order = []
        self.quitting = False
        r = environment.runner
        r.register_message("sg_claim", self.claim)
        r.register_message("sg_record", self.record)
        r.register_message("sg_user_done", self.user_done)

    def claim(self, environment, msg, **_kw):
        m = clock()
        p = self.plan
        i = None
        if self.next < len(p["bodies"]):
            if self.next == p["warmup"] and self.judged_t0 is None:
                self.judged_t0 = m
            late = (
                self.judged_t0 is not None
                and p.get("deadline_s") is not None
                and m - self.judged_t0 >= p["deadline_s"]
            )
            if not late:
                i = self.next
                self.next += 1
        data = {"id": msg.data.get("id"), "master_t": m, "index": i}
        if i is not None:
            data.update(
                body=p["bodies"][i],
                host=p["host"],
                port=p["port"],
                host_header=p["host_header"],
                path=p["path"],
                timeout_s=p["timeout_s"],
                api_key=self.api_key,
            )
        environment.runner.send_message("sg_grant", data, client_id=msg.node_id)

    def record(self, environment, msg, **_kw):
        node = msg.node_id
        f = self.files.get(node)
        if f is None:
            k = len(self.order)
            self.order.append(node)
            f = open(os.path.join(self.plan["out"], "worker-%d.jsonl" % k), "w", encoding="utf-8")
            self.files[node] = f
        rec = dict(msg.data)
        rec["node"] = node
        f.write(json.dumps(rec) + "\n")
        f.flush()

    def user_done(self, environment, msg, **_kw):
        self.users_done += 1
        if self.users_done >= self.plan["users"] and not self.quitting:
            self.quitting = True
            for f in self.files.values():
                f.close()
            with open(os.path.join(self.plan["out"], "master.json"), "w", encoding="utf-8") as f:
                json.dump({"granted": self.next, "workers": self.order, "locust_version": _version()}, f)
            gevent.spawn_later(0.2, environment.runner.quit)


def _version():
    try:
        import locust

        return locust.__version__
    except Exception:  # pragma: no cover
        return None


class _Dechunk:
    """HTTP/1.1 chunked transfer decoding, fed one recv() at a time."""

    def __init__(self):
        self.buf = b""
        self.left = 0
        self.state = "size"
        self.done = False

    def feed(self, data):
        self.buf += data
        out = bytearray()
        while not self.done:
            if self.state == "size":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    break
                line = self.buf[:i].split(b";")[0].strip()
                self.buf = self.buf[i + 2 :]
                n = int(line, 16)
                if n == 0:
                    self.done = True
                    break
                self.left = n
                self.state = "data"
            elif self.state == "data":
                if not self.buf:
                    break
                take = self.buf[: self.left]
                out += take
                self.buf = self.buf[len(take) :]
                self.left -= len(take)
                if self.left == 0:
                    self.state = "crlf"
            else:
                if len(self.buf) < 2:
                    break
                self.buf = self.buf[2:]
                self.state = "size"
        return bytes(out)


def _read_line(t_ms, data):
    try:
        return {"t_ms": t_ms, "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"t_ms": t_ms, "hex": data.hex()}


def exchange(g):
    """One request as the grant `g` describes it: (record fields, bytes kept, error)."""
    rec = {"sent": None, "head": None, "end": None, "status": None, "headers": {}, "error": None,
           "truncated": False, "reads": []}
    body = g["body"].encode("utf-8")
    head = (
        "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: servegate-locust\r\nContent-Type: application/json\r\n"
        "Accept: text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n" % (g["path"], g["host_header"], len(body))
    )
    if g.get("api_key"):
        head += "Authorization: Bearer %s\r\n" % g["api_key"]
    head += "\r\n"
    kept = 0
    sock = None
    try:
        sock = socket.create_connection((g["host"], g["port"]), timeout=min(10.0, g["timeout_s"]))
        sock.settimeout(g["timeout_s"])
        rec["sent"] = sent = clock()
        sock.sendall(head.encode("latin-1") + body)
        raw = b""
        dechunk = None
        length = None
        while True:
            data = sock.recv(65536)
            t = clock()
            if rec["head"] is None:
                if not data:
                    raise ConnectionError("the serve closed the connection before a response head")
                raw += data
                cut = raw.find(b"\r\n\r\n")
                if cut < 0:
                    if len(raw) > 1 << 20:
                        raise ConnectionError("a response head over 1 MiB")
                    continue
                rec["head"] = t
                lines = raw[:cut].decode("latin-1").split("\r\n")
                rec["status"] = int(lines[0].split(" ")[1])
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    k = k.strip().lower()
                    v = v.strip()
                    rec["headers"][k] = rec["headers"][k] + ", " + v if k in rec["headers"] else v
                if "chunked" in rec["headers"].get("transfer-encoding", "").lower():
                    dechunk = _Dechunk()
                elif "content-length" in rec["headers"]:
                    length = int(rec["headers"]["content-length"])
                data = raw[cut + 4 :]
            elif not data:
                break
            piece = dechunk.feed(data) if dechunk else data
            if length is not None:
                piece = piece[: max(0, length - kept)]
            if piece:
                if kept + len(piece) > BODY_CAP_BYTES:
                    piece = piece[: BODY_CAP_BYTES - kept]
                    rec["truncated"] = True
                kept += len(piece)
                rec["reads"].append(_read_line((t - sent) * 1000.0, piece))
            if rec["truncated"] or (dechunk and dechunk.done) or (length is not None and kept >= length):
                break
    except Exception as e:  # a transport failure is the request's record, never the worker's crash
        rec["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        rec["end"] = clock()
        if sock is not None:
            sock.close()
    return rec, kept


class ServegateUser(User):
    """One closed-loop slot: claim the next request from the master, send it, record it, repeat."""

    wait_time = constant(0)

    def on_start(self):
        self.freed = clock()
        self.idle = Event()

    @task
    def one(self):
        runner = self.environment.runner
        cid = uuid.uuid4().hex
        ar = AsyncResult()
        _pending[cid] = ar
        claim_sent = clock()
        runner.send_message("sg_claim", {"id": cid})
        g = ar.get()
        claim_recv = clock()
        if g.get("index") is None:
            runner.send_message("sg_user_done", {})
            self.idle.wait()  # until the master quits the run
            return
        rec, kept = exchange(g)
        rec.update(index=g["index"], freed=self.freed, claim_sent=claim_sent, master_t=g["master_t"],
                   claim_recv=claim_recv)
        self.freed = clock()
        runner.send_message("sg_record", rec)
        self.environment.events.request.fire(
            request_type="POST", name="chat", response_time=(rec["end"] - claim_recv) * 1000.0,
            response_length=kept, exception=rec["error"], context={},
        )
