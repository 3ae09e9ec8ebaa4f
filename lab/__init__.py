"""The built-in lab: simulated Fedora-shaped nodes on one Linux machine (see docs/lab.md)."""
