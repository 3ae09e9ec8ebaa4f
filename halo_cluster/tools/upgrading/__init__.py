"""The upgrade machine: `halo-cluster upgrade` (the image), `rollback` and `upgrade --os` (the
kernel and firmware), two sets of phases over one shared part (docs/architecture.md, Tools).

    machine.py    the exit codes (commands/exits.py's), `Stop`, the history line, the deploy's
                  command line, the completion's judgement, `Reach`: the cluster as both reach it
    nodes.py      `Nodes`, the real `Reach` over tools/transport.py, and the start-up both share
    imagegate.py  the image phases' shared part: the gate, the bench gate, the prune, the lock
    image.py      the image upgrade's phases P0-P4; rollback.py the way back (R)
    imagenodes.py the image phases' own reach of a real cluster (pull, switch, poller, prune)
    imagemain.py  `upgrade` and `rollback`'s start-up and --json
    kernels.py    `upgrade --os`: its targets, the nodes' read and the dnf/GRUB scripts
    osgate.py     `upgrade --os`: what a node is observed to be, and the gate's checks
    osupgrade.py  `upgrade --os`'s phases P0-P2 and start-up

The unit tests answer both sets of phases with one fake cluster (tests/unit/helpers_upgrade.py).
"""
