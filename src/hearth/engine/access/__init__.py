"""Who acts and what they may: apps and their quotas, principals, standing grants, sign-ins.
"""
