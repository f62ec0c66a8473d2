"""The state of a command in flight: the lock, the journal, and a step as a transaction."""
