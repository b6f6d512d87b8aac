#!/usr/bin/env python3
"""vtools: video tools for agents inside the sandbox (placeholder; issue 6 fills it in).

Kept free of statebox imports: it is copied into the sandbox image as /usr/local/bin/vtools.
"""
import sys

if __name__ == "__main__":
    print("vtools: not built yet", file=sys.stderr)
    sys.exit(1)
