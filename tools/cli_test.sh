#!/usr/bin/env bash
# Checks the eagle command line's exit codes and help: 0 for help and good commands, 2 for usage
# errors. Usage: cli_test.sh <path to the eagle binary>
set -uo pipefail
eagle=$1
bad=0
expect() {  # expect <exit code> <text the output must contain> <args...>
  local want=$1 text=$2
  shift 2
  local out rc
  out=$("$eagle" "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL: eagle $* exited $rc (want $want) or lacks '$text':"
    echo "$out" | head -5
    bad=1
  fi
}
expect 0 "usage: eagle <command>" --help
expect 0 "usage: eagle <command>" -h
expect 2 "usage: eagle <command>"
expect 2 "unknown command 'frob'" frob
expect 2 "unknown option '--frob'" --frob
for c in demo devices ops pack train; do
  expect 0 "usage: eagle $c" "$c" --help
  expect 0 "usage: eagle $c" "$c" -h
done
expect 2 "unknown option '--bogus'" demo --bogus
expect 2 "--size must be an integer" demo --size x
expect 2 "unexpected argument" devices extra
expect 0 "captured (" ops
expect 0 "shape rule:" ops sdpa
expect 0 "when attribute generate_stats is true" ops sdpa
expect 2 "close names: sdpa, sdpa_bwd" ops sdp
expect 2 "unexpected argument" ops a b
expect 0 '"device": "cpu"' devices
expect 2 "exactly one of --lengths, --docs, --zipf" pack
expect 2 "--budgets takes positive integers" pack --zipf 1000,10 --budgets 0
expect 1 "does not exist" pack --docs /nonexistent/eagle-docs
expect 0 "recommendation:" pack --zipf 200000,400,3 --budgets 2048,4096 --lookahead 1,16
expect 0 "results agree" demo --device cpu --size 16 --steps 2 --repeats 1
src=$(cd "$(dirname "$0")/../src" && pwd)
expect 2 "unknown option '--bogus'" train --bogus
expect 2 "--steps must be an integer >= 1" train --steps 0
expect 2 "--tokens must be an integer >= 2" train --tokens x
expect 2 "--device must be cpu or cuda" train --device tpu
expect 2 "--dim (30) must be a multiple of --heads (4)" train --device cpu --dim 30 --heads 4
expect 2 "--attention-dtype must be f32 or bf16" train --attention-dtype f16
expect 2 "--lr must be a positive number" train --lr -1
expect 2 "--segment-cap must not exceed --tokens" train --device cpu --tokens 64 --segment-cap 65
expect 2 "--fill must not exceed --tokens" train --device cpu --tokens 64 --fill 65
expect 2 "--fill must be an integer >= 1" train --fill 0
expect 2 "--segment-cap must not exceed --fill" train --device cpu --tokens 64 --fill 16 \
  --segment-cap 32
expect 1 "does not exist" train --device cpu --docs /nonexistent/eagle-docs
expect 0 "summary: loss" train --device cpu --steps 3 --tokens 64 --slots 4 --dim 16 --heads 2 \
  --layers 1 --docs "$src" --max-tokens 100000
expect 2 "--buckets must be an integer >= 2" train --buckets 64,x
expect 2 "--gpus must be an integer >= 1" train --gpus 0
expect 2 "--ranks must be an integer >= 1" train --ranks x
expect 2 "--gpus needs a GPU device" train --device cpu --gpus 2
expect 2 "exclude each other" train --gpus 1 --ranks 2
expect 2 "--ranks runs thread ranks on --device cpu" train --device cuda:0 --ranks 2
gpus=$("$eagle" devices 2>/dev/null | grep -c '"device": "cuda' || true)
expect 2 "but $gpus are visible" train --gpus $((gpus + 1))
expect 0 "params across 2 ranks (cpu-group): bitwise identical" train --ranks 2 --steps 3 \
  --tokens 64 --slots 4 --dim 16 --heads 2 --layers 1 --docs "$src" --max-tokens 100000
expect 0 "buckets: T = 16,32,64" train --device cpu --steps 3 --tokens 64 --slots 4 --dim 16 \
  --heads 2 --layers 1 --docs "$src" --max-tokens 100000 --buckets 32,16
expect 0 "fill 16/16" train --device cpu --steps 3 --tokens 64 --slots 4 --dim 16 \
  --heads 2 --layers 1 --docs "$src" --max-tokens 100000 --buckets 32,16 --fill 16
expect 0 "chosen: entry 0" train --device cpu --tokens 64 --slots 4 --dim 16 --heads 2 \
  --layers 1 --plans -
trace=$(mktemp)
expect 0 "summary: loss" train --device cpu --steps 2 --tokens 64 --slots 4 --dim 16 --heads 2 \
  --layers 1 --docs "$src" --max-tokens 100000 --trace "$trace"
if ! grep -q '"scope": "block0"' "$trace" || ! grep -q '"scope": "optimizer"' "$trace"; then
  echo "FAIL: eagle train --trace wrote no scoped events to $trace"
  bad=1
fi
rm -f "$trace"
# --export: the files a peer loads, .npy headers numpy reads (when python3 has numpy).
export_dir=$(mktemp -d)
expect 0 "export: written to" train --device cpu --steps 2 --tokens 64 --slots 4 --dim 16 \
  --heads 2 --layers 1 --vocab 300 --docs "$src" --max-tokens 100000 --export "$export_dir"
for f in config.json log.json params/embed.npy params/l0.wq.npy params/head.npy \
  batches/step_00002.input_ids.npy batches/step_00002.cu_seqlens.npy; do
  [ -s "$export_dir/$f" ] || { echo "FAIL: eagle train --export wrote no $f"; bad=1; }
done
[ -e "$export_dir/batches/step_00003.input_ids.npy" ] && { echo "FAIL: a third batch"; bad=1; }
[ "$(head -c 6 "$export_dir/params/embed.npy" | tail -c 5)" = "NUMPY" ] ||
  { echo "FAIL: params/embed.npy has no .npy magic"; bad=1; }
if python3 -c "import numpy" 2>/dev/null; then
  python3 - "$export_dir" <<'PY' || bad=1
import json, sys, numpy as np
d = sys.argv[1]
c = json.load(open(f"{d}/config.json"))
for p in c["params"]:
    a = np.load(f"{d}/{p['file']}")
    assert a.dtype == np.float32 and list(a.shape) == p["shape"], (p, a.dtype, a.shape)
t, n = c["capacity"]["tokens"], c["capacity"]["slots"]
for f, shape, dt in [("input_ids", (t,), np.int32), ("labels", (t,), np.int32),
                     ("loss_mask", (t,), np.float32), ("cu_seqlens", (n + 1,), np.int32)]:
    a = np.load(f"{d}/batches/step_00001.{f}.npy")
    assert a.shape == shape and a.dtype == dt, (f, a.shape, a.dtype)
assert len(json.load(open(f"{d}/log.json"))["loss"]) == 2
assert c["model"]["vocab"] == 300 and np.load(f"{d}/params/head.npy").shape == (16, 300)
PY
fi
rm -rf "$export_dir"
expect 2 "--vocab must be an integer >= 256" train --vocab 100
expect 1 "cannot create" train --device cpu --steps 1 --tokens 64 --slots 4 --dim 16 --heads 2 \
  --layers 1 --docs "$src" --max-tokens 10000 --export /dev/null/export
[ "$bad" -eq 0 ] && echo "cli: every check passed"
exit "$bad"
