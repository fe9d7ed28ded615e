# free-port.sh is sourced by the with-*.sh scripts. It defines free_port,
# which prints a loopback TCP port nobody listens on; it calls the
# sourcing script's log function when it finds none.

free_port() {
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' && return
	fi
	local p
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 40000))
		# A refused connection means the port is free.
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	log "found no free port"
	return 1
}
