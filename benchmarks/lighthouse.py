"""Lighthouse scores of the built website, served locally, with the system Chromium.

    python benchmarks/lighthouse.py [--site _build/html] [--out scores.json] [PAGE ...]

PAGE defaults to index.html, chapters/02_scaling.html and chapters/08_sparse_linear.html.
Mobile preset (Lighthouse's default: emulated phone, simulated slow 4G, 4x CPU slowdown),
headless Chromium, nothing outside 127.0.0.1 reached. Prints the four category scores and
the metrics behind Performance for each page; ``--out`` writes them as JSON. The default
server is Python's http.server, which sends files uncompressed; ``--gzip`` compresses
text as a real static host does.

Needs Node and Lighthouse: ``npm install --prefix /tmp/lh lighthouse`` and then
``LIGHTHOUSE=/tmp/lh/node_modules/.bin/lighthouse`` (or ``lighthouse`` on the PATH);
``CHROME_PATH`` defaults to /usr/bin/chromium. Not part of ``make test``: the scores vary
by a few points from run to run on a busy machine; ``--runs N`` keeps each page's median.
"""

import argparse
import functools
import gzip
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["index.html", "chapters/02_scaling.html", "chapters/08_sparse_linear.html"]
CATEGORIES = ["performance", "accessibility", "best-practices", "seo"]
METRICS = ["first-contentful-paint", "largest-contentful-paint", "total-blocking-time",
           "cumulative-layout-shift", "speed-index"]
CHROME_FLAGS = "--headless --no-sandbox --disable-gpu"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class GzipHandler(QuietHandler):
    """Compresses text as every static host does (GitHub Pages, Netlify, nginx)."""

    TYPES = (".html", ".css", ".js", ".svg", ".json", ".txt")

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        if "gzip" not in self.headers.get("Accept-Encoding", "") or not path.is_file() \
                or path.suffix not in self.TYPES:
            return super().do_GET()
        body = gzip.compress(path.read_bytes(), 6)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # Chromium closes connections it no longer needs: not an error of the site


def lighthouse_binary() -> str:
    for candidate in (os.environ.get("LIGHTHOUSE"), shutil.which("lighthouse"),
                      "/tmp/site/lh/node_modules/.bin/lighthouse"):
        if candidate and Path(candidate).exists():
            return candidate
    sys.exit("Lighthouse not found: npm install --prefix /tmp/lh lighthouse; "
             "LIGHTHOUSE=/tmp/lh/node_modules/.bin/lighthouse")


def audit(binary: str, url: str, keep: Path | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="lh-") as tmp:
        report = Path(tmp) / "report.json"
        if keep:
            keep.mkdir(parents=True, exist_ok=True)
            report = keep / (url.split("/", 3)[-1].replace("/", "_") + ".json")
        env = dict(os.environ, CHROME_PATH=os.environ.get("CHROME_PATH", "/usr/bin/chromium"))
        subprocess.run([binary, url, "--quiet", "--output=json", f"--output-path={report}",
                        f"--only-categories={','.join(CATEGORIES)}",
                        f"--chrome-flags={CHROME_FLAGS}"],
                       check=True, env=env, timeout=300)
        data = json.loads(report.read_text())
    scores = {c: round(100 * (data["categories"][c]["score"] or 0)) for c in CATEGORIES}
    metrics = {m: data["audits"][m]["numericValue"] for m in METRICS}
    failed = sorted(a for c in CATEGORIES[1:] for ref in data["categories"][c]["auditRefs"]
                    if (a := ref["id"]) in data["audits"] and ref.get("weight")
                    and (data["audits"][a].get("score") is not None)
                    and data["audits"][a]["score"] < 1)
    return {"scores": scores, "metrics": metrics, "failed_audits": failed,
            "lighthouse": data["lighthouseVersion"]}


def median_run(runs: list[dict]) -> dict:
    best = sorted(runs, key=lambda r: r["scores"]["performance"])[len(runs) // 2]
    best["performance_runs"] = [r["scores"]["performance"] for r in runs]
    best["performance_median"] = statistics.median(best["performance_runs"])
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", default=PAGES)
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--gzip", action="store_true",
                        help="serve text gzip-compressed, as a real host does (default: plain http.server)")
    parser.add_argument("--reports", type=Path, help="keep each full Lighthouse JSON report here")
    args = parser.parse_args()
    binary = lighthouse_binary()
    handler = GzipHandler if args.gzip else QuietHandler
    httpd = QuietServer(("127.0.0.1", 0), functools.partial(handler, directory=str(args.site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    results = {}
    try:
        for page in args.pages:
            result = median_run([audit(binary, f"{base}/{page}", args.reports) for _ in range(args.runs)])
            results[page] = result
            m = result["metrics"]
            fcp, lcp = m["first-contentful-paint"] / 1000, m["largest-contentful-paint"] / 1000
            failed = result["failed_audits"]
            print(f"{page}: " + " ".join(f"{c}={s}" for c, s in result["scores"].items())
                  + f" | FCP {fcp:.1f}s LCP {lcp:.1f}s"
                  f" TBT {m['total-blocking-time']:.0f}ms CLS {m['cumulative-layout-shift']:.3f}"
                  + (f" | below 100: {', '.join(failed)}" if failed else ""),
                  flush=True)
    finally:
        httpd.shutdown()
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
