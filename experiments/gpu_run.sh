#!/usr/bin/env bash
# jaxgbt on an accelerator, in one short run: the versions and devices JAX sees, training
# speed (bench_train.py, jaxgbt on the default device against LightGBM on the host's cores),
# one level's histogram against the device's bandwidth floor (bench_histogram.py), then the
# fast tests on the default backend. Each step has its own time limit, so a slow step
# costs its own results only.
#
#     OUT=out/gpu bash experiments/gpu_run.sh
#     STEPS="revisions" REVISIONS='["33e252e","HEAD"]' bash experiments/gpu_run.sh
#     STEPS="cpu" bash experiments/gpu_run.sh   # the host's processor, two cores
#     STEPS="scatter" bash experiments/gpu_run.sh   # its histogram scatter, disassembled
#     STEPS="compile" bash experiments/gpu_run.sh   # first fits in fresh processes, cached
#
# STEPS picks the steps (default: "train histogram revisions tests"; revisions runs only
# with REVISIONS set; cpu only when named: the host's own processor on CPU_CORES, by
# default its first two, as the 2-vCPU machines the CPU tables were measured on: narrow
# data against the anchors, four wide cells, and profile_fit.py at 200,000 x 28 and
# 2,000 x 180, oblivious and depthwise; scatter only when named: the histogram's scatter
# loop as XLA:CPU compiles it for that processor).
# Needs jax with a GPU/TPU plugin and the package's dependencies importable (PYTHONPATH
# or an installed environment); LightGBM is optional (its row is skipped if absent).
# Writes versions.txt, bench_train.txt, bench_histogram.txt, bench_revisions.txt (with
# REVISIONS, below) and tests.log to $OUT.
set -u
cd "$(dirname "$0")/.."
out=${OUT:-out/gpu}
mkdir -p "$out"
python=${PYTHON:-python3}
threads=${THREADS:-$(nproc)}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
steps=" ${STEPS:-train histogram revisions tests} "
want() { [[ $steps == *" $1 "* ]]; }
# Several test processes share one GPU: each takes memory as it needs it.
export XLA_PYTHON_CLIENT_PREALLOCATE=false

$python - <<'PY' 2>&1 | tee "$out/versions.txt"
import platform, jax, jaxlib, numpy
print("python", platform.python_version(), "jax", jax.__version__, "jaxlib", jaxlib.__version__,
      "numpy", numpy.__version__)
print("backend", jax.default_backend(), "devices", jax.devices())
PY

want train && timeout "${TRAIN_S:-150}" $python experiments/bench_train.py \
  --set "rows=${TRAIN_ROWS:-[1000000, 4000000]}" --set 'jaxgbt_variants=["one-device"]' \
  --set 'anchors=["lightgbm"]' --set "threads=$threads" 2>&1 | tee "$out/bench_train.txt"

want histogram && timeout "${HISTOGRAM_S:-150}" $python experiments/bench_histogram.py \
  --rows ${HISTOGRAM_ROWS:-1000000 10000000} --set "output_dir=\"$out/histogram\"" 2>&1 \
  | tee "$out/bench_histogram.txt"

# With REVISIONS (a TOML list of git revisions whose snapshots were taken beforehand, where
# the repository is: `bench_revisions.py --set 'revisions=[...]' --set rounds=0`, with
# out/bench_revisions carried along), each revision's jaxgbt fits on the device in turn.
if want revisions && [ -n "${REVISIONS:-}" ]; then
  timeout "${REVISIONS_S:-420}" $python experiments/bench_revisions.py \
    --set "revisions=$REVISIONS" --set "rows=${REVISION_ROWS:-[500000]}" \
    --set "rounds=${REVISION_ROUNDS:-1}" --set repeats=1 2>&1 | tee "$out/bench_revisions.txt"
fi

# The host's CPU alone (JAX_PLATFORMS=cpu), pinned to CPU_CORES: XLA:CPU sizes its thread
# pool by the cores the process may use. The anchors are those importable there.
if want cpu; then
  pin="taskset -c ${CPU_CORES:-0,1}"
  n_pinned=$($pin nproc)
  JAX_PLATFORMS=cpu timeout "${CPU_TRAIN_S:-300}" $pin $python experiments/bench_train.py \
    --set 'rows=[200000, 1000000]' --set 'jaxgbt_variants=["default","one-device"]' \
    --set "threads=$n_pinned" 2>&1 | tee "$out/cpu_bench_train.txt"
  JAX_PLATFORMS=cpu timeout "${CPU_WIDE_S:-120}" $pin $python experiments/bench_wide.py \
    --set 'rows=[2000, 20000]' --set 'features=[20, 180]' --set 'tasks=["binary"]' \
    --set 'kinds=["float"]' --set "threads=$n_pinned" --set "output_dir=\"$out/cpu_wide\"" \
    2>&1 | tee "$out/cpu_bench_wide.txt"
  for cell in "rows=200000 features=28 n_trees=20" "rows=2000 features=180 n_trees=50" \
      'rows=2000 features=180 n_trees=30 jaxgbt_settings={grow_policy="depthwise"}'; do
    sets=(); for setting in $cell; do sets+=(--set "$setting"); done
    JAX_PLATFORMS=cpu timeout 90 $pin $python experiments/profile_fit.py "${sets[@]}" \
      --set "output_dir=\"$out/cpu_profile\"" 2>&1 | tee -a "$out/cpu_profile.txt"
  done
fi

# The host's histogram scatter as XLA:CPU compiles it there (STEPS="scatter"): one fit of
# 200,000 x 28 on CPU_CORES with the training chunk's HLO, LLVM IR and object files dumped,
# the scatters' kept, the first disassembled (objdump) beside the processor's description,
# to set against the AMD kind's loop (docs/benchmarks.md, "The Intel kind again").
if want scatter; then
  pin="taskset -c ${CPU_CORES:-0,1}"
  dump="$out/cpu_dump"
  rm -rf "$dump" && mkdir -p "$dump"
  (lscpu; grep -m1 flags /proc/cpuinfo) > "$out/cpu_info.txt" 2>&1
  JAX_PLATFORMS=cpu JAXGBT_COMPILATION_CACHE=0 \
    XLA_FLAGS="--xla_dump_to=$dump --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*_compiled_chunk.*" \
    timeout "${CPU_SCATTER_S:-120}" $pin $python - <<'PY' 2>&1 | tee "$out/cpu_scatter.txt"
import sys, time
sys.path.insert(0, "experiments")
import jax
from bench_wide import make_data
import jaxgbt
X, y = make_data(200_000, 28, "binary", "float", 0)
for label in ("first", "warm"):
    start = time.perf_counter()
    model = jaxgbt.fit("logistic", X, y, n_trees=16, depth=6, devices=jax.devices()[:1])
    jax.block_until_ready(model.leaf_value)
    print(label, "fit s", round(time.perf_counter() - start, 3))
PY
  find "$dump" -type f ! -name '*wrapped_scatter*' ! -name '*after_optimizations.txt' -delete
  first=$(ls "$dump"/*obj-file.wrapped_scatter.o 2>/dev/null | head -1)
  if [ -n "$first" ] && command -v objdump > /dev/null; then
    objdump -d --no-show-raw-insn "$first" > "$out/cpu_scatter.s"
  fi
  ls "$dump" | head -40
fi

# The first fit in fresh processes on the device (STEPS="compile"): with no cache, and with
# the cache `import jaxgbt` sets up, whose stored training chunk a later process loads
# without tracing (docs/benchmarks.md, "The training chunk's executable kept on disk").
if want compile; then
  timeout "${COMPILE_S:-240}" $python experiments/bench_compile.py \
    --set 'grow_policies=["oblivious"]' --set 'calls=[]' --set repeats=2 \
    --set "output_dir=\"$out/compile\"" 2>&1 | tee "$out/bench_compile.txt"
fi

# -p no:benchmark: pytest-benchmark, where installed, warns under xdist, and the suite
# turns warnings into errors. conftest.py turns XLA's deterministic GPU ops on, which
# makes the suite slower there than on CPU.
if want tests; then
  timeout "${TESTS_S:-300}" $python -m pytest -m "not slow" -v -rfE -p no:cacheprovider \
    -p no:benchmark -n "${TEST_WORKERS:-12}" --maxprocesses "${TEST_WORKERS:-12}" \
    ${TESTS:-tests} > "$out/tests.log" 2>&1
  echo "tests: exit $? (124: stopped at the time limit)"
  grep -cE ' PASSED' "$out/tests.log" | sed 's/^/passed: /'
  grep -E ' (FAILED|ERROR) ' "$out/tests.log" | sed 's/^.*\] //' | sort | uniq | head -60
  tail -40 "$out/tests.log"
fi
