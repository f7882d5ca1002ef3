# Sourced by the .ci scripts that call a running demo. `start_demo` starts
# target/debug/devicecloud demo on loopback ports in a scratch directory (stopped and removed when
# the script exits), waits for its lines, and sets `base` (http://127.0.0.1:<port>), `client_id`
# and `client_secret` from them, and `work`, the scratch directory.
start_demo() {
    work=$(mktemp -d)
    DEVICECLOUD_HTTP_ADDR=127.0.0.1:0 DEVICECLOUD_MQTT_ADDR=127.0.0.1:0 DEVICECLOUD_DATA_DIR="$work" \
        target/debug/devicecloud demo >"$work/demo.out" 2>"$work/demo.err" &
    demo=$!
    trap 'kill $demo 2>/dev/null || true; wait $demo 2>/dev/null || true; rm -rf "$work"' EXIT
    for _ in $(seq 1 60); do
        grep -q '^  get a token' "$work/demo.out" 2>/dev/null && break
        sleep 1
    done
    base=$(sed -n 's/^listening http=\([^ ]*\) .*/http:\/\/\1/p' "$work/demo.out")
    client_id=$(sed -n 's/.*client_id=\([^ ]*\) client_secret=.*/\1/p' "$work/demo.out")
    client_secret=$(sed -n 's/.*client_secret=\([^ ]*\)$/\1/p' "$work/demo.out")
}
