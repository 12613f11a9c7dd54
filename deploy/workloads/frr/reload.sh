#!/bin/sh
# reload.sh CONFIG_FILE: apply CONFIG_FILE to the running FRR whenever it changes.
#
# The eipctl controller renders the node's FRR config into CONFIG_FILE; this loop applies it
# with frr-reload.py (which changes only what differs), once per content. After each attempt
# CONFIG_FILE.status is replaced (atomically) by a first line "<sha256> applied" or
# "<sha256> failed" and the last lines of frr-reload.py's output. A config that failed is
# tried again after RETRY seconds; a new one at once.
#
# Environment: RELOAD_INTERVAL (seconds between checks, default 1), FRR_RELOAD (default
# /usr/lib/frr/frr-reload.py), FRR_PATHSPACE (FRR's -N, when the daemons run with one).
set -u

config=${1:?usage: reload.sh CONFIG_FILE}
status=$config.status
interval=${RELOAD_INTERVAL:-1}
reload=${FRR_RELOAD:-/usr/lib/frr/frr-reload.py}
RETRY=10
TAIL=20

work=$(mktemp -d) || exit 1
applied=""   # sha256 of the last config applied successfully
failed=""    # sha256 of the last config that failed, and when
failed_at=0
child=""

stop() {
    [ -n "$child" ] && kill "$child" 2>/dev/null
    rm -rf "$work"
    exit 0
}
trap stop TERM INT HUP

# run COMMAND...: in the background and waited for, so that a SIGTERM is handled at once
run() {
    "$@" &
    child=$!
    wait "$child"
    rc=$?
    child=""
    return "$rc"
}

# frr-reload.py turns into a command whatever the running config has and the new one does
# not: zebra shows "no ipv6 forwarding" when the node forwards no IPv6, so a config that says
# nothing about it would switch IPv6 forwarding on (and router advertisements off). Unless
# the config says otherwise, the node's forwarding stays as it is.
keep_forwarding() {
    grep -q 'forwarding' "$work/config" && return
    vtysh ${FRR_PATHSPACE:+-N "$FRR_PATHSPACE"} -c 'show running-config' 2>/dev/null |
        grep -E '^no ipv6? forwarding$'
}

set -- --reload --stdout
[ -n "${FRR_PATHSPACE:-}" ] && set -- "$@" --pathspace "$FRR_PATHSPACE"

while :; do
    # a copy: the file may be rewritten while it is being applied
    if [ -f "$config" ] && cp "$config" "$work/config"; then
        sha=$(sha256sum "$work/config" | cut -d' ' -f1)
        now=$(date +%s)
        if [ "$sha" != "$applied" ] &&
            { [ "$sha" != "$failed" ] || [ $((now - failed_at)) -ge "$RETRY" ]; }; then
            keep_forwarding >"$work/frr.conf"
            cat "$work/config" >>"$work/frr.conf"
            if run "$reload" "$@" "$work/frr.conf" >"$work/out" 2>&1; then
                result=applied applied=$sha failed=""
            else
                result=failed failed=$sha failed_at=$now
            fi
            { echo "$sha $result"; tail -n "$TAIL" "$work/out"; } >"$status.tmp" &&
                mv -f "$status.tmp" "$status"
        fi
    fi
    run sleep "$interval"
done
