#!/usr/bin/env bash
# Installs what af needs to build, test, fuzz and benchmark on Debian 12.
# Idempotent; run as root (CI and the development machines are).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
pkgs=(
	build-essential pkg-config clang llvm libclang-rt-14-dev
	libevent-dev libcurl4-gnutls-dev libyaml-dev libcjson-dev
	libwebsockets-dev libetpan-dev libsqlite3-dev libseccomp-dev
	libgnutls28-dev
	python3 curl wrk valgrind gnuplot-nox openssl
	dovecot-imapd postfix
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
	    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	$SUDO apt-get update
	$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The MCP reference servers the integration tests run against (tests/mcp),
# at the versions tests/mcp/package-lock.json pins.
if ! command -v node >/dev/null; then
	$SUDO apt-get update
	$SUDO apt-get install -y --no-install-recommends nodejs npm
fi
if command -v node >/dev/null && command -v npm >/dev/null; then
	"$(dirname "$0")/../tests/mcp/install.sh"
fi

# The JSON Schema validator (ajv) tests/integration/test_schema.py checks
# `af schema` with, at the versions tests/schema/package-lock.json pins.
if command -v node >/dev/null && command -v npm >/dev/null; then
	"$(dirname "$0")/../tests/schema/install.sh"
fi
