#!/usr/bin/env bash
# Rebuilds the web page `weft serve` embeds (dist/ is committed, so building Weft needs no Node).
# Run it after changing anything under src/, then commit dist/ with the change.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npm run build
