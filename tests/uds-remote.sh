#!/bin/bash
# timeout: 120
# uds-plus, fallback mode: remote edits come back, no echo (selftests/uds/remote.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run remote
