#!/bin/bash
# timeout: 180
# uds-plus, fallback mode: kill -9 with changes pending, then restart (selftests/uds/crash.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run crash
