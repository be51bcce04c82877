#!/usr/bin/env bash
# Installs the MCP reference servers the integration tests run against, at the
# versions package-lock.json pins, into tests/mcp/node_modules.
set -euo pipefail
cd "$(dirname "$0")"
if [ -f package-lock.json ]; then
	npm ci --no-audit --no-fund
else
	npm install --no-audit --no-fund
fi
