#!/usr/bin/env python3
"""statebox-relay: TCP 127.0.0.1 -> gateway unix socket, inside the container (placeholder; issue 5).

Kept free of statebox imports: it is copied into the sandbox image as /usr/local/bin/statebox-relay.
"""
import sys

if __name__ == "__main__":
    print("statebox-relay: not built yet", file=sys.stderr)
    sys.exit(1)
