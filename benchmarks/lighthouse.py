"""Lighthouse scores of the built website, served locally, with the system Chromium.

    python benchmarks/lighthouse.py [--site _build/html] [--out scores.json] [--all | PAGE ...]

PAGE defaults to index.html, chapters/02_scaling.html and chapters/08_sparse_linear.html;
``--all`` audits every page of the site. ``make bench`` records every page, mobile, gzip,
the median of three runs (``bench_lighthouse.py``).
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
import contextlib
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


def find_lighthouse() -> str | None:
    """The Lighthouse command: $LIGHTHOUSE, ``lighthouse`` on the PATH, or None."""
    for candidate in (os.environ.get("LIGHTHOUSE"), shutil.which("lighthouse"),
                      "/tmp/lh/node_modules/.bin/lighthouse", "/tmp/site/lh/node_modules/.bin/lighthouse"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def find_chrome() -> str | None:
    chrome = os.environ.get("CHROME_PATH", "/usr/bin/chromium")
    return chrome if Path(chrome).exists() else None


def lighthouse_binary() -> str:
    binary = find_lighthouse()
    if binary is None:
        sys.exit("Lighthouse not found: npm install --prefix /tmp/lh lighthouse; "
                 "LIGHTHOUSE=/tmp/lh/node_modules/.bin/lighthouse")
    return binary


def site_pages(site: Path) -> list[str]:
    """Every page of a built site (its HTML files outside _static and _sources)."""
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if not p.relative_to(site).parts[0].startswith("_"))


@contextlib.contextmanager
def serve(site: Path, compress: bool):
    """The site on 127.0.0.1, gzip-compressed or not; yields its base URL."""
    handler = GzipHandler if compress else QuietHandler
    httpd = QuietServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


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


def summary(page: str, result: dict) -> str:
    m = result["metrics"]
    fcp, lcp = m["first-contentful-paint"] / 1000, m["largest-contentful-paint"] / 1000
    failed = result["failed_audits"]
    return (f"{page}: " + " ".join(f"{c}={s}" for c, s in result["scores"].items())
            + f" | FCP {fcp:.1f}s LCP {lcp:.1f}s"
            f" TBT {m['total-blocking-time']:.0f}ms CLS {m['cumulative-layout-shift']:.3f}"
            + (f" | below 100: {', '.join(failed)}" if failed else ""))


def measure(site: Path, pages: list[str], runs: int = 1, compress: bool = True,
            reports: Path | None = None, binary: str | None = None) -> dict:
    """Each page's median run of ``runs`` (by performance score), printed as it comes."""
    binary = binary or lighthouse_binary()
    results = {}
    with serve(site, compress) as base:
        for page in pages:
            done, errors = [], []
            for _ in range(runs + 2):  # a run Lighthouse gives up on (a busy machine) is tried again
                if len(done) == runs:
                    break
                try:
                    done.append(audit(binary, f"{base}/{page}", reports))
                except (subprocess.CalledProcessError, subprocess.TimeoutExpired, KeyError) as error:
                    errors.append(f"{type(error).__name__}: {error}"[:300])
            if not done:
                results[page] = {"error": errors[-1]}
                print(f"{page}: Lighthouse failed: {errors[-1]}", flush=True)
                continue
            results[page] = median_run(done)
            results[page]["failed_runs"] = len(errors)
            print(summary(page, results[page]), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", default=PAGES)
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--all", action="store_true", help="every page of the site (as make bench does)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--gzip", action="store_true",
                        help="serve text gzip-compressed, as a real host does (default: plain http.server)")
    parser.add_argument("--reports", type=Path, help="keep each full Lighthouse JSON report here")
    args = parser.parse_args()
    pages = site_pages(args.site) if args.all else args.pages
    results = measure(args.site, pages, args.runs, args.gzip, args.reports)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
