#!/bin/bash
# timeout: 120
# uds-plus, fallback mode: a log file growing by a replayed trace (selftests/uds/logtrace.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run logtrace
