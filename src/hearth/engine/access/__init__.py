"""Who acts and what they may: apps, principals, standing grants, sign-ins.
"""
