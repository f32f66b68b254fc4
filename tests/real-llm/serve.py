"""llama.cpp's OpenAI-compatible server (from the xllamacpp wheel) on loopback.

Usage: serve.py MODEL.gguf --ctx N --threads N --alias NAME

Prints the address it listens on (a free port on 127.0.0.1) as its first
line of stdout, then serves until SIGTERM or SIGINT.
"""

import argparse
import signal
import sys
import threading

import xllamacpp as xlc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ctx", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--alias", required=True)
    args = ap.parse_args()

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    params = xlc.CommonParams()
    params.model.path = args.model
    # The name /v1/models lists, so the worker's probe finds its model.
    params.model_alias = {args.alias}
    params.n_ctx = args.ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # a free port; listening_address says which
    server = xlc.Server(params)
    print(server.listening_address, flush=True)
    while not stop.wait(0.5):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
