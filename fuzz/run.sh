#!/usr/bin/env bash
# Runs every fuzzer for FUZZ_SECONDS with its seed corpus (fuzz/corpus/NAME,
# read only; new inputs go to a scratch folder). Any crash, leak or sanitizer
# report fails the run, and the input is kept in fuzz/artifacts/.
set -u
cd "$(dirname "$0")/.."
: "${FUZZ_SECONDS:=60}"
: "${FUZZDIR:=build/fuzz}"
mkdir -p fuzz/artifacts
passed=0
failed=0
for bin in "$FUZZDIR"/bin/*-fuzzer; do
	[ -x "$bin" ] || continue
	name=$(basename "$bin" -fuzzer)
	# Seeds: fuzz/corpus/NAME, and NAME_* for a fuzzer with several inputs
	# kinds (model_anthropic, model_openai).
	seeds=$(ls -d fuzz/corpus/"$name" fuzz/corpus/"$name"_* 2>/dev/null)
	scratch=$(mktemp -d)
	echo "== fuzz $name (${FUZZ_SECONDS}s)"
	if "$bin" -max_total_time="$FUZZ_SECONDS" -max_len=65536 \
	    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
	    -artifact_prefix=fuzz/artifacts/"$name"- "$scratch" $seeds \
	    >"$scratch.log" 2>&1; then
		grep -E 'stat::number_of_executed_units|Done [0-9]+ runs' \
		    "$scratch.log" | tail -n 1 | sed 's/^/  /'
		passed=$((passed + 1))
	else
		tail -n 40 "$scratch.log" | sed 's/^/  /'
		failed=$((failed + 1))
	fi
	rm -rf "$scratch" "$scratch.log"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
