#!/bin/bash
# timeout: 180
# uds-plus, fallback mode: SYNCFOLDER vanishes or fills up (selftests/uds/errors.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run errors
