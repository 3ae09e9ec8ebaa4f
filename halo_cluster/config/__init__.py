"""The cluster.yml: read, checked against the schema, derived into the model and host data."""
