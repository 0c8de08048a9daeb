#!/usr/bin/env bash
# The device check, one script (run it on a machine with a CUDA GPU of capability 8.0+, from
# the repository root): the CUDA tests (compiled Triton kernel, kernels on cuda) and the
# Triton benchmark. Uses the machine's own torch and triton; writes under $OUT (default
# ./gpu-check): pytest.log, triton.json (the record `make bench ONLY=triton` keeps).
set -u
OUT=${OUT:-gpu-check}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
$PY -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'capability', torch.cuda.get_device_capability())"
start=$SECONDS
timeout "${TEST_S:-240}" $PY -m pytest -q -p no:cacheprovider -o addopts="" -rs --durations=10 \
    tests/test_device.py tests/test_triton.py 2>&1 | tee "$OUT/pytest.log" | tail -60
echo "tests: $((SECONDS - start)) s"
start=$SECONDS
(cd benchmarks && timeout "${BENCH_S:-300}" $PY -c "
import json, sys, bench_triton
print(bench_triton.HEADER, flush=True)
result = bench_triton.run()
json.dump(result, open(sys.argv[1], 'w'), indent=2)
print({k: v for k, v in result.items() if k != 'rows'})
" "$OUT/triton.json")
echo "bench: $((SECONDS - start)) s"
