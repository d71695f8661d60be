#!/bin/sh
# Runs one Sluice service in the foreground, the way docs/operations.md says:
#   run-service.sh <gateway|scheduler|governor|executor> [arguments…]
# The gateway, scheduler and governor run from a bundle of their TypeScript (built first if a
# source changed since; the image builds them when it is built), the executor from its sources
# through tsx, as it loads TypeScript task modules (packages/service-bundles).
# exec, so the service itself receives SIGTERM and stops cleanly.
set -eu

if [ "$#" -lt 1 ]; then
  echo "usage: run-service.sh <gateway|scheduler|governor|executor> [arguments...]" >&2
  exit 64
fi
name="$1"
shift
entry="services/$name/src/main.ts"
if [ ! -f "$entry" ]; then
  echo "run-service: no service named '$name' (no $entry)" >&2
  exit 64
fi
bundle=$(node --import tsx packages/service-bundles/src/bundle-of-main.ts "$name")
if [ -n "$bundle" ]; then
  exec node --enable-source-maps "$bundle" "$@"
fi
exec node --import tsx "$entry" "$@"
