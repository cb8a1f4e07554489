#!/bin/bash
# timeout: 180
# uds-plus, fallback mode: odd file names and paths longer than PATH_MAX (selftests/uds/oddnames.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run oddnames
