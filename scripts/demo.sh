#!/usr/bin/env bash
# The main job: the example triage agent with its webhook on 127.0.0.1:8080
# and the status port on 127.0.0.1:9090, in the foreground until Ctrl-C.
#
# The model: ANTHROPIC_API_KEY set -> Anthropic; else OPENAI_BASE_URL set ->
# that OpenAI-compatible server (OPENAI_API_KEY and AF_MODEL optional); else
# the stand-in model from tests/ answers, so the demo runs offline too.
set -euo pipefail
cd "$(dirname "$0")/.."
demo=demo
mkdir -p "$demo/data" "$demo/secrets"
chmod 700 "$demo/secrets"
cfg="$demo/agent.yaml"
cp examples/triage/agent.yaml "$cfg"
standin_pid=""

model_block() {	# replace the model's provider, name, base_url and key lines
	python3 - "$cfg" "$@" <<'PY'
import re, sys
path, provider, name, base_url = sys.argv[1:5]
text = open(path).read()
text = re.sub(r"provider: anthropic", f"provider: {provider}", text, count=1)
text = re.sub(r"name: claude-sonnet-4-5", f"name: {name}", text, count=1)
text = text.replace("  api_key: ${secret:anthropic_api_key}",
                    f"  base_url: {base_url}\n  api_key: ${{secret:anthropic_api_key}}", 1)
open(path, "w").write(text)
PY
}

if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
	printf '%s\n' "$ANTHROPIC_API_KEY" > "$demo/secrets/anthropic_api_key"
	echo "demo: model = Anthropic ${AF_MODEL:-claude-sonnet-4-5}"
	[ -z "${AF_MODEL:-}" ] || sed -i "s/name: claude-sonnet-4-5/name: $AF_MODEL/" "$cfg"
elif [ -n "${OPENAI_BASE_URL:-}" ]; then
	printf '%s\n' "${OPENAI_API_KEY:-none}" > "$demo/secrets/anthropic_api_key"
	model_block openai "${AF_MODEL:-gpt-4o-mini}" "$OPENAI_BASE_URL"
	echo "demo: model = $OPENAI_BASE_URL (${AF_MODEL:-gpt-4o-mini})"
else
	key=demo-key
	printf '%s\n' "$key" > "$demo/secrets/anthropic_api_key"
	python3 tests/standin/model_server.py --key "$key" \
	    examples/triage/standin-script.json > "$demo/standin.port" &
	standin_pid=$!
	for _ in $(seq 50); do
		[ -s "$demo/standin.port" ] && break
		sleep 0.1
	done
	port=$(head -n 1 "$demo/standin.port")
	model_block anthropic claude-sonnet-4-5 "http://127.0.0.1:$port"
	echo "demo: no ANTHROPIC_API_KEY or OPENAI_BASE_URL; the stand-in model" \
	    "on 127.0.0.1:$port answers (tests/standin/model_server.py)"
fi
trap '[ -z "$standin_pid" ] || kill "$standin_pid" 2>/dev/null' EXIT

cat <<MSG
demo: webhook http://127.0.0.1:8080/hooks/github, status http://127.0.0.1:9090
demo: try, in another terminal:
  curl -s -XPOST --data-binary @examples/triage/event.json http://127.0.0.1:8080/hooks/github
  curl -s http://127.0.0.1:9090/status
  tail -f $demo/data/audit.jsonl
MSG
# Development machines are seldom containers; af says so in its log.
export AF_ALLOW_NO_CONTAINER=${AF_ALLOW_NO_CONTAINER:-1}
./af run "$cfg" --data "$demo/data" --skills examples/triage/skills \
    --secrets "$demo/secrets"
