#!/bin/sh
# Runs one Sluice service in the foreground, the way docs/operations.md says:
#   run-service.sh <gateway|scheduler|governor|executor> [arguments…]
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
exec node --import tsx "$entry" "$@"
