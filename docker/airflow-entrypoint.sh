#!/bin/sh
# Entry point of the compose deployment's Airflow services: the web/API login comes from the
# environment (AIRFLOW_ADMIN_USER, AIRFLOW_ADMIN_PASSWORD), never from a file in the image.
set -eu
: "${AIRFLOW_ADMIN_PASSWORD:?set AIRFLOW_ADMIN_PASSWORD (see docker/compose.env.example)}"
user="${AIRFLOW_ADMIN_USER:-admin}"
mkdir -p "$AIRFLOW_HOME"
umask 077
python -c 'import json, os, sys; json.dump({sys.argv[1]: os.environ["AIRFLOW_ADMIN_PASSWORD"]}, open(sys.argv[2], "w"))' \
    "$user" "$AIRFLOW_HOME/passwords.json"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="$user:admin"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/passwords.json"
exec "$@"
