#!/usr/bin/env bash
# Installs the JSON Schema validator test_schema.py uses (ajv-cli), at the
# versions package-lock.json pins, into tests/schema/node_modules.
set -euo pipefail
cd "$(dirname "$0")"
if [ -f package-lock.json ]; then
	npm ci --no-audit --no-fund
else
	npm install --no-audit --no-fund
fi
