#!/usr/bin/env bash
# Engine overhead per round (everything except waiting on the LLM and the evaluator): the engine
# driven by instant scripted answers, each event appended to a real run store before it is
# applied. Target: under 50 ms per round.
# Usage: bench/engine_overhead.sh [ROUNDS]   (default 200)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release -q -p ksearch-search --example engine_overhead -- "${1:-200}"
