"""CLI commands for visual reports (plot, graph); registered on the main app when imported."""
