"""The deploy's side of the head's warm-up (warmup.py, docs/roles/serve.md "The warm-up"): once
the configured cluster answers, the wait for serving waits while the warm-up runs, then says what
its history lines say: each model's seconds, or a WARN with why it failed. A failed warm-up never
fails the deploy: vLLM serves, and its first request pays what the warm-up did not."""

from __future__ import annotations

import shlex

from pyinfra import logger

from halo_cluster.config.lock import HISTORY
from halo_cluster.config.serving import WARMUP_SERVICE, warmup_wait
from halo_cluster.node.facts import as_user
from halo_cluster.roles.serve import warmup

CLOCK = f"date -u +{warmup.TIME}"  # the head's clock, in the history's format
TAIL_LINES = 200  # the history's last lines the warm-up's are looked for in


def clock(host) -> str:
    """The head's time now, in the history's format ("" when it cannot say)."""
    _, found = host.run_shell_command(CLOCK)
    return found.stdout.strip()


def summary(found: list[dict], models: list[str]) -> tuple[str, list[str]]:
    """What the serving line adds ("" when no warm-up line was found) and the WARN lines: each
    model's last warm-up line of this start."""
    last = {str(event.get("model")): event for event in found}
    done, warnings = [], []
    for model in models:
        event = last.get(model)
        if event is None:
            warnings.append(f"no warm-up line for {model} in the head's history")
        elif event.get("ok"):
            done.append(f"{model} in {float(event.get('seconds', 0)):.1f} s")
        else:
            warnings.append(f"the warm-up of {model} failed: {event.get('reason', 'no reason')}")
    return (f" (warmed up: {', '.join(done)})" if done else ""), warnings


def warmed(host, user: str, since: str, models: list[str], seconds: int) -> str:
    """Wait at most `seconds` while the head's warm-up runs, then say its WARNs; what the
    serving line adds."""
    waited, _ = host.run_shell_command(as_user(user, f"sh -c {shlex.quote(warmup_wait(seconds))}"))
    if not waited:
        logger.warning(
            f"{host.print_prefix}the warm-up still runs after {seconds} s "
            f"(journalctl --user -u {WARMUP_SERVICE}): serving without it"
        )
        return ""
    read = f'tail -n {TAIL_LINES} "$HOME/{HISTORY}" 2>/dev/null'
    _, lines = host.run_shell_command(as_user(user, f"sh -c {shlex.quote(read)}"))
    added, warnings = summary(warmup.results(lines.stdout.splitlines(), since), models)
    for line in warnings:
        logger.warning(f"{host.print_prefix}{line} (journalctl --user -u {WARMUP_SERVICE})")
    return added
