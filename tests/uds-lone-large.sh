#!/bin/bash
# timeout: 180
# uds-plus, fallback mode: a lone change in a large file waits the client's hash time (selftests/uds/lone-large.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run lone-large
