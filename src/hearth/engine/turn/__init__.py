"""One turn, from its claim to its ending: the runner, the model/tool loop and its state, the
writes (record), the messages it takes while it runs (steering), tool batches, the gate and
the approvals, failover, endings, recovery, the model's context, the agent's instructions,
compaction, supervision, and one tool call run for an agent CLI.
"""
