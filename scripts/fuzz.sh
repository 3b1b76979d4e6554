#!/usr/bin/env bash
# Runs each rml-host fuzz target for a bounded time and prints its exec count.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# FUZZ_ARGS adds libFuzzer options (for example FUZZ_ARGS=-max_len=4096, which keeps
# inputs small and the exec rate high).
#
# Installs cargo-fuzz if missing (nightly toolchain required). Each target starts from
# the committed fixtures and malformed corpus of its format (copied into
# fuzz/corpus-run/TARGET, which is git-ignored) and runs under libFuzzer's limits:
# 2 GiB RSS, 512 MiB per allocation, 10 s per input. Crashes land in fuzz/artifacts.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${1:-600}"
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=($(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^rml-fuzz$'))
command -v cargo-fuzz >/dev/null || cargo +nightly install cargo-fuzz --locked

seeds_for() {
  case "$1" in
    safetensors) echo "rml-host/tests/fixtures/host_formats rml-host/tests/fixtures/host_formats/sharded rml-host/tests/malformed/safetensors" ;;
    npy) echo "rml-host/tests/fixtures/host_formats rml-host/tests/malformed/npy" ;;
    npz) echo "rml-host/tests/fixtures/host_formats rml-host/tests/malformed/npy" ;;
    gguf) echo "rml-host/tests/fixtures/gguf rml-host/tests/malformed/gguf" ;;
    tokenizer_json) echo "rml-llm/tests/fixtures/tokenizers" ;;
    graph_json) echo "models/graph-default rml-host/tests/fixtures/graph rml-host/tests/fixtures/graph/run zoo/fixtures/*/torch" ;;
  esac
}

for target in "${targets[@]}"; do
  corpus="fuzz/corpus-run/$target"
  mkdir -p "$corpus"
  for dir in $(seeds_for "$target"); do
    [ -d "$dir" ] && find "$dir" -maxdepth 1 -type f -exec cp -n {} "$corpus/" \;
  done
  log="fuzz/corpus-run/$target.log"
  echo "==> fuzzing $target for ${seconds}s (log: $log)"
  cargo +nightly fuzz run "$target" "$corpus" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 \
    -print_final_stats=1 ${FUZZ_ARGS:-} >"$log" 2>&1 || { tail -40 "$log"; exit 1; }
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  echo "    $target: $runs execs, $(ls "$corpus" | wc -l) corpus files, no crash"
done
