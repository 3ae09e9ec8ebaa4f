"""`python -m roles`: the table of every cluster.yml key, for docs/configuration.md."""

import roles

print(roles.schema().markdown_table())
