#!/bin/bash
# timeout: 180
# uds-plus, fallback mode: a push of a large file starts early by its expected cost (selftests/uds/push-early.sh).
. "$(dirname "$0")/uds-host.sh"
uds_host_run push-early
