"""reference-serve: llama.cpp's HTTP server, embedded through xllamacpp, started like llama-server.

Run by scripts/reference-serve with the venv python that scripts/provision-reference.sh made.
Serves the llama-server endpoints (/health, /v1/models, /props, /v1/chat/completions, /metrics, ...)
and lets llama.cpp log to stderr. Exits 0 on SIGTERM/SIGINT/SIGHUP, and also when its parent
process dies (PR_SET_PDEATHSIG plus a getppid() watch).

Accepted flags (llama-server spellings too, so one command line template fits both engines):
  -m/--model PATH  --host H  --port P  -t/--threads N  -a/--alias NAME[,NAME...]
  -c/--ctx/--ctx-size N  -np/--parallel N  --metrics  --no-webui (always off)  -lv/--verbosity N
  --no-pdeathsig
"""

import argparse
import ctypes
import os
import platform
import signal
import sys
import threading
import time

PROG = "reference-serve"
SHUTDOWN_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def say(msg):
    # stderr, like llama.cpp's own log, so the two interleave in order.
    sys.stderr.write(f"{PROG}: {msg}\n")
    sys.stderr.flush()


def parse_args(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", required=True, help="GGUF model path")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080, help="0 picks a free port (see the 'listening on' line)")
    ap.add_argument("-t", "--threads", type=int, default=1, help="decode and batch threads (default 1)")
    ap.add_argument("-a", "--alias", default=None, help="model name(s) served, comma separated")
    ap.add_argument("-c", "--ctx", "--ctx-size", dest="ctx", type=int, default=2048)
    ap.add_argument("-np", "--parallel", type=int, default=1, help="slots (default 1)")
    ap.add_argument("--metrics", action="store_true", help="enable /metrics")
    ap.add_argument("-fa", "--flash-attn", choices=["on", "off", "auto"], default="auto",
                    help="flash attention (llama-server's -fa; default auto): changes greedy numerics (docs/drift.md)")
    ap.add_argument("-ctk", "--cache-type-k", default=None, help="KV cache type for K (f16 default, f32, q8_0, ...)")
    ap.add_argument("-ctv", "--cache-type-v", default=None, help="KV cache type for V")
    ap.add_argument("--no-webui", "--no-ui", action="store_true", help="accepted for llama-server parity; the UI is always off")
    ap.add_argument("-lv", "--verbosity", type=int, default=4,
                    help="llama.cpp log verbosity (4, the default, adds the system_info/device lines)")
    ap.add_argument("--no-pdeathsig", action="store_true",
                    help="do not set PR_SET_PDEATHSIG (it fires when the spawning *thread* exits)")
    return ap.parse_args(argv)


def arm_parent_death(expected_ppid, use_prctl):
    """Die with the parent: PR_SET_PDEATHSIG(SIGTERM) as the kernel-side net, plus a watch thread."""
    if use_prctl and sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            say(f"warning: prctl(PR_SET_PDEATHSIG) failed: errno {ctypes.get_errno()}")
    # The parent may have died before prctl took effect: then we were re-parented already.
    if os.getppid() != expected_ppid:
        say(f"parent {expected_ppid} is gone before start; exiting")
        sys.exit(1)

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != expected_ppid:
                say(f"parent {expected_ppid} died; shutting down")
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def slots_busy(base_url):
    """True if a slot is processing, False if all are idle, None if /slots could not be read."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/slots", timeout=0.5) as r:
            slots = json.load(r)
        return any(s.get("is_processing") for s in slots)
    except Exception:
        return None


def main(argv):
    args = parse_args(argv)
    expected_ppid = int(os.environ.pop("REFERENCE_SERVE_PPID", "0") or 0) or os.getppid()

    # Block the shutdown signals before llama.cpp starts any thread: every thread inherits the
    # mask, so the signals stay pending for the main thread's sigwait() below. A signal that
    # arrives while the model is loading is acted on as soon as loading returns (about 1 s).
    signal.pthread_sigmask(signal.SIG_BLOCK, SHUTDOWN_SIGNALS)
    arm_parent_death(expected_ppid, not args.no_pdeathsig)

    if not os.path.isfile(args.model):
        say(f"error: model file not found: {args.model}")
        return 2

    import xllamacpp as xlc

    build = xlc.BUILD_INFO
    build_str = f"b{build.get('build_number')}-{build.get('commit')}"
    say(f"engine xllamacpp {xlc.__version__} llama.cpp build {build_str} "
        f"({build.get('compiler')}, {build.get('build_target')}); python {platform.python_version()}; "
        f"pid {os.getpid()}; n_threads = {args.threads} (n_threads_batch = {args.threads}) / {os.cpu_count()}; "
        f"n_ctx = {args.ctx}; n_parallel = {args.parallel}; model {args.model}")
    say(f"ggml cpu features: {xlc.get_system_info().strip()}")

    p = xlc.CommonParams()
    p.model.path = args.model
    p.hostnames = [args.host]
    p.port = args.port
    p.n_ctx = args.ctx
    p.n_parallel = args.parallel
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    if args.alias:
        # model_alias is a set of names: a bare string would become a set of its characters.
        p.model_alias = {a.strip() for a in args.alias.split(",") if a.strip()}
    for name, attr in ((args.cache_type_k, "cache_type_k"), (args.cache_type_v, "cache_type_v")):
        if name is not None:
            # llama-server's names (f32, f16, q8_0) are the ggml_type members without the prefix.
            t = getattr(xlc.ggml_type, "GGML_TYPE_" + name.upper(), None)
            if t is None:
                say(f"error: unknown --{attr.replace('_', '-')} {name!r}")
                return 2
            setattr(p, attr, t)
            say(f"{attr} = {name}")
    p.ui = False
    p.endpoint_metrics = bool(args.metrics)
    p.verbosity = args.verbosity
    fa = xlc.llama_flash_attn_type
    p.flash_attn_type = {"on": fa.LLAMA_FLASH_ATTN_TYPE_ENABLED, "off": fa.LLAMA_FLASH_ATTN_TYPE_DISABLED,
                         "auto": fa.LLAMA_FLASH_ATTN_TYPE_AUTO}[args.flash_attn]

    t0 = time.monotonic()
    try:
        server = xlc.Server(p)  # returns once the model is loaded; /health says 503 until then
    except Exception as e:  # bad model, port in use, ...
        say(f"error: server failed to start: {e!r}")
        return 1
    say(f"ready: {server.listening_address} (model loaded in {time.monotonic() - t0:.2f} s)")

    sig = signal.sigwait(SHUTDOWN_SIGNALS)
    busy = slots_busy(server.listening_address)
    if busy is False:
        # Idle: let llama.cpp shut down in order (about 0.1 s). The C++ destructor holds the GIL,
        # so the backstop is SIGALRM at its default action (kills the process), not a Python timer.
        say(f"received {signal.Signals(sig).name}; idle, shutting down")
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(3)
        t1 = time.monotonic()
        del server
        say(f"stopped in {time.monotonic() - t1:.2f} s")
    else:
        # A request is in flight: ~Server would wait for the streaming handler's next SSE ping
        # (sse_ping_interval, 30 s) before it cancels the task. Nothing is persisted, so leave now.
        say(f"received {signal.Signals(sig).name}; requests in flight ({'unknown' if busy is None else 'busy'}), exiting now")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
