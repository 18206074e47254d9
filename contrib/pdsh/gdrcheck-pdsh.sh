#!/bin/bash
# Sweep nodes with pdsh: every node prints its gdrcheck report as one JSON line, pdsh prefixes it
# with `node: `, and `gdrcheck fleet summarize` reads the stream.
#
#   gdrcheck-pdsh.sh HOSTLIST [extra `gdrcheck pairs` arguments]
#   gdrcheck-pdsh.sh 'gpu[001-128]'
#
# Exit status: the summary's (0 all alike and passing, 1 outliers or failures, 3 missing or unknown
# nodes, 2 unreadable reports). Node stderr goes to this stderr, prefixed by pdsh.
#
# Settings: PDSH_OPTS (extra pdsh options, split on spaces, e.g. "-R ssh -l admin" or "-R exec"),
# GDRCHECK (binary on the nodes and here, default gdrcheck), GDRCHECK_TIMEOUT (per node, default 100),
# GDRCHECK_FANOUT (default 256). pdsh's command timeout (-u) is the node deadline plus 20 s.
set -u

if [ $# -lt 1 ]; then
    echo "usage: $0 HOSTLIST [gdrcheck pairs arguments...]" >&2
    exit 2
fi
nodes="$1"
shift

GDRCHECK="${GDRCHECK:-gdrcheck}"
timeout="${GDRCHECK_TIMEOUT:-100}"
read -r -a pdsh_opts <<<"${PDSH_OPTS:-}"

# The command goes as separate words: the exec module runs them as argv (with %h replaced by the
# node name), ssh joins them into one remote command line.
pdsh -S "${pdsh_opts[@]}" -w "$nodes" -f "${GDRCHECK_FANOUT:-256}" -u "$((${timeout%.*} + 20))" \
    "$GDRCHECK" pairs --jsonl --timeout "$timeout" "$@" |
    "$GDRCHECK" fleet summarize --input-format prefixed --expect "$nodes" -
rc=("${PIPESTATUS[@]}")
echo "pdsh exit status (the highest node status): ${rc[0]}" >&2
exit "${rc[1]}"
