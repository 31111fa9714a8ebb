"""Regenerate docs/media: a screenshot of TT kernels in tinygrad's VIZ=1 profiler view and a trace.json from TT_DUMP.

    python scripts/make_docs_media.py            # needs Debian's chromium (apt-get install chromium) for the screenshot

Runs PROGRAM (a small matmul, then a fused elementwise + reduction kernel) on the emulator with VIZ=1 PROFILE=1
TT_DUMP, serves the saved profile with tinygrad's own viewer (tinygrad/viz/serve.py) and photographs it with headless
Chromium. The viewer opens on its kernel list; a small same-origin proxy in front of it adds one script that does what
a user would: select the "Profiler" entry and zoom the timeline to the first TT launch's lanes (the viewer's files
themselves are not changed). The smallest kernel's trace.json is copied beside the PNG.
"""
from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import tinygrad

ROOT = Path(__file__).resolve().parents[1]
MEDIA = ROOT / "docs" / "media"
PROGRAM = """
import numpy as np
from tinygrad import Tensor
rng = np.random.default_rng(0)
a = Tensor(rng.standard_normal((32, 64)).astype(np.float32), device="TT")
b = Tensor(rng.standard_normal((64, 32)).astype(np.float32), device="TT")
c = (a @ b).realize()
print(((c.relu() + c.exp2()) * 0.5).sum(axis=1).numpy()[:4])
"""
# select the Profiler entry, then zoom the timeline to [T0, T1] (microseconds since the profile's first event)
VIEW_SCRIPT = """<script>
const poll = setInterval(() => {
  const p = document.querySelector('#ctx-0 p');
  if (p && !window.__selected) { window.__selected = true; p.click(); }
  if (typeof data === 'undefined' || !data || !data.tracks || data.tracks.size === 0 || !canvasZoom) return;
  clearInterval(poll);
  setTimeout(() => {     // once every track is laid out (the time scale's domain depends on all of them)
    const visible = document.querySelector('.metadata-parent').getBoundingClientRect().left -   // the side panel
                    document.querySelector('#device-list').getBoundingClientRect().right;      // covers the rest
    const xs = timelineScale(), x0 = xs(T0), x1 = xs(T1), k = visible / (x1 - x0);
    d3.select('#timeline').call(canvasZoom.transform, d3.zoomIdentity.translate(-x0 * k, 0).scale(k));
  }, 2000);
}, 200);
</script></body>"""


def tt_window(profile_pkl: Path) -> tuple[int, int]:
    """Where the first TT launch's lanes are on the viewer's time axis (microseconds since its first event)."""
    import pickle
    from tinygrad.viz.serve import flatten_events
    events = list(flatten_events(pickle.loads(profile_pkl.read_bytes()), {}))
    start = min(int(st) for st, _, _ in events)
    launches = sorted(int(st) for st, en, e in events if getattr(e, "device", "") == "TT" and en > st)
    until = launches[1] if len(launches) > 1 else float("inf")
    lanes = [(int(st), int(en)) for st, en, e in events
             if getattr(e, "device", "").startswith("TT ") and launches[0] <= st < until]
    lo, hi = min(a for a, _ in lanes) - start, max(b for _, b in lanes) - start
    pad = (hi - lo) // 40
    return max(lo - pad, 0), hi + pad


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proxy(upstream: str, script: bytes) -> int:
    """A same-origin proxy of the viewer that adds `script` to its page; returns its port."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            with urllib.request.urlopen(upstream + self.path) as r:
                body, ctype = r.read(), r.headers.get("Content-Type", "application/octet-stream")
            if self.path in ("/", "/index.html"):
                body = body.replace(b"</body>", script)
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def wait_for(port: int, timeout: float = 60) -> None:
    end = time.time() + timeout
    while time.time() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(f"the viewer did not start on port {port}")


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    MEDIA.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "DEVICE": "TT", "VIZ": "1", "PROFILE": "1", "TMPDIR": tmp, "TT_DUMP": f"{tmp}/dump"}
        subprocess.run([sys.executable, "-c", PROGRAM], env=env, check=True, stdin=subprocess.DEVNULL)
        small = min(Path(tmp, "dump").glob("*/trace.json"), key=lambda p: p.stat().st_size)
        shutil.copy(small, MEDIA / f"trace_{small.parent.name.rsplit('_', 1)[0]}.json")
        if chromium is None:
            print("no chromium: trace copied, screenshot skipped (apt-get install chromium)")
            return 1
        port = free_port()
        serve = Path(tinygrad.__file__).parent / "viz" / "serve.py"
        pkl = {name: next(Path(tmp).glob(f"{name}.pkl*")) for name in ("profile", "rewrites")}
        viewer = subprocess.Popen([sys.executable, str(serve), "--profile-path", str(pkl["profile"]),
                                   "--rewrites-path", str(pkl["rewrites"])], env={**os.environ, "PORT": str(port)},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(port)
            t0, t1 = tt_window(pkl["profile"])
            script = VIEW_SCRIPT.replace("T0", str(t0)).replace("T1", str(t1)).encode()
            url = f"http://127.0.0.1:{proxy(f'http://127.0.0.1:{port}', script)}/"
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            "--no-first-run", "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", f"--user-data-dir={tmp}/chromium", "--window-size=1600,900",
                            "--virtual-time-budget=20000", f"--screenshot={MEDIA / 'viz_profiler.png'}", url],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            viewer.terminate()
    print(f"wrote {MEDIA / 'viz_profiler.png'} and {MEDIA}/trace_*.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
