#!/usr/bin/env bash
# The device paths, checked on a machine with an NVIDIA GPU (under 8 minutes): MindSpore's GPU plugin and its CUDA 11
# libraries installed from the package registry, then the smoke run on one GPU worker and on two data-parallel
# workers (MindSpore's data_parallel engine), then two workers at ZeRO stage 1 (MindSpore's optimizer parallel).
# Writes what happened to $OUT (default: ./device_check_out): report.md, and each run's log and summary.json.
#
#   bash benchmarks/device_check.sh                 # a fresh virtual environment in .venv-gpu, from the registry
#   WHEELS=dir bash benchmarks/device_check.sh      # offline: every wheel needed, downloaded beforehand into dir
#   PYTHON=python3.11 ...                           # the interpreter (the project needs Python 3.10 or 3.11)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device_check_out}; mkdir -p "$OUT"
REPORT="$OUT/report.md"
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3.10 || command -v python3)}
say() { echo "$*" | tee -a "$REPORT"; }
: > "$REPORT"
say "# device check, $(date -u +%Y-%m-%dT%H:%MZ)"
say "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
say "- Python: $($PYTHON --version 2>&1)"

# MindSpore 2.10's GPU plugin is built for CUDA 11 (lib/plugin/gpu11.1, gpu11.6): its runtime libraries, cuDNN 8
# and NCCL 2 come as NVIDIA's cu11 wheels
CUDA11="nvidia-cuda-runtime-cu11 nvidia-cublas-cu11 nvidia-cudnn-cu11==8.* nvidia-cufft-cu11 nvidia-curand-cu11
        nvidia-cusolver-cu11 nvidia-cusparse-cu11 nvidia-cuda-nvrtc-cu11 nvidia-nccl-cu11"
PIP_FROM=${WHEELS:+--no-index --find-links $WHEELS}
if ! { $PYTHON -m venv .venv-gpu && . .venv-gpu/bin/activate &&
       pip install -q $PIP_FROM -e . $CUDA11 > "$OUT/install.log" 2>&1; }; then
  say "- install: FAILED (see install.log)"; tail -5 "$OUT/install.log" | tee -a "$REPORT"; exit 1
fi
NV=$(python -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))")/nvidia
export LD_LIBRARY_PATH=$(ls -d "$NV"/*/lib | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say "- MindSpore $(python -c 'import mindspore; print(mindspore.__version__)'), GPU available: $(python -c 'import mindspore as ms; print(ms.hal.is_available("GPU"))' 2>&1 | tail -1)"

GPU=(--smoke --context.device_target=GPU --lr_schedule.total_steps=5 --runner_config.max_steps=5)
step() {  # step NAME TIMEOUT COMMAND...: run, keep the log and summary.json, one line in the report
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS; timeout "$limit" "$@" --output_dir="runs_gpu/$name" > "$OUT/$name.log" 2>&1; local rc=$?
  cp "runs_gpu/$name/summary.json" "$OUT/$name.summary.json" 2>/dev/null
  local summary=$(python - "runs_gpu/$name" <<'PY' 2>/dev/null
import json, sys, pathlib
s = json.loads((pathlib.Path(sys.argv[1]) / "summary.json").read_text())
print(f"loss {s['first_loss']:.4f} -> {s['last_loss']:.4f}, {s['tokens_per_s']:.0f} tokens/s, parallel {s.get('parallel')}")
PY
)
  say "- $name: exit $rc in $((SECONDS - t0)) s${summary:+; $summary}"
  [ $rc -eq 0 ] || tail -15 "$OUT/$name.log" | sed 's/^/    /' | tee -a "$REPORT"
  return $rc
}
rm -rf runs_gpu
step one_worker 150 llmpt pretrain "${GPU[@]}"
step two_workers_dp 200 llmpt launch --workers 2 -- llmpt pretrain "${GPU[@]}"
if [ -f runs_gpu/two_workers_dp/weights_rank0.sha256 ]; then
  cmp -s runs_gpu/two_workers_dp/weights_rank{0,1}.sha256 && say "- two_workers_dp: ranks' weights identical" \
    || say "- two_workers_dp: ranks' weights DIFFER"
fi
step two_workers_zero1 150 llmpt launch --workers 2 -- llmpt pretrain "${GPU[@]}" --parallel.parallel_optimizer_config.zero_stage=1
say "- done in $SECONDS s"
