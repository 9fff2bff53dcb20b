"""What the upstream benchmark scripts in tools/ share (issue 45): a free
loopback port and waiting until something listens on one. Imported by
name: the scripts run from this folder, which Python puts first on
sys.path."""

import socket
import sys
import time


def free_port():
    """A TCP port free on 127.0.0.1 now (the OS's pick)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening(port, seconds=20):
    """Returns once something accepts on 127.0.0.1:`port`; exits the
    script after `seconds` without."""
    deadline = time.time() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.time() > deadline:
                sys.exit(f"nothing listens on {port}")
            time.sleep(0.05)
