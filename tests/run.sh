#!/usr/bin/env bash
# Runs the unit binaries and the integration suite, then prints one closing line
# "N passed, N failed" with the totals; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
: "${AF_BUILD:=build/plain}"
: "${AF_BIN:=$AF_BUILD/af}"
export AF_BUILD AF_BIN
what=${1:-all}
passed=0
failed=0

count() {	# add the "N passed, N failed" line of a suite's output to the totals
	local line p f
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
	if [ -z "$line" ]; then
		echo "  (no summary line: counted as one failure)"
		failed=$((failed + 1))
		return
	fi
	p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
	f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
	passed=$((passed + p))
	failed=$((failed + f))
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT

if [ "$what" = all ] || [ "$what" = unit ]; then
	# One binary per source: a stale binary whose source is gone
	# does not count.
	for src in tests/unit/test_*.c; do
		t="$AF_BUILD/tests/unit/$(basename "$src" .c)"
		[ -x "$t" ] || continue
		echo "== unit $(basename "$t")"
		"$t" >"$out" 2>&1
		rc=$?
		sed -e 's/^/  /' "$out" | grep -Ev '^  ok ' | tail -n 40
		count "$out"
		if [ $rc -ne 0 ] && ! grep -qE '[1-9][0-9]* failed' "$out"; then
			failed=$((failed + 1))
		fi
	done
fi

if [ "$what" = all ] || [ "$what" = integration ]; then
	echo "== integration"
	python3 tests/integration/run.py ${AF_TEST_FILTER:-} 2>&1 | tee "$out" |
	    sed -e 's/^/  /'
	count "$out"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
