#!/usr/bin/env bash
# kg-fuse's calls against the running platform, as its two accounts: sign in, make an
# ontology, ingest a small markdown file, wait for the job, search, read a concept, delete
# the document and the ontology; and the contributor is no administrator (403 where admin
# gets 200). Each step prints its HTTP code; the first unexpected one stops with exit 1.
# usage: check.sh PLATFORM_ENV (the file scripts/platform.sh up writes; platform.sh check)
set -euo pipefail
[ -f "${1:-}" ] || { echo "check.sh: no platform.env (run scripts/platform.sh up)" >&2; exit 1; }
# shellcheck source=/dev/null
. "$1"
A=$KG_PLATFORM_URL
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ONTOLOGY="Harness Check $$"
ONTOLOGY_PATH="Harness%20Check%20$$"

# call EXPECTED-CODE WHAT CURL-ARGS...: the answer's body in $TMP/body
call() {
    local want=$1 what=$2 code
    shift 2
    code=$(curl -s -m 60 -o "$TMP/body" -w '%{http_code}' "$@")
    if [ "$code" = "$want" ]; then
        printf 'ok    %-58s %s\n' "$what" "$code"
    else
        printf 'FAIL  %-58s %s (wanted %s)\n' "$what" "$code" "$want"
        head -c 600 "$TMP/body"; echo
        exit 1
    fi
}

# sign_in USER PASSWORD: a personal OAuth client, then a client_credentials token, in
# $CLIENT and $TOKEN
sign_in() {
    call 201 "POST /auth/oauth/clients/personal ($1)" -X POST "$A/auth/oauth/clients/personal" \
        --data-urlencode "username=$1" --data-urlencode "password=$2" -d client_name=kg-fuse-check
    local id secret
    id=$(jq -r .client_id "$TMP/body")
    secret=$(jq -r .client_secret "$TMP/body")
    call 200 "POST /auth/oauth/token client_credentials ($1)" -X POST "$A/auth/oauth/token" \
        -d grant_type=client_credentials --data-urlencode "client_id=$id" \
        --data-urlencode "client_secret=$secret"
    CLIENT=$id
    TOKEN=$(jq -r .access_token "$TMP/body")
}

call 200 "GET /health" "$A/health"
sign_in "$KG_PLATFORM_ADMIN_USER" "$KG_PLATFORM_ADMIN_PASSWORD"
ADMIN_CLIENT=$CLIENT ADMIN_TOKEN=$TOKEN
sign_in "$KG_PLATFORM_CONTRIBUTOR_USER" "$KG_PLATFORM_CONTRIBUTOR_PASSWORD"
CONTRIB_CLIENT=$CLIENT CONTRIB_TOKEN=$TOKEN
AH="Authorization: Bearer $ADMIN_TOKEN"
CH="Authorization: Bearer $CONTRIB_TOKEN"
JSON="Content-Type: application/json"

call 201 "POST /ontology/ (admin)" -H "$AH" -H "$JSON" -X POST "$A/ontology/" \
    -d "{\"name\":\"$ONTOLOGY\"}"
printf '# Graph databases\nApache AGE adds openCypher graph queries to PostgreSQL. Knowledge graphs store concepts as vertices and relationships as edges. Semantic search ranks concepts by cosine similarity between sentence embeddings.\n' >"$TMP/check.md"
call 200 "POST /ingest (admin)" -H "$AH" -X POST "$A/ingest" -F "file=@$TMP/check.md" \
    -F "ontology=$ONTOLOGY" -F auto_approve=true
JOB=$(jq -r .job_id "$TMP/body")
STATUS=""
for _ in $(seq 1 90); do
    STATUS=$(curl -s -m 10 -H "$AH" "$A/jobs/$JOB" | jq -r .status)
    case $STATUS in completed | failed | cancelled) break ;; esac
    sleep 2
done
call 200 "GET /jobs/{id} (admin): $STATUS" -H "$AH" "$A/jobs/$JOB"
[ "$STATUS" = completed ] || { jq -c '{status,error}' "$TMP/body"; exit 1; }

SEARCH='{"query":"graph queries in PostgreSQL","limit":5,"min_similarity":0.3}'
call 200 "POST /query/search (admin)" -H "$AH" -H "$JSON" -X POST "$A/query/search" -d "$SEARCH"
CONCEPT=$(jq -r '.results[0].concept_id // empty' "$TMP/body")
[ -n "$CONCEPT" ] || { echo "FAIL  the search found nothing"; exit 1; }
echo "      $(jq -c '{count, top: (.results[0] | {label: .label, score: .score})}' "$TMP/body")"
call 200 "GET /query/concept/{id} (admin)" -H "$AH" "$A/query/concept/$CONCEPT"
call 200 "POST /query/search (contributor)" -H "$CH" -H "$JSON" -X POST "$A/query/search" -d "$SEARCH"
[ "$(jq -r '.results[0].concept_id // empty' "$TMP/body")" = "$CONCEPT" ] \
    || { echo "FAIL  the contributor's search did not find what admin's did"; exit 1; }
call 403 "GET /admin/config/search-threshold (contributor)" -H "$CH" "$A/admin/config/search-threshold"
call 200 "GET /admin/config/search-threshold (admin)" -H "$AH" "$A/admin/config/search-threshold"

call 200 "GET /catalog/children (admin)" -H "$AH" "$A/catalog/children?limit=500"
OID=$(jq -r --arg n "$ONTOLOGY" '.nodes[] | select(.name == $n) | .id' "$TMP/body")
call 200 "GET /catalog/children of the ontology (admin)" -H "$AH" \
    "$A/catalog/children?parent=$OID&parent_kind=ontology&limit=200"
DOC=$(jq -r '.nodes[0].id' "$TMP/body")
call 200 "DELETE /documents/{id} (admin)" -H "$AH" -X DELETE "$A/documents/$DOC"
call 200 "DELETE /ontology/{name} (admin)" -H "$AH" -X DELETE "$A/ontology/$ONTOLOGY_PATH"
call 204 "DELETE /auth/oauth/clients/personal/{id} (admin)" -H "$AH" -X DELETE \
    "$A/auth/oauth/clients/personal/$ADMIN_CLIENT"
call 204 "DELETE /auth/oauth/clients/personal/{id} (contributor)" -H "$CH" -X DELETE \
    "$A/auth/oauth/clients/personal/$CONTRIB_CLIENT"
echo "check passed"
