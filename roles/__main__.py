"""`python -m halo_cluster.roles`: write the generated tables into the docs (`roles/docs.py`: the
keys, the vLLM flags, the owned kernel arguments); `--check`: exit 1 naming each page whose table
is missing or stale, changing nothing."""

import sys

from halo_cluster.roles import docs


def main(check: bool) -> int:
    for page in [] if check else docs.write():
        print(f"{page.relative_to(docs.ROOT)}: generated tables written")
    stale = docs.stale()
    for page in stale:
        problem = (
            "a generated table is missing or stale"
            if page.exists()
            else "missing: its role has keys"
        )
        print(f"{page.relative_to(docs.ROOT)}: {problem}", file=sys.stderr)
    return 1 if stale else 0


sys.exit(main("--check" in sys.argv[1:]))
