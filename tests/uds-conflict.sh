#!/bin/bash
# timeout: 120
# uds-plus, fallback mode: a conflict keeps both versions (selftests/uds/conflict.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run conflict
