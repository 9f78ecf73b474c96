"""analyze(): one model on one platform, from file to an immutable Analysis (nodes, kernels, op types, totals,
peak activation memory), with the what-if options (precision, densities, sparsity).
"""
