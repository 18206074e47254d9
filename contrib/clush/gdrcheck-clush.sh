#!/bin/bash
# Sweep nodes with ClusterShell: one gdrcheck report per node, then one fleet summary.
#
#   gdrcheck-clush.sh NODESET OUTDIR [extra `gdrcheck pairs` arguments]
#   gdrcheck-clush.sh @gpu reports
#
# clush writes each node's stdout to OUTDIR/<node> (--outdir) and its stderr to OUTDIR.err/<node>;
# then `gdrcheck fleet summarize --expect NODESET OUTDIR` compares them. Works on drained nodes too
# (no scheduler involved). Exit status: the summary's (0 all alike and passing, 1 outliers or
# failures, 3 missing or unknown nodes, 2 unreadable reports).
#
# Settings: CLUSH_OPTS (extra clush options, split on spaces, e.g. "-l admin" or "-R exec"),
# GDRCHECK (binary on the nodes and here, default gdrcheck), GDRCHECK_TIMEOUT (per node, default 100),
# GDRCHECK_FANOUT (default 256). clush's own deadline (-u) is the node deadline plus 20 s.
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 NODESET OUTDIR [gdrcheck pairs arguments...]" >&2
    exit 2
fi
nodes="$1" out="$2"
shift 2

GDRCHECK="${GDRCHECK:-gdrcheck}"
timeout="${GDRCHECK_TIMEOUT:-100}"
read -r -a clush_opts <<<"${CLUSH_OPTS:-}"

remote="$(printf '%q ' "$GDRCHECK" pairs --json --timeout "$timeout" "$@")"
mkdir -p "$out" "$out.err" || exit 2

clush "${clush_opts[@]}" -w "$nodes" -f "${GDRCHECK_FANOUT:-256}" -u "$((${timeout%.*} + 20))" \
    --outdir="$out" --errdir="$out.err" "$remote" >/dev/null
echo "clush exit status: $?" >&2

"$GDRCHECK" fleet summarize --expect "$nodes" "$out"
