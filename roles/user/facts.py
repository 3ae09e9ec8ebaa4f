"""What the user role reads about the cluster user besides the snapshot's /etc/passwd: the
account as NSS sees it, so that a user of SSSD or LDAP, in no local file, counts as existing."""

from __future__ import annotations

import shlex
from typing import TypedDict

from pyinfra.api import FactBase


class Account(TypedDict):
    name: str
    uid: int
    home: str


class UserAccount(FactBase["Account | None"]):
    """`getent passwd USER` (every NSS source: files, sss, ldap); None when no source has it."""

    @staticmethod
    def default() -> Account | None:
        return None

    def command(self, user: str) -> str:
        # getent exits 2 for an unknown name: that is an answer, not a failed read
        return f"getent passwd {shlex.quote(user)} || true"

    def process(self, output: list[str]) -> Account | None:
        for line in output:
            fields = line.split(":")
            if len(fields) >= 7 and fields[2].isdigit():
                return Account(name=fields[0], uid=int(fields[2]), home=fields[5])
        return None
