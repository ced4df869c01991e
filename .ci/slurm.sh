#!/bin/bash
# .ci/slurm.sh: starts a one-node Slurm cluster on this machine (Debian's slurm-wlm and
# munge: munged, slurmctld and slurmd on localhost) for the partitioned-build test
# (cmd/warehouse-etl TestSlurmPartitionedBuild), and prints the environment that test
# needs. Needs root (slurmd runs jobs as their submitting user). Idempotent: an already
# running cluster is left alone.
#
#   eval "$(bash .ci/slurm.sh)"      # exports WAREHOUSE_TEST_SLURM=1 once the node is idle
set -euo pipefail

conf=/etc/slurm/slurm.conf
state=/var/spool/slurmctld
mkdir -p /etc/slurm "$state" /var/spool/slurmd /var/log/slurm /run/munge /var/lib/munge /var/log/munge /etc/munge

if ! pgrep -x munged >/dev/null; then
	if [ ! -s /etc/munge/munge.key ]; then
		dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
	fi
	chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
	chmod 0700 /etc/munge /var/lib/munge /var/log/munge
	chmod 0400 /etc/munge/munge.key
	chmod 0755 /run/munge
	if id munge >/dev/null 2>&1; then
		runuser -u munge -- /usr/sbin/munged
	else
		/usr/sbin/munged --force
	fi
fi

host=$(hostname -s)
# config_overrides: the node offers 4 CPUs whatever the machine has, so a 3-task
# array runs at once on a 2-core CI machine; no cgroups (containers rarely allow them).
cat >"$conf" <<CONF
ClusterName=ci
SlurmctldHost=$host
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$state
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SchedulerParameters=defer_batch
MinJobAge=600
NodeName=$host CPUs=4 RealMemory=4096 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF

if ! pgrep -x slurmctld >/dev/null; then
	/usr/sbin/slurmctld -i
fi
if ! pgrep -x slurmd >/dev/null; then
	/usr/sbin/slurmd
fi
for _ in $(seq 60); do
	st=$(sinfo -h -N -o '%T' 2>/dev/null | head -1 || true)
	case $st in
	idle* | mixed* | allocated*)
		echo "export WAREHOUSE_TEST_SLURM=1"
		exit 0
		;;
	esac
	sleep 1
done
echo "slurm.sh: the node did not come up (state '${st:-none}')" >&2
tail -20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
