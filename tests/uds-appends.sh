#!/bin/bash
# timeout: 120
# uds-plus, fallback mode: 1-byte appends at a steady interval (selftests/uds/appends.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run appends
