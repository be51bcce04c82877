#!/usr/bin/env bash
# `make bench`: every figure beside a baseline measured in the same run, then
# bench/REPORT.md and bench/throughput.png. The Makefile sets AF_BUILD and
# AF_BIN and has built af, bench/*.c and the test helpers.
#
# Nothing here asserts a timing; it prints what it measured. Every process the
# bench starts is listed in $tmp/pids and ended by the trap below, by PID.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root"
: "${AF_BUILD:=build/plain}"
: "${AF_BIN:=$AF_BUILD/af}"
export AF_BUILD AF_BIN

for tool in wrk gnuplot python3; do
	if ! command -v "$tool" >/dev/null; then
		echo "bench: $tool is missing (scripts/deps.sh installs it)" >&2
		exit 1
	fi
done

tmp=$(mktemp -d /tmp/af-bench.XXXXXX)
touch "$tmp/pids"
cleanup() {
	local pid
	while read -r pid; do
		[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
	done <"$tmp/pids"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Measure copies: others may rebuild $AF_BUILD while the bench runs.
mkdir -p "$tmp/bin/bench"
cp "$AF_BIN" "$tmp/bin/af"
for b in perm baseline_evhttp baseline_libs model_fast fsync_floor; do
	cp "$AF_BUILD/bench/$b" "$tmp/bin/bench/$b"
done
AF_BUILD=$tmp/bin
AF_BIN=$tmp/bin/af

start=$(date +%s)
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "nproc: $(nproc)"
	echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
	echo "kernel: $(uname -r)"
	echo "loadavg_start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(
	    git diff --quiet HEAD -- engine tools triggers audit status \
	    2>/dev/null || echo ' (with uncommitted changes in the tree)')"
	echo "af: $("$AF_BIN" version 2>/dev/null | head -1)"
} >"$tmp/machine.txt"
cat "$tmp/machine.txt"

python3 "$here/drive.py" "$tmp" "$tmp/results.json"

echo "== 5. permission engine (bench/perm)"
"$AF_BUILD/bench/perm" | tee "$tmp/perm.txt"

{
	echo "loadavg_end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "elapsed_s: $(( $(date +%s) - start ))"
} >>"$tmp/machine.txt"
python3 "$here/report.py" "$tmp/machine.txt" "$tmp/results.json" \
    "$tmp/perm.txt" "$here/REPORT.md" "$here/throughput.png"
echo "bench: wrote bench/REPORT.md and bench/throughput.png" \
    "in $(( $(date +%s) - start )) s"
