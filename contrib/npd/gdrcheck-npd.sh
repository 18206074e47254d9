#!/bin/bash
# node-problem-detector custom plugin: is GPUDirect RDMA (gdr), GPU peer-to-peer (p2p) or
# GPUDirect Storage (gds) broken on this node?
#
#   gdrcheck-npd.sh gdr|p2p|gds
#
# Plugin protocol: exit 0 OK, 1 problem (the rule's condition becomes True), 2 unknown; one line on
# stdout, at most 80 bytes (max_output_length), the finding code first.
#
# Bash only, for the stock NPD image (no Python there): it reads the result the gdrcheck DaemonSet
# (contrib/k8s/gdrcheck-daemonset.yaml) precomputed in /run/gdrcheck/npd/<check>.result
# (line 1: `gdrcheck check --format npd` exit status, line 2: its line). In an image that has
# gdrcheck, and with no precomputed result, it runs gdrcheck itself.
#
# Settings: GDRCHECK_NPD_DIR (default /run/gdrcheck/npd), GDRCHECK_NPD_MAX_AGE seconds after which a
# result is stale (default 900; the DaemonSet writes every 300), GDRCHECK (binary),
# GDRCHECK_NPD_TIMEOUT (default 25, below the rule's 30 s).
export LC_ALL=C
readonly OK=0 NONOK=1 UNKNOWN=2

say() {
    local line="${1%%$'\n'*}"
    printf '%.80s\n' "$line"
}

check="${1:-}"
case "$check" in
    gdr|p2p|gds) ;;
    *) say "USAGE gdrcheck-npd.sh gdr|p2p|gds, not '${check}'"; exit "$UNKNOWN" ;;
esac

dir="${GDRCHECK_NPD_DIR:-/run/gdrcheck/npd}"
max_age="${GDRCHECK_NPD_MAX_AGE:-900}"
result="$dir/$check.result"

status_of() {
    case "$1" in
        0) echo "$OK" ;;
        1) echo "$NONOK" ;;
        *) echo "$UNKNOWN" ;;
    esac
}

if [ -r "$result" ]; then
    now=$(date +%s)
    mtime=$(stat -c %Y "$result" 2>/dev/null || echo 0)
    age=$((now - mtime))
    if [ "$age" -gt "$max_age" ]; then
        say "STALE gdrcheck result for $check is ${age}s old (limit ${max_age}s)"
        exit "$UNKNOWN"
    fi
    rc="" msg=""
    { IFS= read -r rc; IFS= read -r msg; } <"$result"
    say "${msg:-NORESULT gdrcheck exit ${rc:-?} without a line}"
    exit "$(status_of "$rc")"
fi

bin="${GDRCHECK:-gdrcheck}"
if command -v "$bin" >/dev/null 2>&1; then
    msg=$("$bin" check --format npd --require "$check" --timeout "${GDRCHECK_NPD_TIMEOUT:-25}" 2>/dev/null)
    rc=$?
    say "${msg:-NORESULT gdrcheck exit $rc without a line}"
    exit "$(status_of "$rc")"
fi

say "NORESULT no gdrcheck result in $dir and no gdrcheck binary"
exit "$UNKNOWN"
