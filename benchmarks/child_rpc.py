"""Child-side cost of one tool-call round trip over the worker channel (no zygote, no
containment, no ptc pipeline): a child runs ``serve`` and the program times N sequential
``tools.echo()`` calls; this script plays a minimal blocking host.

Usage: .venv/bin/python benchmarks/child_rpc.py [N]
Prints p50/p99 in microseconds and calls/s, as JSON.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker import Limits  # noqa: E402
from worker._protocol._framing import FrameDecoder, encode  # noqa: E402
from worker._protocol._messages import validate_child_frame  # noqa: E402

SDK = """
class ToolCallError(Exception):
    pass

class _Tool:
    def __init__(self, name):
        self.name = name
    def __call__(self, **kwargs):
        ok, value = __transport__.call_batch([(self.name, kwargs)])[0]
        if not ok:
            raise ToolCallError(value)
        return value

class tools:
    echo = _Tool("echo")
"""

PROGRAM = """
import time
samples = []
for i in range({n}):
    t0 = time.perf_counter_ns()
    tools.echo(i=i)
    samples.append(time.perf_counter_ns() - t0)
return samples
"""


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    host, child = socket.socketpair()
    boot = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import socket, worker._child as c; "
        f"c.serve(socket.socket(fileno={child.fileno()}), {{}})"
    )
    proc = subprocess.Popen([sys.executable, "-I", "-c", boot], pass_fds=[child.fileno()])
    child.close()
    decoder = FrameDecoder(validate_child_frame)
    limits = dataclasses.asdict(Limits(max_calls=n + 1, result_bytes=16 * 1024 * 1024))
    done = None
    while done is None:
        data = host.recv(1 << 20)
        if not data:
            break
        for frame in decoder.feed(data):
            if frame["type"] == "ready":
                start = {
                    "type": "start",
                    "code": PROGRAM.format(n=n),
                    "sdk_module": SDK,
                    "profile": "python",
                    "limits": limits,
                    "session": None,
                }
                host.sendall(encode(start))
            elif frame["type"] == "call":
                out = b"".join(
                    encode({"type": "result", "id": c["id"], "ok": True, "value": c["arguments"]})
                    for c in frame["calls"]
                )
                host.sendall(out)
            elif frame["type"] == "done":
                done = frame
    proc.wait()
    assert done is not None and done["ok"], done
    samples = sorted(done["value"][n // 10 :])  # drop the first 10% (warm-up)
    p50 = statistics.median(samples) / 1000
    p99 = samples[int(len(samples) * 0.99) - 1] / 1000
    print(
        json.dumps(
            {
                "calls": n,
                "p50_us": round(p50, 1),
                "p99_us": round(p99, 1),
                "calls_per_s": round(1e9 / statistics.mean(samples)),
            }
        )
    )


if __name__ == "__main__":
    main()
