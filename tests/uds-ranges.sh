#!/bin/bash
# timeout: 180
# uds-plus, fallback mode: small writes into a large file (selftests/uds/ranges.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run ranges
