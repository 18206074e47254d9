#!/bin/bash
# Slurm Prolog gate: a node where GPUDirect RDMA will not work does not start the job.
#
# Install as /etc/slurm/prolog.d/50-gdrcheck.sh (slurm.conf: Prolog=/etc/slurm/prolog.d/*), mode 0755.
# Any non-zero exit drains the node and requeues the job held: that includes "could not decide" (3)
# and a broken install (2). Slurm takes no reason from a prolog, so the one-line result goes to syslog
# (tag gdrcheck-prolog); `journalctl -t gdrcheck-prolog` on the node says why it drained.
# No scontrol here: draining is Slurm's job. Set PrologEpilogTimeout, and keep the deadline short.
#
# Settings: GDRCHECK (binary), GDRCHECK_REQUIRE (default gdr), GDRCHECK_PROLOG_TIMEOUT (default 15).

GDRCHECK="${GDRCHECK:-/usr/local/bin/gdrcheck}"
[ -x "$GDRCHECK" ] || GDRCHECK=gdrcheck

out=$("$GDRCHECK" check --require "${GDRCHECK_REQUIRE:-gdr}" --timeout "${GDRCHECK_PROLOG_TIMEOUT:-15}" \
      --format nhc 2>/dev/null)
rc=$?
if [ "$rc" -ne 0 ]; then
    logger -t gdrcheck-prolog -- "job ${SLURM_JOB_ID:-?}: exit $rc: ${out:-gdrcheck could not run}" 2>/dev/null || true
fi
exit "$rc"
