"""`make bench`: every benchmark, printed and written to benchmarks/results.json.

`python run_all.py flash sdpa` re-runs only the named ones and keeps the others' results.
"""

import datetime
import json
import sys
from pathlib import Path

import bench_build
import bench_chapters
import bench_efficient
import bench_explorer
import bench_flash
import bench_lazy_pages
import bench_lighthouse
import bench_modern
import bench_sdpa
import bench_smollm
import bench_triton
import bench_web_llm
import bench_web_model

BENCHMARKS = {"sdpa": bench_sdpa, "flash": bench_flash, "explorer": bench_explorer,
              "efficient": bench_efficient, "modern": bench_modern, "build": bench_build,
              "triton": bench_triton, "web_model": bench_web_model, "web_llm": bench_web_llm,
              "chapters": bench_chapters,
              "smollm": bench_smollm, "lighthouse": bench_lighthouse, "lazy_pages": bench_lazy_pages}
RESULTS = Path(__file__).with_name("results.json")

chosen = sys.argv[1:] or list(BENCHMARKS)
unknown = set(chosen) - set(BENCHMARKS)
if unknown:
    sys.exit(f"unknown benchmark(s) {sorted(unknown)}; choose from {sorted(BENCHMARKS)}")
previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
results = dict(previous) if sys.argv[1:] else {}
for name in chosen:
    print(f"--- {name}")
    result = BENCHMARKS[name].run()
    result["measured_on"] = datetime.date.today().isoformat()
    if result.get("ran") is False and previous.get(name, {}).get("ran"):
        # a benchmark that needs what this machine lacks (triton: a GPU; lighthouse: Lighthouse
        # or a built site) keeps its last record
        print(f"  did not run here ({result['reason']}); kept the record of {previous[name]['measured_on']}")
        result = previous[name]
    results[name] = result
    for key, value in results[name].items():
        print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    RESULTS.write_text(json.dumps({k: results[k] for k in BENCHMARKS if k in results}, indent=2) + "\n")
print("written benchmarks/results.json")
