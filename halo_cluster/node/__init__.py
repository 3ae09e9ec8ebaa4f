"""What the deploy reads on a node and the operations it runs there."""
