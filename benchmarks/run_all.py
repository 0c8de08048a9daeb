"""`make bench`: every benchmark, printed and written to benchmarks/results.json."""

import datetime
import json
from pathlib import Path

import bench_build
import bench_explorer
import bench_flash
import bench_sdpa

results = {}
for name, module in (("sdpa", bench_sdpa), ("flash", bench_flash), ("explorer", bench_explorer),
                     ("build", bench_build)):
    print(f"--- {name}")
    results[name] = module.run()
    results[name]["measured_on"] = datetime.date.today().isoformat()
    for key, value in results[name].items():
        print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    Path(__file__).with_name("results.json").write_text(json.dumps(results, indent=2) + "\n")
print("written benchmarks/results.json")
