#!/bin/sh
# Runs one Sluice service in the foreground, the way docs/operations.md says:
#   run-service.sh <gateway|scheduler|governor|executor> [arguments…]
# Each runs from a bundle of its TypeScript, built first if a source changed since (the image
# builds them when it is built): packages/service-bundles.
# The bundle's startup module turns source maps on for Sluice's own code only (startup-stub.ts).
# exec, so the service itself receives SIGTERM and stops cleanly.
set -eu

if [ "$#" -lt 1 ]; then
  echo "usage: run-service.sh <gateway|scheduler|governor|executor> [arguments...]" >&2
  exit 64
fi
name="$1"
shift
# The bundle as built, when it is fresh (plain Node: a few ms); otherwise bundle-of builds it
# (through tsx, about half a CPU-second), and exits 64 (usage) for a name that is no service.
if ! bundle=$(node packages/service-bundles/src/fresh-bundle-main.mjs "$name"); then
  bundle=$(node --import tsx packages/service-bundles/src/bundle-of-main.ts "$name")
fi
exec node "$bundle" "$@"
