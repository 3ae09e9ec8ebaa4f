"""Roles: one @deploy per concern, composed by deploy.py. Each reads only host data and facts."""
