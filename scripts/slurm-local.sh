#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, to try the cluster path of the workflow
# (`snakemake --profile workflows/profiles/slurm <target>`) without a cluster.
#
#   sudo scripts/slurm-local.sh          # (= up) start it, or check it is up; prints one status line
#   sudo scripts/slurm-local.sh status   # the status line only (exit 1 when not up)
#   sudo scripts/slurm-local.sh stop     # stop the daemons this script started
#
# Needs root and Debian/Ubuntu's packages:
#   apt-get install -y slurmctld slurmd slurm-client slurmdbd munge mariadb-server
# No systemd: the daemons are started directly. What it sets up, in order:
#   munge (auth key) -> MariaDB + slurmdbd (accounting: the executor plugin asks `sacct` for job
#   states) -> cluster, account and user in sacctmgr -> slurmctld -> slurmd (under `nice -n 19`,
#   so jobs yield the CPU to other work on the machine).
# The node is declared with `SlurmdParameters=config_overrides`, so it may be declared larger
# than the machine; by default it is declared as it is (CPUs, memory) plus GPUS count-only GPUs
# whose device files are made with mknod (nothing can run on them; the `gpu` partition and
# `--gpus=1` requests are scheduled exactly as on a real cluster). Partitions: `cpu` (default)
# and `gpu`, and `urgent`, which pre-empts them: a job submitted to `urgent` (PriorityTier 2)
# that needs the CPUs, memory or GPUs of running `cpu`/`gpu` jobs (PriorityTier 1) sends those
# back to the queue (`PreemptType=preempt/partition_prio`, `PreemptMode=REQUEUE`), as sites with
# a scavenger or owner partition do; nothing goes to `urgent` unless asked (`sbatch -p urgent`).
# Accounting is enforced (`AccountingStorageEnforce=associations`): a job needs a valid
# account, as on most real clusters. A node an administrator sets DOWN (`scontrol update
# nodename=... state=down reason=...`) stays down until `state=resume` (`ReturnToService=1`,
# the usual setting: only a node that was down for not responding comes back by itself); `up`
# resumes a node left down or drained.
#
# Settings (environment variables, read by `up`):
#   SLURM_LOCAL_CPUS     CPUs of the node          (default: nproc)
#   SLURM_LOCAL_MEM_MB   memory of the node in MB  (default: MemTotal minus 1 GB)
#   SLURM_LOCAL_GPUS     count-only GPUs           (default: 2)
#   SLURM_LOCAL_ACCOUNT  the account jobs use      (default: ltrbench; made the users' default
#                        account, which the profile uses when LTR_BENCH_SLURM_ACCOUNT is unset)
#   SLURM_LOCAL_FORCE=1  overwrite an /etc/slurm/slurm.conf this script did not write
# Re-running `up` after changing a setting rewrites the config and restarts slurmctld/slurmd.
set -euo pipefail

CLUSTER=ltrbench
ACCOUNT=${SLURM_LOCAL_ACCOUNT:-ltrbench}
CPUS=${SLURM_LOCAL_CPUS:-$(nproc)}
MEM_MB=${SLURM_LOCAL_MEM_MB:-$(($(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo) - 1024))}
GPUS=${SLURM_LOCAL_GPUS:-2}
HOST=$(hostname -s)
USERS=(root ${SUDO_USER:+"$SUDO_USER"})

ETC=/etc/slurm
MARK="# written by ltr-bench scripts/slurm-local.sh"
RUN=/run/slurm
LOG=/var/log/slurm
LIB=/var/lib/slurm
DB_SOCKET=/run/mysqld/mysqld.sock
DB_PIDFILE=/run/mysqld/mysqld.pid
DB_PASS_FILE=$ETC/.ltrbench-dbpass
GPU_DEV=/dev/ltrbench-gpu   # + index: count-only GPU device files

STARTED=$RUN/ltrbench-started   # a marker per daemon this script started (stop ends only those)

say() { echo "slurm-local: $*" >&2; }
die() { say "error: $*"; exit 1; }

alive() { # alive PIDFILE: the process in PIDFILE runs
    [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

wait_for() { # wait_for SECONDS WHAT COMMAND...: retry COMMAND until it succeeds
    local secs=$1 what=$2
    shift 2
    for ((i = 0; i < secs * 4; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.25
    done
    die "$what did not come up within ${secs}s; see $LOG/ and /var/log/mysql/"
}

require() {
    [[ $(id -u) == 0 ]] || die "must run as root (daemons, /etc/slurm, mknod): sudo $0 ${1:-up}"
    local missing=()
    for bin in munged mungekey mariadbd slurmdbd slurmctld slurmd sbatch sacct sacctmgr; do
        command -v "$bin" >/dev/null || [[ -x /usr/sbin/$bin ]] || missing+=("$bin")
    done
    ((${#missing[@]} == 0)) || die "missing ${missing[*]}: apt-get install -y slurmctld slurmd slurm-client slurmdbd munge mariadb-server"
}

# ---------------------------------------------------------------------------- munge
start_munge() {
    if [[ ! -s /etc/munge/munge.key ]]; then
        mungekey --create --keyfile=/etc/munge/munge.key
    fi
    chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
    if ! alive /run/munge/munged.pid; then
        runuser -u munge -- nice -n 19 /usr/sbin/munged
        touch "$STARTED/munged"
    fi
    wait_for 10 munged sh -c 'munge -n | unmunge'
}

# ---------------------------------------------------------------------------- MariaDB + slurmdbd
start_mariadb() {
    install -d -o mysql -g mysql -m 0755 /run/mysqld /var/log/mysql
    if [[ ! -d /var/lib/mysql/mysql ]]; then
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    fi
    if ! alive "$DB_PIDFILE"; then
        # local socket only; nohup + setsid: it outlives this script
        setsid nohup nice -n 19 /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql \
            --socket="$DB_SOCKET" --pid-file="$DB_PIDFILE" --skip-networking \
            --innodb-buffer-pool-size=256M --innodb-lock-wait-timeout=900 \
            >>/var/log/mysql/ltrbench-mariadb.log 2>&1 </dev/null &
        touch "$STARTED/mariadbd"
    fi
    wait_for 60 MariaDB mariadb --socket="$DB_SOCKET" -e 'select 1'
    if [[ ! -s $DB_PASS_FILE ]]; then
        (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$DB_PASS_FILE")
    fi
    local pass
    pass=$(cat "$DB_PASS_FILE")
    mariadb --socket="$DB_SOCKET" <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
}

write_slurmdbd_conf() {
    local pass
    pass=$(cat "$DB_PASS_FILE")
    (umask 077 && cat >"$ETC/slurmdbd.conf.new" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=$pass
EOF
    )
    chown slurm:slurm "$ETC/slurmdbd.conf.new"
    replace_if_changed "$ETC/slurmdbd.conf"
}

start_slurmdbd() {
    if ! alive $RUN/slurmdbd.pid || [[ $CHANGED_slurmdbd_conf == 1 ]]; then
        stop_pidfile slurmdbd $RUN/slurmdbd.pid
        nice -n 19 slurmdbd
    fi
    wait_for 60 slurmdbd sacctmgr -n list cluster
}

# ---------------------------------------------------------------------------- slurm.conf
replace_if_changed() { # replace_if_changed FILE: move FILE.new over FILE; CHANGED_<name>=1 if it differed
    local var=CHANGED_$(basename "$1" | tr '.-' '__')
    if [[ -f $1 ]] && cmp -s "$1.new" "$1"; then
        rm -f "$1.new"
        printf -v "$var" 0
    else
        mv "$1.new" "$1"
        printf -v "$var" 1
    fi
}

write_slurm_conf() {
    if [[ -f $ETC/slurm.conf ]] && ! grep -qF "$MARK" "$ETC/slurm.conf" && [[ ${SLURM_LOCAL_FORCE:-0} != 1 ]]; then
        die "$ETC/slurm.conf exists and was not written by this script; set SLURM_LOCAL_FORCE=1 to overwrite it"
    fi
    local gres="" gpu_files=""
    if ((GPUS > 0)); then
        gres=" Gres=gpu:$GPUS"
        gpu_files="$GPU_DEV[0-$((GPUS - 1))]"
    fi
    cat >"$ETC/slurm.conf.new" <<EOF
$MARK
ClusterName=$CLUSTER
SlurmctldHost=$HOST
SlurmUser=slurm
AuthType=auth/munge
MpiDefault=none
StateSaveLocation=$LIB/slurmctld
SlurmdSpoolDir=$LIB/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
# only a node that stopped responding returns by itself; one set DOWN waits for state=resume
ReturnToService=1
# no cgroups: plain process tracking, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# the node may be declared larger than the machine (SLURM_LOCAL_CPUS / SLURM_LOCAL_MEM_MB)
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
# accounting: sacct answers from slurmdbd; jobs need a valid account
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageEnforce=associations
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
# memory limits are enforced by polling (no cgroups): a job over its --mem is killed. UsePss:
# a job's memory is the sum of its processes' proportional set sizes, so pages a forked job
# shares with the job server it was forked from count once (as cgroup accounting counts them),
# not once per process
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=2
JobAcctGatherParams=OverMemoryKill,UsePss
# finished jobs stay visible to squeue/scontrol for 5 minutes
MinJobAge=300
KillWait=10
# pre-emption: a job of a higher PriorityTier partition (urgent) requeues the jobs whose
# resources it needs (the requeued job keeps its ID and waits 121 s, SLURM's credential
# lifetime, before it may start again)
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
GresTypes=gpu
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB$gres State=UNKNOWN
PartitionName=cpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=gpu Nodes=$HOST MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=$HOST MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
EOF
    replace_if_changed "$ETC/slurm.conf"
    {
        echo "$MARK"
        [[ -n $gpu_files ]] && echo "NodeName=$HOST Name=gpu File=$gpu_files"
    } >"$ETC/gres.conf.new"
    replace_if_changed "$ETC/gres.conf"
    for ((g = 0; g < GPUS; g++)); do # count-only GPUs: character devices nothing opens
        [[ -c $GPU_DEV$g ]] || mknod -m 0666 "$GPU_DEV$g" c 195 $((200 + g))
    done
}

# ---------------------------------------------------------------------------- accounts
register_cluster() {
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null
    fi
}

register_account() {
    if ! sacctmgr -n -P list account format=account | grep -qx "$ACCOUNT"; then
        sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" \
            description="ltr-bench local cluster" organization=ltr-bench >/dev/null
    fi
    for user in "${USERS[@]}"; do
        if ! sacctmgr -n -P list assoc cluster="$CLUSTER" account="$ACCOUNT" user="$user" format=user | grep -qx "$user"; then
            sacctmgr -i add user "$user" account="$ACCOUNT" cluster="$CLUSTER" >/dev/null
        fi
        if [[ $(sacctmgr -n -P show user "$user" format=DefaultAccount) != "$ACCOUNT" ]]; then
            sacctmgr -i modify user "$user" set DefaultAccount="$ACCOUNT" >/dev/null
        fi
    done
}

# ---------------------------------------------------------------------------- slurmctld / slurmd
start_slurm() {
    local reconf=0
    [[ $CHANGED_slurm_conf == 1 || $CHANGED_gres_conf == 1 ]] && reconf=1
    if ! alive $RUN/slurmctld.pid || ((reconf)); then
        stop_pidfile slurmctld $RUN/slurmctld.pid
        nice -n 19 slurmctld
    fi
    wait_for 60 slurmctld scontrol ping
    if ! alive $RUN/slurmd.pid || ((reconf)); then
        stop_pidfile slurmd $RUN/slurmd.pid
        nice -n 19 slurmd
    fi
    wait_for 60 "slurmd on $HOST" sh -c "sinfo -h -n '$HOST' -o %T | grep -Eqv 'unk|down|drain|not_responding'"
    # a node left down/drained by an earlier run or a changed declaration
    if sinfo -h -n "$HOST" -o %T | grep -Eq 'down|drain'; then
        scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
    fi
}

# ---------------------------------------------------------------------------- stop / status
stop_pidfile() { # stop_pidfile NAME PIDFILE: TERM the process in PIDFILE and wait for it
    local name=$1 pidfile=$2 pid
    alive "$pidfile" || return 0
    pid=$(cat "$pidfile")
    kill -TERM "$pid"
    for ((i = 0; i < 120; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.25
    done
    say "$name (pid $pid) did not stop within 30s"
    return 1
}

status_line() { # one line; exit 0 when the cluster accepts and accounts jobs
    local problems=() node parts
    alive /run/munge/munged.pid || problems+=("munged down")
    alive "$DB_PIDFILE" || problems+=("MariaDB down")
    alive $RUN/slurmdbd.pid || problems+=("slurmdbd down")
    alive $RUN/slurmctld.pid || problems+=("slurmctld down")
    alive $RUN/slurmd.pid || problems+=("slurmd down")
    if ((${#problems[@]} == 5)); then
        echo "slurm-local: down (no daemon running; start: sudo $0 up)"
        return 1
    fi
    node=$(sinfo -h -n "$HOST" -o '%T CPUs=%c mem=%mMB %G' 2>/dev/null | head -n 1 || true)
    parts=$(sinfo -h -o %P 2>/dev/null | sort -u | tr '\n' ' ' || true)
    sacctmgr -n -P list assoc cluster="$CLUSTER" account="$ACCOUNT" user=root format=user 2>/dev/null |
        grep -qx root || problems+=("no association root/$ACCOUNT")
    if ((${#problems[@]})); then
        echo "slurm-local: DEGRADED (${problems[*]}); node $HOST: ${node:-unknown}; logs in $LOG/"
        return 1
    fi
    echo "slurm-local: up: cluster $CLUSTER, node $HOST ${node}, partitions ${parts% }, account $ACCOUNT (users ${USERS[*]}), accounting via slurmdbd"
}

cmd_up() {
    require up
    install -d -m 0755 "$ETC"
    install -d -o slurm -g slurm -m 0755 "$RUN" "$LOG" "$LIB" "$LIB/slurmctld"
    install -d -m 0755 "$STARTED" "$LIB/slurmd"
    start_munge
    start_mariadb
    write_slurm_conf        # sacctmgr reads it too
    write_slurmdbd_conf
    start_slurmdbd
    register_cluster
    start_slurm
    register_account
    status_line
}

cmd_stop() {
    require stop
    local running=0
    for name in slurmd slurmctld slurmdbd; do
        alive $RUN/$name.pid && running=1
        stop_pidfile $name $RUN/$name.pid
    done
    # MariaDB and munged only when this script started them (other services may use them)
    [[ -e $STARTED/mariadbd ]] && stop_pidfile mariadbd "$DB_PIDFILE" && rm -f "$STARTED/mariadbd"
    [[ -e $STARTED/munged ]] && stop_pidfile munged /run/munge/munged.pid && rm -f "$STARTED/munged"
    echo "slurm-local: stopped (config kept in $ETC, accounting database in /var/lib/mysql)"
}

case ${1:-up} in
    up) cmd_up ;;
    stop) cmd_stop ;;
    status) status_line ;;
    *) die "usage: $0 [up|stop|status]" ;;
esac
