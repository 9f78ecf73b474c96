"""A kernel on a platform: classify() (intensity, ridge, bound, predicted time), kernel placement, energy
(the floorline) and PE-array utilization.
"""
