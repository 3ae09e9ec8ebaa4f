"""A deploy for the interrupted-upload test: one managed file replaced by a large text, so the
transfer lasts long enough to be killed part-way."""

from halo_cluster.node.operations import text_file
from roles.launcher import ENV_FILE

text_file(name="Large upload", path=ENV_FILE, text="# filler line of the upload test\n" * 2_500_000)
