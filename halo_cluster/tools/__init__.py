"""The command-line tools around the deploy: halo-cluster and its commands."""
