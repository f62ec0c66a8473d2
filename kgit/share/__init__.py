"""Sharing records with other clones: push and pull (sync.py), the pre-push hook (hooks.py), and repairs (doctor.py)."""
