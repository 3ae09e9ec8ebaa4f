"""A deploy for the interrupted-upload test: one managed file replaced by a large text, so the
transfer lasts long enough to be killed part-way."""

from halo_cluster import roles
from halo_cluster.node.nodefiles import declare
from halo_cluster.node.operations import text_file
from halo_cluster.roles.launcher import ENV_FILE

declare(roles.declared_paths)  # as deploy.py: text_file writes only files a role declares
text_file(name="Large upload", path=ENV_FILE, text="# filler line of the upload test\n" * 2_500_000)
