"""What a runtime executes as one kernel: patterns as data, matching, checks with reasons, pointwise chains.

Below the roofline: it groups nodes and sums their costs, knowing nothing of platforms' figures.
"""
