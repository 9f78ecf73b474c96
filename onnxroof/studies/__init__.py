"""Studies over many analyses of one model: sweep (a dim or the precision) and compare (platforms)."""
