#!/bin/bash
# timeout: 180
# uds-plus, fallback mode: start-up: fill, merge, quiet restart (selftests/uds/startup.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run startup
