#!/usr/bin/env bash
# issue 12: the alert rules pass `promtool check rules`, and their unit tests
# (alerts_test.yaml: each alert fires on trouble, stays quiet when healthy)
# pass `promtool test rules`. Exit 77 without promtool (Debian: prometheus).
#   alerts_test.sh SOURCE_DIR
set -uo pipefail
src="$1"
promtool="$(command -v promtool || true)"
if [[ -z "$promtool" ]]; then echo "SKIP: promtool missing (apt-get install prometheus; tools/dev.sh setup)"; exit 77; fi
rules="$src/deploy/helm/toktier/files/toktier-alerts.yaml"
"$promtool" check rules "$rules" || exit 1
cd "$src/tests/deploy" && "$promtool" test rules alerts_test.yaml || exit 1
for alert in ToktierShadowMismatch ToktierGuardTripped ToktierHitRateDrop ToktierFallbackSurge \
             ToktierStoreWriteFailures ToktierBackendDown; do
  grep -q "alert: $alert\$" "$rules" || { echo "FAIL: alert $alert missing"; exit 1; }
  grep -q "alertname: $alert\$" alerts_test.yaml || { echo "FAIL: alert $alert has no unit test"; exit 1; }
done
echo "alerts: promtool check and unit tests pass"
