# A real Syncthing pair on loopback for the uds-plus tests and benchmark
# (sourced by tests/uds-syncthing.sh and bench/uds-syncthing.sh).
#
# Two instances, A (the writer's side, where uds-plus runs) and B (the far
# side), each with its own home under $ST_W, free ports chosen at run time,
# discovery, relays, NAT, upgrades and usage reports off. They share one
# folder, id "uds": $ST_W/A-folder and $ST_W/B-folder. Everything is asked
# through the REST API with the API key from each instance's config.xml.
#
#   st_require               skip (77) with the reason if syncthing is missing
#   st_setup DELAY_S         generate both homes, folder watcher delay DELAY_S
#   st_start                 start both, wait until they are connected
#   st_api SIDE METHOD PATH [BODY]   REST call; prints the body
#   st_syncs SIDE NAME       LocalIndexUpdated events of folder uds naming
#                            NAME: the times SIDE found a new version of it
#                            (a scan that changed it, or a pull)
#   st_sent SIDE             bytes SIDE sent to the other so far
#   st_wait_same FILE_A FILE_B SECONDS   until both are byte-identical
#   st_stop                  stop both (also on exit)

ST_W=${ST_W:-$(mktemp -d "${TMPDIR:-/tmp}/uds-st.XXXXXX")}
ST_PIDS=
ST_EVENTS="/rest/events?events=LocalIndexUpdated"

st_require() {
	command -v syncthing >/dev/null ||
		skip_all "syncthing is not installed (scripts/deps.sh installs Debian's syncthing)"
	command -v curl >/dev/null ||
		skip_all "curl is not installed (scripts/deps.sh installs it)"
	command -v python3 >/dev/null || skip_all "python3 is not installed"
}

st_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# st_setup DELAY_S: homes $ST_W/A and $ST_W/B, folder "uds" shared.
st_setup() {
	local delay=$1 side
	for side in A B; do
		syncthing generate --home="$ST_W/$side" --no-default-folder \
			>"$ST_W/$side.gen.log" 2>&1 || return 1
		mkdir -p "$ST_W/$side-folder"
		eval "ST_GUI_$side=$(st_free_port)"
		eval "ST_LISTEN_$side=$(st_free_port)"
		eval "ST_ID_$side=$(syncthing serve --home="$ST_W/$side" --device-id)"
	done
	for side in A B; do
		python3 - "$ST_W" "$side" "$delay" "$ST_GUI_A" "$ST_LISTEN_A" \
			"$ST_ID_A" "$ST_GUI_B" "$ST_LISTEN_B" "$ST_ID_B" <<'EOF' || return 1
import sys, secrets, xml.etree.ElementTree as ET
w, side, delay = sys.argv[1], sys.argv[2], sys.argv[3]
port = {"A": (sys.argv[4], sys.argv[5], sys.argv[6]),
        "B": (sys.argv[7], sys.argv[8], sys.argv[9])}
other = "B" if side == "A" else "A"
f = "%s/%s/config.xml" % (w, side)
t = ET.parse(f)
r = t.getroot()
gui = r.find("gui")
gui.find("address").text = "127.0.0.1:%s" % port[side][0]
gui.find("apikey").text = "uds-test-" + secrets.token_hex(12)
o = r.find("options")
def opt(k, v):
    e = o.find(k)
    if e is None:
        e = ET.SubElement(o, k)
    e.text = v
for e in o.findall("listenAddress"):
    o.remove(e)
opt("listenAddress", "tcp://127.0.0.1:%s" % port[side][1])
for k, v in (("globalAnnounceEnabled", "false"), ("localAnnounceEnabled", "false"),
             ("relaysEnabled", "false"), ("natEnabled", "false"),
             ("urAccepted", "-1"), ("autoUpgradeIntervalH", "0"),
             ("crashReportingEnabled", "false"), ("startBrowser", "false"),
             ("reconnectionIntervalS", "1"), ("progressUpdateIntervalS", "-1")):
    opt(k, v)
dev = ET.SubElement(r, "device", id=port[other][2], name=other,
                    compression="metadata", introducer="false")
ET.SubElement(dev, "address").text = "tcp://127.0.0.1:%s" % port[other][1]
# The folder as Syncthing would create it: a copy of its own defaults
# (maxConflicts, versioning, ...), then ours.
import copy
fo = copy.deepcopy(r.find("defaults").find("folder"))
for k, v in (("id", "uds"), ("label", "uds"),
             ("path", "%s/%s-folder" % (w, side)), ("type", "sendreceive"),
             ("rescanIntervalS", "3600"), ("fsWatcherEnabled", "true"),
             ("fsWatcherDelayS", delay)):
    fo.set(k, v)
for e in fo.findall("device"):
    fo.remove(e)
for i, dev_id in enumerate((port["A"][2], port["B"][2])):
    fo.insert(i, ET.Element("device", id=dev_id, introducedBy=""))
r.insert(0, fo)
t.write(f)
EOF
		eval "ST_KEY_$side=$(sed -n 's:.*<apikey>\(.*\)</apikey>.*:\1:p' "$ST_W/$side/config.xml")"
	done
}

st_api() {
	local side=$1 method=$2 path=$3 body=${4:-} port key
	eval "port=\$ST_GUI_$side key=\$ST_KEY_$side"
	curl -sf -m 30 -X "$method" -H "X-API-Key: $key" \
		${body:+-H 'Content-Type: application/json' --data "$body"} \
		"http://127.0.0.1:$port$path"
}

st_start() {
	local side i
	for side in A B; do
		STNOUPGRADE=1 STNODEFAULTFOLDER=1 syncthing serve \
			--home="$ST_W/$side" --no-browser --no-restart \
			--logfile="$ST_W/$side.log" >/dev/null 2>&1 &
		ST_PIDS="$ST_PIDS $!"
	done
	# Both up, connected, and folder "uds" idle on both: bounded.
	for i in $(seq 1 240); do
		if st_api A GET /rest/system/connections 2>/dev/null |
			python3 -c 'import sys, json; c = json.load(sys.stdin)["connections"]; sys.exit(0 if any(v["connected"] for v in c.values()) else 1)' 2>/dev/null &&
			[ "$(st_state A)" = idle ] && [ "$(st_state B)" = idle ]; then
			# Syncthing buffers events of a non-default mask from
			# the first request for it on: ask now, count later.
			st_api A GET "$ST_EVENTS&since=0&timeout=0" >/dev/null &&
				st_api B GET "$ST_EVENTS&since=0&timeout=0" >/dev/null
			return
		fi
		sleep 0.25
	done
	echo "# syncthing did not connect within 60 s; its logs:" >&2
	tail -n 20 "$ST_W/A.log" "$ST_W/B.log" | sed 's/^/#   /' >&2
	return 1
}

st_state() {
	st_api "$1" GET "/rest/db/status?folder=uds" 2>/dev/null |
		python3 -c 'import sys, json; print(json.load(sys.stdin)["state"])' 2>/dev/null
}

st_syncs() {
	st_api "$1" GET "$ST_EVENTS&since=0&timeout=0" |
		python3 -c '
import sys, json
name = sys.argv[1]
n = 0
for e in json.load(sys.stdin):
    d = e.get("data") or {}
    if d.get("folder") == "uds" and name in (d.get("filenames") or []):
        n += 1
print(n)' "$2"
}

st_sent() {
	st_api "$1" GET /rest/system/connections |
		python3 -c 'import sys, json; print(json.load(sys.stdin)["total"]["outBytesTotal"])'
}

st_wait_same() {
	local i
	for i in $(seq 1 $(($3 * 10))); do
		cmp -s "$1" "$2" && return 0
		sleep 0.1
	done
	cmp "$1" "$2"
	return 1
}

st_stop() {
	local p
	for p in $ST_PIDS; do
		kill "$p" 2>/dev/null
	done
	for p in $ST_PIDS; do
		wait "$p" 2>/dev/null
	done
	ST_PIDS=
}
