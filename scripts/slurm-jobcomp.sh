#!/bin/sh
# Slurm jobcomp/script hook (slurm.conf: JobCompType=jobcomp/script, JobCompLoc=<this file>):
# slurmctld runs it once per finished job with the job's facts in the environment (JOBID,
# USERNAME, UID, PARTITION, JOBSTATE, START, END, NODES, ...). It writes that environment,
# NUL-separated, into the spool directory Stoker's cost ledger reads (ReadJobCompSpool in
# src/slurm/jobstats.h), atomically (temporary file + rename), so nothing polls sacct.
# The spool is $STOKER_JOBCOMP_SPOOL, else the directory of this script's slurm.conf + /jobcomp.
set -eu
spool=${STOKER_JOBCOMP_SPOOL:-}
if [ -z "$spool" ]; then
  spool=$(dirname "${SLURM_CONF:-/etc/slurm/slurm.conf}")/jobcomp
fi
mkdir -p "$spool"
case ${JOBID:-} in
  '' | *[!0-9]*) echo "slurm-jobcomp: JOBID missing or not a number" >&2; exit 1 ;;
esac
tmp="$spool/.$JOBID.$$"
env -0 >"$tmp"
mv "$tmp" "$spool/$JOBID.env"
