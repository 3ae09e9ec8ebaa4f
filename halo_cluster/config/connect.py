"""The one bound on reaching a node's SSH, TCP connect and banner alike, for every command: ssh's
ConnectTimeout (tools/sshconfig.py) and the deploy's paramiko (config/hostdata.py), whose own
banner wait is 15 s, so a node that accepts and never greets is said within docs/ci.md's 15 s by
every command. Not a config key: no cluster.yml changes it."""

CONNECT_SECONDS = 10
