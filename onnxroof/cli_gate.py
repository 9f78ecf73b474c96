"""CLI commands for pre-deployment gatekeeping (check, diff); registered on the main app when imported."""
