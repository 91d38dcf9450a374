"""Whether a tool call may run, and asking the owner when it must: `gate` (fence, policy, trust,
grants, then the owner's approval, for one call), `desk` (the approvals waiting, answered and
kept as standing grants) and `preview` (what an approval card shows of a call).
"""
