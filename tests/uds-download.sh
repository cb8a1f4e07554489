#!/bin/bash
# timeout: 120
# uds-plus, fallback mode: a slow download in small chunks (selftests/uds/download.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run download
