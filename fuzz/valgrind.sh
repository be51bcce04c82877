#!/usr/bin/env bash
# `make valgrind`: every fuzz target's corpus (fuzz/corpus/NAME and
# NAME_*) through the target's code under Valgrind, one process a target.
# Any invalid access, use of uninitialised memory or definite leak fails it.
set -u
cd "$(dirname "$0")/.."
: "${AF_BUILD:=build/plain}"
passed=0
failed=0
for bin in "$AF_BUILD"/fuzz/*-replay; do
	[ -x "$bin" ] || continue
	name=$(basename "$bin" -replay)
	mapfile -t inputs < <(find fuzz/corpus/"$name" fuzz/corpus/"$name"_* \
	    -type f 2>/dev/null | sort)
	log=$(mktemp)
	echo "== valgrind $name (${#inputs[@]} inputs)"
	if valgrind -q --error-exitcode=99 --leak-check=full \
	    --errors-for-leak-kinds=definite,indirect \
	    --show-leak-kinds=definite,indirect --track-origins=yes \
	    "$bin" "${inputs[@]}" >"$log" 2>&1; then
		passed=$((passed + 1))
	else
		tail -n 60 "$log" | sed 's/^/  /'
		failed=$((failed + 1))
	fi
	rm -f "$log"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
