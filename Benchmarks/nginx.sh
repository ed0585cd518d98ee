# shellcheck shell=bash
# A private nginx on 127.0.0.1 serving one folder, for benchmarks that need a real HTTP origin.
# Source it, then:
#
#   nginx_serve DIR          # starts nginx (Debian's nginx) on a free port for DIR;
#                            # sets NGINX_PORT, NGINX_URL (http://127.0.0.1:PORT) and NGINX_PID
#   on_exit 'COMMAND'        # runs COMMAND when the script ends (nginx_serve registers its own stop)
#
# nginx runs in the foreground of a background job (`daemon off`), with its configuration,
# pid file, logs and temporary folders in a private folder under $TMPDIR. The script that sourced
# this owns it: on EXIT, and on INT or TERM (which exit with 130 / 143 so that EXIT runs too),
# nginx is stopped by its pid, waited for, and its folder removed. Nothing else is touched.

_on_exit_commands=()

# Runs the registered commands, last registered first.
_run_exit_commands() {
  local i
  for ((i = ${#_on_exit_commands[@]} - 1; i >= 0; i--)); do eval "${_on_exit_commands[i]}" || true; done
  _on_exit_commands=()
}

on_exit() {
  _on_exit_commands+=("$1")
}

trap _run_exit_commands EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

_nginx_stop() {
  if [ -n "${NGINX_PID:-}" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
    # SIGQUIT: a graceful stop of the master and its workers.
    kill -QUIT "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
  fi
  [ -n "${_nginx_dir:-}" ] && rm -rf "$_nginx_dir"
  NGINX_PID=""
}

# nginx_serve DIR [WORKERS]: serves DIR's files (sendfile, keep-alive, no access log).
nginx_serve() {
  local root workers attempt port
  root=$(cd "$1" && pwd)
  workers=${2:-1}
  command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || {
    echo "nginx.sh: nginx is not installed (scripts/setup.sh nginx)" >&2
    return 1
  }
  # Started as root, nginx's workers would drop to `nobody`, who may not read DIR: they run
  # as DIR's owner instead.
  local user_line=""
  [ "$(id -u)" -eq 0 ] && user_line="user $(stat -c %U "$root") $(stat -c %G "$root");"
  _nginx_dir=$(mktemp -d "${TMPDIR:-/tmp}/vipsload-nginx.XXXXXX")
  on_exit _nginx_stop
  mkdir -p "$_nginx_dir/temp"
  for attempt in $(seq 1 20); do
    # A random high port; a taken one makes nginx exit at once, and the next is tried.
    port=$((20000 + RANDOM % 40000))
    cat >"$_nginx_dir/nginx.conf" <<EOF
daemon off;
$user_line
worker_processes $workers;
pid $_nginx_dir/nginx.pid;
error_log $_nginx_dir/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  types { image/jpeg jpg jpeg; image/png png; image/webp webp; image/avif avif; image/gif gif; }
  default_type application/octet-stream;
  client_body_temp_path $_nginx_dir/temp/body;
  proxy_temp_path $_nginx_dir/temp/proxy;
  fastcgi_temp_path $_nginx_dir/temp/fastcgi;
  uwsgi_temp_path $_nginx_dir/temp/uwsgi;
  scgi_temp_path $_nginx_dir/temp/scgi;
  server {
    listen 127.0.0.1:$port;
    root $root;
  }
}
EOF
    PATH="$PATH:/usr/sbin" nginx -p "$_nginx_dir" -c "$_nginx_dir/nginx.conf" -e "$_nginx_dir/error.log" \
      2>>"$_nginx_dir/error.log" &
    NGINX_PID=$!
    # Ready when it answers; gone when the port was taken.
    local tries
    for tries in $(seq 1 100); do
      if ! kill -0 "$NGINX_PID" 2>/dev/null; then break; fi
      if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
        NGINX_PORT=$port
        NGINX_URL="http://127.0.0.1:$port"
        return 0
      fi
      sleep 0.05
    done
    kill -QUIT "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=""
  done
  echo "nginx.sh: nginx did not start; its log:" >&2
  cat "$_nginx_dir/error.log" >&2
  return 1
}
