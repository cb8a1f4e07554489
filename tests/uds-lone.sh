#!/bin/bash
# timeout: 120
# uds-plus, fallback mode: a lone change is not held for t; bursts are (selftests/uds/lone.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run lone
