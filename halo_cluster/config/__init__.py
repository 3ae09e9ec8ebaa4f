"""Cluster.yml read, checked and derived into host data."""
